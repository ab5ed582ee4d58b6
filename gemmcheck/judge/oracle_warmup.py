"""CuPy compiles the oracle's GPU kernels before a test needs them.

The oracle judges large problems on the GPU (gemmcheck.arrays). CuPy compiles each elementwise
kernel and reduction on first use, per dtype: the first bfloat16 judgement took 9.3 s on the
H200 with an empty CuPy cache (scripts/bench_oracle.py), inside whichever test came first.
``warm`` judges small problems of each dtype on the GPU, along the paths judgements take
(exact, exact with IEEE specials, bounded with alpha and beta; a right and a wrong output), on
the thread gemmcheck.arrays.use_device gives it, beside the suites.
"""

from __future__ import annotations

import numpy as np

from gemmcheck.contract import dtypes as dt
from gemmcheck.judge import oracle
from gemmcheck.problems.harness import Run
from gemmcheck.problems.problem import Problem

SHAPE = (24, 17, 40)                     # M, N, K: any shape compiles the same kernels
CASES = (("exact", 1, 0), ("special", 1, 0), ("normal", 2, -1))


def warm(instances) -> None:
    """Judge, on the GPU, a right and a wrong output of each case for one instantiation of each
    dtype among `instances`. Errors are left for the tests: a real judgement meets them again
    and reports them where they belong."""
    import cupy

    for instance in {i.dtype: i for i in instances}.values():
        for values, alpha, beta in CASES:
            try:
                for run, A, B, exact in _runs(instance, Problem(*SHAPE, instance.dtype, values, 1, alpha, beta)):
                    oracle.judge(run, A, B, exact=exact, xp=cupy)
            except Exception:  # noqa: BLE001 - see the docstring
                continue


def _runs(instance, problem: Problem):
    """(run, A, B, exact) of a right output of `problem`, then of one with a wrong element and an
    unwritten one."""
    M, N, K = problem.M, problem.N, problem.K
    A, B, *C0 = problem.operands()
    C0 = C0[0] if C0 else None
    unwritten = np.zeros((M, N), bool)

    def run(bits, mask):
        return Run(instance, M, N, K, (1, 1, 1), (1, 1, 1), bits, mask,
                   alpha=problem.alpha, beta=problem.beta, C0=C0)

    probe = run(np.zeros((M, N), instance.dt.storage), unwritten)
    right = dt.to_bits(oracle.judge(probe, A, B, exact=problem.exact, xp=np).expected, instance.dt)
    wrong, mask = right.copy(), unwritten.copy()
    wrong[0, 0] ^= 1
    wrong[1, 1], mask[1, 1] = instance.dt.poison_bits, True
    return [(run(right, unwritten), A, B, problem.exact), (run(wrong, mask), A, B, problem.exact)]
