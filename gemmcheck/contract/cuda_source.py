"""Reading a .cu file the way a compiler would, without one: kernels, #defines, host code.

Comments and string literals are blanked first (same length, newlines kept), so a
name in a comment or a string never counts, and every offset and line number still
matches the user's file. ``device_part`` keeps only what a device compile needs:
it blanks host functions (``main`` and any function without ``__global__`` or
``__device__``) and, for NVRTC, the C/C++ standard headers NVRTC does not ship. That is
how nvcc treats a .cu file for the device (host code goes to the host compiler), done
here because nvcc is not a dependency: NVRTC comes as a wheel and runs everywhere.
"""

from __future__ import annotations

import difflib
import re

# Headers of the host's C/C++ library that NVRTC does not have; device code needs none of them.
HOST_HEADERS = frozenset("""
cuda_runtime.h cuda.h stdio.h stdlib.h string.h math.h assert.h time.h stdint.h stddef.h float.h limits.h errno.h
cstdio cstdlib cstring cmath cassert ctime cstdint cstddef cfloat climits cerrno
iostream iomanip fstream sstream string vector array map set unordered_map algorithm numeric
random chrono functional memory utility tuple stdexcept exception
""".split())

_TOKEN = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", re.S)
_GLOBAL = re.compile(r"\b__global__\b(?P<between>[^;{}()]*?)\b(?P<name>[A-Za-z_]\w*)\s*\(")
_LAUNCH_BOUNDS = re.compile(r"\b__launch_bounds__\s*\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)")  # nesting <= 2
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(?P<name>[A-Za-z_]\w*)[ \t]+\(?[ \t]*(?P<value>\d+)[ \t]*\)?[ \t]*$",
                     re.M)
_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include[ \t]*<(?P<header>[^>]+)>[^\n]*$", re.M)
_MACRO = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(?P<name>[A-Za-z_]\w*)\((?P<params>[^)]*)\)(?P<body>(?:[^\n]*\\\n)*[^\n]*)",
                    re.M)
_PREPROCESSOR = re.compile(r"^[ \t]*#(?:[^\n\\]|\\[\s\S])*", re.M)


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


def kernels(text: str) -> list[str]:
    """Names of the __global__ functions the source declares (template or not), in order.

    A function-like macro whose body declares ``__global__ void NAME(...)`` with NAME one
    of its parameters declares a kernel at each invocation (``FLAWED_KERNEL(broken_x, ...)``).
    """
    code = _LAUNCH_BOUNDS.sub(lambda m: " " * len(m.group(0)), code_only(text))
    names, generators = [], {}
    for m in _MACRO.finditer(code):
        params = [p.strip() for p in m["params"].split(",")]
        for g in _GLOBAL.finditer(m["body"]):
            if g["name"] in params:
                generators[m["name"]] = params.index(g["name"])
    outside = _PREPROCESSOR.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), code)
    for m in _GLOBAL.finditer(outside):
        names.append(m["name"])
    for macro, position in generators.items():
        for call in re.finditer(rf"\b{macro}\s*\((?P<args>[^()]*)\)", outside):
            args = [a.strip() for a in call["args"].split(",")]
            if position < len(args) and re.fullmatch(r"[A-Za-z_]\w*", args[position]):
                names.append(args[position])
    return list(dict.fromkeys(n for n in names if n != "void"))


def is_template(text: str, entry: str) -> bool | None:
    """Whether the __global__ function `entry` is a template; None when it is not declared plainly."""
    code = _LAUNCH_BOUNDS.sub(lambda m: " " * len(m.group(0)), code_only(text))
    code = _PREPROCESSOR.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), code)
    for m in _GLOBAL.finditer(code):
        if m["name"] == entry:
            head = code[max(code.rfind(";", 0, m.start()), code.rfind("}", 0, m.start())) + 1:m.start()]
            return bool(re.search(r"\btemplate\s*<", head))
    return None


def missing_kernel(text: str, entry: str, file_name: str) -> str | None:
    """None when `entry` is a __global__ function of the source; else why, with what is there."""
    found = kernels(text)
    if entry in found:
        return None
    if not found:
        return f"entry '{entry}': {file_name} declares no __global__ function"
    close = difflib.get_close_matches(entry, found, n=1)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    return (f"entry '{entry}' is not a __global__ function of {file_name}; it declares "
            f"{', '.join(found)}{hint}")


def defines(text: str) -> dict[str, int]:
    """Object-like macros defined to an integer (``#define TILE 2``), by name."""
    return {m["name"]: int(m["value"]) for m in _DEFINE.finditer(code_only(text))}


def device_part(text: str, *, strip_host_headers: bool) -> str:
    """The source with host functions blanked (and standard host headers, if asked): same lines."""
    code = code_only(text)
    out = list(text)
    for start, end in _host_functions(code):
        for i in range(start, end):
            if out[i] != "\n":
                out[i] = " "
    result = "".join(out)
    if strip_host_headers:
        result = _INCLUDE.sub(lambda m: (" " * len(m.group(0)) if m["header"].strip() in HOST_HEADERS
                                         else m.group(0)), result)
    return result


def _host_functions(code: str) -> list[tuple[int, int]]:
    """(start, end) of each top-level function definition that is host code."""
    code = _PREPROCESSOR.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), code)
    spans, head_start, i = [], 0, 0
    while i < len(code):
        c = code[i]
        if c == "{":
            head = code[head_start:i]
            if re.search(r"\bnamespace\b|\bextern\s*\"", head):
                head_start = i + 1          # enter: its contents are top level too
            else:
                end = _matching_brace(code, i)
                is_function = re.search(r"\)\s*(const|noexcept)?\s*$", head) and \
                    not re.search(r"\b(struct|class|union|enum)\b|=", head)
                if is_function and not re.search(r"\b__(global|device)__\b", head):
                    spans.append((head_start + len(head) - len(head.lstrip()), end + 1))
                i = head_start = end + 1
                continue
        elif c in ";}":
            head_start = i + 1
        i += 1
    return spans


def _matching_brace(code: str, open_at: int) -> int:
    depth = 0
    for j in range(open_at, len(code)):
        if code[j] == "{":
            depth += 1
        elif code[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(code) - 1
