"""A drafted catalog entry: its fields in order, each with the TODO lines that go before it, and
values written as TOML."""

from __future__ import annotations

import json
from dataclasses import dataclass, field


@dataclass
class Draft:
    """One kernel's entry: fields in order, with the TODO lines that go before each."""

    fields: list = field(default_factory=list)    # (key, toml value or None, [comment lines])

    def add(self, key: str, value, *comments: str) -> None:
        self.fields.append((key, value, list(comments)))

    def toml(self) -> str:
        lines = ["[[kernel]]"]
        for key, value, comments in self.fields:
            lines += [f"# {c}" for c in comments]
            if value is not None:
                lines.append(f"{key} = {value}")
        return "\n".join(lines)


def toml_value(value) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
    return str(value)
