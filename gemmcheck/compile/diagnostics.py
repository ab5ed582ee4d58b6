"""Compiler errors in one form, whichever compiler ran: ``file(line): error: message`` at the
user's file, as nvcc's and NVRTC's front end (EDG) write them.

Three things are rewritten, nothing else:

- the host preprocessor's lines (nvcc preprocesses with gcc: ``k.cu:1:10: fatal error:
  cublas_v2.h: No such file or directory``) in the front end's form (``k.cu(1): catastrophic
  error: cannot open source file "cublas_v2.h"``, NVRTC's words for the same thing);
- an error in a name expression, which each compiler places in a program of its own
  (NVRTC's ``__nv_name_map(2)``, the translation unit gemmcheck writes for nvcc): it names
  the source and the name expression instead;
- the path of a generated file (that translation unit) in the closing line: the source's.
"""

from __future__ import annotations

import re
from pathlib import Path

_GCC = re.compile(r"^(?P<file>[^\s:][^:\n]*):(?P<line>\d+):(?:\d+:)? (?P<kind>fatal error|error|warning): "
                  r"(?P<message>.*)$", re.M)
_NO_SUCH_FILE = re.compile(r"^(?P<header>.+): No such file or directory$")
_NVRTC_NAME_MAP = re.compile(r"^__nv_name_map\(\d+\): (?P<rest>.*)\n(?P<echo>\s*#pragma nv_mangled_name (?P<name>.*))$",
                             re.M)


def from_host_preprocessor(log: str) -> str:
    """`log` with gcc's ``file:line:col: error: message`` lines in the front end's form."""

    def one(m: re.Match) -> str:
        missing = _NO_SUCH_FILE.match(m["message"])
        if missing:
            return f'{m["file"]}({m["line"]}): catastrophic error: cannot open source file "{missing["header"]}"'
        kind = "catastrophic error" if m["kind"] == "fatal error" else m["kind"]
        return f'{m["file"]}({m["line"]}): {kind}: {m["message"]}'
    return _GCC.sub(one, log)


def name_expression_error(source: Path, name: str, rest: str) -> str:
    return f"{source}: name expression {name}: {rest}"


def from_nvrtc(log: str, source: Path) -> str:
    """NVRTC's log with its name-expression errors naming the source and the expression."""
    return _NVRTC_NAME_MAP.sub(lambda m: name_expression_error(source, m["name"].strip(), m["rest"]) + "\n"
                               + m["echo"], log)


def from_unit(log: str, unit: Path, source: Path, names_by_line: dict[int, str]) -> str:
    """nvcc's log of the translation unit `unit` (``#include`` of `source`, then one line per
    name expression): an error on a name expression's line names the source and the
    expression; the unit's path elsewhere is the source's."""
    where = re.compile(rf"^{re.escape(str(unit))}\((?P<line>\d+)\): (?P<rest>.*)$", re.M)

    def one(m: re.Match) -> str:
        name = names_by_line.get(int(m["line"]))
        return name_expression_error(source, name, m["rest"]) if name else f"{source}: {m['rest']}"
    return where.sub(one, from_host_preprocessor(log)).replace(f'"{unit}"', f'"{source}"')
