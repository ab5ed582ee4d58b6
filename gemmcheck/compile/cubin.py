"""What a cubin says about its kernels beyond ptxas's report: the functions each one calls.

A cubin is an ELF file; its ``.nv.callgraph`` section lists call edges as pairs of symbol
indices (caller, callee) into ``.symtab``, with non-positive indices as markers. A kernel's
stack frame has a cause ptxas does not print: device ``printf`` is a call to ``vprintf``,
whose arguments live on the caller's stack, and the cubin names that callee.
"""

from __future__ import annotations

import struct

_SECTION = struct.Struct("<IIQQQQIIQQ")   # Elf64_Shdr: name type flags addr offset size link info align entsize
_SYMBOL = struct.Struct("<IBBHQQ")        # Elf64_Sym: name info other shndx value size
_EDGE = struct.Struct("<ii")              # .nv.callgraph: caller, callee (symbol indices)


def calls(cubin: bytes) -> dict[str, tuple[str, ...]]:
    """Per function (by its mangled name), every function it calls, directly or through the
    functions it calls; {} for anything that is not a 64-bit ELF with a call graph."""
    if cubin[:5] != b"\x7fELF\x02":
        return {}
    try:
        headers = _section_headers(cubin)
        sections = _by_name(cubin, headers)
        symtab, graph = sections.get(".symtab"), sections.get(".nv.callgraph")
        if symtab is None or graph is None:
            return {}
        names = _symbol_names(cubin, symtab, headers[symtab[6]])   # sh_link: the symbols' string table
        edges: dict[str, set[str]] = {}
        for offset in range(graph[4], graph[4] + graph[5] - _EDGE.size + 1, _EDGE.size):
            caller, callee = _EDGE.unpack_from(cubin, offset)
            if 0 < caller < len(names) and 0 < callee < len(names):
                edges.setdefault(names[caller], set()).add(names[callee])
    except (struct.error, IndexError, ValueError):
        return {}
    return {f: tuple(sorted(_reachable(f, edges))) for f in edges}


def _reachable(start: str, edges: dict[str, set[str]]) -> set[str]:
    seen: set[str] = set()
    todo = list(edges.get(start, ()))
    while todo:
        f = todo.pop()
        if f not in seen:
            seen.add(f)
            todo += edges.get(f, ())
    return seen


def _section_headers(elf: bytes) -> list[tuple]:
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", elf, 0x3A)
    return [_SECTION.unpack_from(elf, shoff + i * shentsize) for i in range(shnum)]


def _by_name(elf: bytes, headers: list[tuple]) -> dict[str, tuple]:
    shstrndx, = struct.unpack_from("<H", elf, 0x3E)
    names = headers[shstrndx]
    return {_string(elf, names[4] + h[0]): h for h in headers}


def _symbol_names(elf: bytes, symtab: tuple, strtab: tuple) -> list[str]:
    return [_string(elf, strtab[4] + _SYMBOL.unpack_from(elf, offset)[0])
            for offset in range(symtab[4], symtab[4] + symtab[5], _SYMBOL.size)]


def _string(elf: bytes, at: int) -> str:
    return elf[at:elf.index(b"\0", at)].decode("utf-8", "replace")
