"""NaN, Inf, -0.0 and subnormals come out as IEEE 754 says.

A NaN or Inf in A taints its whole row of C, in B its whole column; Inf * 0
(of either sign) is NaN; Inf of both signs in one dot product is NaN. -0.0 is
a zero, and subnormal inputs are neither flushed nor rounded away (NVRTC
compiles with -ftz=false unless told otherwise; gemmcheck does not). Finite
elements are still exact, so they are judged bit for bit.
"""

import numpy as np
import pytest

from gemmcheck.problems import problem as pb
from gemmcheck.problems.harness import OPERAND_VARIANTS, run_once, takes_operand_variants
from gemmcheck.judge.oracle import judge, special_pattern
from gemmcheck.problems.problem import Problem
from gemmcheck.pytest_plugin.scope_plugin import claimed_shape_or_skip

SEED = 5


def special_problem(instance, alpha=1, beta=0) -> Problem:
    why = pb.special_values_missing(instance.types)
    if why:
        pytest.skip(f"does not apply: {why}")
    if instance.spec.adds_into_c:
        pytest.skip("does not apply: the kernel adds into C (adds_into_c), and a float atomicAdd to global memory "
                    "flushes subnormals to zero on NVIDIA GPUs: the special kind's subnormal rows are not its to keep")
    t = instance.tile
    return Problem(*claimed_shape_or_skip(instance, 2 * t + 1, t + 3, t + 2), instance.types, "special", SEED,
                   alpha, beta)


def subnormal_rows(A, dtype) -> list[int]:
    smallest_normal = dtype.smallest_normal
    finite = np.where(np.isfinite(A), A, 0.0)
    return [i for i, row in enumerate(finite)
            if row.any() and (np.abs(row[row != 0]) < smallest_normal).all()]


def test_nan_and_inf_propagate_to_the_rows_and_columns_ieee_says(check, reference):
    problem = special_problem(reference)
    nan, pos_inf, neg_inf = special_pattern(*problem.operands())
    assert nan.any() and (pos_inf.any() or neg_inf.any()), f"{problem!r} holds no NaN/Inf to propagate"
    check(reference, problem)


@pytest.mark.instances.with_args(takes_operand_variants)
@pytest.mark.parametrize("variant", OPERAND_VARIANTS[1:], ids=lambda v: v.id)
def test_nan_and_inf_propagate_with_padded_ld_and_alpha_beta(check, require_variant, reference, variant):
    variant = require_variant(reference, variant)
    check(reference, special_problem(reference, variant.alpha, variant.beta),
          leading_dimensions=variant.leading_dimensions)


def test_negative_zeros_and_subnormals_are_kept_exactly(backend, reference, assert_judged):
    problem = special_problem(reference)
    A, B = (np.where(np.isfinite(X), X, 0.0) for X in problem.operands())
    rows = subnormal_rows(A, reference.types.A)
    # The claim has teeth only if the inputs hold -0.0 and a subnormal row whose products
    # do not cancel: flushing that row to zero would then change C.
    assert np.signbit(A[A == 0]).any() and np.signbit(B[B == 0]).any(), "no -0.0 in the inputs"
    assert rows and (A[rows] @ B).any(), f"{problem!r}: no subnormal row with a nonzero product"
    run = run_once(backend, reference, A, B)
    judgement = judge(run, A, B, exact=True,
                      problem=f"{problem.label}, NaN/Inf replaced by 0 (subnormal row {rows[0]})")
    assert_judged(judgement)
