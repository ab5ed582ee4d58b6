"""Random inputs stay within the forward error bound.

For normal, uniform and wide-range (many binades) inputs in every dtype,
|C - C_ref| <= gamma_K(u_acc)(|A||B|) + output rounding, element by element
(gemmcheck.judge.oracle documents the bound and its derivation). The ratio
error/bound of a correct kernel is at most 1; hypothesis climbs toward the
worst ratio it can find (hypothesis.target). Kernels that take leading
dimensions or alpha and beta are held to the bound for alpha A @ B + beta C0
with padded leading dimensions and at (alpha, beta) = (2, -1) too.
"""

import pytest
from hypothesis import given, settings, target
from hypothesis import strategies as st

from gemmcheck.problems.harness import OPERAND_VARIANTS, operand_variants, takes_operand_variants
from gemmcheck.problems.problem import Problem
from gemmcheck.pytest_plugin.scope_plugin import claimed_shape_or_skip
from gemmcheck.problems.strategies import problems

SEED = 2
RANDOM_KINDS = ("normal", "uniform", "wide")


@pytest.mark.parametrize("values", RANDOM_KINDS)
def test_random_inputs_stay_within_the_forward_error_bound(check, reference, values):
    t = reference.tile
    # Ragged edges and a long K (the bound grows with K); square TILE multiples for
    # kernels that claim only those.
    M, N, K = claimed_shape_or_skip(reference, 2 * t + 1, t + 1, 4 * t + 3)
    judgement = check(reference, Problem(M, N, K, reference.types, values, SEED))
    assert judgement.ratio <= 1


@pytest.mark.instances.with_args(takes_operand_variants)
@pytest.mark.parametrize("values", RANDOM_KINDS)
@pytest.mark.parametrize("variant", OPERAND_VARIANTS[1:], ids=lambda v: v.id)
def test_random_inputs_stay_within_the_bound_with_padded_ld_and_alpha_beta(check, require_variant,
                                                                           reference, variant, values):
    variant = require_variant(reference, variant)
    t = reference.tile
    M, N, K = claimed_shape_or_skip(reference, 2 * t + 1, t + 1, 4 * t + 3)
    judgement = check(reference, Problem(M, N, K, reference.types, values, SEED, variant.alpha, variant.beta),
                      leading_dimensions=variant.leading_dimensions)
    assert judgement.ratio <= 1


def test_random_inputs_stay_within_the_bound_on_any_supported_shape(check, searched, profile):
    @settings(max_examples=profile.correctness_examples)
    @given(problem=problems(instance=searched, values=RANDOM_KINDS, max_dim=profile.search_max_dim(searched)))
    def within_bound(problem):
        judgement = check(searched, problem, record=False)
        # Climb toward the worst inputs: a kernel whose error nears its bound is found there.
        target(float(min(judgement.ratio, 1e9)), label="error / bound")
    within_bound()


@pytest.mark.instances.with_args(takes_operand_variants)
def test_random_inputs_stay_within_the_bound_in_every_variant_on_any_supported_shape(check, searched, profile):
    variants = operand_variants(searched.spec)
    scalings = tuple(dict.fromkeys((v.alpha, v.beta) for v in variants))

    @settings(max_examples=profile.correctness_examples)
    @given(problem=problems(instance=searched, values=RANDOM_KINDS, max_dim=profile.search_max_dim(searched), scalings=scalings),
           leading_dimensions=st.sampled_from(tuple(dict.fromkeys(v.leading_dimensions for v in variants))))
    def within_bound(problem, leading_dimensions):
        judgement = check(searched, problem, record=False, leading_dimensions=leading_dimensions)
        target(float(min(judgement.ratio, 1e9)), label="error / bound")
    within_bound()
