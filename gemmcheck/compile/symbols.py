"""Which symbol of a cubin is a catalog's name expression: ``matmul_tiled<float, 16>`` is
``_Z12matmul_tiledIfLi16EEvPKT_S2_PS0_i``.

NVRTC says so itself (its name expressions). For nvcc the compiler says it too: the
translation unit gemmcheck writes instantiates, for name expression number I, a marker
kernel ``gemmcheck_name_expression<I, &NAME>``, whose mangled name holds NAME's declaration
as the compiler resolved it (defaulted template arguments, typedefs, overloads). Demangled
(gemmcheck.contract.parameters.demangled: libstdc++'s demangler), the marker
reads ``void gemmcheck_name_expression<0, &(void k<float, 16, 0>(float*))>()``: the kernel
whose own demangled name is that declaration is NAME. (The mangled forms differ: a
symbol's substitutions are numbered within the whole name.)
"""

from __future__ import annotations

import re

from gemmcheck.contract import parameters

MARKER = "gemmcheck_name_expression"
_ENTRY = re.compile(r"Compiling entry function '(?P<mangled>[^']+)'")
# The declaration in parentheses; for a kernel in a namespace that is not a template the
# demangler writes its qualified name alone (&mylib::k), matched by name.
_MARKER = re.compile(rf"^void {MARKER}<(?P<index>\d+), &(?:\((?P<declaration>.*)\)|(?P<name>[\w:]+))>\(\)$")


def marker_declarations(name_expressions) -> list[str]:
    """The lines that instantiate a marker for each name expression (one line each)."""
    return [f"template <int I, auto F> __global__ void {MARKER}() {{}}"] + [
        f"template __global__ void {MARKER}<{i}, &{name}>();" for i, name in enumerate(name_expressions)]


def from_markers(name_expressions, mangled_entries) -> dict[str, str]:
    """name expression -> the symbol of the kernel its marker names, for each marker built."""
    by_declaration = {demangle(e): e for e in mangled_entries}
    by_name = {function_name(d): e for d, e in by_declaration.items() if not is_marker(e)}
    found = {}
    for entry in mangled_entries:
        m = _MARKER.match(demangle(entry))
        if m is None:
            continue
        declaration = m["declaration"]
        # an extern "C" kernel's symbol is its plain name, which demangles to itself
        symbol = by_name.get(m["name"]) if declaration is None else \
            by_declaration.get(declaration) or by_declaration.get(function_name(declaration))
        if symbol:
            found[name_expressions[int(m["index"])]] = symbol
    return found


def is_marker(symbol: str) -> bool:
    return bool(_MARKER.match(demangle(symbol)))


def demangle(symbol: str) -> str:
    """The C++ declaration `symbol` names; `symbol` itself when it is not mangled (extern "C")."""
    return parameters.demangled(symbol) or symbol


def function_name(declaration: str) -> str:
    """``void ns::k<float, 16>(float const*, int)`` -> ``ns::k<float, 16>``: the parameter
    list and the return type dropped."""
    head, depth, start = declaration[:parameters.parameter_list_at(declaration)], 0, 0
    for i, c in enumerate(head):   # the return type ends at the last top-level space
        depth += (c == "<") - (c == ">")
        if c == " " and depth == 0:
            start = i + 1
    return head[start:]


def entries(ptxas_log: str) -> list[str]:
    """The mangled names of the kernels ptxas compiled, in order, each once."""
    return list(dict.fromkeys(m["mangled"] for m in _ENTRY.finditer(ptxas_log)))


def readable(mangled_entries) -> list[str]:
    """The kernels' names as C++ writes them (markers left out), for an error that lists what was built."""
    return [function_name(demangle(s)) for s in mangled_entries if not is_marker(s)]


def without_markers(ptxas_log: str) -> str:
    """`ptxas_log` less the markers' reports (from a marker's "Compiling entry function" line
    to its "Compile time" line): the log reports the user's kernels only."""
    out, skipping = [], False
    for line in ptxas_log.split("\n"):
        entry = _ENTRY.search(line)
        if entry:
            skipping = is_marker(entry["mangled"])
        if not skipping:
            out.append(line)
        elif "Compile time" in line:
            skipping = False
    return "\n".join(out)
