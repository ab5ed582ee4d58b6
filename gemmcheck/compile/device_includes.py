"""Which ``#include`` lines NVRTC's device compile keeps, as NVRTC decides it.

nvcc hands a .cu file's host side to the host compiler, so a file that includes
``<cublas_v2.h>``, ``<cstdio>`` or a project header with host code builds for the device.
NVRTC has no host C library: such a header stops it (``cannot open source file``). The
decision is the compiler's, not a list of names: compile; for each ``#include`` line (of
the source, or of the user's own headers it includes, compiled through device copies)
that NVRTC cannot open, directly or through the headers it pulls in, blank that line (the
line count is kept) and compile again (gemmcheck.compile.compiler). What was left out,
with NVRTC's own words, is kept: when the device code needs something from such a header,
the compile error carries the original reason.

Decisions are cached by (device texts, include path, defines, options, NVRTC version), in
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

# A toolkit header NVRTC opens but whose host API it rejects (cuda_profiler_api.h's __host__ functions)
_HOST_ONLY = re.compile(r"^(?P<file>.*?)\((?P<line>\d+)\): error: A function (?:explicitly marked as a __host__ "
                        r"function|without execution space annotations)[^\n]*not allowed in JIT mode[^\n]*", re.M)

# probe(text) -> NVRTC's log of a front-end-only compile of `text` ("" when it compiles)
Check = Callable[[str], str]


@dataclass(frozen=True)
class LeftOut:
    """One #include line that the device compile leaves out: of the source, or of one of the
    user's own headers the source includes (``file``: that header's path)."""

    line: int
    spelled: str        # <cublas_v2.h>
    reason: str         # NVRTC's error for it, as NVRTC wrote it
    file: str = ""      # "" : the source itself

    def note(self) -> str:
        """One line: which #include, and NVRTC's error for it (its first line)."""
        where = f"{Path(self.file).name} line {self.line}" if self.file else f"line {self.line}"
        return f"{where}: {self.spelled}: {self.reason.strip().splitlines()[0]}"


def cannot_build(log: str, own_files=()) -> re.Match | None:
    """cannot_open's error, else NVRTC's first rejection of a host function in a header that is
    not one of `own_files` (the source and the user's headers: theirs are blanked instead)."""
    return cannot_open(log) or next((m for m in _HOST_ONLY.finditer(log)
                                     if m["file"] not in own_files and str(Path(m["file"]).resolve()) not in own_files),
                                    None)


def cannot_open(log: str) -> re.Match | None:
    """NVRTC's first "cannot open source file" error in a log, or None."""
    return _CANNOT_OPEN.search(log)


class DeviceFiles:
    """The source's device text, and device copies of the user's own headers it includes, at
    any depth.

    A header of the user's (``#include "helpers.cuh"`` found beside the file that includes it,
    in the source's directory or in the catalog's include_dirs) is compiled as the source is:
    its host functions blanked (and `edit` applied, where a build changes the source's text
    further), the #include lines the compiler cannot open left out, its own headers of the
    user's pointed at their copies; in a copy under ``root`` that starts with ``#line 1 "<the
    header>"``, so errors still name the user's file and line. The #include line is pointed at
    the copy, on the same line. ``compiler`` is device_part's: "nvrtc" (the lines left out are
    those NVRTC reports, below) or "host" (the CPU simulator's g++: each #include kept where
    ``__has_include`` finds it, in the copies too).

    Files in any 8-bit encoding are read and copied byte for byte (cuda_source.read_source).
    NVRTC takes a program as a string of UTF-8: a source with other bytes (a comment in GBK or
    latin-1, as nvcc takes it) is compiled from a copy of its bytes, the program being one
    ``#include`` of it; ``name`` (the source's path) starts that copy as ``#line 1 "<name>"``.
    """

    def __init__(self, text: str, user_dirs, root: Path, *, compiler: str = "nvrtc",
                 edit: Callable[[str], str] | None = None, name: str = "<source>"):
        self.root, self.compiler, self.name = root, compiler, name
        self.texts: dict[str, str] = {"": text}      # "" : the source; else a header's path
        self.copies: dict[tuple[str, int], str] = {}   # (file, line) -> the user's header it includes
        dirs = [Path(d) for d in user_dirs]
        todo = [("", text, dirs)]
        while todo:
            file, text, search = todo.pop()
            for inc in cuda_source.includes(text):
                found = next((d / inc.header for d in search if (d / inc.header).is_file()), None) \
                    if inc.spelled.startswith('"') else None
                if found is None:
                    continue
                path = str(found.resolve())
                if path not in self.texts:
                    try:
                        device = cuda_source.device_part(cuda_source.read_source(found), compiler="nvrtc")
                    except (cuda_source.SourceNotText, OSError):
                        continue   # not a header: the compiler reads it as it is, and says what is wrong
                    self.texts[path] = edit(device) if edit else device
                    # a quoted #include is looked for beside the header first, as compilers do
                    todo.append((path, self.texts[path], [found.resolve().parent, *dirs]))
                self.copies[(file, inc.line)] = path

    def fingerprint(self) -> list:
        """What the compile depends on, for cache keys: the source's and its headers' device texts."""
        return sorted(self.texts.items())

    def include_count(self) -> int:
        return sum(len(cuda_source.includes(t)) for t in self.texts.values())

    def program(self, left: tuple[LeftOut, ...]) -> str:
        """The source's device text with `left` blanked, its own headers' copies written."""
        folder = self.root / hashlib.sha256(json.dumps(
            [self.fingerprint(), [asdict(l) for l in left], self.compiler]).encode()).hexdigest()[:16]
        places = {path: folder / str(n) / Path(path).name
                  for n, path in enumerate(sorted(p for p in self.texts if p))}
        for path, copy in places.items():
            _write(copy, path, self._device_text(path, left, places))
        program = self._device_text("", left, places)
        if self.compiler != "nvrtc" or cuda_source.is_utf8(program):
            return program
        copy = folder / "source" / Path(self.name).name
        _write(copy, self.name, program)
        return f'#include "{copy}"\n'

    def _device_text(self, file: str, left: tuple[LeftOut, ...], places: dict[str, Path]) -> str:
        rows = apply(self.texts[file], tuple(l for l in left if l.file == file)).split("\n")
        for (includer, line), path in self.copies.items():
            if includer == file and rows[line - 1].strip():
                rows[line - 1] = f'#include "{places[path]}"'
        text = "\n".join(rows)
        return text if self.compiler == "nvrtc" else cuda_source.device_part(text, compiler=self.compiler)

    def next_left_out(self, program_name: str, log: str, probe: Check,
                      left: tuple[LeftOut, ...]) -> LeftOut | None:
        """The #include line to leave out next, from a failed compile's `log`: the line NVRTC
        reports it cannot open (in the source or in a header of the user's), or, when that
        happens inside another header, the first #include of those files that NVRTC cannot
        build alone (``probe`` compiles a one-line program). None when the log shows no such
        header, or none of these files' #include lines leads to it."""
        failure = cannot_build(log, (program_name, *self.texts))
        if failure is None:
            return None
        done = {(l.file, l.line) for l in left}
        file = "" if failure["file"] == program_name else str(Path(failure["file"]).resolve()) \
            if failure["file"] in self.texts or str(Path(failure["file"]).resolve()) in self.texts else None
        candidates = [(f, inc) for f in sorted(self.texts, key=lambda f: f == "")
                      for inc in cuda_source.includes(self.texts[f])
                      if (f, inc.line) not in done and (f, inc.line) not in self.copies]
        if file is not None:
            found = next((inc for f, inc in candidates if f == file and inc.line == int(failure["line"])), None)
        else:   # inside a header: the first of these #include lines NVRTC cannot build alone
            found, file = next(((inc, f) for f, inc in candidates
                                if cannot_build(probe(f"#include {inc.spelled}\n"))), (None, None))
            if found is None and self.copies:   # deeper in a header of the user's: leave it out whole
                found, file = next(((inc, "") for inc in cuda_source.includes(self.texts[""])
                                    if ("", inc.line) in self.copies and ("", inc.line) not in done), (None, None))
        return None if found is None else LeftOut(found.line, found.spelled, failure.group(0), file)


def _write(copy: Path, path: str, text: str) -> None:
    """`text` at `copy`, its bytes exactly, read as `path` in the compiler's errors."""
    if not copy.is_file():
        copy.parent.mkdir(parents=True, exist_ok=True)
        buildlock.write_atomic(copy, cuda_source.source_bytes(f'#line 1 "{path}"\n' + text))


def apply(text: str, left: tuple[LeftOut, ...]) -> str:
    return cuda_source.blank_lines(text, [l.line for l in left])


def explain(left: tuple[LeftOut, ...]) -> str:
    """The lines a compile error gets when headers were left out: what, and NVRTC's reason."""
    if not left:
        return ""
    hints = [hint for kinds, hint in (
        ('"', "a header of your own: add its directory to the catalog's include_dirs"),
        ("<", "a C or C++ library header: NVRTC has no host library; libcu++ has device versions "
              "(<cuda/std/cmath>, <cuda/std/array>, ...)")) if any(l.spelled.startswith(kinds) for l in left)]
    return ("\nleft out of the device compile, as NVRTC cannot open or build them (if an error above needs one, "
            f"this is why; {'; '.join(hints)}):\n" + "\n".join("  " + l.note() for l in left))


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
