"""A Problem is one GEMM to run: shape, dtype, what kind of values, and a seed.

Inputs are deterministic from the seed, with a separate random stream per
operand (numpy SeedSequence.spawn), so A of one problem never depends on how
much randomness B used. Every generator returns float64 matrices whose
values are already exactly representable in the dtype: what the kernel reads
is what the reference uses.

A problem computes C = alpha * A @ B + beta * C0 (BLAS's GEMM; alpha, beta
default to 1 and 0). A strided-batched problem (``batch`` > 1) is `batch` such products of one
shape, each product's operands from a seed of its own (product 0's are the unbatched problem's),
stacked along the rows: A is (batch M) x K, B (batch K) x N, C0 and C (batch M) x N, product b's
at rows b M .. (b + 1) M (b K for B). An operand named in ``broadcast`` (stride 0) is product 0's
in every product.

A grouped problem (``groups``: the rows of each group, a mixture-of-experts layer's tokens per
expert) is one product per group of its own rows of A and C against its own B (K x N): groups
may be empty or of one row. Contiguous (``masked`` false): the groups' rows follow one another,
M is their sum, and the kernel finds them through an offsets array (G + 1 prefix sums); masked:
each group has a slot of M rows of which the first groups[g] count, the rest is never to be read
or written. A, C0 and C are stacked by the groups' rows (the counted ones), B by group. Its `dtype` is a type for every operand
(gemmcheck.contract.operand_types: ``"float16"``, or ``"f16f16f32"``, or a record with scale
factors): A, B and C0 are made in their own types, and a kernel with scale factors gets them
from ``scale_operands()`` (D = alpha (sA A)(sB B) + beta C0). With beta = 0 there is no C0 and the kernel must not read
C (the BLAS convention: C's old contents may be anything, here a poison NaN).
With beta != 0, ``operands()`` also gives C0, chosen so that every correct
output element differs from C0 bit for bit: an element the kernel never wrote
still holds C0's bits and is seen as unwritten (the oracle checks the premise).

Value kinds:

- ``exact``: integers in [-r, r] (A, B and C0) with r =
  ``exact_range(dtype, K, alpha, beta)``, and integer alpha and beta, chosen so
  that every product and every partial sum, in any order, is exactly
  representable in the accumulator (see exact_range for the proof) and r
  itself in the input type (r <= 2^p_in; fp16 p = 11, bf16 p = 8). The result
  must also stay finite in the output type (65504 for float16). Any summation
  order then gives the same bits, and the one correct answer is the exact
  result rounded once to the output dtype. Every row of A and column of B
  holds a nonzero and the product is never all zero, so an all-zero output can
  never pass.
- ``normal``, ``uniform``: N(0, 1) and U(-1, 1), rounded to the dtype; judged
  against a forward error bound (gemmcheck.judge.oracle).
- ``wide``: random sign times 2^U(-E, E): values over many binades, with E
  chosen per dtype and K so that inputs stay normal and the output stays
  finite even if every product has the same sign.
- ``special``: the exact integers (C0 too; C0's rows opposite A's subnormal
  row on the same subnormal grid, so the sum stays exact), plus +Inf and NaN in A, -Inf in B, zeros
  placed so that Inf * 0 occurs (once with -0.0), about 10 % of entries -0.0,
  and one row of A scaled onto the dtype's subnormals (n * smallest
  subnormal, n an integer in [-r, r]): still exact in the accumulator, so the
  finite elements are judged bit for bit and a flush-to-zero shows.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

import numpy as np

from gemmcheck import arrays
from gemmcheck.contract import dtypes as dt
from gemmcheck.contract import operand_types
from gemmcheck.contract.epilogue import OUTPUT_SCALE as EPILOGUE_OUTPUT_SCALE
from gemmcheck.phases import timed

VALUE_KINDS = ("exact", "normal", "uniform", "wide", "special")
EXACT_KINDS = ("exact", "special")  # judged bit for bit


finfo = dt.finfo  # defined once, in gemmcheck.contract.dtypes
DEFAULT_SCALING = (1, 0)         # (alpha, beta): C = A @ B, C not read
BETA_SCALING = (2, -1)           # the pair claims also run at, for kernels that take alpha and beta


def scaling_id(alpha, beta) -> str:
    """The test-id part of (alpha, beta): ``alpha2-beta-1``."""
    return f"alpha{alpha:g}-beta{beta:g}"


def accumulator(dtype) -> dt.DType:
    """The DType partial sums are kept in (float32 for float16 and bfloat16)."""
    return operand_types.coerce(dtype).accumulator


def _integer(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise ValueError(f"{name}={value!r}: exact inputs need an integer {name}")
    return int(value)


# Exact scale factors are 2^e, e one of these: a power of two keeps every scaled product exact,
# and no 1, so a kernel that leaves a scale out (or applies one twice) changes the result.
EXACT_SCALE_EXPONENTS = (-1, 1, 2)
# A correct int32 result stays below this, far from int32's poison (dtypes: 0x7EADDEAD).
INTEGER_RESULT_LIMIT = 2 ** 30


def exact_range(dtype, K: int, alpha=1, beta=0) -> int:
    """The largest r such that integers in [-r, r] for A, B and C0 keep every sum exact.

    Proof. A kernel computes alpha * sum_k a_k b_k + beta * c in some order:
    products a_k b_k, possibly scaled first (alpha a_k, alpha a_k b_k) or last
    (alpha * sum), added to each other and to beta c (first, last or anywhere
    between). Every value it can form on the way is an integer: a sum of a
    subset of the terms {alpha a_k b_k} and {beta c}, a sum of a subset of
    {a_k b_k} (before alpha is applied), or one factor (|alpha a_k| <= |alpha| r).
    Each has magnitude <= |alpha| K r^2 + |beta| r (for |alpha| >= 1, which
    bounds the unscaled sums too; alpha = 0 gives K r^2 as the bound of those).
    An integer of magnitude <= 2^p is exact in a type of p significand bits, so
    if that bound is <= 2^p_acc every intermediate is exact in the accumulator,
    whatever the order and with or without FMA, and the result is the exact
    integer, rounded once when stored. Also required: r <= 2^p_in (A, B and C0
    hold r exactly) and the bound <= the output's largest finite value (the
    rounded result is finite). `alpha` and `beta` must be integers.

    Scale factors (2^e, e in EXACT_SCALE_EXPONENTS) make each scaled operand's values
    multiples of 2^-1 no larger than 2^2 r: counted in the finest step, 2^-n for n scaled
    operands, every value above is at most 8^n (|alpha| K r^2) + 2^n |beta| r, which must fit
    2^p_acc; its magnitude, 4^n |alpha| K r^2 + |beta| r, the output's range. An integer
    accumulator (int8 and uint8 inputs) holds every sum below INTEGER_RESULT_LIMIT; there r
    is bounded by the input types' own range (127 for int8, 255 for uint8); one whose sums are
    dequantized into a floating-point output converts them to float32 and scales them there, so
    its values must fit float32's 2^24 and D's range. A kernel that
    declares a saturating output conversion is bounded by its accumulator only: results past
    the output's range are judged as the largest finite value (and _exact makes one).

    A fused epilogue's bias and residual (integers in [-r, r] too) are two more terms of
    magnitude r, counted as beta is; relu and the output scale (1/2) only shrink a value.
    With fp8 tensor-core sums (types.sum_bits = b significant bits per k-step, gemmcheck.judge.oracle.
    bound), the unscaled integers a chain of L products of K forms are at most L r^2, every
    addend of a step at most that: L r^2 < 2^b keeps each a multiple of the step's cut.
    """
    types = operand_types.coerce(dtype)
    alpha, beta = abs(_integer("alpha", alpha)), abs(_integer("beta", beta)) + types.epilogue.added_terms
    if K < 0:
        raise ValueError(f"K={K} must be >= 0")
    acc, n = types.accumulator, len(types.scales)
    # integer sums dequantized into a float output go through float32 (types.arithmetic) on the way
    bits_limit = INTEGER_RESULT_LIMIT if acc.is_integer and not types.dequantizes else \
        2 ** types.arithmetic.significand_bits
    output_limit = bits_limit if types.saturate else int(types.D.largest)
    largest_scale, finest_step = 2.0 ** max(EXACT_SCALE_EXPONENTS), 2.0 ** min(EXACT_SCALE_EXPONENTS)
    spread = (largest_scale / finest_step) ** n
    scale = max(alpha, 1)
    input_limit = min(d.exact_limit for d in (types.A, types.B, types.C))

    def largest_r(magnitude_limit: int) -> int:
        def fits(r: int) -> bool:
            in_steps = spread * scale * K * r * r + beta * r / finest_step ** n
            magnitude = largest_scale ** n * scale * K * r * r + beta * r
            in_tensor_cores = not types.tensor_core_sums or types.chain_length(K) * r * r < 2 ** types.sum_bits
            return in_steps <= bits_limit and magnitude <= magnitude_limit and in_tensor_cores

        low, high = 0, min(input_limit, math.isqrt(magnitude_limit // K) if K else magnitude_limit)
        while low < high:                   # the largest r in [0, high] that fits
            mid = (low + high + 1) // 2
            low, high = (mid, high) if fits(mid) else (low, mid - 1)
        return low

    low = largest_r(min(INTEGER_RESULT_LIMIT if acc.is_integer and not types.dequantizes else output_limit,
                        bits_limit))
    if low < 1 and types.D.itemsize == 1:
        # An 8-bit float output holds so little (448) that at this K even r = 1 may pass it: then
        # results may overflow, judged as the output's conversion has it (Inf, NaN for e4m3,
        # the largest finite value when it saturates); the sums stay exact.
        low = largest_r(bits_limit)
    if low < 1:
        raise ValueError(f"K={K} (alpha={alpha}, beta={beta}) is too long for exact {types.name} "
                         f"inputs: even r = 1 exceeds 2^{acc.significand_bits}; "
                         f"use a smaller K, alpha or beta")
    return low


def wide_exponent(dtype, K: int, alpha=1, beta=0) -> float:
    """E for the ``wide`` kind: |values| in [2^-E, 2^E].

    Inputs stay normal (2^-E >= smallest normal), n 2^2E stays below half the
    output's largest finite value, with n = K for C = A @ B and
    n = |alpha| K (1 + 2 |beta|) with C0 (|C0| <= 2 |alpha| (|A||B|), see
    ``Problem.operands``), and E <= 16 keeps every product far from the
    accumulator's underflow and overflow thresholds. (Scale factors of the random kinds are
    below 2 each: 4^n more, for n scaled operands.)
    """
    types = operand_types.coerce(dtype)
    n = max(max(abs(alpha), 1) * K * (1 + 2 * abs(beta)), 1) * 4 ** len(types.scales)   # K = 0: no products
    by_input = min(-math.log2(d.smallest_normal) for d in (types.A, types.B))
    by_output = (math.log2(min(d.largest for d in (types.C, types.D))) - 1 - math.log2(n)) / 2
    return max(0.5, min(16.0, by_input, by_output))


@dataclass(frozen=True)
class Problem:
    """One GEMM: C[M x N] = alpha A[M x K] B[K x N] + beta C0 in `dtype`, values of one kind, from a seed.
    `dtype`: a dtype name, a combination (``"f16f16f32"``) or an operand_types record (kept
    as its spelling, so the repr rebuilds it)."""

    M: int
    N: int
    K: int
    dtype: str
    values: str = "exact"
    seed: int = 0
    alpha: float = 1
    beta: float = 0
    batch: int = 1                  # products in one launch (a strided batch)
    broadcast: str = ""             # the operands every product shares (stride 0): "", "A", "B"
    groups: tuple = ()              # a grouped GEMM's rows per group (empty: not grouped)
    masked: bool = False            # groups in slots of M rows, the rows past groups[g] masked

    def __post_init__(self):
        for name in ("M", "N", "K"):
            value = getattr(self, name)
            if type(value) is not int or value < 0:
                raise ValueError(f"Problem: {name}={value!r} must be a non-negative integer "
                                 f"(0 is BLAS's empty problem: M or N = 0 computes nothing, K = 0 gives beta C0)")
        types = operand_types.coerce(self.dtype)
        object.__setattr__(self, "dtype", types.spelling)
        if type(self.batch) is not int or self.batch < 1:
            raise ValueError(f"Problem: batch={self.batch!r} must be an integer >= 1 (1: one product)")
        if self.broadcast not in BROADCASTS:
            raise ValueError(f"Problem: broadcast={self.broadcast!r}; choose from {', '.join(map(repr, BROADCASTS))}")
        if self.groups or self.masked:
            object.__setattr__(self, "groups", tuple(self.groups))
            if not self.groups or any(type(g) is not int or g < 0 for g in self.groups):
                raise ValueError(f"Problem: groups={self.groups!r} must be rows per group, integers >= 0, "
                                 f"at least one group")
            if self.masked and max(self.groups) > self.M:
                raise ValueError(f"Problem: masked groups {self.groups!r} hold at most M={self.M} rows each")
            if not self.masked and sum(self.groups) != self.M:
                raise ValueError(f"Problem: groups {self.groups!r} of contiguous rows sum to {sum(self.groups)}, "
                                 f"not M={self.M}; M is the total of the groups' rows")
            if self.batch > 1 or types.scales or types.epilogue.spelling or self.values == "special":
                raise ValueError(f"Problem: groups with a batch, scale factors, an epilogue or the special kind "
                                 f"are not modelled; give groups alone")
        if self.batch > 1 and (unmodelled := operand_types.batch_not_modelled(types)):
            raise ValueError(f"Problem: batch={self.batch} with {unmodelled} ({types.spelling}) is not modelled; "
                             "use batch=1")
        if self.values not in VALUE_KINDS:
            raise ValueError(f"Problem: values={self.values!r}; choose from {', '.join(VALUE_KINDS)}")
        if self.values == "special" and 0 in (self.M, self.N, self.K):
            raise ValueError(f"Problem: values='special' places NaN and Inf in rows of A and columns "
                             f"of B; M={self.M}, N={self.N}, K={self.K} has none: use 'exact'")
        if self.values == "special" and special_values_missing(types):
            raise ValueError(f"Problem: values='special': {special_values_missing(types)}")
        if type(self.seed) is not int or self.seed < 0:
            raise ValueError(f"Problem: seed={self.seed!r} must be a non-negative integer")
        for name in ("alpha", "beta"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"Problem: {name}={value!r} must be a finite number")
            # the kernel may take it in any of its operands' types (T alpha) or the declared scalar's
            for d in dict.fromkeys((types.A, types.B, types.C, types.D, types.scalar)):
                if float(dt.from_bits(dt.to_bits(np.asarray([value], dtype=np.float64), d), d)[0]) != value:
                    raise ValueError(f"Problem: {name}={value!r} is not representable in {d.name}; "
                                     f"use a value the kernel can be passed exactly")
            if self.exact and value != int(value):
                raise ValueError(f"Problem: {name}={value!r}: values={self.values!r} is judged bit "
                                 f"for bit and needs an integer {name}")

    @property
    def id(self) -> str:
        """The shape, as test ids show it: ``M33xN17xK65``, ``M33xN17xK65-batch3-broadcastB``."""
        batch = f"-batch{self.batch}" if self.batch > 1 else ""
        groups = ("-masked" if self.masked else "") + \
            (f"-groups{'_'.join(map(str, self.groups))}" if self.groups else "")
        return f"M{self.M}xN{self.N}xK{self.K}{batch}" + (f"-broadcast{self.broadcast}" if self.broadcast else "") \
            + groups

    def flops(self) -> int:
        """Floating-point operations of the whole launch: 2 M N K per product, times batch; a
        grouped problem's 2 N K per counted row, summed over its groups (what the performance
        layer divides by the time)."""
        if self.groups:
            return 2 * sum(self.groups) * self.N * self.K
        return 2 * self.M * self.N * self.K * self.batch

    @property
    def rows_per_product(self) -> tuple[int, ...]:
        """The rows of A and C of each product, in the order they are stacked: M once, M per
        product of a batch, each group's (counted) rows."""
        return self.groups or (self.M,) * self.batch

    @property
    def scaled(self) -> bool:
        """Whether (alpha, beta) differ from (1, 0)."""
        return (self.alpha, self.beta) != DEFAULT_SCALING

    @property
    def reads_C(self) -> bool:
        """Whether the kernel must read C0 (beta != 0)."""
        return self.beta != 0

    @property
    def label(self) -> str:
        """Everything that makes the inputs: ``float16 normal M33xN17xK65 alpha 2 beta -1 seed 7``."""
        scaling = f" alpha {self.alpha:g} beta {self.beta:g}" if self.scaled else ""
        return f"{self.dtype} {self.values} {self.id}{scaling} seed {self.seed}"

    @property
    def batching(self) -> dict:
        """How the harness lays the problem out: GuardedGemm's `batch`, `broadcast`, `groups` and
        `masked` (a masked group's slot rows, M; 0 for contiguous groups)."""
        return {"batch": self.batch, "broadcast": self.broadcast, "groups": self.groups,
                "masked": self.M if self.masked else 0}

    @property
    def types(self) -> operand_types.OperandTypes:
        """Every operand's type (gemmcheck.contract.operand_types)."""
        return operand_types.of(self.dtype)

    @property
    def dt(self) -> dt.DType:
        """The one element type of a one-type problem (mixed ones: read `types`)."""
        if not self.types.uniform:
            raise TypeError(f"{self!r}: a type per operand; read Problem.types")
        return self.types.A

    @property
    def exact(self) -> bool:
        """Whether the result is judged bit for bit (exact and special kinds)."""
        return self.values in EXACT_KINDS

    def __repr__(self) -> str:
        scaling = f", alpha={self.alpha!r}, beta={self.beta!r}" if self.scaled else ""
        batch = (f", batch={self.batch}" if self.batch > 1 else "") + \
            (f", broadcast={self.broadcast!r}" if self.broadcast else "") + \
            (f", groups={self.groups!r}" if self.groups else "") + (", masked=True" if self.masked else "")
        return (f"Problem(M={self.M}, N={self.N}, K={self.K}, dtype={self.dtype!r}, "
                f"values={self.values!r}, seed={self.seed}{scaling}{batch})")

    @timed("inputs")
    def operands(self) -> tuple[np.ndarray, ...]:
        """(A, B), and C0 when beta != 0, as float64 arrays of values exactly representable
        in the dtype. One random stream per operand (C0 has its own fourth stream, so
        problems at (1, 0) keep the inputs they always had). A large problem's operands
        (SHARED_ELEMENTS) are made once and shared, read-only (_shared_operands)."""
        if len(self.rows_per_product) * (self.M * self.K + self.K * self.N) >= SHARED_ELEMENTS:
            return _shared_operands(self)
        return self.make_operands()

    def make_operands(self) -> tuple[np.ndarray, ...]:
        """operands(), made afresh and writable, never shared (the performance suite's input
        sets hold gigabytes of their own at N = 8192 and release them). A batch's products each
        from a seed sequence of their own ((seed, b); product 0's is the seed's), a broadcast
        operand product 0's in all, stacked along the rows."""
        if self.groups:
            groups = [replace(self, M=rows, groups=(), masked=False)._product_operands(
                np.random.SeedSequence([self.seed, g]), {}) for g, rows in enumerate(self.groups)]
            return tuple(np.concatenate(parts) for parts in zip(*groups))
        first = self._product_operands(np.random.SeedSequence(self.seed), {})
        if self.batch == 1:
            return first
        shared = {name: X for name, X in zip("AB", first) if name in self.broadcast}
        products = [first] + [self._product_operands(np.random.SeedSequence([self.seed, b]), shared)
                              for b in range(1, self.batch)]
        return tuple(np.concatenate(parts) for parts in zip(*products))

    def _product_operands(self, sequence, shared: dict) -> tuple[np.ndarray, ...]:
        """(A, B[, C0]) of one product from its seed sequence; `shared`: operands given (a
        broadcast one), which C0 is then chosen against."""
        streams = [np.random.default_rng(s) for s in sequence.spawn(4)]
        A, B = GENERATORS[_kind(self)](self, *streams[:3])
        A, B = shared.get("A", A), shared.get("B", B)
        if not self.reads_C:
            return A, B
        return A, B, _initial_C(self, A, B, streams[3])

    def scale_operands(self) -> dict[str, np.ndarray]:
        """The scale factors of each scaled operand, by role (``{"scale_A": ...}``; none for a
        kernel without them), as float64 values of the scale's type, shaped as the scale matrix
        (operand_types.Scale.shape). Exact kinds: powers of two (EXACT_SCALE_EXPONENTS), a
        per-tensor pair never multiplying to 1; random kinds: uniform in [1/2, 2). Streams of
        their own (the fifth and sixth), so A, B and C0 stay what they were."""
        types = self.types
        if not types.scales:
            return {}
        streams = np.random.SeedSequence(self.seed).spawn(4 + len(operand_types.SCALED))
        out = {}
        for scale in types.scales:
            rng = np.random.default_rng(streams[4 + operand_types.SCALED.index(scale.operand)])
            shape = scale.shape(*((self.M, self.K) if scale.operand == "A" else (self.K, self.N)))
            if self.exact:
                values = np.exp2(rng.choice(EXACT_SCALE_EXPONENTS, shape)).astype(np.float64)
            else:
                values = dt.round_draws(rng.uniform(0.5, 2.0, shape), scale.type)
            out[scale.role] = values
        if self.exact and len(out) == 2 and all(v.size == 1 for v in out.values()) \
                and float(out["scale_A"].item() * out["scale_B"].item()) == 1.0:
            out["scale_B"] = out["scale_A"].copy()   # (1/2, 2) or (2, 1/2): now (1/2, 1/2) or (2, 2)
        return out

    def epilogue_operands(self) -> dict:
        """A fused epilogue's inputs by role (none for a kernel without one): the bias (a vector
        of M or N values, in its type), the residual (M x N, C's type), as float64 values of
        their types, and the output scale (epilogue.OUTPUT_SCALE). Exact kinds: integers in
        [-r, r] (exact_range counts them); random kinds: N(0, 1). Streams of their own (the
        seventh and eighth), so A, B, C0 and the scale factors stay what they were."""
        epilogue, types = self.types.epilogue, self.types
        if not epilogue.roles:
            return {}
        streams = np.random.SeedSequence(self.seed).spawn(8)
        r = exact_range(types, self.K, self.alpha, self.beta) if self.exact else 0

        def draw(stream, shape, d):
            rng = np.random.default_rng(stream)
            return _integers(rng, shape, r, d) if self.exact else dt.round_draws(rng.standard_normal(shape), d)
        out = {}
        if epilogue.bias:
            out["bias"] = draw(streams[6], self.M if epilogue.bias == "row" else self.N, types.of("bias"))
        if epilogue.residual:
            out["residual"] = draw(streams[7], (self.M, self.N), types.of("residual"))
        if epilogue.output_scale:
            out["output_scale"] = EPILOGUE_OUTPUT_SCALE
        return out

    def exact_product(self) -> np.ndarray:
        """The exact result alpha A @ B + beta C0 of the ``exact`` kind's integers, as int64."""
        if self.values != "exact":
            raise ValueError(f"{self!r}: exact_product is defined for values='exact' only")
        A, B, *C0 = self.operands()
        P = int(self.alpha) * stacked_matmul(A.astype(np.int64), B.astype(np.int64), self.rows_per_product)
        return P + int(self.beta) * C0[0].astype(np.int64) if C0 else P

    def expected_bits(self) -> np.ndarray:
        """The ``exact`` kind's answer: the exact int64 result rounded once to the dtype."""
        types = self.types
        if types.scales:
            raise ValueError(f"{self!r}: expected_bits is defined for kernels without scale factors")
        return dt.to_bits(self.exact_product().astype(np.float64), types.D, saturate=types.saturate)


BROADCASTS = ("", "A", "B")   # Problem.broadcast: no operand, or A or B shared by every product


def stacked_matmul(A, B, rows: tuple[int, ...]):
    """The products of a batch or of groups stacked along the rows (Problem's layout): A's rows
    split by `rows` (each product's), B's into len(rows) equal blocks of K, product by product."""
    if len(rows) == 1:
        return A @ B
    K = B.shape[0] // len(rows)
    return np.concatenate([a @ B[p * K:(p + 1) * K] for p, a in enumerate(split_rows(A, rows))])


def group_table(groups: tuple[int, ...], masked: bool) -> tuple[str, np.ndarray]:
    """(role, values) of a grouped kernel's table: each group's row count (group_counts, masked
    slots) or the offsets of its first row, the total last (group_offsets, contiguous rows)."""
    if masked:
        return "group_counts", np.asarray(groups, dtype=np.int64)
    return "group_offsets", np.cumsum((0, *groups), dtype=np.int64)


def split_rows(X, rows: tuple[int, ...]) -> list:
    """X's rows split into consecutive pieces of `rows` each (a stacked operand's products)."""
    edges = np.cumsum((0, *rows))
    return [X[edges[p]:edges[p + 1]] for p in range(len(rows))]


def product_rows(X, b: int, batch: int):
    """Product b's rows of a batch's stacked operand or output (batch equal pieces)."""
    rows = X.shape[0] // batch
    return X[b * rows:(b + 1) * rows]


# A and B elements from which a problem's operands are shared: every kernel of a dtype is checked
# on the same large problems (the nightly's 4097 x 4095 x 4160, ~0.5 s to draw on the H200's host,
# again for each of ~10 instantiations; the kill matrix's race sizes, ~6 launches a problem).
SHARED_ELEMENTS = 1 << 21


@functools.lru_cache(maxsize=4)   # one large problem per dtype: tests run instantiation by instantiation
def _shared_operands(problem: Problem) -> tuple[np.ndarray, ...]:
    operands = problem.make_operands()
    for X in operands:
        X.setflags(write=False)   # shared by every test of the problem: none may change them
    return operands


def _integers(rng, shape, r, d: dt.DType | None = None) -> np.ndarray:
    """Integers in [-r, r] ([0, r] for an unsigned type `d`) as float64."""
    low = 0 if d is not None and d.smallest == 0 else -r
    return rng.integers(low, r + 1, size=shape).astype(np.float64)


def _nonzero(rng, r, size, d: dt.DType | None = None) -> np.ndarray:
    signs = (1,) if d is not None and d.smallest == 0 else (-1, 1)
    return rng.integers(1, r + 1, size=size) * rng.choice(signs, size=size)


def _kind(p: Problem) -> str:
    """The generator a problem's values use: integer inputs are integers whatever the kind (over
    the range exact_range allows: an int8's whole range for any K the profiles draw)."""
    return "exact" if p.types.inputs_integer and p.values in ("normal", "uniform", "wide") else p.values


def _exact(p: Problem, rng_a, rng_b, rng_extra):
    types = p.types
    r = exact_range(types, p.K, p.alpha, p.beta)
    A = _integers(rng_a, (p.M, p.K), r, types.A)
    B = _integers(rng_b, (p.K, p.N), r, types.B)
    if 0 in (p.M, p.N, p.K):
        return A, B   # an empty product: K = 0 gives beta C0, M or N = 0 nothing at all
    # A nonzero in every row of A and every column of B, at a place fixed by the index.
    rows, cols = np.arange(p.M), np.arange(p.N)
    A[rows, rows % p.K] = _nonzero(rng_a, r, p.M, types.A)
    B[cols % p.K, cols] = _nonzero(rng_b, r, p.N, types.B)
    # C[0, 0] != 0 settles it in K steps; else the whole product (a float64 product of
    # 4097 x 4095 x 4160 costs a third of a second on 16 cores).
    if A[0] @ B[:, 0] == 0 and not (A @ B).any():
        # Everything cancelled (tiny shapes only): change A[0, 0]. B[0, 0] is nonzero,
        # so C[0, 0] changes by a nonzero amount from 0.
        A[0, 0] = r if A[0, 0] != r else -r
    if types.saturate:
        # C[0, 0] = K r^2 (times the scales): past the output's range at all but the smallest
        # K, so the saturating conversion is exercised wherever it can be
        A[0, :], B[:, 0] = r, r
    return A, B


def _normal(p: Problem, rng_a, rng_b, rng_extra):
    types = p.types
    return (dt.round_draws(rng_a.standard_normal((p.M, p.K)), types.A),
            dt.round_draws(rng_b.standard_normal((p.K, p.N)), types.B))


def _uniform(p: Problem, rng_a, rng_b, rng_extra):
    types = p.types
    return (dt.round_draws(rng_a.uniform(-1.0, 1.0, (p.M, p.K)), types.A),
            dt.round_draws(rng_b.uniform(-1.0, 1.0, (p.K, p.N)), types.B))


def _wide(p: Problem, rng_a, rng_b, rng_extra):
    types = p.types
    E = wide_exponent(types, p.K, p.alpha, p.beta)

    def draw(rng, shape, d):
        magnitude = np.exp2(rng.uniform(-E, E, shape))
        return dt.round_draws(rng.choice((-1.0, 1.0), shape) * magnitude, d)
    return draw(rng_a, (p.M, p.K), types.A), draw(rng_b, (p.K, p.N), types.B)


def special_values_missing(types) -> str | None:
    """Why the ``special`` kind cannot be made in these input types (None: it can): it puts
    +-Inf and NaN in A and B (whose path through a fused epilogue's activation IEEE does not
    fix: relu as fmaxf(x, 0) turns NaN into 0)."""
    if types.epilogue.activation:
        return (f"a fused epilogue ({types.epilogue.describe()}): what its activation makes of NaN and Inf "
                "is the kernel's choice; judged on the other kinds")
    missing = [d.name for d in (types.A, types.B) if not d.has_inf]
    if missing:
        return (f"{' and '.join(dict.fromkeys(missing))} hold no Inf (the special kind puts +-Inf and NaN in A "
                "and B); its NaN and saturation rules are judged by the oracle's rounding on the other kinds")
    return None


def _special(p: Problem, rng_a, rng_b, rng):
    A, B = _exact(p, rng_a, rng_b, rng)
    d = p.types.A
    # About 10 % negative zeros in each operand.
    A[rng.random(A.shape) < 0.1] = -0.0
    B[rng.random(B.shape) < 0.1] = -0.0
    rows = rng.permutation(p.M)
    r_inf, r_nan, r_sub = rows[0], rows[min(1, p.M - 1)], rows[min(2, p.M - 1)]
    if p.M >= 3:
        # One row of A on the subnormals: n * smallest subnormal with |n| < 2^(p-1), so
        # every nonzero entry is subnormal; still exact in the accumulator (|n| <= r).
        s = min(exact_range(p.types, p.K, p.alpha, p.beta), 2 ** (d.significand_bits - 1) - 1)
        n = rng.integers(-s, s + 1, size=p.K).astype(np.float64)
        n[rng.integers(p.K)] = _nonzero(rng, s, 1)[0]
        A[r_sub] = np.where(np.signbit(A[r_sub]) & (A[r_sub] == 0), -0.0, n)
        A[r_sub] *= d.smallest_subnormal
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


def scaled_operands(types, A, B, scales: dict):
    """(sA A, sB B): A and B with every element multiplied by its scale factor (Scale.expanded),
    on their array module; A and B themselves when there are no scales."""
    xp = arrays.module_of(A)
    out = []
    for name, X in (("A", A), ("B", B)):
        scale = types.scale(name)
        if scale is not None and X.size:
            X = X * scale.expanded(xp.asarray(scales[scale.role], dtype=xp.float64), *X.shape)
        out.append(X)
    return tuple(out)


def _initial_C(p: Problem, A: np.ndarray, B: np.ndarray, rng) -> np.ndarray:
    """C0 for beta != 0, such that every correct result element differs from C0.

    Exact kinds: integers in [-r, r] (on A's subnormal grid in rows of A that are
    subnormal, so the sum stays exact); where the exact result, rounded, would
    equal C0 the element moves by one step, which changes the result by beta steps
    and C0 by one (so the two part unless beta = 1). Random kinds: the sign makes
    (beta - 1) C0 agree with alpha A @ B, so C_ref - C0 = alpha A@B + (beta - 1) C0
    has magnitude >= |beta - 1| |C0|, and |C0| = |alpha| (|A||B|) U(1, 2) keeps that
    far above the error bound (terms of |alpha||A||B| and |beta||C0| times K u).
    (A and B with their scale factors, when the kernel takes them.)
    """
    types = p.types
    d, out = types.C, types.D
    finite_A, finite_B = scaled_operands(types, arrays.finite_part(A), arrays.finite_part(B), p.scale_operands())
    product = p.alpha * (finite_A @ finite_B)
    if not p.exact:
        magnitude = abs(p.alpha) * (np.abs(finite_A) @ np.abs(finite_B)) * rng.uniform(1, 2, product.shape)
        sign = np.where(product * (p.beta - 1) < 0, -1.0, 1.0)
        return dt.round_draws(sign * np.where(magnitude > 0, magnitude, 1.0), d)
    r = exact_range(types, p.K, p.alpha, p.beta)
    C0 = _integers(rng, (p.M, p.N), r, d)
    step = np.ones((p.M, 1))
    subnormal_rows = (np.abs(finite_A) < types.A.smallest_normal).all(axis=1) & (finite_A != 0).any(axis=1)
    step[subnormal_rows] = types.A.smallest_subnormal
    C0 *= step

    def unchanged(i, j, c):  # the correct result, stored, equals C0 (both zeros count as one)
        result = product[i, j] + p.beta * c
        return (result == c) | (dt.from_bits(dt.to_bits(np.asarray(result), out), out).astype(np.float64) == c)
    for i, j in np.argwhere(unchanged(np.arange(p.M)[:, None], np.arange(p.N), C0)):
        for c in (C0[i, j] + step[i, 0], C0[i, j] - step[i, 0]):
            if abs(c) <= r * step[i, 0] and not unchanged(i, j, c):
                C0[i, j] = c
                break
    return C0


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


def claimed_roundings(instance, M: int, N: int, K: int):
    """The shapes `instance` claims among (M, N, K) with each size kept or rounded up to a
    power-of-two multiple (2 to 512): where a per-dimension claim (K % 8 == 0, M % BM == 0)
    moves a shape it does not claim."""
    def ups(v):
        return sorted({v, *(-(-v // m) * m for m in (2 ** e for e in range(1, 10)))})
    return [(m, n, k) for m in ups(M) for n in ups(N) for k in ups(K) if instance.supports(m, n, k)]


def claimed_shape(instance, M: int, N: int, K: int) -> tuple[int, int, int] | None:
    """(M, N, K) if `instance` claims it; else the nearest square TILE multiple it claims
    (for kernels that support only those); else the smallest shape at or above (M, N, K) with
    each size rounded up to a power-of-two multiple (a claim such as M % BM == 0 and
    N % BN == 0 with BM != BN); None if it claims none of these."""
    if instance.supports(M, N, K):
        return M, N, K
    if instance.spec.sizes is not None:
        return instance.spec.sizes    # the one shape a kernel with its sizes compiled in computes
    tile = instance.tile
    n = -(-max(M, N, K) // tile) * tile
    if instance.supports(n, n, n):
        return n, n, n
    claimed = [(m * n_ * k, (m, n_, k)) for m, n_, k in claimed_roundings(instance, M, N, K)]
    return min(claimed)[1] if claimed else None
