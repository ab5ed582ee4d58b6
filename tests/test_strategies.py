"""Strategies: arguments checked up front, suspects derived from TILE, every drawn
shape within the kernel's declared support, and shrinking to small shapes."""

import pytest
from hypothesis import find, given, settings
from hypothesis.errors import InvalidArgument

from gemmcheck.contract import catalog
from gemmcheck.problems.harness import run_once
from gemmcheck.judge.oracle import judge
from gemmcheck.problems.problem import Problem
from gemmcheck.problems.strategies import (dimensions, problems, ragged_shapes, suspect_dimensions,
                                  supported_shapes)

from fakes import NumpyBackend, correct_product

SPECS = {s.name: s for s in catalog.load(catalog.BUILTIN)}
SEED_16 = catalog.Instance(SPECS["matmul_tiled"], "float32", 16)
GUARDED_16 = catalog.Instance(SPECS["matmul_tiled_guarded"], "float16", 16)


@pytest.mark.parametrize("call, message", [
    (lambda: dimensions(tile=0, max_value=10), "tile=0"),
    (lambda: dimensions(tile=16, min_value=20, max_value=10), "min_value=20 must be <= max_value=10"),
    (lambda: ragged_shapes(tile=16, max_dim=0), "max_dim=0"),
    (lambda: ragged_shapes(tile=16.0, max_dim=10), "tile=16.0"),
    (lambda: supported_shapes(instance=SEED_16, max_dim=8), "max_dim=8"),
    (lambda: problems(instance=GUARDED_16, values=("gaussian",), max_dim=10), "values=('gaussian',)"),
    (lambda: problems(instance=GUARDED_16, values="exact", max_dim=10), "values='exact'"),
    (lambda: problems(instance=GUARDED_16, max_dim=10, scalings=()), "scalings=()"),
    (lambda: problems(instance=GUARDED_16, max_dim=10, scalings=((2,),)), "scalings=((2,),)"),
])
def test_a_bad_argument_is_refused_naming_it_and_its_value(call, message):
    with pytest.raises(InvalidArgument, match=message.replace("(", r"\(").replace(")", r"\)")):
        call()


def test_suspects_are_where_tiled_kernels_break():
    suspects = suspect_dimensions(16, 1, 300)
    for n in (1, 15, 16, 17, 31, 32, 33, 47, 49, 127, 129, 257):
        assert n in suspects
    assert suspects == sorted(suspects) and max(suspects) <= 300
    assert {2, 3, 5, 7, 13, 37, 61, 97, 131} <= set(suspects)


@settings(max_examples=200, database=None)
@given(ragged_shapes(tile=16, max_dim=300))
def test_ragged_shapes_stay_in_range(shape):
    assert all(1 <= n <= 300 for n in shape)


@settings(max_examples=100, database=None)
@given(supported_shapes(instance=SEED_16, max_dim=300))
def test_a_square_only_kernel_gets_only_square_tile_multiples(shape):
    M, N, K = shape
    assert M == N == K and M % 16 == 0 and SEED_16.supports(*shape)


@settings(max_examples=100, database=None)
@given(problems(instance=GUARDED_16, values=("normal", "wide"), max_dim=64))
def test_problems_carry_the_instance_dtype_and_a_requested_kind(problem):
    assert problem.dtype == "float16" and problem.values in ("normal", "wide")
    assert max(problem.M, problem.N, problem.K) <= 64


@settings(max_examples=50, database=None)
@given(problems(instance=GUARDED_16, values=("exact",), max_dim=32, scalings=((1, 0), (2, -1))))
def test_problems_carry_a_requested_scaling(problem):
    assert (problem.alpha, problem.beta) in ((1, 0), (2, -1))
    assert len(problem.operands()) == (3 if problem.beta else 2)


@pytest.mark.parametrize("predicate, smallest", [
    pytest.param(lambda s: s[2] == 1 and s[0] != s[1], [(1, 2, 1)], id="K1-M!=N"),
    pytest.param(lambda s: s[0] % 16 != 0 and s[0] > 16, [(17, 1, 1)], id="ragged-past-one-tile"),
    # Past 100, N is at most the smallest suspect there (127 = 8 TILE - 1): our strategy offers
    # it; where in (100, 127] the search stops (101 or 127 so far) is hypothesis's shrinker.
    pytest.param(lambda s: s[1] > 100, [(1, n, 1) for n in range(101, 128)], id="wide"),
])
def test_shapes_shrink_to_a_smallest_shape_that_fits(predicate, smallest):
    assert find(ragged_shapes(tile=16, max_dim=300), predicate,
                settings=settings(database=None, max_examples=2000)) in smallest


def test_a_failing_kernel_shrinks_to_a_small_failing_problem():
    # A stand-in that forgets the last column whenever N is ragged; hypothesis must end
    # at the smallest such problem (N = 1 < TILE).
    def forgets_ragged_column(instance, grid, block, A, B, C, M, N, K):
        before = C.reshape(M, N)[:, -1].copy()
        correct_product(instance, grid, block, A, B, C, M, N, K)
        if N % instance.tile:
            C.reshape(M, N)[:, -1] = before   # the last column left as it was
    backend = NumpyBackend({"matmul_tiled_guarded": forgets_ragged_column})
    instance = catalog.Instance(SPECS["matmul_tiled_guarded"], "float32", 8)

    def fails(problem: Problem) -> bool:
        A, B = problem.operands()
        return not judge(run_once(backend, instance, A, B), A, B, exact=True).ok
    smallest = find(problems(instance=instance, values=("exact",), max_dim=200), fails,
                    settings=settings(database=None, max_examples=500))
    assert (smallest.M, smallest.N, smallest.K, smallest.seed) == (1, 1, 1, 0)


def test_a_kernel_whose_tile_exceeds_the_profiles_max_dim_is_searched_on_its_own_multiples():
    """On the H200 a 256 x 128 block-tile rung failed every property test of the dev profile
    (max_dim 160: no multiple of 256 to draw). The profile raises max_dim for it."""
    from gemmcheck.problems.profiles import PROFILES

    dev = PROFILES["dev"]
    seed_256 = catalog.Instance(SPECS["matmul_tiled"], "float32", 256)
    with pytest.raises(InvalidArgument, match="max_dim=160"):
        supported_shapes(instance=seed_256, max_dim=dev.max_dim)
    assert dev.search_max_dim(seed_256) == 512
    assert dev.search_max_dim(GUARDED_16) == dev.max_dim == dev.search_max_dim(SEED_16)
    found = find(supported_shapes(instance=seed_256, max_dim=dev.search_max_dim(seed_256)),
                 lambda s: True, settings=settings(database=None))
    assert found == (256, 256, 256)
