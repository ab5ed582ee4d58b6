#!/usr/bin/env python
"""Compile time per instantiation with each device compiler, cold, on the CPU (no GPU needed).

    python scripts/bench_compilers.py                       # builtin and ladder catalogs, nvcc and NVRTC
    python scripts/bench_compilers.py examples/catalog.toml --compilers nvrtc

Every build unit of the catalog (a source and its -D macros, for its target: sm_90 unless the
catalog names one) is compiled once per compiler, one after another, into an empty build
cache, as the compile suite and the GPU backend group them. Prints, per catalog and compiler,
the units, the instantiations, the seconds in all and per instantiation, and the slowest unit.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from gemmcheck.compile import choice, compiler, nvcc_build, resources  # noqa: E402
from gemmcheck.contract import catalog  # noqa: E402


def units(specs) -> dict[tuple, list[str]]:
    """(source, defines, target, linked sources) -> name expressions, as the compile suite builds them."""
    out: dict[tuple, list[str]] = {}
    for inst in (i for s in specs for i in s.instances()):
        unit = (inst.spec.source, inst.defines, resources.arch_of(inst), compiler.linked_sources(inst))
        out.setdefault(unit, []).append(inst.name_expression)
    return out


def measure(specs, device_compiler: str) -> dict:
    """Seconds to build every unit of `specs` with `device_compiler`, each into an empty cache."""
    timings = []
    with tempfile.TemporaryDirectory(prefix="gemmcheck-bench-") as cache:
        os.environ["GEMMCHECK_CACHE_DIR"] = cache
        nvcc_build._MISSING.clear()
        compiler._DECISIONS._known.clear()
        for (source, defines, arch, linked), names in units(specs).items():
            start = time.perf_counter()
            try:
                compiler.compile_source(source, tuple(dict.fromkeys(names)), arch, defines, device_compiler, linked)
                ok = True
            except compiler.CompileError:
                ok = False
            timings.append((time.perf_counter() - start, len(set(names)), source.name, ok))
    total = sum(t for t, *_ in timings)
    count = sum(n for _, n, *_ in timings)
    slowest = max(timings)
    return {"units": len(timings), "instantiations": count, "seconds": total, "per_instantiation": total / count,
            "slowest": f"{slowest[2]} ({slowest[1]} instantiations, {slowest[0]:.2f} s)",
            "failed": sum(not ok for *_, ok in timings)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("catalogs", nargs="*", default=["builtin", "ladder"])
    parser.add_argument("--compilers", default=",".join(choice.installed()),
                        help="comma-separated, from nvcc,nvrtc (default: those installed here)")
    args = parser.parse_args(argv)
    print("| catalog | compiler | units | instantiations | s in all | s per instantiation | slowest unit | failed |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.catalogs:
        specs = catalog.load_all(catalog.resolve([name]))
        for device_compiler in args.compilers.split(","):
            found = measure(specs, device_compiler)
            print(f"| {name} | {device_compiler} | {found['units']} | {found['instantiations']} | "
                  f"{found['seconds']:.1f} | {found['per_instantiation']:.3f} | {found['slowest']} | {found['failed']} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
