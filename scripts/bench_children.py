#!/usr/bin/env python
"""How fast the host starts and runs the kill matrix's child processes, side by side.

    python scripts/bench_children.py                                   # memcheck, 32 children, 4/8/16/32 at once, GPU 0
    python scripts/bench_children.py --tool plain --tool racecheck --gpus 0,1 --at-once 16,32,64

Each child runs one instantiation's small exposing problems (what a kill-matrix row gives a
tool: kill_matrix.small_problems) under a compute-sanitizer tool, or with none ("plain"),
through gemmcheck.judge.isolation as the suites do. For each tool, GPU set and number of
children at once it prints the wall, children per second, the mean seconds of a child, its
start-up (until READY) split into the tool's and interpreter's start with gemmcheck's imports,
making the backend, preparing the kernels, and the CPU seconds per child (its whole process
tree). Children alternate over the GPUs given (CUDA_VISIBLE_DEVICES).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gemmcheck.contract import catalog  # noqa: E402
from gemmcheck.judge import isolation, kill_matrix, sanitizer  # noqa: E402


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def one_child(steps, tool: str, gpu: str, exe: str | None, workdir: Path, backend: str):
    """(seconds, ChildResult) of one child running `steps` under `tool` on `gpu`."""
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=gpu)
    prefix = () if tool == "plain" else sanitizer.command(tool, exe=exe)
    started = time.time()
    _, children = isolation.run_steps(steps, backend=backend, prefix=prefix, exact_allocations=True, env=env,
                                      workdir=workdir, step_timeout=sanitizer.STEP_TIMEOUT_S)
    return started, time.time(), children[0]


def measure(steps, tool: str, gpus: list[str], count: int, at_once: int, exe: str | None,
            backend: str = "cupy") -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gemmcheck-bench-children-") as tmp, \
            ThreadPoolExecutor(max_workers=at_once) as pool:
        futures = [pool.submit(one_child, steps, tool, gpus[i % len(gpus)], exe, Path(tmp) / str(i), backend)
                   for i in range(count)]
        runs = [f.result() for f in futures]
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    parts = dict.fromkeys(isolation.STARTUP_PARTS, 0.0)
    up = 0.0
    for began, _, child in runs:
        up += (child.ready_at or began) - began
        for k, v in (isolation.startup_parts(began, child.marks) or {}).items():
            parts[k] += v
    failed = sum(1 for _, _, c in runs if c.error or not c.ready)
    return {"tool": tool, "gpus": ",".join(gpus), "at once": at_once, "children": count, "wall": wall,
            "per s": count / wall, "child": sum(b - a for a, b, _ in runs) / count, "start-up": up / count,
            **{k: v / count for k, v in parts.items()}, "cpu": cpu / count, "failed": failed}


COLUMNS = ("tool", "gpus", "at once", "children", "wall", "per s", "child", "start-up",
           "start and imports", "backend", "prepare", "cpu", "failed")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tool", action="append", choices=("plain", *sanitizer.TOOLS),
                        help="compute-sanitizer tool, or plain (no tool); repeatable (default: memcheck)")
    parser.add_argument("--instance", default="matmul_tiled-float32-TILE16",
                        help="kernel-dtype-TILEn of the builtin catalog (default: %(default)s)")
    parser.add_argument("--children", type=int, default=32, help="children per measurement (default: 32)")
    parser.add_argument("--at-once", type=_ints, default=[4, 8, 16, 32], metavar="N,N",
                        help="children side by side (default: 4,8,16,32)")
    parser.add_argument("--gpus", default="0", help="CUDA_VISIBLE_DEVICES values the children alternate over")
    parser.add_argument("--backend", default="cupy", help="the children's backend (cpu-sim: a dry run here)")
    args = parser.parse_args(argv)
    instances = {i.id: i for s in catalog.load(catalog.BUILTIN) for i in s.instances()}
    if args.instance not in instances:
        parser.error(f"--instance: no {args.instance!r} in the builtin catalog")
    instance = instances[args.instance]
    settings = kill_matrix.Settings(tools=(), sanitizer_exe=None)
    steps = [isolation.Step.of(i, instance, p, purpose=purpose, repeats=1, control=False)
             for i, (purpose, p) in enumerate(kill_matrix.small_problems(instance, settings))]
    exe = sanitizer.executable()
    tools = args.tool or ["memcheck"]
    if exe is None and any(t != "plain" for t in tools):
        raise SystemExit(f"bench_children: {sanitizer.MISSING}")
    gpus = [g.strip() for g in args.gpus.split(",") if g.strip()]
    print(f"{len(steps)} steps per child ({args.instance}); {os.cpu_count()} cores; seconds per child but wall")
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    for tool in tools:
        for at_once in args.at_once:
            row = measure(steps, tool, gpus, args.children, at_once, exe, args.backend)
            print("| " + " | ".join(f"{row[c]:.2f}" if isinstance(row[c], float) else str(row[c])
                                    for c in COLUMNS) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
