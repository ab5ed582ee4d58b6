"""numpy or CuPy: which array module an array belongs to, host copies, and where the oracle
computes.

The oracle (gemmcheck.judge.oracle) judges a launch with two float64 products and a few
dozen elementwise passes over its M x N elements: at the nightly's 4097 x 4095 x 4160 that
took ~3.5 s of host time per test on the H200 machine, against milliseconds on the GPU. The
judgement is the same on either: exact inputs make every partial sum exact in float64, so
any summation order (numpy's BLAS, cuBLAS) gives the same bits; the forward error bound holds
for a float64 reference summed in any order, with or without FMA. So once the session's
backend is the GPU (``use_device``), large problems (``module_for``) are judged there. CuPy is
imported only then.
"""

from __future__ import annotations

import numpy as np

# M N from which the GPU judges (2048^2: the nightly's race sizes and large shapes). Below it the
# host's passes take tens of ms, less than CuPy's first compile of each kernel the oracle uses
# (measured: ci's 1025 x 1023 problems judged on the GPU made a cold run slower). One judgement,
# host / GPU ms on the H200 (scripts/bench_oracle.py): 400^3 4.0 / 4.5-6.1, 640^3 12-16 / 9-12,
# 1024^3 40-53 / 12-15, with ~9 s of CuPy compiles before the first on an empty CuPy cache. From
# 2^20 with those compiles on a thread beside the suites (tried 2026-11-30), ci's cold run went from
# 89.5 to 102.4 s (a test waited 16.7 s for them) and the nightly's hazards oracle time did not
# fall (141 s against 135 s), so the threshold stayed.
DEVICE_MIN_ELEMENTS = 1 << 22
DEVICE_MIN_PRODUCT = 1 << 31    # or M N K (a long K makes the host's products the cost)

_device = False


def use_device(on: bool) -> None:
    """Judge large problems on the GPU (set by the session when its backend is the GPU)."""
    global _device
    _device = bool(on)


def describe_threshold() -> str:
    """Which problems module_for sends to the GPU, in words: "M N >= 2^22 or M N K >= 2^31"."""
    return (f"M N >= 2^{DEVICE_MIN_ELEMENTS.bit_length() - 1} or "
            f"M N K >= 2^{DEVICE_MIN_PRODUCT.bit_length() - 1}")


def module_for(M: int, N: int, K: int):
    """The array module a problem of this shape is judged with: CuPy for large problems once
    ``use_device(True)``, else numpy."""
    if _device and (M * N >= DEVICE_MIN_ELEMENTS or M * N * K >= DEVICE_MIN_PRODUCT):
        import cupy

        return cupy
    return np


def module_of(x):
    """numpy, or cupy for a CuPy array (CuPy imported only then)."""
    if type(x).__module__.split(".", 1)[0] == "cupy":
        import cupy

        return cupy
    return np


def finite_part(X):
    """X with its NaN and Inf as 0, on X's array module (X itself when all finite): what the
    product of the finite entries reads."""
    xp = module_of(X)
    finite = xp.isfinite(X)
    return X if finite.all() else xp.where(finite, X, 0.0)


def block_reduce(a: np.ndarray, step: int, op, fill):
    """`a` (2-D, numpy) reduced over step x step blocks with the ufunc `op`, the last partial
    blocks padded with `fill`: the tiles holding a wrong element, a heatmap's pooled cells."""
    M, N = a.shape
    pm, pn = -(-M // step) * step, -(-N // step) * step
    padded = np.full((pm, pn), fill, dtype=a.dtype)
    padded[:M, :N] = a
    blocks = padded.reshape(pm // step, step, pn // step, step)
    return op.reduce(op.reduce(blocks, axis=3), axis=1)


def to_host(x):
    """A numpy array of `x` (a CuPy array copied back; anything else as numpy sees it)."""
    if x is None:
        return None
    if module_of(x) is not np:
        return x.get()
    return np.asarray(x)
