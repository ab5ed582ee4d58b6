"""Problems: the exact integer range is proven exact, generators are deterministic per seed
with one stream per operand, and every kind holds what its name promises."""

import math
from pathlib import Path

import numpy as np
import pytest

from gemmcheck.contract import catalog
from gemmcheck.contract import dtypes as dt
from gemmcheck.judge.oracle import special_pattern
from gemmcheck.problems.problem import (VALUE_KINDS, Problem, accumulator, claimed_shape, exact_range,
                                finfo, tile_shapes, wide_exponent)

DTYPES = list(dt.DTYPES)
KS = [1, 2, 3, 17, 65, 256, 1000, 4096, 4160]
SPECS = {s.name: s for s in catalog.load(catalog.BUILTIN)}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("K", KS)
def test_exact_range_keeps_every_partial_sum_exact_and_is_the_largest_such(dtype, K):
    d = dt.get(dtype)
    acc = accumulator(d)
    r = exact_range(d, K)
    worst = K * r * r                       # |partial sum| <= sum of K products of magnitude <= r^2
    assert r <= 2 ** d.significand_bits
    assert worst <= 2 ** acc.significand_bits
    assert worst <= float(finfo(d).max)
    # r + 1 breaks one of the three conditions: the range is not needlessly small.
    bigger = K * (r + 1) ** 2
    assert (r + 1 > 2 ** d.significand_bits or bigger > 2 ** acc.significand_bits
            or bigger > float(finfo(d).max))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("K", [1, 65, 4160])
def test_the_worst_case_partial_sums_are_exact_in_the_accumulator(dtype, K):
    # All products +r^2: every running sum of a sequential accumulation, computed in the
    # accumulator's own numpy type, equals the exact integer running sum.
    d = dt.get(dtype)
    r = exact_range(d, K)
    values = np.arange(-r, r + 1, dtype=np.float64)
    assert np.array_equal(dt.from_bits(dt.to_bits(values, d), d).astype(np.float64), values)
    products = np.full(K, float(r * r))
    running = np.cumsum(products.astype(accumulator(d).numpy), dtype=accumulator(d).numpy)
    assert np.array_equal(running.astype(np.float64), np.cumsum(products))
    # And one more unit past the worst case would be where exactness could end.
    assert int(running[-1]) == K * r * r


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_float64_product_of_exact_inputs_is_the_int64_product(dtype):
    # The oracle uses numpy's float64 (BLAS) product for exact inputs; every partial sum is
    # an integer <= 2^53, so it must equal the int64 product whatever order BLAS sums in.
    for problem in (Problem(33, 17, 65, dtype, "exact", 1), Problem(8, 9, 4096, dtype, "exact", 2)):
        A, B = problem.operands()
        assert np.array_equal((A @ B).astype(np.int64), problem.exact_product())
        assert np.array_equal(problem.expected_bits(), dt.to_bits(A @ B, problem.dt))


def test_expected_bits_round_the_exact_product_once():
    # bfloat16 has 8 significand bits: 257 = 2^8 + 1 is a tie and rounds to even (256).
    p = Problem(1, 1, 1, "bfloat16", "exact", 0)
    assert dt.from_bits(dt.to_bits(np.array([257.0]), p.dt), p.dt)[0] == 256
    A, B = p.operands()
    assert p.expected_bits()[0, 0] == dt.to_bits(np.array([A[0, 0] * B[0, 0]]), p.dt)[0]


@pytest.mark.parametrize("kind", VALUE_KINDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_operands_are_representable_in_the_dtype(kind, dtype):
    A, B = Problem(7, 5, 9, dtype, kind, 3).operands()
    d = dt.get(dtype)
    for X in (A, B):
        back = dt.from_bits(dt.to_bits(X, d), d).astype(np.float64)
        assert np.array_equal(back, X, equal_nan=True)
        assert np.array_equal(np.signbit(back), np.signbit(X))


@pytest.mark.parametrize("kind", VALUE_KINDS)
def test_operands_are_deterministic_from_the_seed(kind):
    one = Problem(9, 7, 5, "float32", kind, 11).operands()
    again = Problem(9, 7, 5, "float32", kind, 11).operands()
    other = Problem(9, 7, 5, "float32", kind, 12).operands()
    for x, y in zip(one, again):
        assert np.array_equal(x, y, equal_nan=True)
    assert not all(np.array_equal(x, y, equal_nan=True) for x, y in zip(one, other))


@pytest.mark.parametrize("kind", ["normal", "uniform", "wide"])
def test_each_operand_has_its_own_stream(kind):
    # A does not change when only B's shape does: the streams are independent.
    A1, _ = Problem(6, 4, 5, "float32", kind, 7).operands()
    A2, _ = Problem(6, 40, 5, "float32", kind, 7).operands()
    assert np.array_equal(A1, A2)


@pytest.mark.parametrize("dtype", DTYPES)
def test_exact_inputs_never_allow_an_all_zero_answer(dtype):
    for seed in range(200):
        for shape in ((1, 1, 1), (2, 3, 1), (3, 2, 5)):
            p = Problem(*shape, dtype, "exact", seed)
            A, B = p.operands()
            assert (A != 0).any(axis=1).all() and (B != 0).any(axis=0).all()
            assert p.exact_product().any()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("K", [1, 65, 4160])
def test_wide_values_span_binades_and_cannot_overflow_the_output(dtype, K):
    d = dt.get(dtype)
    E = wide_exponent(d, K)
    A, B = Problem(16, 16, K, dtype, "wide", 1).operands()
    magnitudes = np.log2(np.abs(A))
    assert magnitudes.max() - magnitudes.min() >= min(2 * E - 1, 8)
    assert (np.abs(A) >= float(finfo(d).smallest_normal)).all()
    assert K * 2.0 ** (2 * E) <= float(finfo(d).max)
    assert np.isfinite(np.abs(A) @ np.abs(B)).all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_special_inputs_hold_every_special_case(dtype):
    p = Problem(9, 11, 7, dtype, "special", 5)
    A, B = p.operands()
    nan, pos_inf, neg_inf = special_pattern(A, B)
    assert np.isnan(A).any() and (A == np.inf).any() and (B == -np.inf).any()
    assert nan.any() and (pos_inf | neg_inf).any()
    # Inf * 0 makes NaN where no NaN input reaches.
    clean = ~np.isnan(A).any(axis=1)[:, None] & ~np.isnan(B).any(axis=0)[None, :]
    assert (nan & clean).any()
    for X in (A, B):
        assert (np.signbit(X) & (X == 0)).any()
    tiny = float(finfo(p.dt).smallest_normal)
    finite = np.where(np.isfinite(A), A, 0.0)
    assert any(row.any() and (np.abs(row[row != 0]) < tiny).all() for row in finite)


def test_a_problem_names_its_shape_and_everything_that_makes_it():
    p = Problem(33, 17, 65, "float16", "normal", 7)
    assert p.id == "M33xN17xK65"
    assert p.label == "float16 normal M33xN17xK65 seed 7"
    assert repr(p) == "Problem(M=33, N=17, K=65, dtype='float16', values='normal', seed=7)"
    assert not p.exact and Problem(1, 1, 1, "float32").exact


@pytest.mark.parametrize("kwargs, message", [
    (dict(M=-1), "M=-1 must be a non-negative integer"),
    (dict(values="gaussian"), "values='gaussian'"),
    (dict(dtype="int8"), "unknown dtype 'int8'"),
    (dict(seed=-1), "seed=-1"),
])
def test_a_bad_problem_is_refused_with_the_value(kwargs, message):
    args = dict(M=2, N=2, K=2, dtype="float32", values="exact", seed=0) | kwargs
    with pytest.raises(ValueError, match=message):
        Problem(**args)


@pytest.mark.parametrize("tile", [1, 2, 16, 32])
def test_tile_shapes_are_valid_and_named_alike_for_every_tile(tile):
    shapes = tile_shapes(tile)
    assert list(shapes) == list(tile_shapes(1))
    assert all(min(s) >= 1 for s in shapes.values())
    M, N, K = shapes["ragged"]
    assert len({M, N, K}) == 3
    assert tile == 1 or (M % tile and N % tile)
    assert shapes["K1"][2] == 1 and shapes["skinny"][1] == 1 and shapes["wide"][0] == 1


def test_claimed_shape_falls_back_to_a_square_tile_multiple_for_the_seed():
    seed = catalog.Instance(SPECS["matmul_tiled"], "float32", 16)
    general = catalog.Instance(SPECS["matmul_tiled_guarded"], "float32", 16)
    assert claimed_shape(general, 33, 17, 67) == (33, 17, 67)
    assert claimed_shape(seed, 33, 17, 67) == (80, 80, 80)
    assert claimed_shape(seed, 32, 32, 32) == (32, 32, 32)


def test_exact_range_refuses_a_K_too_long_to_be_exact():
    with pytest.raises(ValueError, match="too long"):
        exact_range("float32", 2 ** 25)
    assert math.isqrt(2 ** 24 // 4096) == exact_range("float32", 4096)


# -- alpha, beta and C0 -------------------------------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from gemmcheck.problems.problem import BETA_SCALING, scaling_id  # noqa: E402


@settings(max_examples=300, deadline=None)
@given(dtype=st.sampled_from(DTYPES), K=st.integers(1, 10 ** 5), alpha=st.integers(-64, 64),
       beta=st.integers(-64, 64))
def test_the_exact_range_with_alpha_and_beta_keeps_every_sum_exact_and_is_the_largest(dtype, K, alpha, beta):
    d = dt.get(dtype)
    try:
        r = exact_range(d, K, alpha, beta)
    except ValueError as exc:
        assert "too long" in str(exc)
        assert max(abs(alpha), 1) * K + abs(beta) > min(2 ** accumulator(d).significand_bits, float(finfo(d).max))
        return
    limit = min(2 ** accumulator(d).significand_bits, float(finfo(d).max))

    def worst(r):  # the largest magnitude any partial sum of the K + 1 terms can reach
        return max(abs(alpha), 1) * K * r * r + abs(beta) * r
    assert r <= 2 ** d.significand_bits and worst(r) <= limit
    assert r + 1 > 2 ** d.significand_bits or worst(r + 1) > limit
    # Replay the worst case in the accumulator's own type: all terms of one sign, in two
    # orders (beta * C0 first and last); every running sum equals the exact integer one.
    terms = [abs(alpha) * r * r] * K
    acc = accumulator(d).numpy
    for order in ([abs(beta) * r] + terms, terms + [abs(beta) * r]):
        exact = np.cumsum(np.array(order, dtype=object))
        assert np.array_equal(np.cumsum(np.array(order, dtype=acc), dtype=acc).astype(object), exact)


@pytest.mark.parametrize("kind", VALUE_KINDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_beta_nonzero_gives_C0_that_every_correct_result_changes(dtype, kind):
    problem = Problem(9, 7, 33, dtype, kind, 4, *BETA_SCALING)
    A, B, C0 = problem.operands()
    assert C0.shape == (9, 7) and np.isfinite(C0).all()
    assert np.array_equal(dt.from_bits(dt.to_bits(C0, problem.dt), problem.dt).astype(np.float64), C0)
    finite = np.isfinite(A).all(axis=1)[:, None] & np.isfinite(B).all(axis=0)[None, :]
    with np.errstate(invalid="ignore"):
        result = 2 * (np.where(np.isfinite(A), A, 0) @ np.where(np.isfinite(B), B, 0)) - C0
    rounded = dt.from_bits(dt.to_bits(result, problem.dt), problem.dt).astype(np.float64)
    assert not (finite & (rounded == C0)).any()
    assert len(Problem(9, 7, 33, dtype, kind, 4).operands()) == 2   # beta = 0: no C0


def test_the_exact_result_includes_alpha_and_beta():
    problem = Problem(6, 5, 9, "float32", "exact", 2, 3, -2)
    A, B, C0 = problem.operands()
    want = 3 * (A.astype(np.int64) @ B.astype(np.int64)) - 2 * C0.astype(np.int64)
    assert np.array_equal(problem.exact_product(), want)


def test_alpha_and_beta_are_checked_and_shown():
    with pytest.raises(ValueError, match="needs an integer alpha"):
        Problem(4, 4, 4, "float32", "exact", alpha=0.5)
    with pytest.raises(ValueError, match="not representable in float16"):
        Problem(4, 4, 4, "float16", "normal", beta=0.1)
    with pytest.raises(ValueError, match="finite number"):
        Problem(4, 4, 4, "float32", "normal", alpha=float("nan"))
    problem = Problem(4, 4, 4, "float32", "normal", 7, 2, -1)
    assert problem.label == "float32 normal M4xN4xK4 alpha 2 beta -1 seed 7"
    assert repr(problem).endswith("seed=7, alpha=2, beta=-1)") and eval(repr(problem)) == problem
    assert "alpha" not in Problem(4, 4, 4, "float32").label + repr(Problem(4, 4, 4, "float32"))
    assert scaling_id(*BETA_SCALING) == "alpha2-beta-1"


def test_a_large_problems_operands_are_made_once_and_read_only():
    from gemmcheck.problems import problem as problem_module

    large = Problem(1024, 1024, 1024, "float32", "exact", 3)
    assert 2 * 1024 * 1024 >= problem_module.SHARED_ELEMENTS
    first, again = large.operands(), Problem(1024, 1024, 1024, "float32", "exact", 3).operands()
    assert all(a is b for a, b in zip(first, again))                 # equal problems share them
    assert not any(X.flags.writeable for X in first)
    assert all(np.array_equal(a, b) for a, b in zip(first, large.make_operands()))
    small = Problem(33, 17, 65, "float32", "exact", 3)
    assert small.operands()[0] is not small.operands()[0] and small.operands()[0].flags.writeable


def test_claimed_shape_rounds_each_size_to_what_a_per_dimension_claim_asks(tmp_path):
    source = Path(__file__).parent.parent / "examples" / "published" / "03_vectorized_2d_blocktiling.cu"
    (tmp_path / "cat.toml").write_text(f"""
[[kernel]]
name = "rect"
source = "{source}"
entry = "sgemmVectorize"
args = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
template_args = "{{BM}}, {{BN}}, {{BK}}, {{TM}}, {{TN}}"
configs = [{{ name = "wide", BM = 64, BN = 128, BK = 8, TM = 8, TN = 8 }}]
tile = "BM"
grid = ["ceil(N / BN)", "ceil(M / BM)"]
block = ["BM * BN / (TM * TN)"]
dtypes = ["float32"]
shapes = "M % BM == 0 and N % BN == 0 and K % BK == 0"
expect = "correct"
""")
    (inst,) = catalog.load(tmp_path / "cat.toml")[0].instances()
    # the square tile multiple (320 cubed) breaks N % 128 == 0: each size is rounded up instead
    assert claimed_shape(inst, 257, 259, 258) == (320, 384, 264)
    assert claimed_shape(inst, 64, 128, 8) == (64, 128, 8)
