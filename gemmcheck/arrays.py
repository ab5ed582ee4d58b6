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

import threading

import numpy as np

# Where the GPU judges faster than the host (scripts/bench_oracle.py on the H200, one judgement of a
# correct output, host / GPU ms: 400^3 4.0 / 4.5-6.1, 640^3 12-16 / 9-12, 1024^3 40-53 / 12-15). The
# GPU's ~40 CuPy calls cost ~4 ms whatever the size; the host's passes grow with M N and its two
# float64 products with M N K. So: M N >= 1024^2 (the race size of every profile, ci's large shape),
# or M N K >= 2^29 (~812^3; a long K makes the host's products the cost).
DEVICE_MIN_ELEMENTS = 1 << 20
DEVICE_MIN_PRODUCT = 1 << 29

_device = False
_warming: threading.Thread | None = None


def use_device(on: bool, warm=None) -> None:
    """Judge large problems on the GPU (set by the session when its backend is the GPU).

    `warm`: a callable run on a thread of its own (the oracle's judgements of small problems
    on the GPU, which make CuPy compile the kernels every judgement uses: ~9 s on a machine
    with an empty CuPy cache), so the first large problem does not pay for it in its test; the
    first device judgement waits for it (``wait_for_device``)."""
    global _device, _warming
    _device = bool(on)
    if _device and warm is not None and _warming is None:
        _warming = threading.Thread(target=warm, name="gemmcheck-oracle-warm-up", daemon=True)
        _warming.start()


def wait_for_device() -> None:
    """Return once the warm-up started by use_device has ended (at once when there is none)."""
    if _warming is not None:
        _warming.join()


def describe_threshold() -> str:
    """Which problems module_for sends to the GPU, in words: "M N >= 2^20 or M N K >= 2^29"."""
    return (f"M N >= 2^{DEVICE_MIN_ELEMENTS.bit_length() - 1} or "
            f"M N K >= 2^{DEVICE_MIN_PRODUCT.bit_length() - 1}")


def on_device(M: int, N: int, K: int) -> bool:
    """Whether a problem of this shape is judged on the GPU in this session."""
    return _device and (M * N >= DEVICE_MIN_ELEMENTS or M * N * K >= DEVICE_MIN_PRODUCT)


def module_for(M: int, N: int, K: int):
    """The array module a problem of this shape is judged with: CuPy for large problems once
    ``use_device(True)`` (after the warm-up, if one runs), else numpy."""
    if on_device(M, N, K):
        import cupy

        wait_for_device()
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
