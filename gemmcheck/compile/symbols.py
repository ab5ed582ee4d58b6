"""Which symbol of a cubin is a catalog's name expression: ``matmul_tiled<float, 16>`` is
``_Z12matmul_tiledIfLi16EEvPKT_S2_PS0_i``.

NVRTC says so itself (its name expressions); nvcc does not, so the kernels ptxas compiled
(its ``Compiling entry function '...'`` lines) are demangled, with the C++ runtime's own
demangler (``__cxa_demangle`` of libstdc++, which the host compiler nvcc needs brings),
and matched to the name expression, both written one way: no spaces, integer arguments
without their ``u`` / ``l`` suffixes, the CUDA types by the names their structs have.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import re

_ENTRY = re.compile(r"Compiling entry function '(?P<mangled>[^']+)'")
_SUFFIX = re.compile(r"\b(\d+)(?:ull|llu|ul|lu|ll|u|l)\b", re.I)
# typedefs of the CUDA types whose demangled names are their structs' names
_ALIASES = {"half": "__half", "nv_bfloat16": "__nv_bfloat16", "nv_half": "__half", "uint": "unsignedint",
            "ushort": "unsignedshort", "ulong": "unsignedlong"}


@functools.lru_cache(maxsize=None)
def _demangler():
    library = ctypes.CDLL(ctypes.util.find_library("stdc++") or "libstdc++.so.6")
    function = library.__cxa_demangle
    function.restype = ctypes.c_void_p
    function.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_size_t),
                         ctypes.POINTER(ctypes.c_int)]
    free = ctypes.CDLL(None).free
    free.argtypes = [ctypes.c_void_p]
    return function, free


def demangle(symbol: str) -> str:
    """The C++ declaration `symbol` names; `symbol` itself when it is not mangled (extern "C")."""
    function, free = _demangler()
    status = ctypes.c_int()
    pointer = function(symbol.encode(), None, None, ctypes.byref(status))
    if not pointer:
        return symbol
    try:
        return ctypes.string_at(pointer).decode()
    finally:
        free(pointer)


def function_name(declaration: str) -> str:
    """``void ns::k<float, 16>(float const*, int)`` -> ``ns::k<float, 16>``: the parameter
    list and the return type dropped."""
    depth, end = 0, len(declaration)
    for i in range(len(declaration) - 1, -1, -1):   # the last top-level (...) is the parameter list
        c = declaration[i]
        if c == ")":
            depth += 1
        elif c == "(":
            depth -= 1
            if depth == 0:
                end = i
                break
    head, depth, start = declaration[:end], 0, 0
    for i, c in enumerate(head):   # the return type ends at the last top-level space
        depth += (c == "<") - (c == ">")
        if c == " " and depth == 0:
            start = i + 1
    return head[start:]


def canonical(name: str) -> str:
    """One spelling of a C++ name: no spaces, no integer suffixes, typedefs by their struct names."""
    text = re.sub(r"\b[A-Za-z_]\w*\b", lambda m: _ALIASES.get(m.group(0), m.group(0)), name)
    return _SUFFIX.sub(r"\1", re.sub(r"\s+", "", text)).replace("unsignedint", "unsigned")


def entries(ptxas_log: str) -> list[str]:
    """The mangled names of the kernels ptxas compiled, in order, each once."""
    return list(dict.fromkeys(m["mangled"] for m in _ENTRY.finditer(ptxas_log)))


def match(name_expressions, mangled_entries) -> tuple[dict[str, str], list[str]]:
    """(name expression -> mangled symbol, the name expressions no entry is): an entry matches
    when its demangled name is the name expression, or, when none is, the name expression
    with defaulted template arguments after its own; two entries of one name (overloads, or
    two that differ in a defaulted argument) are not told apart and match neither."""
    by_name: dict[str, list[str]] = {}
    for symbol in mangled_entries:
        by_name.setdefault(canonical(function_name(demangle(symbol))), []).append(symbol)
    found, missing = {}, []
    for name in name_expressions:
        symbols = by_name.get(canonical(name)) or _with_defaults(canonical(name), by_name)
        if len(symbols) == 1:
            found[name] = symbols[0]
        else:
            missing.append(name)
    return found, missing


def _with_defaults(name: str, by_name: dict[str, list[str]]) -> list[str]:
    """The entries that are `name` with more template arguments after its own: the template's
    defaulted parameters, which a name expression may leave out and a demangled name spells."""
    base, args = _template(name)
    if args is None:
        return []
    return [symbol for other, symbols in by_name.items() for symbol in symbols
            if _template(other)[0] == base and len(_template(other)[1] or ()) > len(args)
            and _template(other)[1][:len(args)] == args]


def _template(name: str) -> tuple[str, list[str] | None]:
    """``k<a,b<c,d>>`` -> ("k", ["a", "b<c,d>"]); a name that is not a template-id has None."""
    if not name.endswith(">") or "<" not in name:
        return name, None
    base, inner = name[:name.index("<")], name[name.index("<") + 1:-1]
    args, depth, start = [], 0, 0
    for i, c in enumerate(inner):
        depth += (c in "<(") - (c in ">)")
        if c == "," and depth == 0:
            args.append(inner[start:i])
            start = i + 1
    return base, args + [inner[start:]]


def readable(mangled_entries) -> list[str]:
    """The entries' names as C++ writes them, for an error that lists what was built."""
    return [function_name(demangle(s)) for s in mangled_entries]
