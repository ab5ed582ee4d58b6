"""The exact reference of exact judging, and the premise it rests on (checked, never assumed).

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

Operand types and scale factors
-------------------------------
The premise is stated for the accumulator of the kernel's operand types (gemmcheck.contract.
operand_types): float32 for float16, bfloat16, 8-bit float and tf32 inputs, int32 for int8 and
uint8 ones (p = 31: every sum below 2^31 is exact, never wrapped). A and B here are the values
the kernel multiplies: with scale factors, sA A and sB B (gemmcheck.judge.oracle.judging scales
them), so the quanta above are the scaled operands'; judging also checks the unscaled A and B
(a kernel that sums a block of products before it scales them forms those sums). The answer is
the exact result rounded once to D's type (saturated to its finite range when the kernel's
output conversion saturates). Integer sums dequantized into a floating-point output (int8 in,
bfloat16 out) are converted to float32 and scaled there: the scaled values must then be exact
in float32 too (types.arithmetic), the integer sums before the scales in int32.

Tensor-core fp8 sums
--------------------
A kernel whose products fp8 tensor cores add (``sums = "tensor-core-fp8"``) keeps b = 13
significant bits of each k-step's addends, aligned to the largest one (gemmcheck.judge.oracle.
bound): the premise then also asks, per k-step of each chain of the unscaled A and B (what the
tensor cores multiply), that the largest addend m (the chain's partial sum so far, or a
product) stays below 2^b q_i q_j, so that every addend is a multiple of the step's cut
(gemmcheck.judge.oracle.tensor_core_sums.inexact; exact_range keeps chain r^2 < 2^b).

alpha and beta
--------------
C = alpha A @ B + beta C0 (C0 read only when beta != 0). Exact judging needs
integer alpha and beta (checked): the premise above extends to the sum of the
K terms alpha a_k b_k and the term beta c, each a multiple of the finest
quantum among them, bounded by Q = |alpha| P + |beta| |C0|
(gemmcheck.problems.problem.exact_range proves the generated integers satisfy it).
"""

from __future__ import annotations

import math

import numpy as np

from gemmcheck import arrays
from gemmcheck.contract import dtypes as dt
from gemmcheck.contract import operand_types
from gemmcheck.judge.oracle import tensor_core_sums


class InexactProblem(ValueError):
    """exact=True was asked for inputs whose partial sums are not all exact."""


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


def exactness_violation(A: np.ndarray, B: np.ndarray, types, alpha=1, beta=0,
                        C0: np.ndarray | None = None) -> str | None:
    """Why the partial sums of alpha A @ B + beta C0 are not all exact in the accumulator of
    `types` (an operand_types record, or a one-type kernel's DType) (None if they are)."""
    types = operand_types.coerce(types)
    finite_A, finite_B = arrays.finite_part(A), arrays.finite_part(B)
    return _violation(finite_A, finite_B, types.arithmetic, alpha, beta, C0) or \
        _tensor_core_violation(finite_A, finite_B, types)


def _tensor_core_violation(finite_A, finite_B, types) -> str | None:
    """Why fp8 tensor-core sums of finite_A @ finite_B may cut a bit (None if they cannot, or
    when the accumulator adds the products)."""
    if not types.tensor_core_sums:
        return None
    q = _quantum_exponents(finite_A, axis=1)[:, None] + _quantum_exponents(finite_B, axis=0)[None, :]
    where = tensor_core_sums.inexact(finite_A, finite_B, q, types)
    if where is None:
        return None
    return (f"C[{where[0]}, {where[1]}]: a k-step's largest addend needs more than {types.sum_bits} significant "
            f"bits (fp8 tensor-core sums, promoted every {types.chain_length(finite_A.shape[1])} of K)")


def _violation(finite_A, finite_B, acc: dt.DType, alpha, beta, C0) -> str | None:
    """exactness_violation of inputs whose non-finite entries are already 0, in accumulator `acc`."""
    for name, value in (("alpha", alpha), ("beta", beta)):
        if value != int(value):
            return f"{name}={value!r} is not an integer"
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
                + abs(int(beta)) * largest[2] <= acc.exact_limit):
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
    emin_sub = math.log2(acc.smallest_subnormal)
    p = acc.significand_bits
    too_big = needed > p
    too_fine = (P > 0) & (q < emin_sub)
    for mask, why in ((too_big, f"a partial sum needs more than {p} significand bits"),
                      (too_fine, f"a product is finer than {acc.name}'s smallest subnormal")):
        if mask.any():
            i, j = (int(v) for v in xp.argwhere(mask)[0])
            return f"C[{i}, {j}]: {why} (accumulator {acc.name})"
    return None


def exact_reference(A, B, types, alpha=1, beta=0, C0=None, unscaled=None):
    """The exact alpha A @ B + beta C0 of finite A and B, as float64 on their array module
    (raises InexactProblem if it is not exact). `types`: an operand_types record (or a
    one-type kernel's DType); `unscaled`: (A, B) before their scale factors, when A and B
    are scaled (their partial sums must be exact too).

    Premise checked: every partial sum is exact in the accumulator, hence (p <= 53) in
    float64, so the float64 product, scaled and summed, is exact in any summation order.
    """
    types = operand_types.coerce(types)
    acc = types.accumulator
    finite_A, finite_B = arrays.finite_part(A), arrays.finite_part(B)
    # the scaled values in the arithmetic after the sums (float32 for dequantized integer sums)
    why = _violation(finite_A, finite_B, types.arithmetic, alpha, beta, C0)
    if why is None and unscaled is not None:
        why = _violation(*(arrays.finite_part(X) for X in unscaled), acc, alpha, 0, None)
        why = why and f"before the scale factors: {why}"
    if why is None:   # the tensor cores multiply the unscaled operands
        why = _tensor_core_violation(*(arrays.finite_part(X) for X in (unscaled or (A, B))), types)
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
