#!/usr/bin/env python
"""One oracle judgement on the host (numpy) and on the GPU (CuPy), by problem size.

    python scripts/bench_oracle.py                    # cubes 64 .. 2048, exact bfloat16 and bounded float32
    python scripts/bench_oracle.py 96 200 640 --repeats 20

Prints milliseconds per judgement (the median of --repeats), for a correct output, where
each side's time starts from host inputs and the run's host C bits, as a test hands them to
``oracle.judge``. The GPU column needs CuPy and a device (else it says why and is left out);
its first judgement per dtype, which pays CuPy's kernel compiles, is reported apart. Where the
GPU column is below the host's is where ``gemmcheck.arrays`` should send problems to the GPU.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from gemmcheck import arrays  # noqa: E402
from gemmcheck.contract import catalog, dtypes as dt  # noqa: E402
from gemmcheck.judge import oracle  # noqa: E402
from gemmcheck.problems.harness import Run  # noqa: E402
from gemmcheck.problems.problem import Problem  # noqa: E402

CASES = (("bfloat16", "exact"), ("float32", "normal"))


def _instance(dtype: str):
    return next(i for s in catalog.load_all(catalog.resolve(["builtin"])) for i in s.instances()
                if s.name == "matmul_tiled" and i.dtype == dtype and i.tile == 16)


def _correct_run(inst, problem: Problem):
    A, B = problem.operands()[:2]
    bits = dt.to_bits(A @ B, inst.dt)
    M, N, K = problem.M, problem.N, problem.K
    return Run(inst, M, N, K, (1, 1, 1), (1, 1, 1), bits, np.zeros((M, N), bool)), A, B


def _median_ms(judge, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        judge()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def _device_available() -> str | None:
    try:
        import cupy

        cupy.cuda.runtime.getDeviceCount()
        return None
    except Exception as exc:  # no CuPy, no driver, no device
        return f"{type(exc).__name__}: {exc}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", type=int, nargs="*", default=[64, 128, 256, 400, 640, 1024, 2048])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    why_not = _device_available()
    if why_not:
        print(f"no GPU column: {why_not}")
    first = {}
    print("| size | case | host ms | GPU ms |")
    print("|---|---|---|---|")
    for size in args.sizes:
        for dtype, kind in CASES:
            inst = _instance(dtype)
            problem = Problem(size, size, size, dtype, kind, 1)
            run, A, B = _correct_run(inst, problem)
            exact = kind == "exact"

            def judge():
                judgement = oracle.judge(run, A, B, exact=exact)
                assert judgement.ok, judgement.message()

            arrays.use_device(False)
            host = _median_ms(judge, args.repeats)
            gpu = "-"
            if not why_not:
                saved = arrays.DEVICE_MIN_ELEMENTS, arrays.DEVICE_MIN_PRODUCT
                arrays.use_device(True)
                arrays.DEVICE_MIN_ELEMENTS = arrays.DEVICE_MIN_PRODUCT = 0   # every size on the GPU
                try:
                    if dtype not in first:
                        t0 = time.perf_counter()
                        judge()
                        first[dtype] = (time.perf_counter() - t0) * 1e3
                    gpu = f"{_median_ms(judge, args.repeats):.2f}"
                finally:
                    arrays.use_device(False)
                    arrays.DEVICE_MIN_ELEMENTS, arrays.DEVICE_MIN_PRODUCT = saved
            print(f"| {size}^3 | {kind} {dtype} | {host:.2f} | {gpu} |", flush=True)
    for dtype, ms in first.items():
        print(f"first GPU judgement of {dtype} (CuPy's kernel compiles): {ms:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
