"""Rounding to the dtypes, on the host and on the GPU: correctly rounded (to nearest, ties to
even, once), and the same bits on both (the oracle judges large problems on the GPU:
gemmcheck.arrays)."""

from fractions import Fraction

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
               tie_f16, 1 + 3 * 2.0 ** -11, tie_f16 * (1 - 2.0 ** -40), tie_f16 * (1 + 2.0 ** -30)]
    return np.concatenate([random, special])


def _nearest_even_bits(x: float, d: dt.DType) -> int:
    """Bits of x in `d` rounded once to nearest, ties to even, by exact rationals: the array
    library only supplies a neighbour (through float32, so possibly one step off) and the
    steps to either side of it; which of them is nearest is decided here."""
    exact = Fraction(x) if np.isfinite(x) else None
    info = dt.finfo(d)
    half_step_at_max = Fraction(2) ** (int(info.maxexp) - 1 - int(info.nmant) - 1)
    if exact is None or abs(exact) >= Fraction(float(info.max)) + half_step_at_max:
        # Inf and beyond halfway to the next binade: Inf (no rounding question)
        return int(np.array(np.copysign(np.inf, x), dtype=d.numpy).view(d.storage))
    with np.errstate(over="ignore"):
        near = np.array(x, dtype=np.float32).astype(d.numpy)
        lo = np.nextafter(near, np.array(-np.inf, dtype=d.numpy))
        hi = np.nextafter(near, np.array(np.inf, dtype=d.numpy))
    candidates = [c for c in (lo, near, hi) if np.isfinite(float(c))]
    best = min(candidates, key=lambda c: (abs(Fraction(float(c)) - exact), int(c.view(d.storage)) & 1))
    return int(best.view(d.storage))


def _nearest_even(x: np.ndarray, d: dt.DType) -> np.ndarray:
    return np.array([_nearest_even_bits(v, d) for v in x], dtype=d.storage)


def test_host_bfloat16_is_rounded_once_to_nearest_even():
    x = _values(3000)
    got = dt.to_bits(x, BF16)
    want = _nearest_even(x, BF16)
    assert np.array_equal(got, want), x[got != want][:5]
    # just above a tie, and below float32's resolution there: rounding through float32
    # first would land on the tie and go to even (0x3F80); rounded once it goes up
    just_above_a_tie = np.array([1 + 2.0 ** -8 + 2.0 ** -38])
    assert dt.to_bits(just_above_a_tie, BF16)[0] == 0x3F81


@pytest.mark.parametrize("name", ["float16", "float32"])
def test_host_float16_and_float32_are_rounded_once_to_nearest_even(name):
    d = dt.get(name)
    x = _values(3000)
    with np.errstate(over="ignore"):
        got = dt.to_bits(x, d)
    want = _nearest_even(x, d)
    assert np.array_equal(got, want), x[got != want][:5]


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_float32_rounded_to_odd_then_to_nearest_rounds_once(name):
    """The GPU's path (no direct float64 -> float16 or bfloat16 there), run on the host."""
    d = dt.get(name)
    x = _values(3000)
    odd = dt.float32_rounded_to_odd(np, x)
    if name == "float16":
        with np.errstate(over="ignore"):
            got = odd.astype(np.float16).view(np.uint16)
    else:
        got = dt.bfloat16_bits_of_float32(np, odd)
    want = _nearest_even(x, d)
    assert np.array_equal(got, want), x[got != want][:5]


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
