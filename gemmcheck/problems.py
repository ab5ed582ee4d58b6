"""A Problem is one GEMM to run: shape, dtype, what kind of values, and a seed.

Inputs are deterministic from the seed, with a separate random stream per
operand (numpy SeedSequence.spawn), so A of one problem never depends on how
much randomness B used. Every generator returns float64 matrices whose
values are already exactly representable in the dtype: what the kernel reads
is what the reference uses.

Value kinds:

- ``exact``: integers in [-r, r] with r = ``exact_range(dtype, K)`` chosen so
  that every product and every partial sum, in any order, is exactly
  representable in the accumulator (|partial| <= K r^2 <= 2^p_acc, every
  integer up to 2^p is representable with p significand bits) and r itself in
  the input type (r <= 2^p_in; fp16 p = 11, bf16 p = 8). For float16 the
  result must also stay finite (K r^2 <= 65504). Any summation order then
  gives the same bits, and the one correct answer is the exact product
  rounded once to the output dtype. Every row of A and column of B holds a
  nonzero and the product is never all zero, so an all-zero output can never
  pass.
- ``normal``, ``uniform``: N(0, 1) and U(-1, 1), rounded to the dtype; judged
  against a forward error bound (gemmcheck.oracle).
- ``wide``: random sign times 2^U(-E, E): values over many binades, with E
  chosen per dtype and K so that inputs stay normal and the output stays
  finite even if every product has the same sign.
- ``special``: the exact integers, plus +Inf and NaN in A, -Inf in B, zeros
  placed so that Inf * 0 occurs (once with -0.0), about 10 % of entries -0.0,
  and one row of A scaled onto the dtype's subnormals (n * smallest
  subnormal, n an integer in [-r, r]): still exact in the accumulator, so the
  finite elements are judged bit for bit and a flush-to-zero shows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from gemmcheck import dtypes as dt
from gemmcheck.phases import timed

VALUE_KINDS = ("exact", "normal", "uniform", "wide", "special")
EXACT_KINDS = ("exact", "special")  # judged bit for bit


def finfo(dtype: dt.DType):
    """numpy-style finfo for every gemmcheck dtype (bfloat16 included)."""
    return ml_dtypes.finfo(dtype.numpy)


def accumulator(dtype: dt.DType) -> dt.DType:
    """The DType partial sums are kept in (float32 for float16 and bfloat16)."""
    return dt.get(dtype.accumulator)


def exact_range(dtype: dt.DType | str, K: int) -> int:
    """The largest r such that integers in [-r, r] make every partial sum exact.

    r <= 2^p_in (r is representable in the input type), K r^2 <= 2^p_acc (every
    partial sum is an integer of magnitude <= 2^p_acc, so exact in the
    accumulator, in any order), and K r^2 <= the output's largest finite value
    (the once-rounded result is finite).
    """
    d = dt.get(dtype) if isinstance(dtype, str) else dtype
    if K < 1:
        raise ValueError(f"K={K} must be >= 1")
    r_input = 2 ** d.significand_bits
    r_accumulator = math.isqrt(2 ** accumulator(d).significand_bits // K)
    r_output = math.isqrt(int(float(finfo(d).max)) // K)
    r = min(r_input, r_accumulator, r_output)
    if r < 1:
        raise ValueError(f"K={K} is too long for exact {d.name} inputs: even K * 1 * 1 "
                         f"exceeds 2^{accumulator(d).significand_bits}")
    return r


def wide_exponent(dtype: dt.DType | str, K: int) -> float:
    """E for the ``wide`` kind: |values| in [2^-E, 2^E].

    Inputs stay normal (2^-E >= smallest normal), K * 2^2E stays below half
    the output's largest finite value, and E <= 16 keeps every product far from
    the accumulator's underflow and overflow thresholds.
    """
    d = dt.get(dtype) if isinstance(dtype, str) else dtype
    info = finfo(d)
    by_input = -math.log2(float(info.smallest_normal))
    by_output = (math.log2(float(info.max)) - 1 - math.log2(K)) / 2
    return max(0.5, min(16.0, by_input, by_output))


@dataclass(frozen=True)
class Problem:
    """One GEMM: C[M x N] = A[M x K] B[K x N] in `dtype`, values of one kind, from a seed."""

    M: int
    N: int
    K: int
    dtype: str
    values: str = "exact"
    seed: int = 0

    def __post_init__(self):
        for name in ("M", "N", "K"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError(f"Problem: {name}={value!r} must be a positive integer")
        dt.get(self.dtype)
        if self.values not in VALUE_KINDS:
            raise ValueError(f"Problem: values={self.values!r}; choose from {', '.join(VALUE_KINDS)}")
        if type(self.seed) is not int or self.seed < 0:
            raise ValueError(f"Problem: seed={self.seed!r} must be a non-negative integer")

    @property
    def id(self) -> str:
        """The shape, as test ids show it: ``M33xN17xK65``."""
        return f"M{self.M}xN{self.N}xK{self.K}"

    @property
    def label(self) -> str:
        """Everything that makes the inputs: ``float16 normal M33xN17xK65 seed 7``."""
        return f"{self.dtype} {self.values} {self.id} seed {self.seed}"

    @property
    def dt(self) -> dt.DType:
        return dt.get(self.dtype)

    @property
    def exact(self) -> bool:
        """Whether the result is judged bit for bit (exact and special kinds)."""
        return self.values in EXACT_KINDS

    def __repr__(self) -> str:
        return (f"Problem(M={self.M}, N={self.N}, K={self.K}, dtype={self.dtype!r}, "
                f"values={self.values!r}, seed={self.seed})")

    @timed("inputs")
    def operands(self) -> tuple[np.ndarray, np.ndarray]:
        """(A, B) as float64 arrays holding values exactly representable in the dtype."""
        streams = [np.random.default_rng(s) for s in np.random.SeedSequence(self.seed).spawn(3)]
        return GENERATORS[self.values](self, *streams)

    def exact_product(self) -> np.ndarray:
        """The exact product of the ``exact`` kind's integers, as int64."""
        if self.values != "exact":
            raise ValueError(f"{self!r}: exact_product is defined for values='exact' only")
        A, B = self.operands()
        return A.astype(np.int64) @ B.astype(np.int64)

    def expected_bits(self) -> np.ndarray:
        """The ``exact`` kind's answer: the exact int64 product rounded once to the dtype."""
        return dt.to_bits(self.exact_product().astype(np.float64), self.dt)


def _rounded(values: np.ndarray, d: dt.DType) -> np.ndarray:
    return dt.from_bits(dt.to_bits(values, d), d).astype(np.float64)


def _integers(rng, shape, r) -> np.ndarray:
    return rng.integers(-r, r + 1, size=shape).astype(np.float64)


def _nonzero(rng, r, size) -> np.ndarray:
    return rng.integers(1, r + 1, size=size) * rng.choice((-1, 1), size=size)


def _exact(p: Problem, rng_a, rng_b, rng_extra):
    r = exact_range(p.dt, p.K)
    A = _integers(rng_a, (p.M, p.K), r)
    B = _integers(rng_b, (p.K, p.N), r)
    # A nonzero in every row of A and every column of B, at a place fixed by the index.
    rows, cols = np.arange(p.M), np.arange(p.N)
    A[rows, rows % p.K] = _nonzero(rng_a, r, p.M)
    B[cols % p.K, cols] = _nonzero(rng_b, r, p.N)
    if not (A @ B).any():
        # Everything cancelled (tiny shapes only): change A[0, 0]. B[0, 0] is nonzero,
        # so C[0, 0] changes by a nonzero amount from 0.
        A[0, 0] = r if A[0, 0] != r else -r
    return A, B


def _normal(p: Problem, rng_a, rng_b, rng_extra):
    return (_rounded(rng_a.standard_normal((p.M, p.K)), p.dt),
            _rounded(rng_b.standard_normal((p.K, p.N)), p.dt))


def _uniform(p: Problem, rng_a, rng_b, rng_extra):
    return (_rounded(rng_a.uniform(-1.0, 1.0, (p.M, p.K)), p.dt),
            _rounded(rng_b.uniform(-1.0, 1.0, (p.K, p.N)), p.dt))


def _wide(p: Problem, rng_a, rng_b, rng_extra):
    E = wide_exponent(p.dt, p.K)

    def draw(rng, shape):
        magnitude = np.exp2(rng.uniform(-E, E, shape))
        return _rounded(rng.choice((-1.0, 1.0), shape) * magnitude, p.dt)
    return draw(rng_a, (p.M, p.K)), draw(rng_b, (p.K, p.N))


def _special(p: Problem, rng_a, rng_b, rng):
    A, B = _exact(p, rng_a, rng_b, rng)
    # About 10 % negative zeros in each operand.
    A[rng.random(A.shape) < 0.1] = -0.0
    B[rng.random(B.shape) < 0.1] = -0.0
    rows = rng.permutation(p.M)
    r_inf, r_nan, r_sub = rows[0], rows[min(1, p.M - 1)], rows[min(2, p.M - 1)]
    if p.M >= 3:
        # One row of A on the subnormals: n * smallest subnormal with |n| < 2^(p-1), so
        # every nonzero entry is subnormal; still exact in the accumulator (|n| <= r).
        s = min(exact_range(p.dt, p.K), 2 ** (p.dt.significand_bits - 1) - 1)
        n = rng.integers(-s, s + 1, size=p.K).astype(np.float64)
        n[rng.integers(p.K)] = _nonzero(rng, s, 1)[0]
        A[r_sub] = np.where(np.signbit(A[r_sub]) & (A[r_sub] == 0), -0.0, n)
        A[r_sub] *= float(finfo(p.dt).smallest_subnormal)
    k_inf, k_ninf = rng.integers(p.K), rng.integers(p.K)
    A[r_inf, k_inf] = np.inf
    B[k_inf, rng.integers(p.N)] = -0.0          # +Inf * -0.0 = NaN there
    B[k_ninf, rng.integers(p.N)] = -np.inf
    A[rng.integers(p.M), k_ninf] = 0.0          # 0 * -Inf = NaN there
    if p.M >= 2:
        A[r_nan, rng.integers(p.K)] = np.nan
    for X, keep_row in ((A, r_sub if p.M >= 3 else -1), (B, -1)):
        # At least one -0.0 per operand, even on tiny shapes: a zero already there, else
        # a finite entry outside the subnormal row.
        if not (np.signbit(X) & (X == 0)).any():
            rows_ok = np.arange(X.shape[0])[:, None] != keep_row
            zeros = np.argwhere((X == 0) & rows_ok)
            finite = np.argwhere(np.isfinite(X) & rows_ok)
            candidates = zeros if len(zeros) else finite
            if len(candidates):
                X[tuple(candidates[rng.integers(len(candidates))])] = -0.0
    return A, B


GENERATORS = {
    "exact": _exact,
    "normal": _normal,
    "uniform": _uniform,
    "wide": _wide,
    "special": _special,
}


# -- shapes derived from the kernel's own TILE (for fixed, readable test cases) ----------

def tile_shapes(tile: int) -> dict[str, tuple[int, int, int]]:
    """Named (M, N, K) shapes where tiled kernels break, derived from TILE.

    Ids stay the same for every TILE, so test ids read alike across instances.
    """
    t = tile
    return {
        "aligned": (2 * t, 2 * t, 2 * t),
        "one": (1, 1, 1),
        "tile+1": (t + 1, t + 1, t + 1),
        "tile-1": (max(1, t - 1), max(1, 2 * t - 1), max(1, t - 1)),
        "ragged": (2 * t + 1, t + 1, 3 * t + 2),
        "K1": (t + 1, 2 * t + 1, 1),
        "K-below-tile": (2 * t, 2 * t + 1, max(1, t // 2)),
        "skinny": (3 * t + 1, 1, t + 1),
        "wide": (1, 4 * t + 3, 2 * t + 1),
        "primes": (37, 41, 43),
    }


def claimed_shape(instance, M: int, N: int, K: int) -> tuple[int, int, int] | None:
    """(M, N, K) if `instance` claims it; else the nearest square TILE multiple it claims
    (for kernels that support only those); None if it claims neither."""
    if instance.supports(M, N, K):
        return M, N, K
    tile = instance.tile
    n = -(-max(M, N, K) // tile) * tile
    return (n, n, n) if instance.supports(n, n, n) else None
