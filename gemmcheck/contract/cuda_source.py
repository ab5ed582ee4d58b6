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

import bisect
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
    namespace: str = ""   # the named namespaces it is declared in ("mylib::kernels"); "" at file scope

    @property
    def qualified(self) -> str:
        """Its name as code outside its namespaces calls it: ``mylib::kernels::gemm``."""
        return f"{self.namespace}::{self.name}" if self.namespace else self.name

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
    return list(_find_kernels(text, file_name, tuple(str(d) for d in include_dirs),
                              tuple((str(k), str(v)) for k, v in defines)))


@functools.lru_cache(maxsize=64)   # a catalog asks 4 times per entry: 131 scans of 8 sources a load
def _find_kernels(text: str, file_name: str, include_dirs: tuple, defines: tuple) -> tuple[Kernel, ...]:
    pre = preprocessed(text, file_name, include_dirs, defines)
    written = _PREPROCESSOR.sub(_spaces, code_only(pre))
    code = _LAUNCH_BOUNDS.sub(_spaces, written)   # same offsets: heads are read from `written`
    found: dict[str, Kernel] = {}
    namespaces = _namespaces(code)
    for m in _GLOBAL.finditer(code):
        if m["name"] == "void" or m["name"] in found:
            continue
        head_start = max(code.rfind(";", 0, m.start()), code.rfind("}", 0, m.start())) + 1
        close = _matching(code, m.end() - 1, "(", ")")
        file, line = _line_of(pre, m.start("name"), file_name)
        found[m["name"]] = Kernel(m["name"], file, line, " ".join(written[head_start:m.end() - 1].split()),
                                  " ".join(code[m.end():close].split()), namespaces(m.start()))
    return tuple(found.values())


_NAMESPACE_OPEN = re.compile(r"\bnamespace\s*(?P<name>[A-Za-z_][\w:]*)?\s*$")


def _namespaces(code: str):
    """A function (offset in `code`) -> the named namespaces enclosing it, ``a::b``; anonymous
    ones add nothing (their kernels are called unqualified in the file)."""
    opened, stack = [], []   # (offset, the namespaces open after it)
    for m in re.finditer(r"[{}]", code):
        if m.group() == "{":
            ns = _NAMESPACE_OPEN.search(code, max(0, m.start() - 200), m.start())
            stack.append(ns["name"] if ns and ns["name"] else ("" if ns else None))
        elif stack:
            stack.pop()
        opened.append((m.start(), "::".join(n for n in stack if n)))

    def at(offset: int) -> str:
        i = bisect.bisect_left(opened, (offset, "")) - 1
        return opened[i][1] if i >= 0 else ""
    return at


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
    hidden = hidden_kernel(text, entry, file_name, include_dirs, defines)
    if hidden:
        return hidden
    if not found:
        return f"entry '{entry}': {name} declares no __global__ function (after preprocessing)"
    close = difflib.get_close_matches(entry, found, n=1)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    return (f"entry '{entry}' is not a __global__ function of {name}; it declares "
            f"{', '.join(found)}{hint}")


_CONDITIONAL = re.compile(r"^[ \t]*#[ \t]*(?P<word>if|ifdef|ifndef|elif|else|endif)\b(?P<rest>[^\n]*)$", re.M)


def hidden_kernel(text: str, entry: str, file_name: str, include_dirs=(), defines=()) -> str | None:
    """Why `entry`, written in the source as a __global__ function, is not one after
    preprocessing: the branch of an #if / #ifdef ... it is in is not taken. None when the
    source does not define it under such a branch."""
    code = code_only(text)
    written = next((m for m in _GLOBAL.finditer(_PREPROCESSOR.sub(_spaces, _LAUNCH_BOUNDS.sub(_spaces, code)))
                    if m["name"] == entry), None)
    if written is None:
        return None
    line = code.count("\n", 0, written.start("name")) + 1
    rows = text.split("\n")
    branches, stack = {}, []    # directive line -> its text; the branches open at each line
    for m in _CONDITIONAL.finditer(code):
        at = code.count("\n", 0, m.start()) + 1
        if at >= line:
            break
        if m["word"] in ("if", "ifdef", "ifndef"):
            stack.append([at])
        elif m["word"] in ("elif", "else") and stack:
            stack[-1].append(at)
        elif m["word"] == "endif" and stack:
            stack.pop()
        branches[at] = " ".join(rows[at - 1].split())
    open_branches = [group[-1] for group in stack]
    if not open_branches:
        return None
    # which branches the preprocessor takes: a marker after each directive survives only in a taken one
    marked = list(rows)
    for at in open_branches:
        marked[at - 1] += f"\ngemmcheck_branch_{at}"
    kept = preprocessed("\n".join(marked), file_name, include_dirs, defines)
    dropped = [at for at in open_branches if f"gemmcheck_branch_{at}" not in kept]
    if not dropped:
        return None
    at = dropped[0]
    return (f"entry '{entry}' is defined at {Path(file_name).name}:{line} inside `{branches[at]}` (line {at}): "
            "the compiler never sees it")


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
    for start, end in _host_functions(code) + _host_declarations(code):
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


def _object_macros(code: str) -> dict[str, str]:
    """The file's object-like macros by name (bodies on one line): how a head is read as the
    compiler reads it (``KERNEL name(...)``)."""
    return {m["name"]: m["body"].replace("\\\n", " ") for m in _OBJECT_MACRO.finditer(code)}


def _host_functions(code: str) -> list[tuple[int, int]]:
    """(start, end) of each top-level function definition that is host code.

    A head is read with the file's object-like macros expanded, so ``KERNEL name(...)`` after
    ``#define KERNEL template <int BM> __global__ void`` is device code, as the compiler sees it.
    """
    macros = _object_macros(code)
    spans = []
    for head, head_start, _, end in top_level_blocks(_PREPROCESSOR.sub(_spaces, code)):
        is_function = re.search(r"\)\s*(const|noexcept)?\s*$", head) and \
            not re.search(r"\b(struct|class|union|enum)\b|=", head)
        if is_function and not re.search(r"\b__(global|device)__\b", _expanded(head, macros)):
            spans.append((head_start + len(head) - len(head.lstrip()), end + 1))
    return spans


# A function's declaration without its body: a return type, the name (template arguments of an
# explicit instantiation allowed), the parameters, qualifiers; read after the template header.
_PROTOTYPE = re.compile(r"^\s*(?:(?:extern\s+)?template\b\s*(?:<[^;{}]*?>)?)?(?P<before>[^;{}()=]*?[\w>*&\]]\s*[*&\s])"
                        r"\s*(?P<name>[A-Za-z_~][\w:~]*(?:\s*<[^;{}()]*>)?)\s*\((?P<rest>[^;{}]*)\)"
                        r"(?P<after>[^;{}()=]*(?:\([^;{}()]*\)[^;{}()=]*)*);$", re.S)
_NOT_A_PROTOTYPE = re.compile(r"^\s*(?:typedef|using|static_assert|friend|namespace|asm|__asm__)\b|\bconstexpr\b")


def _host_declarations(code: str) -> list[tuple[int, int]]:
    """(start, end) of each top-level function declaration without a body that is host code:
    a prototype (``void cudaCheck(cudaError_t error, const char *file, int line);``) or an explicit
    instantiation of a host function template. nvcc's device pass ignores them; NVRTC refuses
    host functions and g++ may not know their types (a host library's, left out). Read with the
    file's object-like macros expanded, as _host_functions reads heads; a statement that is not
    plainly a declaration (a macro invocation ``FOO(x);``, a variable with an initializer) is kept."""
    macros = _object_macros(code)
    spans = []
    code = _PREPROCESSOR.sub(_spaces, code)
    for start, end in top_level_statements(code):
        written = code[start:end]
        statement = _expanded(written, macros)
        m = _PROTOTYPE.match(statement)
        if m and not _NOT_A_PROTOTYPE.search(statement) and m["before"].strip() and \
                not re.search(r"\b__(global|device)__\b", statement):
            spans.append((start + len(written) - len(written.lstrip()), end))
    return spans


def _top_level(code: str):
    """The one walk over a file's top level (comments, strings and preprocessor lines already
    blanked), namespaces and ``extern "C"`` blocks entered: their contents are top level too.
    Yields ("block", head, head_start, open_at, end) for each brace block and ("statement",
    start, end) for each declaration that ends in ';' outside one."""
    head_start, i = 0, 0
    while i < len(code):
        c = code[i]
        if c == "{":
            head = code[head_start:i]
            # `extern "C" {` opens a linkage block; `extern "C" __global__ void k(...) {` a function
            if re.search(r"\bnamespace\b|\bextern\s*\"[^\"]*\"\s*$", head):
                head_start = i + 1
            else:
                end = _matching(code, i, "{", "}")
                yield "block", head, head_start, i, end
                i = head_start = end + 1
                continue
        elif c == ";":
            yield "statement", head_start, i + 1
            head_start = i + 1
        elif c == "}":
            head_start = i + 1
        i += 1


def top_level_blocks(code: str):
    """Yield (head, head_start, open_at, end) for each top-level brace block of `code` (see
    _top_level): host functions here, kernel definitions for the CPU simulator's builds."""
    for kind, *found in _top_level(code):
        if kind == "block":
            yield tuple(found)


def top_level_statements(code: str):
    """Yield (start, end) of each top-level declaration of `code` that ends in ';' outside a
    brace block (see _top_level): prototypes here, explicit instantiations for the CPU
    simulator's builds."""
    for kind, *found in _top_level(code):
        if kind == "statement":
            yield tuple(found)


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


def without_comments(text: str) -> str:
    """`text` with comments blanked and string literals kept (same length and lines): inline
    PTX lives in strings."""
    return _TOKEN.sub(lambda m: _blank(m) if m.group(0)[0] == "/" else m.group(0), text)
