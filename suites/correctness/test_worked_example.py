"""The seed's worked example (tiled-gemm-cuda.txt, section 5), bit for bit.

A = B = [[1..4], [5..8], [9..12], [13..16]], N = 4: every reference kernel, at
every TILE it declares that divides 4, in every dtype. The expected matrices
are the seed's hand trace, written down here, not computed by the code under test;
the oracle judges the runs, and its expectation is checked against the trace.
"""

import numpy as np
import pytest

from gemmcheck.contract import dtypes as dt
from gemmcheck.problems.harness import run_once
from gemmcheck.judge.oracle import judge

pytestmark = pytest.mark.instances(lambda i: i.supports(4, 4, 4))

SEED_A = np.arange(1, 17, dtype=np.int64).reshape(4, 4)
SEED_C = np.array([[90, 100, 110, 120],
                   [202, 228, 254, 280],
                   [314, 356, 398, 440],
                   [426, 484, 542, 600]], dtype=np.int64)
# After phase t = 0 (TILE 2), block (0, 0) holds these partial sums (section 5).
SEED_PARTIALS = np.array([[11, 14], [35, 46]], dtype=np.int64)


def test_seed_matrix_is_the_exact_product():
    # The hand trace and integer arithmetic agree: the expectation is not a typo.
    assert np.array_equal(SEED_A @ SEED_A, SEED_C)


def judged(backend, reference, A, B, what):
    """The run judged by the oracle (exact: every partial sum is an integer far below 2^p).
    A kernel with scale factors gets scales of 1, one with a fused epilogue a zero bias and
    residual and an output scale of 1: the hand trace has none (relu keeps its positive sums)."""
    epilogue = reference.types.epilogue
    if epilogue.transcendental:
        pytest.skip(f"{epilogue.activation} changes the hand trace's sums: the trace has no activation")
    A, B = A.astype(np.float64), B.astype(np.float64)
    for name, X, t in (("A", A, reference.types.A), ("B", B, reference.types.B)):
        held = dt.from_bits(dt.to_bits(X, t), t)
        if not np.array_equal(held, X):
            first = X[held != X].flat[0]
            pytest.skip(f"{name}'s type {t.name} cannot hold the worked example's inputs ({first:g} is "
                        f"{dt.from_bits(dt.to_bits(np.array([first]), t), t)[0]:g} there): the hand trace does not apply")
    shapes = {"A": A.shape, "B": B.shape}
    ones = {s.role: np.ones(s.shape(*shapes[s.operand])) for s in reference.types.scales}
    return judge(run_once(backend, reference, A, B, scales=ones, epilogue=epilogue.neutral(4, 4)), A, B, exact=True,
                 problem=f"{reference.dtype} {what}, N = 4" + (", scale factors 1" if ones else ""))


def test_worked_example_bit_for_bit(backend, reference, assert_judged):
    judgement = judged(backend, reference, SEED_A, SEED_A, "A = B = [[1..4],...,[13..16]]")
    # The oracle expects the seed's hand trace (rounded once to the dtype: bfloat16 holds
    # 542 as 544), and the kernel must store exactly that.
    assert np.array_equal(judgement.expected, SEED_C)
    assert_judged(judgement)


def test_partial_sums_after_the_first_phase(backend, reference, assert_judged):
    # With A's columns 2 and 3 zeroed, phase t = 1 adds nothing: C is what phase t = 0 left.
    A = SEED_A.copy()
    A[:, 2:] = 0
    judgement = judged(backend, reference, A, SEED_A, "A = [[1..4],...] with columns 2, 3 zeroed, B = [[1..4],...]")
    assert np.array_equal(judgement.expected[:2, :2], SEED_PARTIALS)
    assert_judged(judgement)
