"""The element types gemmcheck knows: how each is named in C, stored, rounded and poisoned.

Everything that depends on the element type lives here, so adding one is one entry.
Buffers travel as raw unsigned bits (``storage``), so bfloat16 and the 8-bit floats need
nothing from the array library beyond unsigned integers.

``DTYPES`` are the types a kernel with one element type is tested in (``dtypes =
["float32"]``); ``ELEMENT_TYPES`` adds what one operand of a mixed kernel may be
(gemmcheck.contract.operand_types): the 8-bit floats (e4m3 without Inf, e5m2 with it), int8
and uint8 accumulating in int32, and tf32 (float32 storage that the kernel rounds to TF32's
11 significant bits before it multiplies).
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
    unit_roundoff: float  # u = 2**-p for p significand bits (round to nearest); 0 for integers
    poison_bits: int     # quiet NaN with a payload no arithmetic produces: "never written"
    guard_bits: int      # another payloaded quiet NaN: the guard bands around buffers
    short: str = ""      # the name in a combination of operand types: "f16" (operand_types)
    # Relative error of the conversion a kernel applies to values stored in this type before it
    # multiplies them (tf32: float32 storage rounded or truncated to 11 significant bits, < 2^-10).
    conversion_roundoff: float = 0.0

    @property
    def itemsize(self) -> int:
        return self.numpy.itemsize

    @property
    def is_integer(self) -> bool:
        return self.numpy.kind in "iu"

    @property
    def significand_bits(self) -> int:
        """p: every integer of magnitude <= 2^p is exact in the type (for an integer type: the
        bits below its sign, so 2^p - 1 is its largest value)."""
        if self.is_integer:
            return 8 * self.itemsize - (self.numpy.kind == "i")
        return int(round(-np.log2(self.unit_roundoff)))

    @property
    def exact_limit(self) -> int:
        """The largest magnitude up to which every integer is exact in the type."""
        return int(np.iinfo(self.numpy).max) if self.is_integer else 2 ** self.significand_bits

    @property
    def largest(self) -> float:
        """The largest finite value."""
        return float(np.iinfo(self.numpy).max if self.is_integer else finfo(self).max)

    @property
    def smallest(self) -> float:
        """The least value: -largest, or 0 for an unsigned integer type."""
        return float(np.iinfo(self.numpy).min) if self.is_integer else -self.largest

    @property
    def smallest_subnormal(self) -> float:
        """The spacing of the type next to 0: its smallest normal times 2^(1 - p) (tf32's
        2^-136, not float32's 2^-149: it keeps 10 fraction bits); 1 for an integer type."""
        return 1.0 if self.is_integer else self.smallest_normal * 2.0 ** (1 - self.significand_bits)

    @property
    def smallest_normal(self) -> float:
        return 1.0 if self.is_integer else float(finfo(self).smallest_normal)

    @property
    def marks_are_nan(self) -> bool:
        """Whether the poison and guard patterns are NaNs with payloads no arithmetic makes
        (float8_e4m3fn has no NaN to spare, an integer type none at all)."""
        return not self.is_integer and self.name != "float8_e4m3fn"

    @property
    def has_inf(self) -> bool:
        """Whether the type holds infinities (float8_e4m3fn and the integers do not)."""
        return not self.is_integer and self.name != "float8_e4m3fn"


DTYPES: dict[str, DType] = {
    d.name: d
    for d in (
        DType("float32", "float", np.dtype(np.float32), np.dtype(np.uint32),
              "float32", 2.0**-24, 0x7FC0DEAD, 0x7FC0CAFE, "f32"),
        DType("float64", "double", np.dtype(np.float64), np.dtype(np.uint64),
              "float64", 2.0**-53, 0x7FF8DEADDEADDEAD, 0x7FF8CAFECAFECAFE, "f64"),
        DType("float16", "__half", np.dtype(np.float16), np.dtype(np.uint16),
              "float32", 2.0**-11, 0x7EAD, 0x7ECA, "f16"),
        DType("bfloat16", "__nv_bfloat16", np.dtype(ml_dtypes.bfloat16), np.dtype(np.uint16),
              "float32", 2.0**-8, 0x7FED, 0x7FCA, "bf16"),
    )
}
# The types an operand of a mixed kernel may have besides DTYPES. float8_e4m3fn has one NaN
# per sign (0x7F, 0xFF), and a kernel converting without saturation writes either: its guard
# is +NaN (an input's out-of-bounds read shows as NaN), its poison a finite value, -2^-9 (0x81),
# which no exact result here takes (they are multiples of 2^-2) and which the oracle counts as
# unwritten only where the correct result is not that value. An integer type has no NaN at
# all: its guard is its largest value (an out-of-bounds read of an int8 A shows as a wrong
# value, not as NaN), and int32's poison a value no judged result comes near (a correct int32
# result here stays below 2^30: gemmcheck.problems.problem.exact_range).
ELEMENT_TYPES: dict[str, DType] = {
    **DTYPES,
    **{d.name: d for d in (
        DType("float8_e4m3fn", "__nv_fp8_e4m3", np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(np.uint8),
              "float32", 2.0**-4, 0x81, 0x7F, "e4m3"),
        DType("float8_e5m2", "__nv_fp8_e5m2", np.dtype(ml_dtypes.float8_e5m2), np.dtype(np.uint8),
              "float32", 2.0**-3, 0x7D, 0xFE, "e5m2"),
        DType("int8", "signed char", np.dtype(np.int8), np.dtype(np.uint8), "int32", 0.0, 0x7F, 0x7E, "s8"),
        DType("uint8", "unsigned char", np.dtype(np.uint8), np.dtype(np.uint8), "int32", 0.0, 0xFF, 0xFE, "u8"),
        DType("int32", "int", np.dtype(np.int32), np.dtype(np.uint32), "int32", 0.0, 0x7EADDEAD, 0x7ECAFECA,
              "s32"),
        DType("tf32", "float", np.dtype(np.float32), np.dtype(np.uint32), "float32", 2.0**-11,
              0x7FC0DEAD, 0x7FC0CAFE, "tf32", conversion_roundoff=2.0**-10),
    )},
}


# The integer types a grouped kernel's table of offsets or counts may be declared in (not
# operand types): int32 as CUTLASS and DeepGEMM keep them, int64 as PyTorch's cumsum gives them.
TABLE_TYPES: dict[str, DType] = {
    "int32": ELEMENT_TYPES["int32"],
    **{d.name: d for d in (
        DType("int64", "long long", np.dtype(np.int64), np.dtype(np.uint64), "int64", 0.0,
              0x7EADDEAD7EADDEAD, 0x7ECAFECA7ECAFECA),
        DType("uint32", "unsigned", np.dtype(np.uint32), np.dtype(np.uint32), "uint32", 0.0, 0x7EADDEAD, 0x7ECAFECA),
        DType("uint64", "unsigned long long", np.dtype(np.uint64), np.dtype(np.uint64), "uint64", 0.0,
              0x7EADDEAD7EADDEAD, 0x7ECAFECA7ECAFECA),
    )},
}


def get(name: str) -> DType:
    """Return the element type called `name`; a ValueError lists the known ones."""
    try:
        return ELEMENT_TYPES[name]
    except KeyError:
        raise ValueError(f"unknown element type {name!r}; known: {', '.join(ELEMENT_TYPES)}") from None


def finfo(dtype: DType):
    """numpy-style finfo for every gemmcheck floating type (bfloat16 and the 8-bit floats
    included): the one place it is read."""
    return ml_dtypes.finfo(dtype.numpy)


def to_bits(values, dtype: DType, *, saturate: bool = False):
    """Round `values` to `dtype` (round to nearest even) and return the raw bits; on the
    array module of `values` (numpy, or CuPy: see _device_bits). `saturate`: a value beyond the
    finite range (an infinity too) becomes the largest finite value of its sign, as CUDA's
    satfinite conversions do (__NV_SATFINITE, cvt.rn.satfinite); else it overflows as the
    type does (Inf; NaN in float8_e4m3fn, which has no Inf; an integer type wraps)."""
    xp = arrays.module_of(values)
    if xp is not np:
        return _device_bits(xp, values, dtype, saturate)
    values = np.asarray(values)
    if dtype.is_integer:
        return _integer_bits(values, dtype, saturate)
    if saturate:
        values = np.where(np.isnan(values), values, np.clip(values, -dtype.largest, dtype.largest))
    if dtype.itemsize == 1:
        return float8_bits(values, dtype)
    if dtype.name == "tf32":
        dtype = DTYPES["float32"]     # stored as float32: the kernel does the rounding to TF32
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


# Each 8-bit float's (significand bits p, exponent of its smallest normal): e4m3 2^-6, e5m2 2^-14.
_FLOAT8 = {"float8_e4m3fn": (4, -6), "float8_e5m2": (3, -14)}


def float8_bits(values, dtype: DType) -> np.ndarray:
    """float64 -> an 8-bit float's bits, rounded once to nearest even, as CUDA's
    __nv_cvt_double_to_fp8 (cuda_fp8.hpp) with __NV_NOSAT does: below half the smallest
    subnormal a signed zero; past the largest finite value by half a step or more (a tie
    rounds to even: e4m3's 464 is 448, e5m2's 61440 is Inf) Inf, or NaN for e4m3 (no Inf);
    NaN 0x7F. (ml_dtypes makes e4m3's 464 a NaN.) Saturating is the caller's clip."""
    p, emin = _FLOAT8[dtype.name]
    x = np.asarray(values, dtype=np.float64)
    # Values the type holds (every input drawn in it) need no rounding: ml_dtypes' conversion
    # there is exact, and 20 times faster than the rounding below (4096^2 elements: 0.24 s,
    # not 4.8 s). Any other value (NaN too: never equal) takes the rounding.
    held = x.astype(dtype.numpy)
    if np.array_equal(held.astype(np.float64), x):
        return held.view(np.uint8)
    magnitude = np.abs(np.where(np.isfinite(x), x, 0.0))
    exponent = np.floor(np.log2(np.where(magnitude > 0, magnitude, 1.0)))
    step = np.exp2(np.maximum(exponent, emin) - (p - 1))
    rounded = np.rint(magnitude / step) * step          # rint: to nearest, ties to even
    overflow = (rounded > dtype.largest) | np.isinf(x)
    finite = np.copysign(np.where(overflow, 0.0, rounded), x).astype(dtype.numpy).view(np.uint8)
    past = np.uint8(0x7C) if dtype.has_inf else np.uint8(0x7F)
    bits = np.where(overflow, past | (np.signbit(x).astype(np.uint8) << np.uint8(7)), finite)
    return np.where(np.isnan(x), np.uint8(0x7F), bits).astype(np.uint8)


def _integer_bits(values: np.ndarray, dtype: DType, saturate: bool) -> np.ndarray:
    """Integer values -> an integer type's bits: clipped to its range with `saturate`, else
    wrapped (two's complement, as a C cast on the GPU does); NaN is 0."""
    x = np.rint(np.nan_to_num(np.asarray(values, dtype=np.float64), nan=0.0))
    if saturate:
        x = np.clip(x, dtype.smallest, dtype.largest)
    return np.ascontiguousarray(x.astype(np.int64).astype(dtype.numpy)).view(dtype.storage)


def round_draws(values: np.ndarray, dtype: DType) -> np.ndarray:
    """Random float64 draws as the nearest values of `dtype` (float64): bfloat16 through float32,
    as ml_dtypes always rounded them (which neighbour a random draw becomes is no claim; the
    inputs' bits stay what they were, and the fast conversion applies); an integer type's
    nearest integers, clipped to its range."""
    if dtype.name == "bfloat16":
        values = np.asarray(values).astype(np.float32)
    if dtype.is_integer:
        return np.clip(np.rint(values), dtype.smallest, dtype.largest)
    if dtype.itemsize == 1 and np.all(np.abs(values) <= dtype.largest):
        # within the finite range ml_dtypes rounds to nearest as the GPU does, 10 times faster
        # than float8_bits (past it, e4m3's 464 would be its NaN, not 448)
        return np.asarray(values).astype(dtype.numpy).astype(np.float64)
    return from_bits(to_bits(values, dtype), dtype).astype(np.float64)


def from_bits(bits, dtype: DType):
    """The values held in raw `bits` of `dtype`. On a CuPy array, float32 and bfloat16 bits
    come back as float64 values (exact, subnormals kept: see _widen_float32_bits), and 8-bit
    floats through a table of their 256 values (CuPy has no such dtype)."""
    xp = arrays.module_of(bits)
    if xp is not np and dtype.numpy == np.float32:
        return _widen_float32_bits(xp, xp.asarray(bits).view(xp.uint32))
    if xp is not np and dtype.name == "bfloat16":
        return _widen_float32_bits(xp, xp.left_shift(bits.astype(xp.uint32), xp.uint32(16)))
    if xp is not np and dtype.itemsize == 1 and not dtype.is_integer:
        table = np.arange(256, dtype=np.uint8).view(dtype.numpy).astype(np.float64)
        return xp.asarray(table)[xp.asarray(bits).astype(xp.int32)]
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


def _device_bits(xp, values, d: DType, saturate: bool = False):
    """to_bits on CuPy, correctly rounded without bfloat16 in the array library and without
    relying on a direct float64 -> float16 conversion (through float32 rounded to odd). The
    8-bit and integer types, and saturation, go through the host (no large problem of the
    builtin catalogs has them)."""
    x = xp.asarray(values)
    if saturate or d.itemsize == 1 or d.is_integer:
        return xp.asarray(to_bits(xp.asnumpy(x), d, saturate=saturate))
    if d.name == "float64":
        return xp.ascontiguousarray(x.astype(xp.float64)).view(xp.uint64)
    if d.numpy == np.float32:
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
