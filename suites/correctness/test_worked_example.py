"""The seed's worked example (tiled-gemm-cuda.txt, section 5), bit for bit.

A = B = [[1..4], [5..8], [9..12], [13..16]], N = 4: every reference kernel, at
every TILE it declares that divides 4, in every dtype. The expected matrices
are the seed's hand trace, written down here, not computed by the code under test.
"""

import numpy as np
import pytest

from gemmcheck import dtypes as dt
from gemmcheck.harness import run_once

pytestmark = pytest.mark.instances(lambda i: i.supports(4, 4, 4))

SEED_A = np.arange(1, 17, dtype=np.int64).reshape(4, 4)
SEED_C = np.array([[90, 100, 110, 120],
                   [202, 228, 254, 280],
                   [314, 356, 398, 440],
                   [426, 484, 542, 600]], dtype=np.int64)
# After phase t = 0 (TILE 2), block (0, 0) holds these partial sums (section 5).
SEED_PARTIALS = np.array([[11, 14], [35, 46]], dtype=np.int64)


def expected_bits(exact: np.ndarray, dtype: dt.DType) -> np.ndarray:
    """An exact integer result rounded once to the output type: what any correct kernel
    stores when every partial sum is exact in its accumulator. bfloat16 (8 significant
    bits) cannot hold 542, so there the one correct answer is 544 (round to nearest even)."""
    return dt.to_bits(exact.astype(np.float64), dtype)


def assert_bits_equal(run, exact, what):
    __tracebackhide__ = True
    want = expected_bits(exact, run.instance.dt)
    got = run.C_bits[:exact.shape[0], :exact.shape[1]]
    if not np.array_equal(got, want):
        bad = np.argwhere(got != want)
        i, j = bad[0]
        pytest.fail(
            f"{run.instance.id} ({run.instance.name_expression}), {what}: {len(bad)} of {want.size} "
            f"elements differ; first at C[{i},{j}] (tile {i // run.instance.tile},"
            f"{j // run.instance.tile}): got {run.C[i, j]!r}, expected {exact[i, j]}\n"
            f"got:\n{run.C}\nexpected:\n{exact}", pytrace=False)


def test_seed_matrix_is_the_exact_product():
    # The hand trace and integer arithmetic agree: the expectation is not a typo.
    assert np.array_equal(SEED_A @ SEED_A, SEED_C)


def test_worked_example_bit_for_bit(backend, reference):
    run = run_once(backend, reference, SEED_A, SEED_A)
    assert not run.unwritten.any(), f"{reference.id}: unwritten elements at {np.argwhere(run.unwritten).tolist()}"
    assert_bits_equal(run, SEED_C, "A = B = [[1..4],...,[13..16]], N = 4")


def test_partial_sums_after_the_first_phase(backend, reference):
    # With A's columns 2 and 3 zeroed, phase t = 1 adds nothing: C is what phase t = 0 left.
    A = SEED_A.copy()
    A[:, 2:] = 0
    run = run_once(backend, reference, A, SEED_A)
    assert_bits_equal(run, SEED_PARTIALS, "partial sums of block (0, 0) after phase t = 0")
