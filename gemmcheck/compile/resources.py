"""Static resource checks that need no GPU: read ptxas's report of registers,
shared memory, spills and stack frame per instantiation, from the same build
(gemmcheck.compile.compiler: nvcc's or NVRTC's, one ptxas report form) the GPU backend runs, and what uses local memory
(the functions a kernel calls, from the cubin: gemmcheck.compile.cubin).

A catalog entry may claim what the report shows (``resources``, RESOURCE_CLAIMS of
gemmcheck.contract.catalog); gemmcheck's own reference kernels claim ``no-stack-frame``.
A user's kernel that claims nothing gets its local memory as information, never a failure.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from gemmcheck.compile import compiler, cubin
from gemmcheck.tables import format_table

DEFAULT_ARCH = "sm_90"


def arch_of(instance) -> str:
    """The target the static checks compile `instance` for: its catalog's arch, else DEFAULT_ARCH."""
    return compiler.target(instance, DEFAULT_ARCH)

_ENTRY = re.compile(r"Compiling entry function '(?P<mangled>[^']+)' for '(?P<arch>[^']+)'")
_FRAME = re.compile(r"(?P<stack>\d+) bytes stack frame, (?P<spill_st>\d+) bytes spill stores, "
                    r"(?P<spill_ld>\d+) bytes spill loads")
_USED = re.compile(r"Used (?P<regs>\d+) registers")
_SMEM = re.compile(r"(?P<smem>\d+) bytes smem")
_BARRIERS = re.compile(r"used (?P<bar>\d+) barriers")


@dataclass(frozen=True)
class Resources:
    name_expression: str
    arch: str
    registers: int
    shared_bytes: int
    stack_frame: int
    spill_stores: int
    spill_loads: int
    barriers: int
    calls: tuple[str, ...] = ()   # the functions it calls (mangled), from the cubin's call graph

    @property
    def spills(self) -> int:
        return self.spill_stores + self.spill_loads


# Device printf compiles to a call of vprintf, which takes its arguments through the stack.
PRINTF = "vprintf"


def local_memory(found: Resources) -> str | None:
    """One line on the local memory ptxas reports for an instantiation and what uses it (a
    printf, a call, spilled registers), or None when it uses none."""
    if not (found.stack_frame or found.spills):
        return None
    what = f"{found.stack_frame} B stack frame"
    if found.spills:
        what += f", {found.spill_stores} B spill stores and {found.spill_loads} B spill loads (registers ran out)"
    if PRINTF in found.calls:
        why = "it calls printf (vprintf takes its arguments through the stack)"
    elif found.calls:
        why = f"it calls {', '.join(found.calls)}"
    elif not found.spills:
        why = "local memory: an array indexed at run time, or a local object too large for registers"
    else:
        why = ""
    return f"{what}{': ' + why if why else ''}"


def notes(rows) -> list[str]:
    """One line per (instance, Resources) that uses local memory: what uses it, and whether its
    catalog claims otherwise or the line is information only."""
    out = []
    for instance, found in rows:
        used = local_memory(found)
        if used:
            claim = instance.spec.resources
            out.append(f"{instance.id}: {used}" + (f" (claimed: resources = '{claim}')" if claim else
                                                   " (information: its catalog claims no resources)"))
    return out


def claim_broken(found: Resources, claim: str) -> str | None:
    """None when `found` keeps the catalog's resources `claim`; else what breaks it (one line)."""
    broken = found.spills > 0 if claim == "no-spills" else (found.spills > 0 or found.stack_frame > 0)
    return local_memory(found) if broken else None


def table(found: Iterable[Resources]) -> list[str]:
    """ptxas's resources as text, one line per instantiation, in the order given."""
    return format_table(("instantiation", "arch", "regs", "smem B", "stack B", "spill B", "barriers"),
                        [(r.name_expression, r.arch, r.registers, r.shared_bytes, r.stack_frame, r.spills,
                          r.barriers) for r in found])


class CompileFailed(RuntimeError):
    pass


def parse_ptxas(log: str, mangled_to_name: dict[str, str]) -> dict[str, Resources]:
    """Resources per name expression from a `ptxas -v` log."""
    out: dict[str, Resources] = {}
    # Each entry's block runs from its "Compiling entry function" line to the next one.
    starts = list(_ENTRY.finditer(log))
    for i, m in enumerate(starts):
        block = log[m.end(): starts[i + 1].start() if i + 1 < len(starts) else len(log)]
        name = mangled_to_name.get(m["mangled"], m["mangled"])
        frame, used = _FRAME.search(block), _USED.search(block)
        if not (frame and used):
            raise CompileFailed(f"could not read ptxas's report for {name}:\n{block}")
        smem, bars = _SMEM.search(block), _BARRIERS.search(block)
        out[name] = Resources(
            name, m["arch"], int(used["regs"]), int(smem["smem"]) if smem else 0,
            int(frame["stack"]), int(frame["spill_st"]), int(frame["spill_ld"]),
            int(bars["bar"]) if bars else 0)
    return out


def compile_report(source: Path, name_expressions: tuple[str, ...], arch: str = DEFAULT_ARCH, defines: tuple = (),
                   compiler_name: str | None = None, linked: tuple = ()) -> dict[str, Resources]:
    """Compile `name_expressions` of `source` for `arch` with `compiler_name` ("nvcc" or
    "nvrtc"; None: the run's choice); the resources of each.

    The build is gemmcheck.compile.compiler's: the same cubin the GPU backend loads.
    """
    from gemmcheck.compile import choice

    return _compile_report(source, tuple(name_expressions), arch, tuple(defines),
                           compiler_name or choice.resolve(linked=bool(linked)), tuple(linked))


@functools.lru_cache(maxsize=None)
def _compile_report(source, name_expressions, arch, defines, compiler_name, linked) -> dict[str, Resources]:
    try:
        compiled = compiler.compile_source(source, name_expressions, arch, defines=defines,
                                           compiler=compiler_name, linked=linked)
    except compiler.CompileError as exc:
        raise CompileFailed(str(exc)) from None
    mapping = {mangled: name for name, mangled in compiled.mangled.items()}
    # nvcc also builds the kernels the source's host code launches: only the ones asked for
    report = {name: r for name, r in parse_ptxas(compiled.log, mapping).items() if name in name_expressions}
    missing = set(name_expressions) - set(report)
    if missing:
        raise CompileFailed(f"{source.name}: ptxas reported nothing for {sorted(missing)}")
    graph = cubin.calls(compiled.cubin)
    return {name: dataclasses.replace(found, calls=graph.get(compiled.mangled.get(name, ""), ()))
            for name, found in report.items()}
