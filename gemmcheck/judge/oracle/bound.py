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

Underflow in the accumulator
----------------------------
The relative model fl(x op y) = (x op y)(1 + delta) holds down to the accumulator's smallest
normal; below it a product rounds to the subnormal grid with an absolute error of at most
eta_acc, half its smallest subnormal (a sum that underflows is exact). Each of the n roundings
of a term may be such a product, carried by the later roundings and alpha:

    + n max(1, |alpha|) eta_acc (1 + gamma_n(u_acc))(1 + u_out)

which is 2^-25 a rounding for a float16 accumulator (an HGEMM summing in half: tiny products
land there) and 2^-150 for float32 (nothing measurable).

Per operand type
----------------
Everything above is read from the kernel's operand types (gemmcheck.contract.operand_types),
so every combination is judged by this one bound:

- u_acc is the accumulator's unit roundoff: float32 (2^-24) for float16, bfloat16, 8-bit
  float and tf32 inputs, float64 for float64, 0 for int32 (integer sums are exact: the bound
  is the float64 reference's own error, and integer results must match it exactly);
- integer sums dequantized into a floating-point output (int8 in, bfloat16 out, with scale
  factors per row of A and column of B): the sum is exact, then converted to float32 (one
  rounding), scaled and alpha'd there (one each) and beta C added (one): the term analysis
  above with one term, n = 1 + [alpha != 1] + [beta != 0] + scaled, u_acc = 2^-24;
- u_out and eta_out are D's: 0 when D is the accumulator's type (float32 output of float16
  inputs), 2^-8 and half bfloat16's smallest subnormal for a bfloat16 output of float32 sums;
- scale factors: D = alpha (sA A)(sB B) + beta C, P = |sA A| |sB B|. A kernel may scale A's
  and B's elements before it multiplies them, or a product, or a block's partial sum, once
  per scaled operand: each adds at most one rounding to a term's path, so n grows by the
  number of scaled operands (K + 2 for both: rounded sA a and sB b, their rounded product,
  K - 1 additions; or an exact product, K - 1 additions and two scale multiplies);
- a conversion the kernel applies to its inputs before it multiplies (tf32: float32 data
  rounded, or truncated, to 11 significant bits, relative error below u_in = 2^-10 each)
  multiplies every product by (1 + d_A)(1 + d_B), |d| <= u_in: gamma_n(u_acc) becomes
  (1 + gamma_n(u_acc))(1 + u_in,A)(1 + u_in,B) - 1.

Tensor-core fp8 sums
--------------------
A kernel that declares ``sums = "tensor-core-fp8"`` has its products added by Hopper's fp8
tensor cores, which do not add in float32: each wgmma k-step adds 32 products to the running
sum s with the 33 addends aligned to the largest exponent and about 14 significant bits kept.
Model (worst case over how the cut is made): with m = max(|s|, |p_k|), 2^e <= m < 2^(e+1),
each addend is cut to the multiples of 2^(e+1-b), off by less than 2^(e+1-b) <= u_b m,
u_b = 2^(1-b); b = 13, one bit below the ~14 measured, so the bound also holds if the cut
rounds either way or if the k-step is split in two aligned halves. The products themselves
are exact (4 + 4 significand bits), the aligned sum of the cut addends is exact, and its
conversion to float32 is off by at most 2^-23 of it. So one step adds at most
33 u_b m + 2^-23 |s_new|. m comes from the operands (per element): |s| <= |S| + E, S the
exact partial sum of the chain so far and E the error allowed so far, and
|p_k| <= max_k |a_ik| max_k |b_kj| over the step's k, so

    m <= max(|S| + E, max|a_i.| max|b_.j|),   E <- E + 33 u_b m + 2^-23 (|S_next| + E + 33 u_b m),

from E = 0 at the start of each chain: the products of K the tensor cores sum before the
kernel adds the partial sum into a float32 register (the declared ``chain``: 128 or 64; none:
the whole K). Chain c's result is T_c = S_c + e_c, |e_c| <= E_c. The kernel adds the
ceil(K / chain) results in float32 and scales them, so each T_c is a term of the analysis
above with n = ceil(K / chain) + [alpha != 1] + [beta != 0] + scaled roundings:

    |S - C_exact| <= gamma_n(u_acc) Q + (1 + gamma_n(u_acc)) |alpha| E_tc,   E_tc = sum_c E_c,

and the store and the reference go through as above: the bound gains
(1 + gamma_n(u_acc))(1 + u_out) |alpha| E_tc. E_tc is computed on A and B as the kernel
multiplies them (with their scale factors, constant along a step: they multiply m and the
sums alike, which u_b m, not the power of two below it, keeps true for any factor), in
float64 (its own error, ~K 2^-53 of |A||B|, is inside the gamma_K(u_64) term). Where only
|A||B| is known (the performance suite's output check), m <= P_c + E gives the worst case
E_c <= ((1 + c)^s - 1) P_c over s = ceil(chain / 32) steps, c = 33 u_b (1 + 2^-23) + 2^-23:
sound, and loose. The float32 bound (u_acc = 2^-24 over K additions) does not hold for these
sums: a cut of 2^-12 of m is some 2^12 times what it allows (tests/test_tensor_core_sums.py
shows both on a model of this arithmetic). Exact judging keeps its premise with b bits for
the tensor cores' sums (gemmcheck.judge.oracle.exactness).

A kernel that accumulates in its input type (float16 sums where float32 is declared) exceeds
this bound by orders of magnitude on random inputs: the bound is built from the declared
accumulator, so it catches the difference (tests/test_oracle.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from gemmcheck.contract import operand_types
from gemmcheck.judge.oracle import tensor_core_sums

U64 = 2.0 ** -53


def gamma(K: int, u: float) -> float:
    """gamma_K = K u / (1 - K u), Higham's constant for K roundings of unit roundoff u."""
    if K * u >= 1:
        raise ValueError(f"gamma_K undefined: K u = {K} * {u!r} >= 1")
    return K * u / (1 - K * u)


def roundings(K: int, alpha=1, beta=0, scaled: int = 0, added: int = 0) -> int:
    """n: the most roundings any term of alpha (sA A)(sB B) + beta C0 goes through (see above);
    `scaled`: how many of A and B carry scale factors; `added`: terms added after (a fused
    epilogue's bias: one more addition on every term's path)."""
    return K + (alpha != 1) + (beta != 0) + scaled + added


def float32_terms(types, K: int) -> int:
    """How many terms the accumulator adds: the K products, or with tensor-core sums the
    ceil(K / chain) partial sums (each chain's own error is E_tc's, see above)."""
    if not types.tensor_core_sums or not K:
        return K
    return -(-K // types.chain_length(K))


def accumulated_terms(types, K: int) -> int:
    """The terms whose roundings the bound counts: float32_terms, or one for integer sums
    dequantized into a floating-point output (exact, then converted to float32: one rounding)."""
    return 1 if types.dequantizes else float32_terms(types, K)


def output_roundoff(types) -> tuple[float, float]:
    """(u_out, eta_out): the rounding of the accumulator's sum to D's type (`types`: an
    operand_types record, or a one-type kernel's DType).

    Zero when D is the accumulator's type (float32, float64, int32).
    """
    types = operand_types.coerce(types)
    d = types.D
    if not types.output_rounds or d.is_integer:
        return 0.0, 0.0
    return d.unit_roundoff, d.smallest_subnormal / 2


@dataclass(frozen=True)
class Bound:
    """|C - C_ref| <= coefficient * Q_hat + u_out * |C_ref| + eta_out, per element, with
    Q_hat = |alpha| (|A||B|) + |beta| |C0| computed in float64 (A and B with their scale
    factors)."""

    K: int
    dtype: str
    u_acc: float
    u_out: float
    eta_out: float
    gamma_acc: float
    gamma_ref: float
    alpha: float = 1
    beta: float = 0
    accumulator: str = "float32"
    scaled: int = 0                  # how many of A and B carry scale factors
    u_in: float = 0.0                # the larger input conversion's roundoff (tf32), 0 for none
    added: int = 0                   # terms added after the sum (a fused epilogue's bias)
    types: operand_types.OperandTypes | None = None   # the record it was made from
    eta_acc: float = 0.0             # the accumulator's underflow over every rounding (above)

    @classmethod
    def for_types(cls, types, K: int, alpha=1, beta=0) -> "Bound":
        """The bound of a kernel of these operand types (a record, or a one-type DType)."""
        types = operand_types.coerce(types)
        u_acc = types.arithmetic.unit_roundoff
        u_out, eta_out = output_roundoff(types)
        scaled = len(types.scales)
        added = bool(types.epilogue.bias)
        n = roundings(accumulated_terms(types, K), alpha, beta, scaled, added)
        u_a, u_b = types.A.conversion_roundoff, types.B.conversion_roundoff
        gamma_acc = (1 + gamma(n, u_acc)) * (1 + u_a) * (1 + u_b) - 1 if (u_a or u_b) else gamma(n, u_acc)
        # the float64 reference adds all K products, whatever the kernel's sums
        gamma_ref = gamma(roundings(K, alpha, beta, scaled, added), U64)
        arithmetic = types.arithmetic
        eta_acc = 0.0 if arithmetic.is_integer else n * max(1.0, abs(alpha)) * arithmetic.smallest_subnormal / 2
        return cls(K, types.name, u_acc, u_out, eta_out, gamma_acc, gamma_ref, alpha, beta,
                   arithmetic.name, scaled, max(u_a, u_b), added, types, eta_acc)

    for_dtype = for_types   # a one-type kernel's DType resolves to its record

    def magnitude(self, xp, absprod, abs_C0=None):
        """Q_hat = |alpha| absprod + |beta| |C0| (absprod = |A||B|)."""
        Q = abs(self.alpha) * absprod if self.alpha != 1 else absprod
        return Q if self.beta == 0 else Q + abs(self.beta) * abs_C0

    @property
    def coefficient(self) -> float:
        return (self.gamma_acc + self.gamma_ref) * (1 + self.u_out) / (1 - self.gamma_ref)

    @property
    def underflow(self) -> float:
        """The accumulator's underflow term, n max(1, |alpha|) eta_acc carried to the output."""
        return self.eta_acc * (1 + self.gamma_acc) * (1 + self.u_out)

    @property
    def tensor_core_sums(self) -> bool:
        return self.types is not None and self.types.tensor_core_sums

    def evaluate(self, Q_hat, C_ref, xp=np, operands=None):
        """The bound per element. `operands`: (A, B) as the kernel multiplies them (finite,
        float64), which tensor-core sums need for their error term (without them: its worst case
        from Q_hat)."""
        slack = 1 + 8 * U64
        bound = self.coefficient * Q_hat + self.u_out * xp.abs(C_ref) + self.eta_out + self.underflow
        if self.tensor_core_sums and self.K:
            grow = (1 + self.gamma_acc) * (1 + self.u_out)
            if operands is None:
                bound = bound + grow * tensor_core_sums.worst_coefficient(self.types, self.K) * Q_hat
            else:
                bound = bound + grow * abs(self.alpha) * tensor_core_sums.error(*operands, self.types)
        return bound * slack

    def describe(self) -> str:
        acc = self.accumulator
        u_acc = f"2^{math.log2(self.u_acc):.0f}" if self.u_acc else "0"
        out = (f"u_out = 2^{math.log2(self.u_out):.0f} ({self.dtype} output), "
               f"eta_out = {self.eta_out:.3g}" if self.u_out else f"u_out = 0 (accumulates in {acc})")
        extra = (f", {self.scaled} scaled operand(s)" if self.scaled else "") + \
            (f", inputs converted with u_in = 2^{math.log2(self.u_in):.0f}" if self.u_in else "") + \
            (f"; + {self.underflow:.3g} for underflow in {acc}" if self.underflow > 1e-30 else "")
        if self.tensor_core_sums:
            chain = self.types.chain_length(self.K)
            extra += (f"; + (1 + gamma_n(u_acc))(1 + u_out) |alpha| E_tc: fp8 tensor-core sums, "
                      f"{self.types.sum_bits} bits kept per 32-product k-step, promoted to float32 every "
                      f"{chain} of K ({float32_terms(self.types, self.K)} float32 term(s))")
        if (self.alpha, self.beta) == (1, 0) and not self.scaled and not self.added and not (
                self.types and self.types.dequantizes):
            return (f"|C - C_ref| <= (gamma_K(u_acc) + gamma_K(u_64))(1 + u_out)/(1 - gamma_K(u_64)) (|A||B|) "
                    f"+ u_out |C_ref| + eta_out; K = {self.K}, u_acc = {u_acc} ({acc}), "
                    f"gamma_K(u_acc) = {self.gamma_acc:.3g}, {out}{extra}")
        n = roundings(accumulated_terms(self.types, self.K) if self.types else self.K, self.alpha, self.beta,
                      self.scaled, self.added)
        return (f"|C - C_ref| <= (gamma_n(u_acc) + gamma_n(u_64))(1 + u_out)/(1 - gamma_n(u_64)) "
                f"(|alpha||A||B| + |beta||C0|) + u_out |C_ref| + eta_out; alpha = {self.alpha:g}, "
                f"beta = {self.beta:g}, K = {self.K}, n = {n}, u_acc = {u_acc} ({acc}), "
                f"gamma_n(u_acc) = {self.gamma_acc:.3g}, {out}{extra}")


def epilogue_bound(b: Bound, epilogue, values: dict, Q_hat, z_ref, out_ref, xp):
    """The bound of a fused epilogue's D (gemmcheck.contract.epilogue): |z - z_ref| <= the
    coefficient times Q_hat (Q_hat with |bias| in it, z = alpha A B + beta C + bias), carried
    through the activation, residual add and output scale (Epilogue.propagate, with the float64
    reference's own evaluation error as a few u_64 more), then D's own rounding."""
    error_z = b.coefficient * Q_hat + b.underflow
    before_store = epilogue.propagate(error_z, z_ref, values, b.u_acc + 4 * U64)
    return (before_store + b.u_out * (xp.abs(out_ref) + before_store) + b.eta_out) * (1 + 8 * U64)


def reference_and_bound(b: Bound, epilogue, values: dict, ref, Q_hat, xp, operands=None):
    """(the reference, its bound): `ref` (alpha A B + beta C0) and the bound over Q_hat, or
    with a fused epilogue the epilogue applied to `ref` (its `values` by role) and
    epilogue_bound (Q_hat with |bias| in it). `operands`: (A, B), for tensor-core sums."""
    if not epilogue.spelling:
        return ref, b.evaluate(Q_hat, ref, xp, operands)
    z_ref = epilogue.pre_activation(ref, values)
    Q_hat = Q_hat + xp.abs(z_ref - ref)   # |bias|, along its axis
    out_ref = epilogue.apply(ref, values)
    return out_ref, epilogue_bound(b, epilogue, values, Q_hat, z_ref, out_ref, xp)


def bound_ratio(xp, got, ref, absprod, dtype, K: int, alpha=1, beta=0, abs_C0=None):
    """|got - ref| / bound per element on any array module (numpy or cupy); inf where got is NaN.

    got: the kernel's output as float64; ref: alpha (A @ B) + beta C0 in float64;
    absprod: |A| @ |B| in float64; abs_C0: |C0| (needed when beta != 0).
    The one comparison behind the oracle's bounded judging and perf's output check.
    """
    if beta != 0 and abs_C0 is None:
        raise ValueError(f"bound_ratio: beta={beta!r} needs abs_C0 (|C0|)")
    b = Bound.for_types(dtype, K, alpha, beta)
    bound = b.evaluate(b.magnitude(xp, absprod, abs_C0), ref, xp)
    return xp.where(xp.isnan(got), xp.inf, _ratio(xp, xp.abs(got - ref), bound))


def within_bound(xp, got, ref, absprod, dtype, K: int, alpha=1, beta=0, abs_C0=None) -> bool:
    """Whether every element of `got` is within the forward error bound (see bound_ratio)."""
    return bool(xp.all(bound_ratio(xp, got, ref, absprod, dtype, K, alpha, beta, abs_C0) <= 1))


def _ratio(xp, err, bound):
    """error / bound; 0 / 0 is 0 and anything / 0 is inf."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = err / bound
    zero = bound == 0    # rare (an all-zero row of A or column of B with an exact accumulator)
    return xp.where(zero, xp.where(err > 0, xp.inf, 0.0), ratio) if zero.any() else ratio
