"""Which of a source's ``#include`` lines NVRTC's device compile keeps, as NVRTC decides it.

nvcc hands a .cu file's host side to the host compiler, so a file that includes
``<cublas_v2.h>``, ``<cstdio>`` or a project header with host code builds for the device.
NVRTC has no host C library: such a header stops it (``cannot open source file``). The
decision is the compiler's, not a list of names: compile; for each ``#include`` of the
source that NVRTC cannot open (directly, or through the headers it pulls in), blank that
line (the line count is kept) and compile again (gemmcheck.compile.compiler). What was left out, with NVRTC's own
words, is kept: when the device code needs something from such a header, the compile
error carries the original reason.

Decisions are cached by (device text, include path, defines, options, NVRTC version), in
memory and on disk beside the cubins, so a source's instantiations and units decide once.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from gemmcheck.compile import buildlock
from gemmcheck.contract import cuda_source

_CANNOT_OPEN = re.compile(r'^(?P<file>.*?)\((?P<line>\d+)\): catastrophic error: cannot open source file '
                          r'"(?P<header>[^"]+)"[^\n]*(?:\n[^\n]*){0,2}', re.M)

# probe(text) -> NVRTC's log of a front-end-only compile of `text` ("" when it compiles)
Check = Callable[[str], str]


@dataclass(frozen=True)
class LeftOut:
    """One #include line of the source that the device compile leaves out."""

    line: int
    spelled: str        # <cublas_v2.h>
    reason: str         # NVRTC's error for it, as NVRTC wrote it

    def note(self) -> str:
        """One line: which #include, and NVRTC's error for it (its first line)."""
        return f"line {self.line}: {self.spelled}: {self.reason.strip().splitlines()[0]}"


def cannot_open(log: str) -> re.Match | None:
    """NVRTC's first "cannot open source file" error in a log, or None."""
    return _CANNOT_OPEN.search(log)


def next_left_out(text: str, program_name: str, log: str, probe: Check,
                  left: tuple[LeftOut, ...]) -> LeftOut | None:
    """The #include line of `text` to leave out next, from a failed compile's `log`: the line
    NVRTC reports it cannot open, or, when that happens inside a header, the source's first
    #include that NVRTC cannot build alone (``probe`` compiles a one-line program). None when
    the log shows no such header, or it is not one the source includes."""
    failure = cannot_open(log)
    if failure is None:
        return None
    culprit = _culprit(text, program_name, failure, probe, {l.line for l in left})
    return None if culprit is None else LeftOut(culprit.line, culprit.spelled, failure.group(0))


def _culprit(text: str, program_name: str, failure: re.Match, probe: Check, done: set[int]):
    own = [inc for inc in cuda_source.includes(text) if inc.line not in done]
    if failure["file"] == program_name:
        return next((inc for inc in own if inc.line == int(failure["line"])), None)
    # Inside a header: the first of the source's own #include lines NVRTC cannot build alone.
    return next((inc for inc in own if cannot_open(probe(f"#include {inc.spelled}\n"))), None)


def apply(text: str, left: tuple[LeftOut, ...]) -> str:
    return cuda_source.blank_lines(text, [l.line for l in left])


def explain(left: tuple[LeftOut, ...]) -> str:
    """The lines a compile error gets when headers were left out: what, and NVRTC's reason."""
    if not left:
        return ""
    return ("\nleft out of the device compile, as NVRTC cannot open them (if an error above needs one, "
            "this is why; a header of your own: add its directory to the catalog's include_dirs):\n"
            + "\n".join("  " + l.note() for l in left))


class Decisions:
    """Decisions by key, in memory and on disk (``<cache>/includes/<key>.json``)."""

    def __init__(self, root: Callable[[], Path]):
        self._root = root
        self._known: dict[str, tuple[LeftOut, ...]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def key(*parts) -> str:
        return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:32]

    def get(self, key: str) -> tuple[LeftOut, ...] | None:
        with self._lock:
            if key in self._known:
                return self._known[key]
        try:
            raw = json.loads((self._root() / f"{key}.json").read_text())
            found = tuple(LeftOut(**item) for item in raw)
        except (OSError, ValueError, TypeError):
            return None
        with self._lock:
            self._known[key] = found
        return found

    def put(self, key: str, left: tuple[LeftOut, ...]) -> None:
        with self._lock:
            self._known[key] = left
        try:
            self._root().mkdir(parents=True, exist_ok=True)
            buildlock.write_atomic(self._root() / f"{key}.json", json.dumps([asdict(l) for l in left]).encode())
        except OSError:
            pass   # a read-only cache only costs time
