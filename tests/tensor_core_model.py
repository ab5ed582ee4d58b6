"""A model of an fp8 tensor-core GEMM's arithmetic (test helper), as rung 10 does it: each
k-step of 32 products of the unscaled fp8 operands is added to the running sum of its chain
with the 33 addends aligned to the largest exponent and cut to `bits` significant bits; every
`chain` products of K the partial sum is added to a float32 accumulator; then the scale
factors (sA sB, in float32) and the output conversion to D's type.

Variants model wrong kernels: `drop_step` leaves one k-step out, `scales` "A only" leaves B's
scale out (the rung's twin), `accumulate` "bfloat16" rounds the running sum to bfloat16.
"""

from __future__ import annotations

import numpy as np

from gemmcheck.contract import dtypes as dt
from gemmcheck.contract import operand_types

K_STEP = operand_types.TENSOR_CORE_K_STEP


def _cut(terms: np.ndarray, bits: int, how: str) -> np.ndarray:
    """Every addend of a step (last axis) cut to the multiples of 2^(e + 1 - bits), 2^e <= the
    largest |addend| < 2^(e + 1): toward zero ("trunc") or down ("floor")."""
    largest = np.abs(terms).max(axis=-1, keepdims=True)
    _, e = np.frexp(np.where(largest > 0, largest, 1.0))     # largest = f 2^e, f in [1/2, 1)
    quantum = np.ldexp(1.0, e - bits)                          # 2^((e - 1) + 1 - bits)
    return (np.trunc if how == "trunc" else np.floor)(terms / quantum) * quantum


def _round(X: np.ndarray, name: str) -> np.ndarray:
    d = dt.get(name)
    return dt.from_bits(dt.to_bits(X, d), d).astype(np.float64)


def gemm(A, B, scales: dict, types, *, bits: int = 14, how: str = "trunc", drop_step: int | None = None,
         scale_B: bool = True, accumulate: str = "float32") -> np.ndarray:
    """D (float64 values of D's type) of fp8 A (M x K) and B (K x N), unscaled, with per-tensor
    `scales` {"scale_A": [[sA]], "scale_B": [[sB]]}, summed in chains of types.chain_length(K)."""
    types = operand_types.coerce(types)
    (M, K), N = A.shape, B.shape[1]
    chain = types.chain_length(K)
    acc = np.zeros((M, N), dtype=np.float32)
    for start in range(0, K, chain):
        s = np.zeros((M, N))
        for k in range(start, min(start + chain, K), K_STEP):
            if k // K_STEP == drop_step:
                continue
            stop = min(k + K_STEP, start + chain, K)
            products = A[:, None, k:stop] * B.T[None, :, k:stop]        # exact: 4 + 4 bits
            terms = np.concatenate([s[:, :, None], products], axis=-1)
            s = _cut(terms, bits, how).sum(axis=-1).astype(np.float32).astype(np.float64)
            if accumulate != "float32":
                s = _round(s, accumulate)
        acc = (acc + s.astype(np.float32)).astype(np.float32)
    sA, sB = (np.float32(scales[r].reshape(-1)[0]) for r in ("scale_A", "scale_B"))
    scale = sA * sB if scale_B else sA
    return _round((acc * np.float32(scale)).astype(np.float64), types.D.name)
