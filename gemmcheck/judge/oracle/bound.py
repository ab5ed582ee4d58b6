"""The forward error bound of bounded judging: how far a correct kernel's result may be from
the float64 reference, and the ratio of an error to it.

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
C = alpha A @ B + beta C0 (C0 read only when beta != 0).

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
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from gemmcheck.contract import dtypes as dt

U64 = 2.0 ** -53


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


def _ratio(xp, err, bound):
    """error / bound; 0 / 0 is 0 and anything / 0 is inf."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = err / bound
    zero = bound == 0    # rare (an all-zero row of A or column of B with an exact accumulator)
    return xp.where(zero, xp.where(err > 0, xp.inf, 0.0), ratio) if zero.any() else ratio
