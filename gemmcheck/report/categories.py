"""Defect categories for allure (categories.json, Allure 3 config) and the message prefix
checks use so a failure lands in its category."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from gemmcheck.verdict import defects
from gemmcheck.verdict import Defect


def defect_message(defects: Defect | str | Iterable[Defect | str], text: str) -> str:
    """``"unwritten_output, wrong_values: <text>"``: the prefix categories.json matches."""
    if isinstance(defects, (Defect, str)):
        defects = [defects]
    names = [d.value if isinstance(d, Defect) else Defect(d).value for d in defects]
    return f"{', '.join(names)}: {text}"


@dataclass(frozen=True)
class Category:
    name: str
    defects: tuple[Defect, ...] = ()
    words: tuple[str, ...] = ()          # plain-language regexes (environment problems)
    statuses: tuple[str, ...] = ("failed", "broken", "skipped")
    description: str = ""

    def message_regex(self) -> str:
        """Matches a message carrying one of our defects in its prefix (see the module doc), or
        one of the words. Wrapped in [\\s\\S]* so Allure 2 (whole-message match) and Allure 3
        (search) agree."""
        parts = []
        if self.defects:
            names = "|".join(d.value for d in self.defects)
            parts.append(rf"(?:^|\n|: |\n\n)(?:[a-z_]+, )*(?:{names})(?:, [a-z_]+)*: ")
        parts += self.words
        return r"[\s\S]*(?:" + "|".join(parts) + r")[\s\S]*"


# Order matters: a test goes to the first category that matches.
CATEGORIES = (
    Category("Broken variant not caught", (), (r"\[XPASS\(strict\)\]",), ("failed",),
             description="a deliberately broken kernel passed: a detector has a gap"),
    *(Category(name, defects.in_category(name), description=text)
      for name, text in defects.CATEGORIES.items()),
    Category("Environment problems", (), (
        r"no CUDA device", r"needs [\w-]+ on PATH", r"not found on PATH", r"BackendUnavailable",
        r"CUDARuntimeError", r"cudaErrorNoDevice", r"out of memory", r"CompileFailed",
        r"NVRTC"), description="the machine, not the kernel: no device, missing tools"),
)
assert {d for c in CATEGORIES for d in c.defects} == set(Defect), "every Defect needs a category"


def categories_json() -> list[dict]:
    """categories.json for the results directory (Allure 2 format; Allure 3 reads it too)."""
    return [{"name": c.name, "description": c.description, "matchedStatuses": list(c.statuses),
             "messageRegex": c.message_regex()} for c in CATEGORIES]


def allure3_categories() -> list[dict]:
    """The same categories for Allure 3's config: by defect label or by message, grouped by
    kernel so a reviewer reads 'Shared-memory race > matmul_broken_nobarrier'."""
    rules = []
    for c in CATEGORIES:
        matchers = [{"statuses": list(c.statuses), "message": c.message_regex()}]
        if c.name == "Broken variant not caught":
            matchers.insert(0, {"labels": {"kill": "^missed$"}})
        if c.defects:
            names = "|".join(d.value for d in c.defects)
            matchers.insert(0, {"labels": {"defect": f"^(?:{names})$"}})
        rules.append({"id": c.name.lower().replace(" ", "-"), "name": c.name,
                      "matchers": matchers, "groupBy": [{"label": "kernel"}],
                      "groupByMessage": False, "expand": True})
    return rules


def category_of(message: str, status: str = "failed") -> str | None:
    """The name of the first category whose regex matches (Python's re; tests use it)."""
    for c in CATEGORIES:
        if status in c.statuses and re.fullmatch(c.message_regex(), message or ""):
            return c.name
    return None


