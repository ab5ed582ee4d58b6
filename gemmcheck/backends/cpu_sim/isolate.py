"""Building each kernel with what it needs: the kernels a build does not want are left out,
headers that are not there are left out, and a kernel that uses what the simulator does
not model gets one reason naming the construct and where it is used.

All of it is decided from the source's own structure and from what g++ reports, not from
a list of names: a kernel nobody asked for cannot fail a build (its definition is blanked,
lines kept); an `#include` g++ cannot find (cuBLAS, other host libraries) is blanked when
the build stops on it; a name from CUDA's namespaces or of CUDA's `__` form that g++ does
not know, inline PTX, `__constant__` or `extern __shared__` is a construct cpu-sim does not
model.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from gemmcheck.contract import cuda_source

_PREPROCESSOR = re.compile(r"^[ \t]*#(?:[^\n\\]|\\[\s\S])*", re.M)
_LAUNCH_BOUNDS = re.compile(r"\b__launch_bounds__\s*\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)")
_NAME_BEFORE_PARENS = re.compile(r"([A-Za-z_]\w*)\s*\($")


def _blank_span(text: str, start: int, end: int) -> str:
    return text[:start] + re.sub(r"[^\n]", " ", text[start:end]) + text[end:]


def kernel_definitions(text: str) -> list[tuple[str, int, int]]:
    """(name, start, end) of every top-level ``__global__`` function definition, in order.

    Top level includes namespaces and ``extern "C"`` blocks. A kernel declared by a macro
    invocation has no braces of its own here and is not listed (nor ever blanked).
    """
    code = _PREPROCESSOR.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), cuda_source.code_only(text))
    code = _LAUNCH_BOUNDS.sub(lambda m: " " * len(m.group(0)), code)
    out = []
    for head, head_start, _, end in cuda_source.top_level_blocks(code):
        if re.search(r"\b__global__\b", head) and not re.search(r"\b(struct|class|union|enum)\b", head):
            signature = head[:head.rfind(")") + 1] if ")" in head else head
            name = _kernel_name(signature)
            if name:
                out.append((name, head_start + _declaration_start(head), end + 1))
    return out


# Before __global__: the template header and the specifiers (`extern " "`: code_only blanks
# the "C"), each followed by white space or the end.
_LEAD = re.compile(r"(?:template\s*<[^;{}()]*>\s*)?(?:(?:static|inline|extern\s*\"[^\"]*\")(?:\s+|$))*$")


def _declaration_start(head: str) -> int:
    """Where the kernel's own declaration starts in `head`: its template header and
    specifiers before __global__, not what precedes them (a macro invocation without a
    semicolon that declares other kernels)."""
    at = re.search(r"\b__global__\b", head).start()
    lead = _LEAD.search(head[:at].rstrip())
    return lead.start() if lead and lead.group(0).strip() else at


def _kernel_name(signature: str) -> str | None:
    """The function's name: the identifier before the parameter list's opening parenthesis."""
    depth = 0
    for j in range(len(signature) - 1, -1, -1):
        if signature[j] == ")":
            depth += 1
        elif signature[j] == "(":
            depth -= 1
            if depth == 0:
                m = _NAME_BEFORE_PARENS.search(signature[:j + 1])
                return m.group(1) if m else None
    return None


# An explicit instantiation (`template __global__ void k<16>(int, ...);`, `extern template ...`):
# the name it instantiates, before its template arguments.
_INSTANTIATION = re.compile(r"^\s*(?:extern\s+)?template\s+(?!<)[^;{}]*?\b(?P<name>[A-Za-z_]\w*)\s*[<(][^;{}]*;$", re.S)


def keep_kernels(text: str, entries) -> str:
    """`text` with every kernel definition blanked (lines kept) but those named in `entries`,
    and the explicit instantiations of the kernels blanked (`template __global__ void k<16>(...);`,
    how a file makes nvcc emit a template's bodies) with them; the launchers instantiate the rest."""
    definitions = [d for d in kernel_definitions(text) if d[0] not in set(entries)]
    blanked = {name for name, _, _ in definitions}
    spans = [(start, end) for _, start, end in definitions]
    code = _PREPROCESSOR.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), cuda_source.code_only(text))
    for start, end in cuda_source.top_level_statements(code):
        m = _INSTANTIATION.match(code[start:end])
        if m and m["name"] in blanked:
            statement = code[start:end]
            spans.append((start + len(statement) - len(statement.lstrip()), end))
    for start, end in sorted(spans, reverse=True):
        text = _blank_span(text, start, end)
    return text


_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include[ \t]*[<\"](?P<header>[^>\"]+)[>\"][^\n]*$", re.M)


def missing_headers(cmd: list[str]) -> set[str]:
    """Headers the translation unit includes that g++ cannot find, from its dependency scan
    (`cmd` is the compile command; -M -MG lists a missing header instead of stopping)."""
    scan = [a for a in cmd if a not in ("-c",)]
    if "-o" in scan:
        at = scan.index("-o")
        del scan[at:at + 2]
    out = subprocess.run(scan + ["-M", "-MG", "-w"], capture_output=True, text=True, errors="surrogateescape")
    deps = [d for d in out.stdout.replace("\\\n", " ").split() if not d.endswith(":")]
    return {d for d in deps if not Path(d).is_absolute() and not Path(d).exists()}


def without_includes(text: str, headers) -> str:
    """`text` with the `#include` lines of `headers` blanked (lines kept)."""
    headers = set(headers)
    return _INCLUDE.sub(lambda m: " " * len(m.group(0)) if m["header"].strip() in headers else m.group(0), text)


# -- what g++ says a kernel uses that the simulator does not model ---------------------------

@dataclass(frozen=True)
class Unmodelled:
    construct: str      # "cuda::pipeline", "inline PTX assembly (asm)", ...
    file: str
    line: int


_ERROR = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):(?:(?P<column>\d+):)? error: (?P<message>.*)$", re.M)
_QUALIFIED = re.compile(r"[A-Za-z_]\w*(?:\s*::\s*[A-Za-z_]\w*)*")
_CUDA_NAMESPACES = ("cuda", "nvcuda", "cooperative_groups", "cub", "thrust")


def _construct(message: str) -> str | None:
    m = re.search(r"'(?:class |struct )?([\w:]+)(?:<[^']*>)?' has no member named '(\w+)'", message)
    if m and m.group(1).split("::")[0] in _CUDA_NAMESPACES:
        return f"{m.group(1)}::{m.group(2)}"
    m = re.search(r"'([\w:]+)' is not a member of '([\w:]+)'", message)
    if m and m.group(2).split("::")[0] in _CUDA_NAMESPACES:
        return f"{m.group(2)}::{m.group(1)}"
    m = re.search(r"'([\w:]+)' (?:was not declared in this scope|has not been declared|does not name a type)",
                  message) or re.search(r"no arguments to '([\w:]+)' that depend on a template parameter", message)
    if m:
        name = m.group(1)
        if name == "__constant__":
            return "__constant__ memory"
        if name.startswith("__") or name.split("::")[0] in _CUDA_NAMESPACES:
            return name
    if "asm" in message and ("constraint" in message or "operand" in message):
        return "inline PTX assembly (asm)"
    if "conflicting specifiers" in message or "storage class" in message:
        return "dynamic shared memory (extern __shared__)"
    return None


def _spelled(construct: str, error: re.Match) -> str:
    """A bare namespace ('cuda' does not name a type) as the source spells the use there:
    the qualified name at the error's column (cuda::barrier)."""
    if construct not in _CUDA_NAMESPACES or not error["column"]:
        return construct
    try:
        row = cuda_source.read_source(error["file"]).splitlines()[int(error["line"]) - 1]
    except (OSError, IndexError, cuda_source.SourceNotText):
        return construct
    m = _QUALIFIED.match(row, int(error["column"]) - 1)
    return re.sub(r"\s+", "", m.group(0)) if m else construct


def unmodelled(log: str, source: Path | None = None, entry: str | None = None) -> Unmodelled | None:
    """The construct g++'s log shows the simulator does not model, at its first use in the
    source (g++ (run with LC_ALL=C) quotes names with ASCII quotes)."""
    found = [Unmodelled(_spelled(c, m), Path(m["file"]).name, int(m["line"]))
             for m in _ERROR.finditer(log) if (c := _construct(m["message"]))]
    if found:
        return min(found, key=lambda u: u.line)
    m = re.search(r"Error: no such instruction: `(?P<instruction>[^'\n]*)'", log)
    if m:   # the assembler met PTX: its file and line are its own; find the asm in the kernel
        file, line = "", 0
        if source is not None and entry is not None:
            text = cuda_source.read_source(source)
            code = cuda_source.code_only(text)
            for name, start, end in kernel_definitions(text):
                asm = re.search(r"\basm\b", code[start:end]) if name == entry else None
                if asm:
                    file, line = source.name, code.count("\n", 0, start + asm.start()) + 1
                    break
        return Unmodelled(f"inline PTX assembly (asm: {m['instruction'].strip()[:60]})", file, line)
    return None
