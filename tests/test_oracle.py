"""The oracle: the bound's arithmetic, the exactness premise, the IEEE special-value
pattern, and each check firing on a defective stand-in and silent on a correct one."""

from functools import partial

import numpy as np
import pytest

from gemmcheck.contract import catalog
from gemmcheck.contract import dtypes as dt
from gemmcheck.problems.harness import run_once
from gemmcheck.judge.oracle import (U64, Bound, InexactProblem, assert_judgement, exactness_violation,
                              gamma, judge, special_pattern)
from gemmcheck.problems.problem import VALUE_KINDS, Problem, exact_range, finfo
from gemmcheck.verdict import Defect, VerdictLog

from fakes import NumpyBackend, correct_product
from hazard_stand_ins import beyond, scribbles_on_B

SPECS = {s.name: s for s in catalog.load(catalog.BUILTIN)}
GUARDED = SPECS["matmul_tiled_guarded"]
DTYPES = list(dt.DTYPES)
RANDOM_KINDS = ("normal", "uniform", "wide")


def inst(dtype="float32", tile=4):
    return catalog.Instance(GUARDED, dtype, tile)


def stand_in(fn):
    """A NumpyBackend whose kernel computes C = fn(instance, A, B) (float64 in and out)
    and stores it rounded to the dtype; an element fn gives as the poison bits is not stored
    (it is left unwritten, whatever C held)."""
    def kernel(instance, grid, block, A, B, C, M, N, K):
        d = instance.dt
        a = dt.from_bits(A, d).reshape(M, K).astype(np.float64)
        b = dt.from_bits(B, d).reshape(K, N).astype(np.float64)
        out = fn(instance, a, b)
        bits = out.reshape(-1) if out.dtype == d.storage else dt.to_bits(out, d).reshape(-1)
        stored = bits != d.poison_bits
        C[stored] = bits[stored]
    return NumpyBackend({"matmul_tiled_guarded": kernel})


def judged(backend, problem, tile=4):
    A, B = problem.operands()
    with np.errstate(invalid="ignore", over="ignore"):
        return judge(run_once(backend, inst(problem.dtype, tile), A, B), A, B,
                     exact=problem.exact, problem=problem)


CORRECT = NumpyBackend({"matmul_tiled_guarded": correct_product})


# -- the bound's arithmetic --------------------------------------------------------------

def test_gamma_is_K_u_over_one_minus_K_u():
    assert gamma(1, 2.0 ** -24) == 2.0 ** -24 / (1 - 2.0 ** -24)
    assert gamma(1000, 2.0 ** -11) == pytest.approx(1000 * 2.0 ** -11 / (1 - 1000 * 2.0 ** -11))
    with pytest.raises(ValueError, match="K u"):
        gamma(2048, 2.0 ** -11)


@pytest.mark.parametrize("dtype, u_acc, u_out, eta_out", [
    ("float32", 2.0 ** -24, 0.0, 0.0),
    ("float64", 2.0 ** -53, 0.0, 0.0),
    ("float16", 2.0 ** -24, 2.0 ** -11, 2.0 ** -25),
    ("bfloat16", 2.0 ** -24, 2.0 ** -8, 2.0 ** -134),
])
def test_the_bound_uses_the_accumulator_and_the_output_rounding(dtype, u_acc, u_out, eta_out):
    b = Bound.for_dtype(dt.get(dtype), 100)
    assert (b.u_acc, b.u_out, b.eta_out) == (u_acc, u_out, eta_out)
    assert b.gamma_acc == gamma(100, u_acc) and b.gamma_ref == gamma(100, U64)
    assert b.coefficient == pytest.approx((gamma(100, u_acc) + gamma(100, U64)) * (1 + u_out)
                                          / (1 - gamma(100, U64)), rel=1e-15)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("K", [1, 7, 256, 2048])
def test_a_sequential_float32_accumulation_stays_within_the_bound(dtype, K):
    # What a kernel does: products in the accumulator, summed in order, rounded to the output.
    d = dt.get(dtype)
    rng = np.random.default_rng(K)
    a = dt.from_bits(dt.to_bits(rng.standard_normal((8, K)), d), d).astype(np.float32)
    b = dt.from_bits(dt.to_bits(rng.standard_normal((K, 8)), d), d).astype(np.float32)
    products = a[:, :, None] * b[None, :, :]                         # float32 products
    sums = np.cumsum(products, axis=1, dtype=np.float32)[:, -1, :]   # sequential float32 sums
    C = dt.from_bits(dt.to_bits(sums.astype(np.float64), d), d).astype(np.float64)
    A64, B64 = a.astype(np.float64), b.astype(np.float64)
    bound = Bound.for_dtype(d, K).evaluate(np.abs(A64) @ np.abs(B64), A64 @ B64)
    assert (np.abs(C - A64 @ B64) <= bound).all()


@pytest.mark.parametrize("K", [256, 1024])
def test_the_bound_is_tight_enough_to_catch_half_precision_accumulation(K):
    # A float32 kernel that accumulates in float16 is wrong; the bound must say so.
    problem = Problem(8, 8, K, "float32", "uniform", 1)
    A, B = problem.operands()

    def half_accumulation(instance, a, b):
        acc = np.zeros((a.shape[0], b.shape[1]), dtype=np.float16)
        for k in range(a.shape[1]):
            acc = (acc + (a[:, k:k + 1] * b[k:k + 1, :]).astype(np.float16)).astype(np.float16)
        return acc.astype(np.float64)
    j = judged(stand_in(half_accumulation), problem)
    assert Defect.WRONG_VALUES in j.defects and j.ratio > 1


def test_the_bound_catches_float64_computed_in_float32():
    problem = Problem(16, 16, 64, "float64", "normal", 1)
    j = judged(stand_in(lambda i, a, b: (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float64)),
               problem)
    assert Defect.WRONG_VALUES in j.defects and j.ratio > 1


# -- exactness premise -------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_the_exact_range_passes_the_premise_and_one_more_fails_it(dtype):
    d = dt.get(dtype)
    K = 64
    r = exact_range(d, K)
    A, B = np.full((2, K), float(r)), np.full((K, 2), float(r))
    assert exactness_violation(A, B, d) is None
    if K * (r + 1) ** 2 > 2 ** dt.get(d.accumulator).significand_bits:
        odd = float(2 * r + 1)   # odd: no power of two divides it out
        A2, B2 = np.full((2, K), odd), np.full((K, 2), odd)
        assert "significand bits" in exactness_violation(A2, B2, d)


def test_judging_inexact_inputs_bit_for_bit_is_refused():
    A, B = Problem(4, 4, 64, "float32", "normal", 1).operands()
    with pytest.raises(InexactProblem, match="use exact=False"):
        judge(run_once(CORRECT, inst(), A, B), A, B, exact=True)


def test_products_finer_than_the_accumulator_are_not_exact():
    A = np.array([[2.0 ** -100]])
    B = np.array([[2.0 ** -60]])
    assert "smallest subnormal" in exactness_violation(A, B, dt.get("float32"))


# -- IEEE special values ------------------------------------------------------------------

def test_the_special_pattern_follows_ieee_by_hand():
    A = np.array([[np.inf, 1.0], [0.0, 2.0], [np.nan, 0.0], [-0.0, 1.0]])
    B = np.array([[0.0, 1.0, 2.0], [1.0, -np.inf, np.inf]])
    nan, pos, neg = special_pattern(A, B)
    # row 0: inf*0 = NaN; inf*1 + 1*(-inf) = NaN; inf*2 + 1*inf = +inf
    # row 1: finite; 0*1 + 2*(-inf) = -inf; 0*2 + 2*inf = +inf
    # row 2: NaN everywhere
    # row 3: -0*0 + 1*1 = 1; -0*1 + 1*(-inf) = -inf; +inf
    assert nan.tolist() == [[True, True, False], [False, False, False],
                            [True, True, True], [False, False, False]]
    assert pos.tolist() == [[False, False, True], [False, False, True],
                            [False, False, False], [False, False, True]]
    assert neg.tolist() == [[False, False, False], [False, True, False],
                            [False, False, False], [False, True, False]]


def test_inf_times_negative_zero_is_nan():
    nan, _, _ = special_pattern(np.array([[np.inf]]), np.array([[-0.0]]))
    assert nan.all()


# -- each check fires on its defect and is silent on a correct kernel ----------------------

@pytest.mark.parametrize("kind", VALUE_KINDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_a_correct_kernel_is_judged_correct(dtype, kind):
    for shape in ((1, 1, 1), (33, 17, 65), (5, 40, 3)):
        j = judged(CORRECT, Problem(*shape, dtype, kind, 9))
        assert j.ok, j.message()
        assert j.ratio <= 1 and not np.isinf(j.error_map).any()


def test_negative_zero_for_a_zero_result_is_accepted():
    problem = Problem(3, 3, 2, "float32", "exact", 0)
    A, B = problem.operands()
    A[1] = 0.0                               # row 1 of C is exactly zero

    def negative_zero_row(instance, a, b):
        C = a @ b
        C[1] = -0.0
        return C
    j = judge(run_once(stand_in(negative_zero_row), inst(), A, B), A, B, exact=True)
    assert j.ok, j.message()


@pytest.mark.parametrize("dtype", DTYPES)
def test_one_wrong_bit_is_wrong_values_when_exact(dtype):
    def one_ulp_off(instance, a, b):
        bits = dt.to_bits(a @ b, instance.dt)
        bits[1, 2] ^= 1
        return bits
    j = judged(stand_in(one_ulp_off), Problem(5, 6, 7, dtype, "exact", 1))
    assert j.defects == {Defect.WRONG_VALUES}
    assert [f.detector for f in j.findings] == ["exact-bits"]
    assert j.findings[0].count == 1 and j.findings[0].where == (1, 2)
    assert np.isinf(j.error_map[1, 2]) and j.failing.sum() == 1


def _rounded(x: float, d) -> float:
    return float(dt.from_bits(dt.to_bits(np.array([x]), d), d).astype(np.float64)[0])


def _past(x: float, d) -> float:
    """The representable value of d at least one ulp of d beyond x (away from zero)."""
    exponent = max(np.floor(np.log2(abs(x))), np.log2(float(finfo(d).smallest_normal)))
    ulp = 2.0 ** (exponent - (d.significand_bits - 1))
    return _rounded(x + np.sign(x) * 2 * ulp, d)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", RANDOM_KINDS)
def test_an_error_past_the_bound_is_wrong_values_and_one_within_is_not(dtype, kind):
    problem = Problem(6, 5, 40, dtype, kind, 2)
    A, B = problem.operands()
    d = dt.get(dtype)
    ref = A @ B
    bound = Bound.for_dtype(d, 40).evaluate(np.abs(A) @ np.abs(B), ref)

    def storing(value):
        def kernel(instance, a, b):
            C = a @ b
            C[2, 3] = value
            return C
        return kernel
    beyond = _past(ref[2, 3] + np.copysign(bound[2, 3], ref[2, 3]), d)
    assert abs(beyond - ref[2, 3]) > bound[2, 3]
    far = judged(stand_in(storing(beyond)), problem)
    assert far.defects == {Defect.WRONG_VALUES} and far.findings[0].detector == "error-bound"
    assert far.findings[0].where == (2, 3) and far.ratio > 1
    # Correct rounding passes in every dtype; in float32/float64 (bound >> one ulp) so
    # does an error of half the bound.
    near = ref[2, 3] + (0.5 * bound[2, 3] if d.accumulator == d.name else 0.0)
    within = judged(stand_in(storing(_rounded(near, d))), problem)
    assert within.ok, within.message()


@pytest.mark.parametrize("kind", ["exact", "normal"])
def test_an_unwritten_element_is_unwritten_output(kind):
    def skips_one(instance, a, b):
        bits = dt.to_bits(a @ b, instance.dt)
        bits[4, 0] = instance.dt.poison_bits
        return bits
    j = judged(stand_in(skips_one), Problem(9, 7, 5, "float16", kind, 1))
    assert j.defects == {Defect.UNWRITTEN_OUTPUT}
    assert j.findings[0].where == (4, 0) and j.findings[0].count == 1
    assert np.isinf(j.error_map[4, 0]) and np.isinf(j.ratio)


@pytest.mark.parametrize("kind", ["exact", "normal"])
def test_a_nan_where_none_belongs_is_wrong_values(kind):
    def one_nan(instance, a, b):
        C = a @ b
        C[3, 3] = np.nan
        return C
    j = judged(stand_in(one_nan), Problem(8, 8, 8, "float32", kind, 1))
    assert j.defects == {Defect.WRONG_VALUES}
    assert j.findings[0].detector == "nan-inf-pattern"
    assert j.findings[0].details["nan_where_none_belongs"] == 1


def test_a_guard_nan_in_C_is_named_as_an_out_of_bounds_read():
    def reads_a_guard(instance, a, b):
        bits = dt.to_bits(a @ b, instance.dt)
        bits[0, 1] = instance.dt.guard_bits
        return bits
    j = judged(stand_in(reads_a_guard), Problem(4, 4, 4, "float32", "exact", 1))
    assert j.findings[0].details["guard_payload"] == 1
    assert "out-of-bounds read" in j.message()


def test_a_store_past_the_last_row_of_C_is_an_out_of_bounds_write_though_every_value_is_right():
    """A kernel without its row guard writes its last tile's rows past M after C's end: C holds
    the right bits, only the guard band changed (TMA's zero fill made those rows zeros)."""
    def rows_past_m(instance, grid, block, A, B, C, M, N, K):
        correct_product(instance, grid, block, A, B, C, M, N, K)
        C.base[beyond(C, 0):beyond(C, 3 * N)] = 0
    j = judged(NumpyBackend({"matmul_tiled_guarded": rows_past_m}), Problem(9, 7, 5, "float32", "exact", 1))
    assert j.defects == {Defect.OUT_OF_BOUNDS_WRITE}
    assert j.findings[0].details["guard_damage"] == {"C": 21}, j.findings
    assert "the kernel wrote outside its output: 21 in C's guards" in j.message()
    assert "failing:" not in j.message()   # no element of C is wrong


def test_a_launch_that_changes_B_is_input_mutation_though_C_is_right():
    j = judged(NumpyBackend({"matmul_tiled_guarded": scribbles_on_B}), Problem(9, 7, 5, "float32", "exact", 1))
    assert j.defects == {Defect.INPUT_MUTATION}
    assert j.findings[0].details["inputs_changed"] == {"B": 1}


def test_a_correct_kernel_changes_nothing_outside_C():
    j = judged(CORRECT, Problem(9, 7, 5, "float32", "exact", 1))
    assert j.ok and "nothing outside C changed" in j.message()


def test_a_kernel_that_drops_nan_and_inf_is_caught():
    j = judged(stand_in(lambda i, a, b: np.nan_to_num(a, nan=0, posinf=0, neginf=0)
                        @ np.nan_to_num(b, nan=0, posinf=0, neginf=0)),
               Problem(9, 11, 7, "float32", "special", 5))
    assert Defect.WRONG_VALUES in j.defects
    assert j.findings[0].details["missing_nan"] > 0


def test_zeros_where_ieee_gives_nan_or_inf_are_caught_though_they_are_the_exact_results_bits():
    """The bits the exact result rounds to hold 0 where IEEE gives NaN or Inf: a kernel that
    stores exactly those bits must not pass judge's shortcut for all-exact outputs."""
    def zeros_at_specials(instance, a, b):
        specials = np.logical_or.reduce(special_pattern(a, b))
        return np.where(specials, 0.0, np.nan_to_num(a, nan=0, posinf=0, neginf=0)
                        @ np.nan_to_num(b, nan=0, posinf=0, neginf=0))
    j = judged(stand_in(zeros_at_specials), Problem(9, 11, 7, "float32", "special", 5))
    assert Defect.WRONG_VALUES in j.defects
    assert j.findings[0].details["missing_nan"] > 0


def test_a_kernel_that_flushes_subnormals_is_caught():
    def flushes(instance, a, b):
        tiny = 2.0 ** -126
        return np.where(np.abs(a) < tiny, 0.0, a) @ b
    p = Problem(9, 11, 7, "float32", "special", 5)
    A, B = (np.where(np.isfinite(X), X, 0.0) for X in p.operands())
    j = judge(run_once(stand_in(flushes), inst(), A, B), A, B, exact=True)
    assert j.defects == {Defect.WRONG_VALUES}


def test_a_dropped_K_tail_is_wrong_values():
    def drops_tail(instance, a, b):
        full = (a.shape[1] // instance.tile) * instance.tile
        return a[:, :full] @ b[:full, :]
    j = judged(stand_in(drops_tail), Problem(9, 9, 9, "float32", "exact", 1))
    assert j.defects == {Defect.WRONG_VALUES}


@pytest.mark.parametrize("kind", VALUE_KINDS)
def test_an_all_zero_output_never_passes(kind):
    j = judged(stand_in(lambda i, a, b: np.zeros((a.shape[0], b.shape[1]))),
               Problem(1, 1, 1, "float16", kind, 0) if kind != "special" else
               Problem(5, 5, 5, "float16", kind, 0))
    assert not j.ok


# -- the message, the verdict and the failure -----------------------------------------------

def test_the_failure_message_carries_everything_needed_to_act(monkeypatch):
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "suites/correctness/test_x.py::test_y[k-float32-TILE4] (call)")

    def two_wrong(instance, a, b):
        C = a @ b
        C[5, 6] += 1.0
        C[1, 1] += 0.5
        return C
    problem = Problem(9, 7, 33, "float32", "normal", 42)
    message = judged(stand_in(two_wrong), problem).message()
    for piece in ("wrong_values: ", "matmul_tiled_guarded-float32-TILE4", "matmul_tiled_guarded<float, 4>",
                  "float32 normal M9xN7xK33 seed 42", "gamma_K(u_acc)", "K = 33",
                  "2 of 63 elements (3.17%)", "max abs error 1", "max rel error",
                  "worst: C[5, 6] (tile 1, 1)", "actual", "expected", "bound",
                  "pytest 'suites/correctness/test_x.py::test_y[k-float32-TILE4]'",
                  "Problem(M=9, N=7, K=33, dtype='float32', values='normal', seed=42)"):
        assert piece in message, f"{piece!r} missing from:\n{message}"


def test_assert_judgement_records_the_verdict_and_fails_with_the_message():
    log = VerdictLog()
    ok = judged(CORRECT, Problem(4, 4, 4, "float32", "exact", 1))
    assert_judgement(ok, log)
    assert log.verdicts[-1].ok and log.verdicts[-1].problem == "float32 exact M4xN4xK4 seed 1"

    def one_nan(instance, a, b):
        C = a @ b
        C[0, 0] = np.nan
        return C
    bad = judged(stand_in(one_nan), Problem(4, 4, 4, "float32", "exact", 1))
    with pytest.raises(pytest.fail.Exception, match="NaN where none belongs"):
        assert_judgement(bad, log)
    assert log.verdicts[-1].defects == {Defect.WRONG_VALUES}
    header, worst = bad.worst_table().splitlines()
    assert header.split()[:4] == ["i", "j", "tile", "actual"] and worst.split()[:4] == ["0", "0", "0,0", "nan"]


def test_inputs_not_rounded_to_the_dtype_are_refused():
    A = np.full((2, 2), 1.0 + 2.0 ** -20)
    run = run_once(CORRECT, inst("float16"), A, A)
    with pytest.raises(ValueError, match="not representable in float16"):
        judge(run, A, A, exact=False)


def test_inputs_of_the_wrong_shape_are_refused():
    A, B = Problem(3, 4, 5, "float32", "exact", 1).operands()
    run = run_once(CORRECT, inst(), A, B)
    with pytest.raises(ValueError, match="shapes disagree"):
        judge(run, A[:, :4], B[:4], exact=True)


# -- alpha and beta --------------------------------------------------------------------------

from gemmcheck.problems.harness import run_problem  # noqa: E402
from gemmcheck.judge.oracle import UnchangedElements, bound_ratio, roundings, within_bound  # noqa: E402
from gemmcheck.problems.problem import BETA_SCALING  # noqa: E402

from fakes import RoleBackend, RoleSpec, SGEMM_ROLES, role_gemm  # noqa: E402

# beta = 1 is not among them: C - C0 = alpha A @ B there, which no choice of C0 keeps
# away from zero, so the unwritten check's premise cannot be guaranteed (and is refused).
SCALINGS = [(1, 0), BETA_SCALING, (3, 2), (-2, 3), (0, 3)]


def scaled_judged(problem, kernel=role_gemm):
    instance = catalog.Instance(RoleSpec("sgemm", SGEMM_ROLES), problem.dtype, 4)
    run = run_problem(RoleBackend({"sgemm": kernel}), instance, problem)
    A, B = problem.operands()[:2]
    with np.errstate(invalid="ignore", over="ignore"):
        return judge(run, A, B, exact=problem.exact, problem=problem)


def test_alpha_and_beta_add_a_rounding_each_and_none_at_one_and_zero():
    assert roundings(64) == roundings(64, 1, 0) == 64
    assert roundings(64, 2, 0) == roundings(64, 1, -1) == 65 and roundings(64, 2, -1) == 66
    assert Bound.for_dtype(dt.get("float32"), 64, 2, -1).gamma_acc == gamma(66, 2.0 ** -24)
    assert Bound.for_dtype(dt.get("float32"), 64) == Bound.for_dtype(dt.get("float32"), 64, 1, 0)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("order", ["alpha-last", "alpha-per-product", "beta-first"])
@pytest.mark.parametrize("K", [1, 7, 256, 2048])
def test_every_order_of_scaling_stays_within_the_bound(dtype, order, K):
    # What kernels do, in float32: alpha after the sum, alpha on every product, or the
    # accumulator started from beta * C0. Every one must be inside the bound.
    d, f = dt.get(dtype), np.float32
    alpha, beta = 1.5, -0.75
    rng = np.random.default_rng(K)
    a, b, c = (dt.from_bits(dt.to_bits(rng.standard_normal(shape), d), d).astype(f)
               for shape in ((8, K), (K, 8), (8, 8)))
    products = a[:, :, None] * b[None, :, :]
    if order == "alpha-last":
        S = f(alpha) * np.cumsum(products, axis=1, dtype=f)[:, -1, :] + f(beta) * c
    elif order == "alpha-per-product":
        S = np.cumsum(f(alpha) * products, axis=1, dtype=f)[:, -1, :] + f(beta) * c
    else:
        S = np.cumsum(np.concatenate([(f(beta) * c)[:, None, :], f(alpha) * products], axis=1),
                      axis=1, dtype=f)[:, -1, :]
    C = dt.from_bits(dt.to_bits(S.astype(np.float64), d), d).astype(np.float64)
    A64, B64, C064 = (x.astype(np.float64) for x in (a, b, c))
    ref = alpha * (A64 @ B64) + beta * C064
    ratio = bound_ratio(np, C, ref, np.abs(A64) @ np.abs(B64), d, K, alpha, beta, np.abs(C064))
    assert (ratio <= 1).all()
    assert within_bound(np, C, ref, np.abs(A64) @ np.abs(B64), d, K, alpha, beta, np.abs(C064))
    # The same result judged against beta = 0 is outside: the check can fail.
    assert not within_bound(np, C, alpha * (A64 @ B64), np.abs(A64) @ np.abs(B64), d, K, alpha, 0)


def test_bound_ratio_is_inf_at_nan_and_needs_C0_with_beta():
    d = dt.get("float32")
    got, ref, absprod = np.array([[np.nan, 1.0]]), np.array([[1.0, 1.0]]), np.array([[1.0, 1.0]])
    assert list(bound_ratio(np, got, ref, absprod, d, 4)[0]) == [np.inf, 0.0]
    with pytest.raises(ValueError, match="needs abs_C0"):
        bound_ratio(np, got, ref, absprod, d, 4, 2, -1)


@pytest.mark.parametrize("scaling", SCALINGS, ids=lambda s: f"alpha{s[0]}-beta{s[1]}")
@pytest.mark.parametrize("kind", VALUE_KINDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_a_correct_scaled_kernel_is_judged_correct(dtype, kind, scaling):
    j = scaled_judged(Problem(9, 7, 33, dtype, kind, 5, *scaling))
    assert j.ok, j.message()


@pytest.mark.parametrize("kind", ["exact", "normal"])
def test_a_wrong_beta_is_caught_in_every_dtype(kind):
    for dtype in DTYPES:
        j = scaled_judged(Problem(9, 7, 33, dtype, kind, 5, *BETA_SCALING), partial(role_gemm, beta=-0.5))
        assert Defect.WRONG_VALUES in j.defects, dtype


def test_exact_judging_refuses_a_non_integer_alpha_and_a_sum_too_long():
    d = dt.get("float32")
    A, B = np.ones((2, 3)), np.ones((3, 2))
    assert "not an integer" in exactness_violation(A, B, d, alpha=0.5)
    C0 = np.full((2, 2), float(2 ** 24 - 3))
    assert exactness_violation(A, B, d, 1, 1, C0) is None          # 3 + 2^24 - 3 = 2^24 fits
    assert "significand bits" in exactness_violation(A, B, d, 1, 3, C0)   # 3 + 3 (2^24 - 3) does not
    assert "significand bits" in exactness_violation(A, B, d, 2 ** 23, 0)  # 3 * 2^23 does not either


def test_C0_that_a_correct_result_equals_is_refused_not_trusted():
    # beta = 1 and a zero product: the correct result is C0 itself, so an unwritten
    # element would look written. The oracle refuses to judge rather than pass it.
    problem = Problem(4, 4, 4, "float32", "exact", 1, 1, 1)
    A, B, C0 = problem.operands()
    A[0] = 0.0
    instance = catalog.Instance(RoleSpec("sgemm", SGEMM_ROLES), "float32", 4)
    run = run_once(RoleBackend({"sgemm": role_gemm}), instance, A, B, C0, alpha=1, beta=1)
    with pytest.raises(UnchangedElements, match="a correct result can equal C0"):
        judge(run, A, B, exact=True)
    with pytest.raises(UnchangedElements):
        judge(run, A, B, exact=False)


def test_a_negative_alpha_swaps_the_infinities_and_zero_alpha_makes_them_nan():
    A = np.array([[np.inf, 1.0]])
    B = np.array([[1.0], [1.0]])
    nan, pos, neg = special_pattern(A, B)
    assert pos.all() and not neg.any() and not nan.any()
    nan, pos, neg = special_pattern(A, B, alpha=-2)
    assert neg.all() and not pos.any() and not nan.any()
    nan, pos, neg = special_pattern(A, B, alpha=0)
    assert nan.all() and not pos.any() and not neg.any()


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
def test_perfs_output_check_and_the_oracle_judge_by_the_same_bound(dtype):
    # perf.check_output is to call bound_ratio (one comparison); until then they must agree.
    from gemmcheck.perf import check_output
    d = dt.get(dtype)
    problem = Problem(16, 16, 64, dtype, "normal", 3)
    A, B = problem.operands()
    ref, absprod = A @ B, np.abs(A) @ np.abs(B)
    got = dt.from_bits(dt.to_bits(ref * (1 + 3e-2), d), d).astype(np.float64)
    ratio = bound_ratio(np, got, ref, absprod, d, 64)
    assert check_output(np, got, ref, absprod, d, 64).worst_ratio == pytest.approx(float(ratio.max()), rel=1e-12)
    assert within_bound(np, ref, ref, absprod, d, 64) and not within_bound(np, got, ref, absprod, d, 64)


@pytest.mark.parametrize("shape, tile", [((37, 21), 8), ((64, 64), 16), ((5, 3), 4), ((1, 1), 1)])
def test_a_finding_names_every_tile_that_holds_a_wrong_element_in_order(shape, tile):
    """The tiles of a finding, found in numpy (a racing kernel at 2048^2 has millions of wrong
    elements), are those of every element by hand, row-major; ragged edge tiles included."""
    from gemmcheck.judge.oracle.judging import _tiles

    for density in (0.0, 0.01, 0.5, 1.0):
        mask = np.random.default_rng(7).random(shape) < density
        by_hand = sorted({(i // tile, j // tile) for i, j in zip(*np.nonzero(mask))})
        assert _tiles(mask, tile) == by_hand


def test_a_reference_computed_once_for_many_runs_judges_as_each_run_alone():
    """The kill matrix judges every distinct launch of one problem against one exact product
    (oracle.reference_of); the findings are those of judging each run alone."""
    from gemmcheck.judge.oracle import reference_of

    def off_at(i, j):
        def kernel(instance, a, b):
            bits = dt.to_bits(a @ b, instance.dt)
            bits[i, j] ^= 1
            return bits
        return stand_in(kernel)

    problem = Problem(9, 7, 5, "float32", "exact", 3)
    A, B = problem.operands()
    runs = [run_once(backend, inst("float32", 4), A, B) for backend in (off_at(1, 2), off_at(8, 6), CORRECT)]
    reference = reference_of(runs[0], A, B)
    for run in runs:
        alone, shared = (judge(run, A, B, exact=True, problem=problem, reference=r) for r in (None, reference))
        assert [(f.defect, f.count, f.where) for f in shared.findings] == \
               [(f.defect, f.count, f.where) for f in alone.findings]
    assert [len(judge(r, A, B, exact=True, reference=reference).findings) for r in runs] == [1, 1, 0]


from hypothesis import given, settings, strategies as st


@settings(max_examples=200, deadline=None)
@given(K=st.integers(1, 8), r=st.integers(0, 2048), alpha=st.sampled_from([1, 2, -3, 0]),
       beta=st.sampled_from([0, 1, -1, 2]), seed=st.integers(0, 2**16))
def test_integer_inputs_are_exact_exactly_when_every_partial_sum_fits(K, r, alpha, beta, seed):
    """exactness_violation's cheap path (the range proof's scalar bound) and its per-element
    check give one answer: None exactly when every element's bound on its partial sums,
    max(|alpha|, 1) |A| @ |B| + |beta| |C0|, is within 2^p of the accumulator (float32 for
    float16 inputs: 2^24)."""
    rng = np.random.default_rng(seed)
    A, B, C0 = (rng.integers(-r, r + 1, shape).astype(np.float64) for shape in ((3, K), (K, 4), (3, 4)))
    got = exactness_violation(A, B, dt.get("float16"), alpha, beta, C0)
    P = max(abs(alpha), 1) * (np.abs(A) @ np.abs(B)) + abs(beta) * np.abs(C0)
    assert (got is None) == bool(P.max() <= 2 ** 24), (got, P.max())


def test_judging_and_the_shared_reference_count_as_the_oracle_phase():
    """--gemm-phases reports the oracle's share: judge and reference_of are timed as "oracle"
    (a decorator once slid onto a helper and the oracle phase read 0.0 s)."""
    from gemmcheck import phases
    from gemmcheck.judge.oracle import reference_of

    import time

    # Large enough that the call is milliseconds: an exact judgement at 96^3 took 0.4 ms
    # and the phase's own bookkeeping made the ratio below flaky.
    problem = Problem(400, 400, 400, "float32", "exact", 1)
    A, B = problem.operands()
    run = run_once(CORRECT, inst("float32", 4), A, B)
    phases.enable()
    try:
        for call in (lambda: judge(run, A, B, exact=True), lambda: reference_of(run, A, B)):
            tries = []   # the best of three: a loaded host (a parallel run) can preempt one between clocks
            for _ in range(3):
                phases.begin()
                start = time.perf_counter()
                call()
                wall = time.perf_counter() - start
                counted = phases.take()
                assert set(counted) == {"oracle"}, counted
                tries.append((counted["oracle"] / wall, counted, wall))
            assert max(ratio for ratio, _, _ in tries) >= 0.9, tries
    finally:
        phases.enable(False)


def test_a_half_accumulator_whose_products_underflow_is_judged_by_the_subnormal_grid_not_called_wrong():
    """An HGEMM that sums in half (accumulator = "float16") rounds a product below half's smallest
    normal to the subnormal grid: an absolute error up to 2^-25, which no relative bound covers
    (at K = 1 a correct kernel was judged wrong by 1.26x its bound). The bound's underflow term
    covers it; a value one grid step further off is still outside."""
    from gemmcheck.contract import operand_types

    types = operand_types.of("float16 accumulator=float16")
    half = dt.get("float16")
    A = dt.from_bits(dt.to_bits(np.array([[3.1e-3]]), half), half).astype(np.float64)
    B = dt.from_bits(dt.to_bits(np.array([[4.7e-3]]), half), half).astype(np.float64)
    ref = A @ B                                                     # 1.46e-5: subnormal in half
    kernel = dt.from_bits(dt.to_bits(ref, half), half).astype(np.float64)   # rounded to 2^-24 steps
    b = Bound.for_types(types, 1)
    bound = b.evaluate(np.abs(A) @ np.abs(B), ref)
    assert abs(kernel - ref)[0, 0] > b.coefficient * (np.abs(A) @ np.abs(B))[0, 0]   # beyond the relative part
    assert abs(kernel - ref)[0, 0] <= bound[0, 0]
    assert abs(kernel + np.sign(kernel - ref) * 2.0 ** -24 - ref)[0, 0] > bound[0, 0]
    assert "for underflow in float16" in b.describe()
    assert Bound.for_types(operand_types.of("float16"), 1).underflow < 1e-40   # float32 sums: nothing measurable
