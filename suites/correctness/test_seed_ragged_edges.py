"""The seed kernel outside its declared support does exactly what the seed predicts.

matmul_tiled (tiled-gemm-cuda.txt, section 3) declares square N divisible by
TILE. Section 7.1 says why: its grid is N / TILE rounded down and its phase
loop runs N / TILE times. On N = 2 TILE + 1 that means: every output in a
row or column past the last full tile is never written, and every written
output misses the K tail (the last N mod TILE products). These tests assert
those facts, element by element, and only then make the claim a correct
kernel would satisfy; the claim must fail (strict xfail, and only a failed
claim counts: a broken fact fails the test outright). So the xfail passes
only for the right reason, and the shape stays reported as out of scope.
"""

import numpy as np
import pytest

from gemmcheck.contract import catalog
from gemmcheck.contract import dtypes as dt
from gemmcheck.problems.harness import run_once
from gemmcheck.judge.oracle import assert_judgement, judge
from gemmcheck.problems.problem import Problem

SEED = 6


def is_the_seed_kernel(instance) -> bool:
    # The prediction is about the seed's own source, so this one test names it.
    spec = instance.spec
    return spec.catalog == catalog.BUILTIN and spec.entry == "matmul_tiled" and instance.tile >= 2


@pytest.mark.instances.with_args(is_the_seed_kernel)
@pytest.mark.xfail(strict=True, raises=pytest.fail.Exception,
                   reason="out of scope: the seed's floor grid and N / TILE phases (section 7.1) "
                          "leave ragged edges unwritten and drop the K tail")
def test_seed_kernel_on_ragged_N_leaves_edges_unwritten_and_drops_the_K_tail(backend, reference):
    t = reference.tile
    N = 2 * t + 1
    full = (N // t) * t                       # the part the floor grid and phase loop cover
    problem = Problem(N, N, N, reference.types, "exact", SEED)
    A, B = problem.operands()
    assert not reference.supports(N, N, N)
    run = run_once(backend, reference, A, B)

    # Fact 1: exactly the rows and columns past the last full tile are unwritten.
    predicted_unwritten = np.ones((N, N), dtype=bool)
    predicted_unwritten[:full, :full] = False
    assert np.array_equal(run.unwritten, predicted_unwritten), (
        f"{reference.id}: unwritten elements are not the ragged edge: "
        f"{np.argwhere(run.unwritten != predicted_unwritten)[:8].tolist()}")
    # Fact 2: the written block holds the product without the K tail, bit for bit.
    truncated = A[:full, :full] @ B[:full, :full]
    assert not np.array_equal(truncated, (A @ B)[:full, :full]), "the K tail contributes nothing here"
    want = dt.to_bits(truncated, reference.dt)
    assert np.array_equal(run.C_bits[:full, :full], want), (
        f"{reference.id}: the written block is not the K-truncated product")
    # Fact 3: indices stay below N * N, so nothing outside the operands is touched.
    assert run.guard_damage == {"A": 0, "B": 0, "C": 0} and run.inputs_changed == {"A": 0, "B": 0}

    # The claim a correct kernel would satisfy; for the seed it must fail.
    assert_judgement(judge(run, A, B, exact=True, problem=problem))
