"""Large shapes, each checked once: the profile's fixed large problems.

Hypothesis searches small and ragged shapes, where edge bugs live and an example
costs milliseconds; these fixed cases carry the claims at scale (many blocks in
the grid, a long K accumulation, ragged edges at every side of a large matrix),
one problem each instead of hundreds of random huge ones.
"""

import pytest

from gemmcheck.problems.problem import Problem
from gemmcheck.pytest_plugin.session import gemm_config

SEED = 1


@pytest.fixture
def large(reference, profile, require_in_scope, large_shape):
    """(M, N, K) of the large shape, for a reference instantiation the profile checks at scale."""
    if reference.tile < profile.large_min_tile:
        pytest.skip(f"profile {profile.name} checks large shapes at TILE >= {profile.large_min_tile} "
                    "only; smaller TILEs run the same edge logic on the searched small shapes")
    require_in_scope(reference, *large_shape)
    return large_shape


def pytest_generate_tests(metafunc):
    if "large_shape" not in metafunc.fixturenames:
        return
    profile = gemm_config(metafunc.config).profile
    shapes = [pytest.param(s, id=f"M{s[0]}xN{s[1]}xK{s[2]}") for s in profile.large_shapes]
    if not shapes:
        shapes = [pytest.param(None, id="none", marks=pytest.mark.skip(
            reason=f"profile {profile.name} checks no large shapes (--gemm-profile ci or nightly do)"))]
    metafunc.parametrize("large_shape", shapes)


@pytest.mark.slow
@pytest.mark.gpu   # on the CPU simulator one 1025^3 problem takes minutes
def test_exact_inputs_give_the_exact_product_at_a_large_shape(check, reference, large):
    M, N, K = large
    check(reference, Problem(M, N, K, reference.types, "exact", SEED))


@pytest.mark.slow
@pytest.mark.gpu   # on the CPU simulator one 1025^3 problem takes minutes
def test_random_inputs_stay_within_the_error_bound_at_a_large_shape(check, reference, large):
    M, N, K = large
    check(reference, Problem(M, N, K, reference.types, "normal", SEED))
