"""Reading a .cu file the way a compiler does: kernels after preprocessing, #defines, the device part.

Kernels are found in the preprocessed text (pcpp, a C preprocessor in Python), as the
compiler finds them: a kernel declared through a macro counts, one under ``#if 0`` does
not, and ``__launch_bounds__(...)`` never hides one. Headers the preprocessor cannot open
(cuBLAS, the C++ library: host headers here) are left out of that pass; headers beside
the source and in the catalog's ``include_dirs`` are read.

``device_part`` is what a device compile gets: host functions (``main``, anything without
``__global__`` or ``__device__``) blanked, every line kept, so errors point at the user's
file. Which ``#include`` lines the device compile keeps is decided by the compiler, never
by a list of names: NVRTC's build (gemmcheck.compile.device_includes) leaves out each
header NVRTC reports it cannot open; for a host compiler (the CPU simulator's g++) each
``#include`` is kept where ``__has_include`` says the compiler finds it.
"""

from __future__ import annotations

import difflib
import functools
import io
import re
from dataclasses import dataclass
from pathlib import Path

from gemmcheck.compile.prelude import PRELUDE

_TOKEN = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", re.S)
_GLOBAL = re.compile(r"\b__global__\b(?P<between>[^;{}()]*?)\b(?P<name>[A-Za-z_]\w*)\s*\(")
_LAUNCH_BOUNDS = re.compile(r"\b(?:__launch_bounds__|__cluster_dims__)\s*\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)")  # nesting <= 2
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(?P<name>[A-Za-z_]\w*)[ \t]+\(?[ \t]*(?P<value>\d+)[ \t]*\)?[ \t]*$",
                     re.M)
_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include[ \t]*(?P<spelled>(?P<open>[<\"])(?P<header>[^>\"\n]+)[>\"])[^\n]*$",
                      re.M)
_PREPROCESSOR = re.compile(r"^[ \t]*#(?:[^\n\\]|\\[\s\S])*", re.M)
_LINE_MARKER = re.compile(r"^#line (?P<line>\d+)(?: \"(?P<file>(?:\\.|[^\"\\])*)\")?\s*$")

# Macros every CUDA device compile defines; the discovery pass sees the file as the device
# compile does (an sm_90 build, the default of the static checks).
DEVICE_MACROS = {"__CUDACC__": "1", "__NVCC__": "1", "__CUDA_ARCH__": "900"}


class IncludeDirConflict(ValueError):
    """One source declared with two different include_dirs lists."""


# -- reading a source, in any 8-bit encoding ---------------------------------------------

class SourceNotText(ValueError):
    """A kernel source that is not text: the message is one line naming the file."""


def read_source(path) -> str:
    """The text of a source or header as a compiler reads it: its bytes, in any encoding.

    nvcc takes a comment in GBK or latin-1, and so does every reader here: the bytes are
    decoded as UTF-8 with ``surrogateescape``, which keeps each byte that is not UTF-8 as a
    stand-in character, so discovery reads the code around it and ``source_bytes`` gives the
    compilers the file's bytes exactly. A NUL byte means a binary file (or UTF-16), which no
    compiler takes: SourceNotText.
    """
    data = Path(path).read_bytes()
    nul = data.find(b"\0")
    if nul >= 0:
        raise SourceNotText(f"{path}: not a text file (a NUL byte at offset {nul}: a binary file, or UTF-16); "
                            "give the CUDA C source, saved as UTF-8 or another 8-bit encoding")
    return data.decode("utf-8", "surrogateescape")


def source_bytes(text: str) -> bytes:
    """The bytes `text` was read from (read_source): what a compiler is given."""
    return text.encode("utf-8", "surrogateescape")


def is_utf8(text: str) -> bool:
    """Whether `text` holds no byte read_source kept as a stand-in (it is valid UTF-8)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def readable(text: str) -> str:
    """`text` for a person (a terminal, a report): each byte that is not UTF-8 shown as U+FFFD."""
    return source_bytes(text).decode("utf-8", "replace")


def _blank(match: re.Match) -> str:
    """Spaces for a comment's or a string's content, newlines kept; quotes kept for strings."""
    text = match.group(0)
    inner = re.sub(r"[^\n]", " ", text)
    if text[0] in "\"'":
        return text[0] + inner[1:-1] + text[-1]
    return inner


def code_only(text: str) -> str:
    """`text` with comments and string/char literal contents blanked (same length and lines)."""
    return _TOKEN.sub(_blank, text)


def _spaces(match: re.Match) -> str:
    return re.sub(r"[^\n]", " ", match.group(0))


# -- where a source's headers are -------------------------------------------------------

_INCLUDE_DIRS: dict[Path, tuple[Path, ...]] = {}


def declare_include_dirs(source: Path, dirs) -> None:
    """Record the catalog's ``include_dirs`` for `source` (absolute paths): every compile of
    it, NVRTC's and the CPU simulator's, searches them after the source's own directory.
    A source declared twice must be declared alike."""
    source, dirs = Path(source).resolve(), tuple(Path(d).resolve() for d in dirs)
    known = _INCLUDE_DIRS.setdefault(source, dirs)
    if known != dirs:
        raise IncludeDirConflict(f"{source.name} is declared with include_dirs {[str(d) for d in known]} and "
                                 f"{[str(d) for d in dirs]}; one source is compiled one way: give both the same")


def include_dirs_of(source: Path) -> tuple[Path, ...]:
    """The directories a compile of `source` searches: its own, then the catalog's include_dirs."""
    source = Path(source).resolve()
    return (source.parent, *_INCLUDE_DIRS.get(source, ()))


# -- kernels, after preprocessing ---------------------------------------------------------

@dataclass(frozen=True)
class Kernel:
    """A __global__ function as the preprocessed source declares it."""

    name: str
    file: str          # the file it is declared in (the source, or a header it includes)
    line: int          # 1-based, in that file
    head: str          # its declaration up to the parameter list's '(' (macros expanded)
    params: str        # its parameter list, as written (macros expanded)

    @property
    def is_template(self) -> bool:
        return bool(re.search(r"\btemplate\s*<", self.head))


def preprocessed(text: str, file_name: str = "<source>", include_dirs=(), defines=()) -> str:
    """`text` after a C preprocessor, ``#line`` markers kept; headers it cannot open left out.

    ``defines``: ((name, value), ...) as -D would give them. Falls back to the text with
    directives blanked when the preprocessor itself fails on it.
    """
    return _preprocessed(text, file_name, tuple(str(d) for d in include_dirs),
                         tuple((str(k), str(v)) for k, v in defines))[0]


def unopened_headers(text: str, file_name: str = "<source>", include_dirs=(), defines=()) -> list[str]:
    """The ``#include "..."`` headers (the user's own, not ``<system>`` ones) the preprocessing
    pass could find neither beside the source nor in `include_dirs`, as spelled: kernels and
    macros they declare are not seen."""
    return list(_preprocessed(text, file_name, tuple(str(d) for d in include_dirs),
                              tuple((str(k), str(v)) for k, v in defines))[1])


@functools.lru_cache(maxsize=64)
def _preprocessed(text, file_name, include_dirs, defines) -> tuple[str, tuple[str, ...]]:
    from pcpp import Action, OutputDirective, Preprocessor

    unopened: dict[str, None] = {}

    class Quiet(Preprocessor):
        def on_file_open(self, is_system_include, includepath):
            try:   # a header in any 8-bit encoding, as the source; a binary one is not a header
                return io.StringIO(read_source(includepath))
            except SourceNotText as exc:
                raise OSError(str(exc)) from None

        def on_include_not_found(self, is_malformed, is_system_include, curdir, includepath):
            if not is_system_include:
                unopened[includepath] = None
            raise OutputDirective(Action.IgnoreAndRemove)   # a host header: not the device's concern

        def on_error(self, file, line, msg):
            pass   # #error, unknown macros in #if ...: the compiler reports those, not discovery

        def on_comment(self, tok):
            return False   # comments dropped

    pre = Quiet()
    pre.line_directive = "#line"
    for name, value in {**DEVICE_MACROS, **dict(defines)}.items():
        pre.define(f"{name} {value}")
    for d in include_dirs:
        pre.add_path(d)
    try:
        pre.parse(text, file_name)
        out = io.StringIO()
        pre.write(out)
        return out.getvalue(), tuple(unopened)
    except Exception:   # pcpp is stricter than compilers on a few constructs; never fail discovery on it
        return f'#line 1 "{file_name}"\n' + _PREPROCESSOR.sub(_spaces, code_only(text)), tuple(unopened)


def _line_of(preprocessed_text: str, offset: int, default_file: str) -> tuple[str, int]:
    """(file, line) in the user's files of an offset into preprocessed text, from its #line markers."""
    file, line = default_file, 1
    for raw in preprocessed_text[:offset].split("\n")[:-1]:
        m = _LINE_MARKER.match(raw)
        if m:
            line = int(m["line"])
            file = m["file"] if m["file"] is not None else file
        else:
            line += 1
    return file, line


def find_kernels(text: str, file_name: str = "<source>", include_dirs=(), defines=()) -> list[Kernel]:
    """The __global__ functions of the preprocessed source, in order, each once."""
    pre = preprocessed(text, file_name, include_dirs, defines)
    written = _PREPROCESSOR.sub(_spaces, code_only(pre))
    code = _LAUNCH_BOUNDS.sub(_spaces, written)   # same offsets: heads are read from `written`
    found: dict[str, Kernel] = {}
    for m in _GLOBAL.finditer(code):
        if m["name"] == "void" or m["name"] in found:
            continue
        head_start = max(code.rfind(";", 0, m.start()), code.rfind("}", 0, m.start())) + 1
        close = _matching(code, m.end() - 1, "(", ")")
        file, line = _line_of(pre, m.start("name"), file_name)
        found[m["name"]] = Kernel(m["name"], file, line, " ".join(written[head_start:m.end() - 1].split()),
                                  " ".join(code[m.end():close].split()))
    return list(found.values())


def kernels(text: str, file_name: str = "<source>", include_dirs=(), defines=()) -> list[str]:
    """Names of the __global__ functions the source declares (template or not), in order."""
    return [k.name for k in find_kernels(text, file_name, include_dirs, defines)]


def is_template(text: str, entry: str, file_name: str = "<source>", include_dirs=(), defines=()) -> bool | None:
    """Whether the __global__ function `entry` is a template; None when the source does not declare it."""
    for k in find_kernels(text, file_name, include_dirs, defines):
        if k.name == entry:
            return k.is_template
    return None


def missing_kernel(text: str, entry: str, file_name: str, include_dirs=(), defines=()) -> str | None:
    """None when `entry` is a __global__ function of the source; else why, with what is there."""
    found = kernels(text, file_name, include_dirs, defines)
    name = Path(file_name).name
    if entry in found:
        return None
    if not found:
        return f"entry '{entry}': {name} declares no __global__ function (after preprocessing)"
    close = difflib.get_close_matches(entry, found, n=1)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    return (f"entry '{entry}' is not a __global__ function of {name}; it declares "
            f"{', '.join(found)}{hint}")


def defines(text: str) -> dict[str, int]:
    """Object-like macros defined to an integer (``#define TILE 2``), by name."""
    return {m["name"]: int(m["value"]) for m in _DEFINE.finditer(code_only(text))}


# -- the device part ---------------------------------------------------------------------

@dataclass(frozen=True)
class Include:
    line: int          # 1-based
    spelled: str       # <cublas_v2.h> or "helpers.cuh", as written
    header: str        # cublas_v2.h


def includes(text: str) -> list[Include]:
    """The source's own ``#include`` lines (not its headers'), in order."""
    code = code_only(text)
    out = []
    for m in _INCLUDE.finditer(code):
        spelled = text[m.start("spelled"):m.end("spelled")]   # code_only blanks a "quoted" name
        out.append(Include(code.count("\n", 0, m.start()) + 1, spelled, spelled[1:-1].strip()))
    return out


def blank_lines(text: str, lines) -> str:
    """`text` with the given 1-based lines blanked (spaces; every newline kept)."""
    rows = text.split("\n")
    for n in lines:
        rows[n - 1] = " " * len(rows[n - 1])
    return "\n".join(rows)


def device_part(text: str, *, compiler: str | None = None, strip_host_headers: bool | None = None) -> str:
    """What a device compile of the source gets: host functions blanked, lines kept.

    compiler="nvrtc" (or strip_host_headers=True): nothing else; NVRTC's build leaves out the
    headers it reports it cannot open (gemmcheck.compile.device_includes) and takes the prelude
    with --pre-include. compiler="host" (or strip_host_headers=False), for a host compiler such as
    the CPU simulator's g++: the prelude is included first, and each ``#include`` of the source is
    kept only where ``__has_include`` finds it; ``#line`` directives keep every line's number.
    """
    if compiler is None:
        compiler = "nvrtc" if strip_host_headers else "host"
    if compiler not in ("nvrtc", "host"):
        raise ValueError(f"device_part: compiler must be 'nvrtc' or 'host', got {compiler!r}")
    code = code_only(text)
    out = list(text)
    for start, end in _host_functions(code):
        for i in range(start, end):
            if out[i] != "\n":
                out[i] = " "
    result = "".join(out)
    return result if compiler == "nvrtc" else _for_host_compiler(result)


def _for_host_compiler(text: str) -> str:
    """The prelude first, then `text` with each #include guarded by __has_include (lines kept)."""
    rows = text.split("\n")
    for inc in reversed(includes(text)):
        n = inc.line
        note = (f"gemmcheck: the compiler cannot open {inc.spelled}; it is left out of the device compile "
                "(an error below may come from that)").replace('"', "'")
        rows[n - 1:n] = [f"#if __has_include({inc.spelled})", rows[n - 1], "#else",
                         f'#pragma message("{note}")', "#endif", f"#line {n + 1}"]
    return f'#include "{PRELUDE}"\n#line 1\n' + "\n".join(rows)


_OBJECT_MACRO = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(?P<name>[A-Za-z_]\w*)(?![(\w])(?P<body>(?:[^\n]*\\\n)*[^\n]*)",
                           re.M)


def _host_functions(code: str) -> list[tuple[int, int]]:
    """(start, end) of each top-level function definition that is host code.

    A head is read with the file's object-like macros expanded, so ``KERNEL name(...)`` after
    ``#define KERNEL template <int BM> __global__ void`` is device code, as the compiler sees it.
    """
    macros = {m["name"]: m["body"].replace("\\\n", " ") for m in _OBJECT_MACRO.finditer(code)}
    spans = []
    for head, head_start, _, end in top_level_blocks(_PREPROCESSOR.sub(_spaces, code)):
        is_function = re.search(r"\)\s*(const|noexcept)?\s*$", head) and \
            not re.search(r"\b(struct|class|union|enum)\b|=", head)
        if is_function and not re.search(r"\b__(global|device)__\b", _expanded(head, macros)):
            spans.append((head_start + len(head) - len(head.lstrip()), end + 1))
    return spans


def top_level_blocks(code: str):
    """Yield (head, head_start, open_at, end) for each top-level brace block of `code` (comments,
    strings and preprocessor lines already blanked), namespaces and ``extern "C"`` blocks
    entered: their contents are top level too. The one walk over a file's definitions: host
    functions here, kernel definitions for the CPU simulator's builds."""
    head_start, i = 0, 0
    while i < len(code):
        c = code[i]
        if c == "{":
            head = code[head_start:i]
            if re.search(r"\bnamespace\b|\bextern\s*\"", head):
                head_start = i + 1
            else:
                end = _matching(code, i, "{", "}")
                yield head, head_start, i, end
                i = head_start = end + 1
                continue
        elif c in ";}":
            head_start = i + 1
        i += 1


def _expanded(head: str, macros: dict[str, str], depth: int = 8) -> str:
    """`head` with object-like macros replaced by their bodies (a few levels deep)."""
    for _ in range(depth):
        new = re.sub(r"\b[A-Za-z_]\w*\b", lambda m: macros.get(m.group(0), m.group(0)), head)
        if new == head:
            break
        head = new
    return head


def _matching(code: str, open_at: int, open_char: str, close_char: str) -> int:
    depth = 0
    for j in range(open_at, len(code)):
        if code[j] == open_char:
            depth += 1
        elif code[j] == close_char:
            depth -= 1
            if depth == 0:
                return j
    return len(code) - 1
