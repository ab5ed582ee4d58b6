"""Exact inputs give exact results.

Integer inputs small enough that every partial sum is exact in the
accumulator leave a correct kernel no freedom: whatever its summation order,
it must store the exact product rounded once, bit for bit. Claimed on the
shapes derived from each TILE, and on any shape hypothesis finds within the
kernel's declared support. Kernels that take leading dimensions or alpha and
beta make the same claim with padded leading dimensions and at (alpha, beta)
= (2, -1), where the exact result is alpha A @ B + beta C0.
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gemmcheck.problems.harness import OPERAND_VARIANTS, operand_variants, takes_operand_variants
from gemmcheck.problems.problem import Problem, tile_shapes
from gemmcheck.problems.strategies import problems

SEED = 1
SHAPE_NAMES = list(tile_shapes(1))


@pytest.mark.parametrize("shape", SHAPE_NAMES)
def test_exact_inputs_give_the_exact_product_bit_for_bit(check, require_in_scope, reference, shape):
    M, N, K = tile_shapes(reference.tile)[shape]
    require_in_scope(reference, M, N, K)
    check(reference, Problem(M, N, K, reference.types, "exact", SEED))


@pytest.mark.instances.with_args(takes_operand_variants)
@pytest.mark.parametrize("shape", SHAPE_NAMES)
@pytest.mark.parametrize("variant", OPERAND_VARIANTS[1:], ids=lambda v: v.id)
def test_exact_inputs_give_the_exact_result_with_padded_ld_and_alpha_beta(check, require_in_scope,
                                                                          require_variant, reference,
                                                                          variant, shape):
    variant = require_variant(reference, variant)
    M, N, K = tile_shapes(reference.tile)[shape]
    require_in_scope(reference, M, N, K)
    check(reference, Problem(M, N, K, reference.types, "exact", SEED, variant.alpha, variant.beta),
          leading_dimensions=variant.leading_dimensions)


def test_exact_inputs_give_the_exact_product_on_any_supported_shape(check, searched, profile):
    @settings(max_examples=profile.correctness_examples)
    @given(problem=problems(instance=searched, values=("exact",), max_dim=profile.search_max_dim(searched)))
    def exact_product(problem):
        check(searched, problem, record=False)
    exact_product()


@pytest.mark.instances.with_args(takes_operand_variants)
def test_exact_inputs_give_the_exact_result_in_every_variant_on_any_supported_shape(check, searched, profile):
    variants = operand_variants(searched.spec)
    scalings = tuple(dict.fromkeys((v.alpha, v.beta) for v in variants))

    @settings(max_examples=profile.correctness_examples)
    @given(problem=problems(instance=searched, values=("exact",), max_dim=profile.search_max_dim(searched), scalings=scalings),
           leading_dimensions=st.sampled_from(tuple(dict.fromkeys(v.leading_dimensions for v in variants))))
    def exact_result(problem, leading_dimensions):
        check(searched, problem, record=False, leading_dimensions=leading_dimensions)
    exact_result()
