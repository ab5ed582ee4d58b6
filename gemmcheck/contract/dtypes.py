"""The element types gemmcheck knows: how each is named in C, stored, rounded and poisoned.

Everything that depends on the dtype lives here, so adding one is one entry.
Buffers travel as raw unsigned bits (``storage``), so bfloat16 needs nothing
from the array library beyond 16-bit integers.
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from gemmcheck import arrays


@dataclass(frozen=True)
class DType:
    name: str            # the catalog's and the test ids' name: "float16"
    c_type: str          # what the kernel template is instantiated with: "__half"
    numpy: np.dtype      # host dtype of values
    storage: np.dtype    # same-size unsigned integer: how bits travel and compare
    accumulator: str     # the name of the type partial sums are kept in
    unit_roundoff: float  # u = 2**-p for p significand bits (round to nearest)
    poison_bits: int     # quiet NaN with a payload no arithmetic produces: "never written"
    guard_bits: int      # another payloaded quiet NaN: the guard bands around buffers

    @property
    def itemsize(self) -> int:
        return self.numpy.itemsize

    @property
    def significand_bits(self) -> int:
        return int(round(-np.log2(self.unit_roundoff)))


DTYPES: dict[str, DType] = {
    d.name: d
    for d in (
        DType("float32", "float", np.dtype(np.float32), np.dtype(np.uint32),
              "float32", 2.0**-24, 0x7FC0DEAD, 0x7FC0CAFE),
        DType("float64", "double", np.dtype(np.float64), np.dtype(np.uint64),
              "float64", 2.0**-53, 0x7FF8DEADDEADDEAD, 0x7FF8CAFECAFECAFE),
        DType("float16", "__half", np.dtype(np.float16), np.dtype(np.uint16),
              "float32", 2.0**-11, 0x7EAD, 0x7ECA),
        DType("bfloat16", "__nv_bfloat16", np.dtype(ml_dtypes.bfloat16), np.dtype(np.uint16),
              "float32", 2.0**-8, 0x7FED, 0x7FCA),
    )
}


def get(name: str) -> DType:
    """Return the DType called `name`; a ValueError lists the known ones."""
    try:
        return DTYPES[name]
    except KeyError:
        raise ValueError(f"unknown dtype {name!r}; known: {', '.join(DTYPES)}") from None


def finfo(dtype: DType):
    """numpy-style finfo for every gemmcheck dtype (bfloat16 included): the one place it is read."""
    return ml_dtypes.finfo(dtype.numpy)


def to_bits(values, dtype: DType):
    """Round `values` to `dtype` (round to nearest even) and return the raw bits; on the
    array module of `values` (numpy, or CuPy: see _device_bits)."""
    xp = arrays.module_of(values)
    if xp is not np:
        return _device_bits(xp, values, dtype)
    values = np.asarray(values)
    if dtype.name == "bfloat16" and values.dtype == np.float64:
        # ml_dtypes before 0.7 goes float64 -> float32 -> bfloat16, rounding twice (1 + 2^-8 +
        # 2^-38 becomes 1, not 1 + 2^-7); so its conversion is used only for values float32
        # holds (all the oracle rounds: sums exact in the float32 accumulator), the rest are
        # rounded once here, as on the GPU, whichever release is installed
        with np.errstate(over="ignore"):
            single = values.astype(np.float32)
        if not ((single == values) | np.isnan(values)).all():
            return bfloat16_bits_of_float32(np, float32_rounded_to_odd(np, values))
        values = single
    return np.ascontiguousarray(values.astype(dtype.numpy)).view(dtype.storage)


def round_draws(values: np.ndarray, dtype: DType) -> np.ndarray:
    """Random float64 draws as the nearest values of `dtype` (float64): bfloat16 through float32,
    as ml_dtypes always rounded them (which neighbour a random draw becomes is no claim; the
    inputs' bits stay what they were, and the fast conversion applies)."""
    if dtype.name == "bfloat16":
        values = np.asarray(values).astype(np.float32)
    return from_bits(to_bits(values, dtype), dtype).astype(np.float64)


def from_bits(bits, dtype: DType):
    """The values held in raw `bits` of `dtype`. On a CuPy array, float32 and bfloat16 bits
    come back as float64 values (exact, subnormals kept: see _widen_float32_bits)."""
    xp = arrays.module_of(bits)
    if xp is not np and dtype.name == "float32":
        return _widen_float32_bits(xp, xp.asarray(bits).view(xp.uint32))
    if xp is not np and dtype.name == "bfloat16":
        return _widen_float32_bits(xp, xp.left_shift(bits.astype(xp.uint32), xp.uint32(16)))
    return xp.asarray(bits).view(dtype.numpy)


F32_MIN_NORMAL = 2.0 ** -126
F32_SUBNORMAL_STEP_EXP = 149     # float32's subnormals are multiples of 2^-149


def _widen_float32_bits(xp, bits):
    """float32 bits -> float64 values. CuPy builds its kernels with -ftz=true, which flushes
    float32 subnormals in conversions (seen on the H200): those are made from their integer
    significand instead."""
    subnormal = ((bits >> xp.uint32(23)) & xp.uint32(0xFF)) == 0
    with np.errstate(invalid="ignore"):
        normal = bits.view(xp.float32).astype(xp.float64)
    tiny = (bits & xp.uint32(0x7FFFFF)).astype(xp.float64) * 2.0 ** -F32_SUBNORMAL_STEP_EXP
    return xp.where(subnormal, xp.where((bits >> xp.uint32(31)) == 1, -tiny, tiny), normal)


def _tiny_float32_grid(xp, x):
    """(tiny, |x| on float32's subnormal grid in units of 2^-149, sign bit): the part of
    float64 -> float32 below float32's smallest normal, done in float64 arithmetic (CuPy's
    kernels would flush it)."""
    tiny = xp.abs(x) < F32_MIN_NORMAL
    scaled = xp.where(tiny, xp.abs(x), 0.0) * 2.0 ** F32_SUBNORMAL_STEP_EXP
    return tiny, scaled, xp.signbit(x).astype(xp.uint32) << xp.uint32(31)


def float32_rounded_to_odd(xp, values):
    """float64 -> float32, rounded to odd: toward zero, and the last bit set if that was
    inexact. Rounding this to a type of p <= 22 significand bits rounds `values` correctly
    (to nearest even, as if done once): float16 (11) and bfloat16 (8) have p + 2 <= 24."""
    x = xp.asarray(values, dtype=xp.float64)
    with np.errstate(over="ignore"):                  # beyond float32's range: inf, stepped back below
        t = x.astype(xp.float32)                      # to nearest: may round away from zero
    away = xp.abs(t.astype(xp.float64)) > xp.abs(x)
    t = xp.where(away, xp.nextafter(t, xp.zeros_like(t)), t)
    inexact = (t.astype(xp.float64) != x) & ~xp.isnan(x)
    bits = t.view(xp.uint32) | inexact.astype(xp.uint32)
    tiny, scaled, sign = _tiny_float32_grid(xp, x)
    toward_zero = xp.trunc(scaled)
    tiny_bits = sign | toward_zero.astype(xp.uint32) | (toward_zero != scaled).astype(xp.uint32)
    return xp.where(tiny, tiny_bits, bits).view(xp.float32)


def bfloat16_bits_of_float32(xp, t):
    """float32 values -> bfloat16 bits, rounded to nearest even; NaN stays a quiet NaN."""
    bits = xp.asarray(t, dtype=xp.float32).view(xp.uint32)
    rounded = (bits + xp.uint32(0x7FFF) + ((bits >> xp.uint32(16)) & xp.uint32(1))) >> xp.uint32(16)
    quiet_nan = (bits >> xp.uint32(16)) | xp.uint32(0x0040)
    return xp.where(xp.isnan(t), quiet_nan, rounded).astype(xp.uint16)


def _device_bits(xp, values, d: DType):
    """to_bits on CuPy, correctly rounded without bfloat16 in the array library and without
    relying on a direct float64 -> float16 conversion (through float32 rounded to odd)."""
    x = xp.asarray(values)
    if d.name == "float64":
        return xp.ascontiguousarray(x.astype(xp.float64)).view(xp.uint64)
    if d.name == "float32":
        with np.errstate(over="ignore"):
            bits = xp.ascontiguousarray(x.astype(xp.float32)).view(xp.uint32)
        tiny, scaled, sign = _tiny_float32_grid(xp, x.astype(xp.float64))
        return xp.where(tiny, sign | xp.rint(scaled).astype(xp.uint32), bits)
    odd = float32_rounded_to_odd(xp, x)
    if d.name == "float16":
        return xp.ascontiguousarray(odd.astype(xp.float16)).view(xp.uint16)
    if d.name == "bfloat16":
        return bfloat16_bits_of_float32(xp, odd)
    raise ValueError(f"to_bits on the GPU: no rounding for {d.name}")
