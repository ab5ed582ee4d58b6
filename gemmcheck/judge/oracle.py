"""The oracle: what a correct kernel must have written, and how far off a run is.

``judge(run, A, B, exact=...)`` returns a Judgement (findings, worst ratio,
error map, message); ``assert_judgement`` records it and fails the test with
everything needed to act on it. Checks go in this order, each on the
elements the previous ones left: shape, unwritten elements (poison bits),
NaN/Inf positions, then values.

Exact judging (``exact=True``)
------------------------------
When every product and partial sum is exactly representable in the
accumulator, any summation order gives the same value and the one correct
answer is the exact product rounded once to the output type. ``judge``
checks that premise before relying on it: each row of A is an integer
multiple of a power of two q_i (its smallest nonzero "quantum"), each column
of B of q_j, so every partial sum of C[i, j] is an integer multiple of
q_i q_j bounded by P[i, j] = (|A| |B|)[i, j]; it is exact in a type with p
significand bits if P[i, j] <= 2^p q_i q_j and q_i q_j is no finer than the
type's smallest subnormal. This holds for the accumulator and for float64
(p = 53), so the float64 product numpy computes, in whatever order its BLAS
likes, is the exact product. If the premise fails, ``judge`` raises
InexactProblem rather than call a correct kernel wrong. Values are compared
bit for bit, except that +0.0 and -0.0 are both accepted for a zero result
(a kernel that starts its sum from the first product instead of +0.0 may
return -0.0 for an all -0.0 dot product; both are IEEE-correct).

Bounded judging (``exact=False``)
---------------------------------
With u_acc the unit roundoff of the accumulator, the standard result
(Higham, Accuracy and Stability, 2nd ed., sec. 3.1) for a dot product of
length K summed in any order, with or without FMA, is

    |S - C_exact| <= gamma_K(u_acc) P,   gamma_K(u) = K u / (1 - K u),   P = |A| |B|.

For float16/bfloat16 inputs the products are even exact in float32 (11 + 11
and 8 + 8 significand bits fit in 24), so gamma_K covers the K - 1 additions
with room to spare. The kernel then stores T(S): for float32 and float64 the
accumulator is the output type, so this is no rounding (u_out = 0); for
float16 and bfloat16 it is one more rounding to nearest, with
|T(S) - S| <= u_out |S| + eta_out, where eta_out is half the output's
smallest subnormal (the absolute error of rounding in the subnormal range).
With |S| <= |C_exact| + gamma_K(u_acc) P:

    |C - C_exact| <= gamma_K(u_acc) (1 + u_out) P + u_out |C_exact| + eta_out.

The reference C_ref is numpy's float64 product, itself off by at most
gamma_K(u_64) P, and P is computed in float64, so P <= P_hat / (1 - gamma_K(u_64)).
Putting |C_exact| <= |C_ref| + gamma_K(u_64) P in:

    |C - C_ref| <= [(gamma_K(u_acc) + gamma_K(u_64)) (1 + u_out)] P_hat / (1 - gamma_K(u_64))
                   + u_out |C_ref| + eta_out

and the bound is multiplied by (1 + 8 u_64) for the rounding of its own
evaluation and of |C - C_ref|. For float64 kernels the reference's own error
doubles the bound (honest: a float64 reference cannot tell a float64 kernel's
last bits); for every other dtype the u_64 terms are negligible. Not covered:
underflow inside the accumulator (the random kinds keep products far from it)
and overflow (a finite reference with an infinite result is reported as Inf
where none belongs). The ratio |C - C_ref| / bound is reported; a correct
kernel never exceeds 1.

alpha and beta
--------------
C = alpha A @ B + beta C0 (C0 read only when beta != 0). Exact judging needs
integer alpha and beta (checked): the premise above extends to the sum of the
K terms alpha a_k b_k and the term beta c, each a multiple of the finest
quantum among them, bounded by Q = |alpha| P + |beta| |C0|
(gemmcheck.problems.problem.exact_range proves the generated integers satisfy it).

Bound: in whatever order a kernel forms alpha a_k b_k (product, then alpha:
two roundings, or alpha times the finished sum: one more rounding of every
term) and beta c (one rounding), and adds the K + 1 terms (K additions at
most along any term's path), each term x_t reaches the accumulator's result
as x_t (1 + theta_t) with |theta_t| <= gamma_n(u_acc), n = K + 1 [alpha != 1]
+ 1 [beta != 0] (Higham, Lemma 3.1 and eq. 3.4: a product of at most n
factors (1 + delta), |delta| <= u). Multiplying by alpha = 1 and adding
beta c = 0 are exact, so n = K at (1, 0) and the bound is the one above. The
scaling is assumed done in the accumulator type (as cuBLAS does for half
inputs with float32 compute); an epilogue rounded to float16 first is one
more rounding than the bound allows and may be reported. So

    |S - C_exact| <= gamma_n(u_acc) Q,   Q = |alpha| |A||B| + |beta| |C0|,

and the rest of the derivation goes through with P replaced by Q and K by n:
the store rounding adds u_out |C_exact| + eta_out, and the float64 reference
alpha (A @ B) + beta C0 is off by at most gamma_n(u_64) Q.

Unwritten elements when beta != 0: C starts as C0 instead of poison, so an
unwritten element still holds C0's bits. That only proves "unwritten" if no
correct result can hold them: ``judge`` checks the premise (exact: the
expected bits differ from C0's and not both are zeros; bound: |C_ref - C0|
exceeds the bound) and raises UnchangedElements otherwise
(gemmcheck.problems.problem chooses C0 so that it holds).

Special values
--------------
The expected NaN/Inf pattern follows IEEE 754 on the float64 inputs: the
product a*b is NaN when either is NaN or one is infinite and the other zero
(of either sign), +-Inf when one is infinite and the other nonzero; C[i, j] is
NaN if any product is NaN or products of both infinite signs occur, +-Inf if
only infinite products of one sign occur, finite otherwise; alpha < 0 swaps
the infinite signs, alpha = 0 turns Inf into NaN (0 * Inf), and a finite
beta C0 changes neither. So a NaN or Inf
taints whole rows of C (from A) and whole columns (from B), and an element is
finite exactly when row i of A and column j of B are. Counts are computed with
0/1 matrix products, never with a library's own inf*0 handling.

Subnormals: gemmcheck builds with -ftz=false (gemmcheck.compile.compiler; NVRTC's
default, and no fast-math flags), so subnormal inputs, products and results
must be kept, not flushed to zero; the ``special`` kind's subnormal row makes
a flush visible as wrong values (and Inf * subnormal, flushed, as a NaN where
IEEE gives Inf). CuPy's own compile adds -ftz=true: the first H200 run
showed exactly that flush for float32 and bfloat16. The NaN payload is not judged (GPUs return a canonical NaN);
only the poison and guard payloads carry meaning: poison means unwritten, a
guard payload means the element read past an operand's end.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

import numpy as np

from gemmcheck import arrays, report
from gemmcheck.contract import dtypes as dt
from gemmcheck.phases import timed
from gemmcheck.tables import format_table
from gemmcheck.verdict import Defect, Finding, HasFindings, Verdict

U64 = 2.0 ** -53
WORST_ROWS = 10


class InexactProblem(ValueError):
    """exact=True was asked for inputs whose partial sums are not all exact."""


class UnchangedElements(ValueError):
    """beta != 0 and C0 equals a correct result somewhere: an unwritten element would pass."""


# -- the bound ---------------------------------------------------------------------------

def gamma(K: int, u: float) -> float:
    """gamma_K = K u / (1 - K u), Higham's constant for K roundings of unit roundoff u."""
    if K * u >= 1:
        raise ValueError(f"gamma_K undefined: K u = {K} * {u!r} >= 1")
    return K * u / (1 - K * u)


def roundings(K: int, alpha=1, beta=0) -> int:
    """n: the most roundings any term of alpha A @ B + beta C0 goes through (see above)."""
    return K + (alpha != 1) + (beta != 0)


def output_roundoff(d: dt.DType) -> tuple[float, float]:
    """(u_out, eta_out): the rounding of the accumulator's sum to the output type.

    Zero when the accumulator is the output type (float32, float64).
    """
    if d.accumulator == d.name:
        return 0.0, 0.0
    return d.unit_roundoff, float(dt.finfo(d).smallest_subnormal) / 2


@dataclass(frozen=True)
class Bound:
    """|C - C_ref| <= coefficient * Q_hat + u_out * |C_ref| + eta_out, per element, with
    Q_hat = |alpha| (|A||B|) + |beta| |C0| computed in float64."""

    K: int
    dtype: str
    u_acc: float
    u_out: float
    eta_out: float
    gamma_acc: float
    gamma_ref: float
    alpha: float = 1
    beta: float = 0

    @classmethod
    def for_dtype(cls, d: dt.DType, K: int, alpha=1, beta=0) -> "Bound":
        u_acc = dt.get(d.accumulator).unit_roundoff
        u_out, eta_out = output_roundoff(d)
        n = roundings(K, alpha, beta)
        return cls(K, d.name, u_acc, u_out, eta_out, gamma(n, u_acc), gamma(n, U64), alpha, beta)

    def magnitude(self, xp, absprod, abs_C0=None):
        """Q_hat = |alpha| absprod + |beta| |C0| (absprod = |A||B|)."""
        Q = abs(self.alpha) * absprod if self.alpha != 1 else absprod
        return Q if self.beta == 0 else Q + abs(self.beta) * abs_C0

    @property
    def coefficient(self) -> float:
        return (self.gamma_acc + self.gamma_ref) * (1 + self.u_out) / (1 - self.gamma_ref)

    def evaluate(self, Q_hat, C_ref, xp=np):
        slack = 1 + 8 * U64
        return (self.coefficient * Q_hat + self.u_out * xp.abs(C_ref) + self.eta_out) * slack

    def describe(self) -> str:
        acc = dt.get(self.dtype).accumulator
        out = (f"u_out = 2^{math.log2(self.u_out):.0f} ({self.dtype} output), "
               f"eta_out = {self.eta_out:.3g}" if self.u_out else f"u_out = 0 (accumulates in {acc})")
        if (self.alpha, self.beta) == (1, 0):
            return (f"|C - C_ref| <= (gamma_K(u_acc) + gamma_K(u_64))(1 + u_out)/(1 - gamma_K(u_64)) (|A||B|) "
                    f"+ u_out |C_ref| + eta_out; K = {self.K}, u_acc = 2^{math.log2(self.u_acc):.0f} ({acc}), "
                    f"gamma_K(u_acc) = {self.gamma_acc:.3g}, {out}")
        n = roundings(self.K, self.alpha, self.beta)
        return (f"|C - C_ref| <= (gamma_n(u_acc) + gamma_n(u_64))(1 + u_out)/(1 - gamma_n(u_64)) "
                f"(|alpha||A||B| + |beta||C0|) + u_out |C_ref| + eta_out; alpha = {self.alpha:g}, "
                f"beta = {self.beta:g}, K = {self.K}, n = {n}, u_acc = 2^{math.log2(self.u_acc):.0f} ({acc}), "
                f"gamma_n(u_acc) = {self.gamma_acc:.3g}, {out}")


def bound_ratio(xp, got, ref, absprod, dtype: dt.DType, K: int, alpha=1, beta=0, abs_C0=None):
    """|got - ref| / bound per element on any array module (numpy or cupy); inf where got is NaN.

    got: the kernel's output as float64; ref: alpha (A @ B) + beta C0 in float64;
    absprod: |A| @ |B| in float64; abs_C0: |C0| (needed when beta != 0).
    The one comparison behind the oracle's bounded judging and perf's output check.
    """
    if beta != 0 and abs_C0 is None:
        raise ValueError(f"bound_ratio: beta={beta!r} needs abs_C0 (|C0|)")
    b = Bound.for_dtype(dtype, K, alpha, beta)
    bound = b.evaluate(b.magnitude(xp, absprod, abs_C0), ref, xp)
    return xp.where(xp.isnan(got), xp.inf, _ratio(xp, xp.abs(got - ref), bound))


def within_bound(xp, got, ref, absprod, dtype: dt.DType, K: int, alpha=1, beta=0, abs_C0=None) -> bool:
    """Whether every element of `got` is within the forward error bound (see bound_ratio)."""
    return bool(xp.all(bound_ratio(xp, got, ref, absprod, dtype, K, alpha, beta, abs_C0) <= 1))


# -- exactness premise -------------------------------------------------------------------

def _element_quantum_exponents(X):
    """Per element: log2 of the largest power of two that divides it; +inf for zero and non-finite."""
    xp = arrays.module_of(X)
    finite = xp.isfinite(X) & (X != 0)
    mantissa, exponent = xp.frexp(xp.where(finite, X, 1.0))
    significand = xp.abs(mantissa * 2.0 ** 53).astype(xp.int64)
    lowest_bit = significand & -significand
    q = exponent - 53 + xp.log2(lowest_bit.astype(xp.float64))
    return xp.where(finite, q, xp.inf)


def _quantum_exponents(X: np.ndarray, axis: int) -> np.ndarray:
    """Per row (axis=1) or column (axis=0): log2 of the largest power of two that divides
    every finite nonzero entry. +inf where there is none."""
    return _element_quantum_exponents(X).min(axis=axis)


def _is_integer(X) -> bool:
    xp = arrays.module_of(X)
    return bool(xp.array_equal(xp.trunc(X), X))


def _largest(X) -> int:
    """max |X| as an int (0 for an empty X)."""
    return int(arrays.module_of(X).abs(X).max()) if X.size else 0


def exactness_violation(A: np.ndarray, B: np.ndarray, d: dt.DType, alpha=1, beta=0,
                        C0: np.ndarray | None = None) -> str | None:
    """Why the partial sums of alpha A @ B + beta C0 are not all exact in d's accumulator
    (None if they are)."""
    return _violation(arrays.finite_part(A), arrays.finite_part(B), d, alpha, beta, C0)


def _violation(finite_A, finite_B, d: dt.DType, alpha, beta, C0) -> str | None:
    """exactness_violation of inputs whose non-finite entries are already 0."""
    for name, value in (("alpha", alpha), ("beta", beta)):
        if value != int(value):
            return f"{name}={value!r} is not an integer"
    acc = dt.get(d.accumulator)
    xp = arrays.module_of(finite_A)
    (M, K), N = finite_A.shape, finite_B.shape[1]
    reads_C0 = beta != 0 and C0 is not None
    C0 = xp.asarray(C0, dtype=xp.float64) if reads_C0 else xp.zeros((M, N))
    if _is_integer(finite_A) and _is_integer(finite_B) and (not reads_C0 or _is_integer(C0)):
        # Integer inputs (the common case): every partial sum is an integer no larger than
        # problems.exact_range's bound; within 2^p it is exact, and |A| @ |B| (a second
        # float64 product as large as the reference) is not needed.
        largest = [_largest(X) for X in (finite_A, finite_B)] + [_largest(C0) if reads_C0 else 0]
        if (max(abs(int(alpha)), 1) * K * largest[0] * largest[1]
                + abs(int(beta)) * largest[2] <= 2 ** acc.significand_bits):
            return None
        # A quantum of 1 is a safe, cheap lower bound.
        q = xp.zeros((M, N))
    else:
        q = (_quantum_exponents(finite_A, axis=1)[:, None] + _quantum_exponents(finite_B, axis=0)[None, :])
        q = xp.minimum(q, _element_quantum_exponents(C0))
    # Unscaled partial sums are bounded by P too (alpha = 0 still forms them).
    P = max(abs(alpha), 1) * (xp.abs(finite_A) @ xp.abs(finite_B)) + abs(beta) * xp.abs(C0)
    with np.errstate(divide="ignore", invalid="ignore"):
        needed = xp.where(P > 0, xp.log2(xp.where(P > 0, P, 1.0)) - q, -xp.inf)
    emin_sub = math.log2(float(dt.finfo(acc).smallest_subnormal))
    p = acc.significand_bits
    too_big = needed > p
    too_fine = (P > 0) & (q < emin_sub)
    for mask, why in ((too_big, f"a partial sum needs more than {p} significand bits"),
                      (too_fine, f"a product is finer than {acc.name}'s smallest subnormal")):
        if mask.any():
            i, j = (int(v) for v in xp.argwhere(mask)[0])
            return f"C[{i}, {j}]: {why} (accumulator {acc.name})"
    return None


def exact_reference(A, B, d: dt.DType, alpha=1, beta=0, C0=None):
    """The exact alpha A @ B + beta C0 of finite A and B, as float64 on their array module
    (raises InexactProblem if it is not exact).

    Premise checked: every partial sum is exact in d's accumulator, hence (p <= 53) in
    float64, so the float64 product, scaled and summed, is exact in any summation order.
    """
    finite_A, finite_B = arrays.finite_part(A), arrays.finite_part(B)
    why = _violation(finite_A, finite_B, d, alpha, beta, C0)
    if why:
        raise InexactProblem(f"exact=True, but the inputs do not make every partial sum exact: "
                             f"{why}; use exact=False (the error bound) for these inputs")
    xp = arrays.module_of(A)
    with np.errstate(invalid="ignore"):
        return _scaled(finite_A @ finite_B, alpha, beta, None if C0 is None else xp.asarray(C0))


def _scaled(product: np.ndarray, alpha, beta, C0):
    """alpha * product + beta * C0, skipping the neutral steps (so (1, 0) is the product itself)."""
    result = product if alpha == 1 else alpha * product
    return result if beta == 0 else result + beta * C0


# -- IEEE special values -------------------------------------------------------------------

def special_pattern(A, B, alpha=1) -> tuple:
    """(nan, +inf, -inf) masks of alpha A @ B (+ a finite beta C0) by IEEE 754 rules (assumes
    finite products stay finite), on the array module of A and B."""
    M, N = A.shape[0], B.shape[1]
    xp = arrays.module_of(A)
    if xp.isfinite(A).all() and xp.isfinite(B).all():
        none = xp.zeros((M, N), dtype=bool)
        return none, none.copy(), none.copy()
    f = xp.float64
    nan_a, nan_b = xp.isnan(A).astype(f), xp.isnan(B).astype(f)
    inf_a, inf_b = xp.isinf(A).astype(f), xp.isinf(B).astype(f)
    zero_a, zero_b = (A == 0).astype(f), (B == 0).astype(f)
    pos_a, neg_a = (A > 0).astype(f), (A < 0).astype(f)        # NaN compares false
    pos_b, neg_b = (B > 0).astype(f), (B < 0).astype(f)
    pinf_a, ninf_a = (A == xp.inf).astype(f), (A == -xp.inf).astype(f)
    pinf_b, ninf_b = (B == xp.inf).astype(f), (B == -xp.inf).astype(f)
    ones_a, ones_b = xp.ones_like(nan_a), xp.ones_like(nan_b)
    nan_products = nan_a @ ones_b + ones_a @ nan_b + inf_a @ zero_b + zero_a @ inf_b
    pos_inf = pinf_a @ pos_b + ninf_a @ neg_b + pos_a @ pinf_b + neg_a @ ninf_b
    neg_inf = pinf_a @ neg_b + ninf_a @ pos_b + pos_a @ ninf_b + neg_a @ pinf_b
    nan = (nan_products > 0) | ((pos_inf > 0) & (neg_inf > 0))
    pos, neg = (pos_inf > 0) & ~nan, (neg_inf > 0) & ~nan
    if alpha == 0:
        return nan | pos | neg, xp.zeros_like(pos), xp.zeros_like(neg)
    return (nan, neg, pos) if alpha < 0 else (nan, pos, neg)


# -- the judgement ---------------------------------------------------------------------------

@dataclass
class Judgement(HasFindings):
    """What the oracle concluded about one run; `.ok` only if nothing was found."""

    instance: object                     # catalog.Instance
    problem: str                         # label: "float16 normal M33xN17xK65 seed 7"
    M: int
    N: int
    K: int
    exact: bool
    bound_text: str
    findings: list[Finding] = field(default_factory=list)
    ratio: float = 0.0                   # worst error / bound (0 for an exact match; inf if unbounded)
    error_map: np.ndarray | None = None  # M x N: error / bound; inf where unwritten or NaN/Inf wrong
    C: np.ndarray | None = None          # actual values (float64)
    expected: np.ndarray | None = None   # expected values (float64; NaN/Inf where IEEE says)
    bound: np.ndarray | None = None      # per-element bound (zeros when exact)
    failing: np.ndarray | None = None    # M x N bool: every element that is wrong in any way
    unwritten: np.ndarray | None = None  # M x N bool: still the poison bits
    reproduction: str = ""
    run: object = None                   # the harness.Run judged (for the report's evidence)

    def worst(self) -> tuple[int, int] | None:
        if self.error_map is None or self.error_map.size == 0:
            return None
        if self.failing is not None and self.failing.any():
            masked = np.where(self.failing, self.error_map, -1.0)
        else:
            masked = self.error_map
        i, j = np.unravel_index(int(np.argmax(masked)), masked.shape)
        return int(i), int(j)

    def _errors(self):
        # against an expected 0 the relative error is inf (or nan for 0/0) by intent
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            abs_err = np.abs(self.C - self.expected)
            rel_err = abs_err / np.abs(self.expected)
        return abs_err, rel_err

    def _element(self, i: int, j: int) -> str:
        tile = self.instance.tile
        return f"C[{i}, {j}] (tile {i // tile}, {j // tile})"

    def _actual(self, i: int, j: int) -> str:
        if self.unwritten is not None and self.unwritten[i, j]:
            return "unwritten (poison bits)"
        return repr(float(self.C[i, j]))

    def message(self) -> str:
        """The full failure message: who, on what, against which bound, how wrong, where, how to rerun."""
        inst = self.instance
        total = self.M * self.N
        head = f"{inst.id} ({inst.name_expression}) on {self.problem}"
        if not self.ok:
            # The report's defect categories match on this prefix (gemmcheck.report).
            head = report.defect_message(sorted({f.defect for f in self.findings}, key=_order), head)
        lines = [head,
                 f"  judged: {self.bound_text}"]
        if getattr(self.run, "operands_text", ""):
            lines.append(f"  operands: {self.run.operands_text}")
        if self.ok:
            lines.append(f"  ok: every element written and within the bound; worst ratio {self.ratio:.3g}")
            return "\n".join(lines)
        for f in self.findings:
            lines.append(f"  {f.defect.value} [{f.detector}]: {f.summary}")
        n_fail = int(self.failing.sum())
        abs_err, rel_err = self._errors()
        measurable = self.failing & np.isfinite(abs_err)
        if measurable.any():
            lines.append(f"  failing: {n_fail} of {total} elements ({n_fail / total:.2%}); "
                         f"max abs error {np.max(abs_err[measurable]):.6g}, "
                         f"max rel error {np.max(np.where(measurable, rel_err, 0)):.6g}; "
                         f"worst error/bound {self.ratio:.6g}")
        else:
            lines.append(f"  failing: {n_fail} of {total} elements ({n_fail / total:.2%})")
        where = self.worst()
        if where is not None:
            i, j = where
            lines.append(f"  worst: {self._element(i, j)}: actual {self._actual(i, j)}, expected "
                         f"{float(self.expected[i, j])!r}, bound {self.bound[i, j]:.6g}")
        if self.reproduction:
            lines.append(f"  reproduce: {self.reproduction}")
        return "\n".join(lines)

    def worst_table(self, rows: int = WORST_ROWS) -> str:
        """The worst elements, one per line: index, tile, actual, expected, error, bound, ratio."""
        header = ("i", "j", "tile", "actual", "expected", "abs err", "bound", "ratio")
        lines = []
        if self.error_map is not None:
            order = np.argsort(-np.where(self.failing, self.error_map, -1.0), axis=None, kind="stable")
            abs_err, _ = self._errors()
            for flat in order[:rows]:
                i, j = np.unravel_index(int(flat), self.error_map.shape)
                if not self.failing[i, j]:
                    break
                unwritten = self.unwritten is not None and self.unwritten[i, j]
                lines.append((i, j, f"{i // self.instance.tile},{j // self.instance.tile}",
                              "unwritten" if unwritten else f"{self.C[i, j]:.7g}", f"{self.expected[i, j]:.7g}",
                              f"{abs_err[i, j]:.4g}", f"{self.bound[i, j]:.4g}", f"{self.error_map[i, j]:.3g}"))
        return "\n".join(format_table(header, lines))


def _order(defect: Defect) -> int:
    return list(Defect).index(defect)


def current_test() -> str:
    """The running pytest node id (from PYTEST_CURRENT_TEST), or ''."""
    return os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]


def reproduction(problem=None) -> str:
    node = current_test()
    parts = [f"pytest '{node}'"] if node else []
    if problem is not None and hasattr(problem, "operands"):
        parts.append(f"inputs: {problem!r}.operands()")
    return "; ".join(parts)


def _representable(X, d: dt.DType) -> bool:
    xp = arrays.module_of(X)
    back = dt.from_bits(dt.to_bits(X, d), d).astype(xp.float64)
    # NaN-free inputs (nearly all) settle with one comparison; array_equal's equal_nan
    # costs ~6x that (2-3 ms of a 600^2 judgement here).
    return bool((back == X).all()) or bool(xp.array_equal(back, X, equal_nan=True))


def _scaling(run) -> tuple:
    """(alpha, beta, C0) of a run; C0 only when beta != 0 (otherwise C held poison)."""
    alpha, beta = getattr(run, "alpha", 1), getattr(run, "beta", 0)
    return alpha, beta, (getattr(run, "C0", None) if beta != 0 else None)


@timed("oracle")
def reference_of(run, A: np.ndarray, B: np.ndarray):
    """exact_reference of the problem `run` was launched on (its alpha, beta and C0), for
    judge(reference=) when many runs of that problem are judged; on the array module judge
    uses for that shape (gemmcheck.arrays.module_for)."""
    alpha, beta, C0 = _scaling(run)
    xp = arrays.module_for(run.M, run.N, run.K)
    return exact_reference(xp.asarray(A, dtype=xp.float64), xp.asarray(B, dtype=xp.float64),
                           run.instance.dt, alpha, beta, C0)


@timed("oracle")
def judge(run, A: np.ndarray, B: np.ndarray, *, exact: bool, problem=None,
          reference: np.ndarray | None = None) -> Judgement:
    """Judge one run against the inputs it was given.

    `A`, `B`: float64 host inputs, already exactly representable in the dtype.
    `exact`: True to compare bit for bit (the inputs must make every partial sum
    exact; checked, InexactProblem otherwise), False for the forward error bound.
    `problem`: a Problem or label for the message (its seed makes the reproduction).
    alpha, beta and C0 come from the run (C = alpha A @ B + beta C0; see the module doc).
    `reference`: with exact, exact_reference of these inputs, when one caller judges many runs
    of one problem (the kill matrix's repeated launches): computed once, not per run.
    Large problems are judged on the GPU when the session's backend is the GPU (the same
    judgement: gemmcheck.arrays); the Judgement's arrays are numpy either way.
    """
    inst = run.instance
    alpha, beta, C0 = _scaling(run)
    d = inst.dt
    (M, K), (K2, N) = np.shape(A), np.shape(B)
    xp = arrays.module_for(M, N, K)
    A, B = xp.asarray(A, dtype=xp.float64), xp.asarray(B, dtype=xp.float64)
    if K != K2 or (run.M, run.N, run.K) != (M, N, K) or run.C_bits.shape != (M, N):
        raise ValueError(f"{inst.id}: shapes disagree: A {A.shape}, B {B.shape}, run M={run.M} "
                         f"N={run.N} K={run.K}, C {run.C_bits.shape}")
    if beta != 0 and (C0 is None or np.shape(C0) != (M, N) or not np.isfinite(C0).all()):
        raise ValueError(f"{inst.id}: beta={beta!r} needs a finite C0 of shape ({M}, {N}) in the run")
    C0 = None if C0 is None else xp.asarray(C0, dtype=xp.float64)
    for name, X in (("A", A), ("B", B)) + ((("C0", C0),) if C0 is not None else ()):
        if not _representable(X, d):
            raise ValueError(f"{inst.id}: {name} holds values not representable in {d.name}; "
                             f"pass the inputs as rounded to the dtype (what the kernel read)")
    label = getattr(problem, "label", None) or (str(problem) if problem is not None else f"M{M}xN{N}xK{K} {d.name}")

    C_bits = xp.asarray(run.C_bits)
    C = dt.from_bits(C_bits, d).astype(xp.float64)
    nan_e, pinf_e, ninf_e = special_pattern(A, B, alpha)
    finite_e = ~(nan_e | pinf_e | ninf_e)
    no_special_inputs = bool(finite_e.all())
    scaling = "" if (alpha, beta) == (1, 0) else f" (alpha = {alpha:g}, beta = {beta:g})"
    if exact:
        ref = exact_reference(A, B, d, alpha, beta, C0) if reference is None else xp.asarray(reference)
        bound = xp.zeros((M, N))
        bound_text = (f"exact: the exact result{scaling} rounded once to {d.name}, bit for bit "
                      f"(+0.0 and -0.0 equal), every partial sum exact in {d.accumulator}")
    else:
        b = Bound.for_dtype(d, K, alpha, beta)
        finite_A, finite_B = arrays.finite_part(A), arrays.finite_part(B)
        ref = _scaled(finite_A @ finite_B, alpha, beta, C0)
        bound = b.evaluate(b.magnitude(xp, xp.abs(finite_A) @ xp.abs(finite_B),
                                       None if C0 is None else xp.abs(C0)), ref, xp)
        bound_text = b.describe()
    if exact:
        # Rounding once may overflow (float16 beyond 65504): then Inf is the correct answer.
        # (want: the bits a right element holds; an element that overflows here leaves
        # finite_e below and is not compared with them.)
        want = dt.to_bits(xp.where(finite_e, ref, 0.0), d)
        rounded = dt.from_bits(want, d).astype(xp.float64)
        pinf_e |= finite_e & (rounded == xp.inf)
        ninf_e |= finite_e & (rounded == -xp.inf)
        finite_e &= xp.isfinite(rounded)
    specials = nan_e | pinf_e | ninf_e
    expected = (xp.where(nan_e, xp.nan, xp.where(pinf_e, xp.inf, xp.where(ninf_e, -xp.inf, ref)))
                if specials.any() else ref)
    if C0 is not None:
        _check_every_element_changes(inst, d, C0, ref, bound, finite_e, want if exact else None)

    findings: list[Finding] = []
    error_map = xp.zeros((M, N))
    unwritten = xp.asarray(run.unwritten, dtype=bool)
    written = ~unwritten

    # 1. Unwritten: still the poison bits (beta != 0: still C0's bits, which no correct result has).
    if unwritten.any():
        if C0 is not None:
            what = "never written (still C0's bits, which every correct result changes)"
        elif getattr(run, "c_fill", "poison") == "finite":
            what = "never written (still the finite values C held, which no correct result comes near)"
        elif "beta" in getattr(inst.spec, "roles", ()):
            # 0 * NaN keeps the NaN's payload on the CPU, so C = alpha * acc + beta * C gives
            # the poison back too (gemmcheck.judge.beta_zero tells the two apart)
            what = ("still the poison bits: never written, or computed from C's NaN (a read of C at "
                    "beta = 0 keeps its payload)")
        else:
            what = "never written (still the poison bits)"
        findings.append(_finding(Defect.UNWRITTEN_OUTPUT, "poison", unwritten, inst, what))
        error_map[unwritten] = xp.inf

    if exact and no_special_inputs and not findings and bool((C_bits == want).all()):
        # Every element holds the exact result's bits (an overflow's Inf included): nothing
        # below can find anything. Most runs end here; the kill matrix judges a reference's
        # output at 1024^2 on the host about a dozen times a row.
        return Judgement(inst, label, M, N, K, exact, bound_text, findings, 0.0,
                         arrays.to_host(error_map), arrays.to_host(C), arrays.to_host(expected),
                         arrays.to_host(bound), np.zeros((M, N), bool), arrays.to_host(unwritten),
                         reproduction(problem), run)

    # 2. NaN/Inf positions.
    nan_c = xp.isnan(C) & written
    pinf_c, ninf_c = (C == xp.inf) & written, (C == -xp.inf) & written
    nan_where_none = nan_c & ~nan_e
    missing_nan = nan_e & written & ~nan_c
    inf_wrong = written & ~nan_e & ~nan_c & ((pinf_c != pinf_e) | (ninf_c != ninf_e))
    pattern_wrong = nan_where_none | missing_nan | inf_wrong
    if pattern_wrong.any():
        guard_payload = int(xp.count_nonzero(C_bits[nan_where_none] == d.guard_bits))
        parts = [f"{n} {what}" for n, what in (
            (int(nan_where_none.sum()), "NaN where none belongs"),
            (int(missing_nan.sum()), "finite where IEEE gives NaN"),
            (int(inf_wrong.sum()), "Inf where IEEE gives none or the wrong Inf"),
        ) if n]
        if guard_payload:
            parts.append(f"{guard_payload} of the NaNs carry the guard payload (an out-of-bounds read)")
        findings.append(_finding(Defect.WRONG_VALUES, "nan-inf-pattern", pattern_wrong, inst,
                                 "NaN/Inf positions wrong (" + "; ".join(parts) + ")",
                                 details={"nan_where_none_belongs": int(nan_where_none.sum()),
                                          "missing_nan": int(missing_nan.sum()),
                                          "wrong_inf": int(inf_wrong.sum()),
                                          "guard_payload": guard_payload}))
        error_map[pattern_wrong] = xp.inf

    # 3. Values, where both are finite.
    compare = written & finite_e & xp.isfinite(C)
    if exact:
        same = (C_bits == want) | ((C == 0) & (ref == 0))
        wrong = compare & ~same
        error_map[wrong] = xp.inf
        detector, what = "exact-bits", "differ from the exact result rounded once"
    else:
        err = xp.abs(C - ref)
        ratio = _ratio(xp, err, bound)
        error_map[compare] = ratio[compare]
        wrong = compare & (err > bound)
        detector, what = "error-bound", "outside the forward error bound"
    if wrong.any():
        findings.append(_finding(Defect.WRONG_VALUES, detector, wrong, inst, what))

    failing = unwritten | pattern_wrong | wrong
    host = arrays.to_host
    return Judgement(inst, label, M, N, K, exact, bound_text, findings,
                     float(error_map.max()) if error_map.size else 0.0, host(error_map),
                     host(C), host(expected), host(bound), host(failing), host(unwritten),
                     reproduction(problem), run)


def _ratio(xp, err, bound):
    """error / bound; 0 / 0 is 0 and anything / 0 is inf."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = err / bound
    zero = bound == 0    # rare (an all-zero row of A or column of B with an exact accumulator)
    return xp.where(zero, xp.where(err > 0, xp.inf, 0.0), ratio) if zero.any() else ratio


def _check_every_element_changes(inst, d: dt.DType, C0, ref, bound, finite_e, want) -> None:
    """The premise of the unwritten check when beta != 0: no correct result holds C0's bits.
    `want`: an exact judgement's right bits (None when judged by the bound)."""
    xp = arrays.module_of(ref)
    if want is not None:
        rounded = dt.from_bits(want, d)
        same = (want == dt.to_bits(C0, d)) | ((rounded == 0) & (C0 == 0))
    else:
        same = xp.abs(ref - C0) <= bound
    same &= finite_e
    if same.any():
        i, j = (int(x) for x in xp.argwhere(same)[0])
        raise UnchangedElements(
            f"{inst.id}: at {int(same.sum())} elements, first C[{i}, {j}] (C0 = {float(C0[i, j])!r}, correct "
            f"result {float(ref[i, j])!r}), a correct result can equal C0, so an unwritten element would "
            f"pass; use Problem.operands()'s C0 (it avoids this for beta != 1)")


def _finding(defect: Defect, detector: str, mask, inst, what: str,
             details: dict | None = None) -> Finding:
    mask = arrays.to_host(mask)
    count = int(np.count_nonzero(mask))
    i, j = (int(x) for x in np.unravel_index(int(np.argmax(mask)), mask.shape))   # the first, row-major
    tiles = _tiles(mask, inst.tile)
    shown = ", ".join(f"({a},{b})" for a, b in tiles[:8]) + (" ..." if len(tiles) > 8 else "")
    summary = (f"{what}: {count} of {mask.size} elements; first C[{i}, {j}] "
               f"(tile {i // inst.tile}, {j // inst.tile}); tiles {shown}")
    info = {"tiles": [list(t) for t in tiles[:64]], "fraction": count / mask.size}
    info.update(details or {})
    return Finding(defect, detector, summary, count, (i, j), info)


def _tiles(mask: np.ndarray, tile: int) -> list[tuple[int, int]]:
    """The (tile row, tile column) of every tile holding a True element, row-major. In numpy,
    not per element: a racing kernel at nightly's 2048^2 has millions of wrong elements (a
    Python loop over them took seconds per finding on the H200)."""
    return [(int(a), int(b)) for a, b in np.argwhere(arrays.block_reduce(mask, tile, np.logical_or, False))]


def assert_judgement(judgement: Judgement, verdicts=None, explained: Finding | None = None) -> None:
    """Record the judgement (if a VerdictLog is given), attach evidence, fail with its message.
    `explained`: the root cause another check established that accounts for this judgement's
    findings (gemmcheck.judge.beta_zero.explanation): recorded instead of them, and the first
    line of the failure, the judgement's own story after it."""
    __tracebackhide__ = True
    if verdicts is not None:
        verdicts.record(Verdict.for_instance(judgement.instance, judgement.problem,
                                             [explained] if explained else judgement.findings,
                                             current_test()))
    if judgement.ok:
        return
    if judgement.run is not None:
        report.attach_judgement(judgement, judgement.run)
    report.attach_text("worst elements (oracle)", judgement.worst_table())
    import pytest
    message = judgement.message()
    if explained is not None:
        message = f"{explained.defect.value}: {explained.summary}\n\n{message}"
    pytest.fail(message, pytrace=False)
