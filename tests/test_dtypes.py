"""Rounding to the dtypes, on the host and on the GPU: correctly rounded (to nearest, ties to
even, once), and the same bits on both (the oracle judges large problems on the GPU:
gemmcheck.arrays)."""

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from gemmcheck.contract import dtypes as dt

BF16 = dt.get("bfloat16")


def _values(n=20000, seed=3):
    """Random float64 over the float32 range and beyond, exact ties and values a hair off
    them, signed zeros, infinities, subnormals."""
    rng = np.random.default_rng(seed)
    random = rng.standard_normal(n) * 10.0 ** rng.integers(-45, 40, n)
    tie_bf16, tie_f16 = 1 + 2.0 ** -8, 1 + 2.0 ** -11
    special = [0.0, -0.0, np.inf, -np.inf, 3.4e38, 3.39e38, -3.4e38, 1e-45, -1e-45, 1e-40,
               65504.0, 65520.0, 65519.99, 6e-8, 2.98e-8, 2.99e-8,
               tie_bf16, 1 + 3 * 2.0 ** -8, -tie_bf16, tie_bf16 * (1 + 2.0 ** -30),
               tie_f16, 1 + 3 * 2.0 ** -11, tie_f16 * (1 - 2.0 ** -40)]
    return np.concatenate([random, special])


def _nearest_even_bf16(x: float) -> int:
    """bfloat16 bits of x rounded once to nearest, ties to even, by exact rationals."""
    if not np.isfinite(x):
        return int(np.array(x, dtype=np.float32).astype(ml_dtypes.bfloat16).view(np.uint16))
    with np.errstate(over="ignore"):
        below = np.array(x, dtype=np.float32).astype(ml_dtypes.bfloat16)   # a neighbour; step to both
    lo = np.nextafter(below, np.array(-np.inf, dtype=ml_dtypes.bfloat16))
    hi = np.nextafter(below, np.array(np.inf, dtype=ml_dtypes.bfloat16))
    candidates = [c for c in (lo, below, hi) if np.isfinite(float(c))]
    exact = Fraction(x)
    best = min(candidates, key=lambda c: (abs(Fraction(float(c)) - exact), int(c.view(np.uint16)) & 1))
    limit = Fraction(2) ** 127 * (2 - Fraction(1, 2 ** 8))   # halfway to the next binade: Inf beyond
    if abs(exact) >= limit:
        return int(np.array(np.copysign(np.inf, x), dtype=ml_dtypes.bfloat16).view(np.uint16))
    return int(best.view(np.uint16))


def test_host_bfloat16_is_rounded_once_to_nearest_even():
    x = _values(3000)
    got = dt.to_bits(x, BF16)
    want = np.array([_nearest_even_bf16(v) for v in x], dtype=np.uint16)
    assert np.array_equal(got, want), x[got != want][:5]
    # just above a tie, and below float32's resolution there: rounding through float32
    # first would land on the tie and go to even (0x3F80); rounded once it goes up
    just_above_a_tie = np.array([1 + 2.0 ** -8 + 2.0 ** -38])
    assert dt.to_bits(just_above_a_tie, BF16)[0] == 0x3F81


def test_float16_through_float32_rounded_to_odd_equals_the_direct_conversion():
    x = _values()
    with np.errstate(over="ignore"):
        direct = x.astype(np.float16).view(np.uint16)     # numpy rounds float64 -> float16 once
        via_odd = dt.float32_rounded_to_odd(np, x).astype(np.float16).view(np.uint16)
    assert np.array_equal(via_odd, direct), x[via_odd != direct][:5]


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(dt.DTYPES))
def test_the_gpu_rounds_to_the_same_bits_as_the_host(name):
    cupy = pytest.importorskip("cupy")
    d = dt.get(name)
    x = _values()
    with np.errstate(over="ignore"):
        host = dt.to_bits(x, d)
    device = dt.to_bits(cupy.asarray(x), d)
    assert device.dtype == host.dtype
    assert np.array_equal(device.get(), host), x[device.get() != host][:5]
    back = dt.from_bits(device, d).astype(cupy.float64).get()
    assert np.array_equal(back, dt.from_bits(host, d).astype(np.float64), equal_nan=True)
