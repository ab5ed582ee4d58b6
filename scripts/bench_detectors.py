#!/usr/bin/env python
"""Host-side cost of one kill-matrix observation of a racing kernel at the nightly's sizes.

    python scripts/bench_detectors.py                 # 2048^3, 10 launches, 30 % of C wrong
    python scripts/bench_detectors.py 1024 --profile  # with cProfile's top entries

The kernel is a stand-in (the exact product, computed once, with random elements damaged
in each launch), so what is timed is gemmcheck's own work: the guarded launches' buffers
(observe) and the plain detectors (detect), where a real racing kernel's nightly row spent
46-80 s on an H200 host before the oracle's findings stopped looping over every wrong
element in Python. No GPU needed.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from fakes import NumpyBackend  # noqa: E402
from gemmcheck.contract import catalog, dtypes as dt  # noqa: E402
from gemmcheck.judge import hazards  # noqa: E402
from gemmcheck.problems.problem import Problem  # noqa: E402

INSTANCE = "broken_no_barriers-float32-TILE16"


def racing_stand_in(damaged: float):
    products: dict = {}

    def kernel(instance, grid, block, A, B, C, M, N, K):
        if (M, N, K) not in products:
            d = instance.dt
            a = dt.from_bits(A, d).reshape(M, K).astype(np.float64)
            b = dt.from_bits(B, d).reshape(K, N).astype(np.float64)
            products[(M, N, K)] = dt.to_bits(a @ b, d).reshape(-1)
        out = products[(M, N, K)].copy()
        out[np.random.default_rng().random(out.size) < damaged] ^= 1   # one bit off: wrong values
        C[:] = out
    return kernel


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("size", type=int, nargs="?", default=2048)
    parser.add_argument("--launches", type=int, default=10, help="the nightly's race_repeats (10)")
    parser.add_argument("--damaged", type=float, default=0.3, help="fraction of C wrong per launch")
    parser.add_argument("--profile", action="store_true", help="print cProfile's top entries of detect")
    args = parser.parse_args(argv)

    spec = next(s for s in catalog.load(ROOT / "kernels" / "catalog.toml") if INSTANCE.startswith(s.name + "-"))
    instance = next(i for i in spec.instances() if i.id == INSTANCE)
    backend = NumpyBackend({spec.entry: racing_stand_in(args.damaged)})
    problem = Problem(args.size, args.size, args.size, instance.dtype, "exact", seed=5)
    hazards.observe(backend, instance, problem, repeats=1, control=False)   # the product, once

    t0 = time.perf_counter()
    obs = hazards.observe(backend, instance, problem, repeats=args.launches, purpose="race stress")
    t1 = time.perf_counter()
    profile = cProfile.Profile() if args.profile else None
    if profile:
        profile.enable()
    found = hazards.detect(obs)
    if profile:
        profile.disable()
    t2 = time.perf_counter()
    print(f"{args.size}^3, {args.launches} launches + 1 control, {args.damaged:.0%} of C wrong: "
          f"observe {t1 - t0:.2f} s, detect {t2 - t1:.2f} s; found {', '.join(f.defect.value for f in found)}")
    if profile:
        pstats.Stats(profile).sort_stats("cumtime").print_stats(15)
    return 0


if __name__ == "__main__":
    sys.exit(main())
