"""What fp8 tensor-core sums do to a GEMM's partial sums, per element and k-step: the error
term of bounded judging and the premise of exact judging for a kernel that declares
``sums = "tensor-core-fp8"`` (gemmcheck.contract.operand_types; the derivation is in
gemmcheck.judge.oracle.bound's docstring).

Each k-step adds K_STEP products to the running sum of its chain, with the addends aligned to
the largest of them: what it may lose depends on that largest addend, m = max(|s|, |a_k b_k|).
Both are bounded from the operands alone: |s| by the exact partial sum S so far plus the error
allowed so far, |a_k b_k| by max_k |a_ik| * max_k |b_kj| over the step (an outer product).
"""

from __future__ import annotations

from gemmcheck import arrays
from gemmcheck.contract import operand_types

K_STEP = operand_types.TENSOR_CORE_K_STEP
TERMS = K_STEP + 1                 # the products of a step and the running sum, each cut
U_FLOAT32_CUT = 2.0 ** -23         # a step's sum cut (not rounded) to float32


def unit(types) -> float:
    """u_b = 2^(1 - b): an addend cut to b bits of the largest one, m, is off by less than u_b m."""
    return 2.0 ** (1 - operand_types.coerce(types).sum_bits)


def steps(A, B, chain: int):
    """Per k-step of every chain of `chain` products (the last ones may be shorter): (first, S,
    largest, S_next): whether it starts a chain, then M x N float64 arrays on A's array module:
    the chain's exact partial sum before the step (0 at a chain's start), the bound on the
    step's largest |product|, the sum after it."""
    xp = arrays.module_of(A)
    (M, K), N = A.shape, B.shape[1]
    for start in range(0, K, max(chain, 1)):
        S = xp.zeros((M, N))
        for k in range(start, min(start + chain, K), K_STEP):
            a, b = A[:, k:min(k + K_STEP, start + chain, K)], B[k:min(k + K_STEP, start + chain, K), :]
            largest = xp.abs(a).max(axis=1)[:, None] * xp.abs(b).max(axis=0)[None, :]
            S_next = S + a @ b
            yield k == start, S, largest, S_next
            S = S_next


def error(A, B, types):
    """E: per element, the most the tensor cores' sums of (A @ B) may be off in all (the sum over
    chains of each chain's error at its end), A and B as the kernel multiplies them (float64,
    finite)."""
    xp = arrays.module_of(A)
    types = operand_types.coerce(types)
    c = TERMS * unit(types)
    K = A.shape[1]
    total = E = xp.zeros((A.shape[0], B.shape[1]))
    for first, S, largest, S_next in steps(A, B, types.chain_length(K)):
        if first:                          # a fresh partial sum: its error starts at 0
            total, E = total + E, xp.zeros_like(S)
        cut = c * xp.maximum(xp.abs(S) + E, largest)
        E = E + cut + U_FLOAT32_CUT * (xp.abs(S_next) + E + cut)
        # (float64 S is off by ~K 2^-53 of |A||B|: the bound's (1 + 8 u_64) slack and its
        # gamma_K(u_64) term cover it)
    return total + E


def worst_coefficient(types, K: int) -> float:
    """E <= this * (|A||B|) for any operands: m <= P_c + E per step, so E_c <= ((1 + c)^s - 1) P_c
    over a chain of s steps, c = 33 u_b (1 + 2^-23) + 2^-23 (used where only |A||B| is known)."""
    types = operand_types.coerce(types)
    c = TERMS * unit(types) * (1 + U_FLOAT32_CUT) + U_FLOAT32_CUT
    s = -(-types.chain_length(K) // K_STEP)
    return (1 + c) ** s - 1


def inexact(A, B, quantum, types) -> tuple[int, int] | None:
    """The first element (i, j) whose tensor-core sums may cut a bit although every addend is a
    multiple of 2^quantum[i, j] (None: every addend of every step is a multiple of the step's
    cut, 2^(e + 1 - b) with 2^e <= m: m < 2^(b + quantum) suffices)."""
    xp = arrays.module_of(A)
    types = operand_types.coerce(types)
    limit = 2.0 ** (types.sum_bits + quantum)
    for _, S, largest, _ in steps(A, B, types.chain_length(A.shape[1])):
        bad = xp.maximum(xp.abs(S), largest) >= limit
        if bad.any():
            i, j = (int(v) for v in xp.argwhere(bad)[0])
            return i, j
    return None
