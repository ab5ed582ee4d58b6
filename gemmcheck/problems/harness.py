"""Run one GEMM the way gemmcheck watches it: guarded buffers, poisoned output.

Every operand sits in one flat buffer between two guard bands filled with a
payloaded quiet NaN (dtypes.DType.guard_bits). An out-of-bounds read pulls
that NaN into a result; an out-of-bounds write changes a guard's bits. C is
filled with another payloaded NaN (poison_bits) before each launch. An element
whose bits still equal the poison after it *may* never have been written: a
quiet NaN's payload survives arithmetic (NaN + x keeps it, on the CPU and in a
GPU's float64), so an element computed from stale shared memory that held the
poison holds the poison too. It is called never written only when C is
launched again filled with a second poison (confirming_poison) and the element
then holds that one (never_written: Run.unwritten, which every detector and the
oracle read); D likewise, for a kernel that writes one. Bits, not values, are compared: NaN == NaN is False, and a
payload is evidence.

Operands are laid out as the kernel's catalog entry says: row- or
column-major per operand (``spec.layouts``), with a leading dimension that is
tight (ld == width) or padded (ld > width, for kernels that take ld roles).
The padding between lines is filled with the guard pattern too: a kernel that
assumes ld == width reads it (NaN in its result) or writes it (guard damage).

C = alpha A @ B + beta C0. With beta == 0, C starts as poison and the kernel
must not read it (BLAS); with beta != 0, C starts as C0, which the problem
chose so that every correct element changes: an element still holding C0's
bits was never written. A kernel that declares the convention
``reads_c_at_beta_zero = true`` (its callers always initialize C) gets C
filled with finite garbage at beta == 0 instead (``c_fill="finite"``: random
values near the dtype's largest, which no correct result here comes near, so
an element still holding them was never written).

A kernel that writes a separate D (its catalog lists the role D) gets D poisoned and guarded
at every launch, and C is an input then: read only when beta != 0 (poison, or finite garbage,
at beta == 0), compared after the launch like A and B (a write into it is input mutation). A
kernel declaring ``d_aliases_c`` also runs in place (``in_place=True``: D is C's buffer, as for a
kernel that writes over C). Scale factors (``scale_A``, ``scale_B``) sit in guarded buffers of
their own, inputs too; one a kernel takes by value is passed as the number.

Scratch memory (``workspace``, ``semaphores``: a split-K or stream-K kernel's partial sums and
arrival counters) is raw bytes of the size the catalog's ``scratch`` gives, in a guarded buffer of
its own: reset before every launch as its callers leave it (zeros, or all-ones bytes, a NaN or -1
whatever the kernel reads them as, where ``scratch_zeroed = false`` says it needs nothing of them),
and judged by its guards only (its contents are the kernel's own business).

BLAS's degenerate sizes: M == 0 or N == 0 launches nothing (a zero grid is a
launch error; BLAS returns at once) and C is left as it was; K == 0 launches
as usual and a correct kernel writes beta C0 (zeros at beta == 0). An empty
operand keeps a leading dimension of at least 1, as BLAS requires.

A strided batch (``batch`` > 1, for a kernel that takes the role ``batch``): every operand holds
its products one after another, stride_X = its matrix's span plus a gap of guard pattern as long
as a guard band, so a product that strays into its neighbour's place writes a gap first, named
with both batch indices ("C's guards between batch 0 and batch 1"); an operand every product
shares (``broadcast``) is stored once and passed with stride 0. The operands and the output are
stacked along the rows (gemmcheck.problems.problem: product b's rows b M .. (b + 1) M).
An operand the kernel takes no stride_X (nor X_array) for, it finds itself (``A + b * M * K``):
its products are packed, with no band between them, and it is never broadcast.
A pointer-array batch (a kernel that takes A_array ... D_array, as cuBLAS's gemmBatched) stores
its products the same way and passes, for each such operand, an array of one pointer per
product (a broadcast operand: the same pointer every time), in a guarded buffer of its own whose
guard pattern is an address that faults (POINTER_GUARD_BITS); the arrays are written afresh for
every launch (the output's buffer is a new one each run), inputs like A.
A grouped GEMM (a kernel that takes group_offsets or group_counts) is laid out alike: B one
K x N block per group (a guard band apart where the kernel takes stride_B), A and C the groups'
rows one after another with their offsets, or in masked slots of M rows with their counts,
whose rows past a group's count hold the guard pattern in the output (a write there named with
its group) and ones in A. A kernel given one product runs batch 1, or one group of every row.

A GuardedGemm is built once per problem (initialize) and launched as often
as a detector needs (run); each run returns a Run with what it saw.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gemmcheck.contract import dtypes as dt
from gemmcheck.contract import launch
from gemmcheck.backends import Backend, KernelLaunchError
from gemmcheck.contract.catalog import Instance
from gemmcheck.phases import timed
from gemmcheck.problems.problem import BETA_SCALING, DEFAULT_SCALING, Problem, group_table, product_rows, scaling_id

MIN_GUARD = 1024
LEADING_DIMENSIONS = ("tight", "padded")
LD_ROLES = {"A": "lda", "B": "ldb", "C": "ldc", "D": "ldd"}
OPERAND_NAMES = ("A", "B", "C", "D")
STRIDE_ROLES = {"A": "stride_A", "B": "stride_B", "C": "stride_C", "D": "stride_D"}
C_FILLS = ("default", "poison", "finite", "zeros")   # what C holds before a launch at beta == 0
# What surrounds an array of pointers: an address that faults wherever it is dereferenced (not
# canonical on x86-64, outside every GPU allocation), so a product index past the batch crashes
# the kernel, as a caller's array would leave it to.
POINTER_GUARD_BITS = 0xDEADBEEF_DEADBEE0
# Around scratch memory: a byte neither of its fills is (0x00 zeroed, 0xFF not), so a stray store
# of zeros or of all-ones bits shows.
SCRATCH_GUARD_BYTE = 0x5A
# Scratch memory its callers do not zero (scratch_zeroed = false): all-ones bytes, a NaN as any
# float type and -1 as any integer, so a kernel that counts or sums from zero there goes wrong.
SCRATCH_GARBAGE_BYTE = 0xFF


def scratch_guard(guard: int, size: int) -> int:
    """The guard band around scratch memory of `size` bytes, in bytes, where operands get
    `guard` elements (0: exact-size buffers, for compute-sanitizer): 16 bytes for each of those
    elements, or the buffer's own size where that is longer. Wider than an operand's: float
    partial sums whose lines are padded to whole tiles overrun by up to SPLITS x M x (TILE - 1)
    elements (240 M bytes at 4 slices of 16), where an operand's band is TILE x M elements."""
    return 0 if guard == 0 else -(-max(16 * guard, size) // 16) * 16


def scratch_fill(spec) -> int:
    """The byte scratch memory holds before every launch, as its callers leave it."""
    return 0 if spec.scratch_zeroed else SCRATCH_GARBAGE_BYTE


def product_pointers(base: int, step: int, count: int) -> np.ndarray:
    """An array of pointers (a pointer-array batch's): `count` addresses `step` bytes apart from
    `base` (step 0: the same matrix for every product), as 64-bit values."""
    return np.array([base + b * step for b in range(count)], dtype=np.uint64)


def takes_leading_dimensions(spec) -> bool:
    """Whether the kernel is passed lda, ldb, ldc (else they can only be tight)."""
    return any(role in spec.roles for role in LD_ROLES.values())


def padded_leading_dimension(width: int) -> int:
    """A leading dimension > width: the next multiple of 8 above it. Always padded (a kernel
    that assumes ld == width is caught); a multiple of 8 keeps every line 16-byte aligned
    for 2-byte types, so kernels with vector loads that need aligned lines can claim it."""
    return (width // 8 + 1) * 8


@dataclass(frozen=True)
class OperandVariant:
    """How the operands are passed, beyond the problem's values: tight or padded leading
    dimensions, and (alpha, beta). The claims run at every variant a kernel takes."""

    leading_dimensions: str
    alpha: float
    beta: float

    @property
    def id(self) -> str:
        """As test ids show it: ``padded-alpha2-beta-1``."""
        return f"{self.leading_dimensions}-{scaling_id(self.alpha, self.beta)}"

    def fitted(self, spec) -> "OperandVariant":
        """The variant as a kernel takes it: alpha and beta only where it takes them, so a kernel
        with alpha and no beta runs at alpha 2 (never only at alpha 1)."""
        roles = spec.roles
        return OperandVariant(self.leading_dimensions, self.alpha if "alpha" in roles else DEFAULT_SCALING[0],
                              self.beta if "beta" in roles else DEFAULT_SCALING[1])

    def why_not(self, spec) -> str | None:
        """Why the kernel cannot be run this way (None if it can)."""
        roles = spec.roles
        if self.leading_dimensions == "padded" and not takes_leading_dimensions(spec):
            return f"{spec.name} takes no lda/ldb/ldc: padded leading dimensions do not apply"
        for role, value, neutral in (("alpha", self.alpha, 1), ("beta", self.beta, 0)):
            if value != neutral and role not in roles:
                return f"{spec.name} takes no {role}: {role} = {value:g} does not apply"
        return None


OPERAND_VARIANTS = tuple(OperandVariant(ld, *scaling) for ld in LEADING_DIMENSIONS
                         for scaling in (DEFAULT_SCALING, BETA_SCALING))


def operand_variants(spec) -> tuple[OperandVariant, ...]:
    """The variants the kernel can take, each as it takes it (OperandVariant.fitted; tight at
    (1, 0) always)."""
    return tuple(dict.fromkeys(f for v in OPERAND_VARIANTS if (f := v.fitted(spec)).why_not(spec) is None))


def fitted_variant(spec, variant: OperandVariant) -> tuple[OperandVariant | None, str | None]:
    """(the variant as the kernel takes it, None), or (None, why it adds nothing: a padded ld
    it cannot take, or no alpha or beta to vary, so it is a variant before it)."""
    fitted = variant.fitted(spec)
    why = fitted.why_not(spec)
    if why:
        return None, why
    earlier = next((v for v in OPERAND_VARIANTS[:OPERAND_VARIANTS.index(variant)] if v.fitted(spec) == fitted), None)
    if earlier is not None:
        return None, f"{spec.name} takes no alpha or beta to vary: as it takes them, this is variant {earlier.id}"
    return fitted, None


def takes_operand_variants(instance) -> bool:
    """Whether the kernel takes any variant beyond tight leading dimensions at (1, 0)."""
    return len(operand_variants(instance.spec)) > 1


def guard_elements(M: int, N: int, K: int, tile: int) -> int:
    """Guard band length: enough that any read a TILE-rounded index can make lands in it.

    A kernel that rounds the grid up but forgets its load guards reads up to
    TILE rows (of K or N elements) plus TILE past the end of an operand.
    """
    # A whole number of 16 elements: every matrix then starts 16-byte aligned in its buffer,
    # as a caller's allocation does (TMA tensor maps and vector loads require it).
    return -(-max(MIN_GUARD, tile * max(M, N, K) + 2 * tile) // 16) * 16


@dataclass
class GuardedBuffer:
    """A rows x cols matrix laid out as [guard | lines of ld elements | guard] in one flat
    allocation; a line is a row (layout 'row') or a column ('col'), and the ld - width
    elements that end each line are padding, filled with the guard pattern."""

    name: str
    rows: int
    cols: int
    guard: int
    bits: np.ndarray          # host copy: the whole flat buffer as it was uploaded
    device: object = None     # the backend's buffer
    pristine: object = None   # the backend's copy of the buffer as uploaded, never launched on
    layout: str = "row"
    ld: int = 0               # elements from one line to the next; 0: tight
    copies: int = 1           # matrices stored one after another (a strided batch's products)
    batch_stride: int = 0     # elements from one stored matrix's first element to the next's
    valid: tuple = ()         # rows that count in each stored matrix (masked groups); (): all
    unit: str = "batch"       # what a stored matrix is called in a damage's place: "batch", "group"

    def __post_init__(self):
        self.ld = self.ld or max(self.width, 1)   # BLAS: ld >= max(1, width), also for an empty matrix
        if self.ld < self.width:
            raise ValueError(f"{self.name}: leading dimension {self.ld} < width {self.width} "
                             f"({self.rows} x {self.cols}, {self.layout}-major)")

    @property
    def lines(self) -> int:
        return self.rows if self.layout == "row" else self.cols

    @property
    def width(self) -> int:
        return self.cols if self.layout == "row" else self.rows

    @property
    def size(self) -> int:
        return self.rows * self.cols

    @property
    def span(self) -> int:
        """Elements from the (first) matrix's first element to the end of the last one's last line."""
        return (self.copies - 1) * self.batch_stride + self.lines * self.ld

    def inner(self):
        """The device view of the matrix itself (what the kernel gets a pointer to)."""
        if self.guard == 0 and self.span == len(self.bits):
            return self.device  # exact-size: the allocation itself, nothing around it
        return self.device[self.guard:self.guard + self.span]

    def _stored(self, flat: np.ndarray) -> np.ndarray:
        return flat[self.guard:self.guard + self.span].reshape(self.lines, self.ld)

    def matrix(self, flat: np.ndarray) -> np.ndarray:
        """The rows x cols matrix of a flat host array of this layout (a view); a batch's
        matrices stacked along the rows ((copies rows) x cols, a copy)."""
        if self.valid:
            return np.concatenate([m[:v] for m, v in zip(self.matrices(flat), self.valid)])
        if self.copies > 1:
            return self.matrices(flat).reshape(self.copies * self.rows, self.cols)
        lines = self._stored(flat)[:, :self.width]
        return lines if self.layout == "row" else lines.T

    def matrices(self, flat: np.ndarray) -> np.ndarray:
        """copies x rows x cols: every stored matrix of a flat host array (a view, writable)."""
        item = flat.itemsize
        lines = np.lib.stride_tricks.as_strided(
            flat[self.guard:], shape=(self.copies, self.lines, self.width),
            strides=(self.batch_stride * item, self.ld * item, item))
        return lines if self.layout == "row" else lines.transpose(0, 2, 1)

    def fill(self, flat: np.ndarray, values) -> None:
        """Write `values` (rows x cols, a batch's stacked along the rows, or one value) into `flat`."""
        values = np.asarray(values)
        if self.valid:
            edges = np.cumsum((0, *self.valid))
            for m, v, start in zip(self.matrices(flat), self.valid, edges):
                m[:v] = values if values.ndim == 0 else values[start:start + v]
            return
        self.matrices(flat)[...] = values if values.ndim == 0 else values.reshape(self.copies, self.rows, self.cols)

    def guard_cells(self, flat: np.ndarray) -> np.ndarray:
        """Every element that must keep the guard pattern: both bands, the padding, the gaps
        between a batch's matrices."""
        if self.copies > 1 or self.valid:
            return flat[self._guard_mask(len(flat))]
        g = self.guard
        padding = self._stored(flat)[:, self.width:].reshape(-1)
        return np.concatenate([flat[:g], padding, flat[g + self.span:]])

    def _guard_mask(self, length: int) -> np.ndarray:
        mask = np.ones(length, dtype=bool)
        self.fill(mask, False)
        return mask

    def damage(self, now: np.ndarray) -> dict[str, int]:
        """Guard elements `now` changed from the buffer as uploaded, by where: the buffer's name
        for its bands and padding, and (a batch) "C, between batch b and batch b + 1" for the
        gap between two products' matrices, where a product that strays into its neighbour's
        place writes first."""
        if self.copies == 1 and not self.valid:
            return {self.name: int(np.count_nonzero(self.guard_cells(now) != self.guard_cells(self.bits)))}
        changed = (now != self.bits) & self._guard_mask(len(now))
        out, in_gaps = {}, 0
        for b in range(self.copies):
            # past product b's counted rows (a masked group's tail) up to the next one's start
            start = self.guard + b * self.batch_stride + (self.valid[b] if self.valid else self.lines) * self.ld
            end = self.guard + (b + 1) * self.batch_stride if b + 1 < self.copies else self.guard + self.span
            n = int(np.count_nonzero(changed[start:end]))
            if n:
                out[gap_name(self.name, b, self.unit)] = n
                in_gaps += n
        return {self.name: int(np.count_nonzero(changed)) - in_gaps, **out}

    def split(self, flat: np.ndarray):
        """(front guard, matrix, back guard) of a flat host array of this layout."""
        g = self.guard
        return flat[:g], self.matrix(flat), flat[g + self.span:]


def gap_name(name: str, b: int, unit: str = "batch") -> str:
    """How a guard damage count names the place after product b's rows (oracle.outside): the
    gap between a batch's products, or a masked group's tail rows."""
    if unit == "group":
        return f"{name}, in group {b}'s masked rows"
    return f"{name}, between {unit} {b} and {unit} {b + 1}"


def guarded(name: str, matrix_bits: np.ndarray, guard: int, guard_bits: int, *,
            layout: str = "row", ld: int = 0, copies: int = 1, valid: tuple = (), slot_rows: int = 0,
            unit: str = "batch", gap: int | None = None) -> GuardedBuffer:
    """`matrix_bits` (a batch's `copies` matrices stacked along the rows) between guard bands;
    a batch's matrices a guard band apart. Masked groups: `copies` slots of `slot_rows` rows, the
    first valid[g] of slot g holding group g's rows of `matrix_bits`, the rest guard pattern.
    `gap`: elements between stored matrices (default a guard band; 0 where the kernel computes
    the next one's place itself, as a grouped kernel's g * M * K)."""
    rows = slot_rows or matrix_bits.shape[0] // copies
    cols = matrix_bits.shape[1]
    if valid and layout != "row":
        raise ValueError(f"{name}: masked groups are laid out row-major")
    buf = GuardedBuffer(name, rows, cols, guard, np.empty(0, dtype=matrix_bits.dtype),
                        layout=layout, ld=ld, copies=copies, valid=tuple(valid), unit=unit)
    if copies > 1:
        buf.batch_stride = buf.lines * buf.ld + (guard if gap is None else gap)
    buf.bits = np.full(guard + buf.span + guard, guard_bits, dtype=matrix_bits.dtype)
    buf.fill(buf.bits, matrix_bits)
    return buf


@dataclass
class Run:
    """What one launch left behind."""

    instance: Instance
    M: int
    N: int
    K: int
    grid: tuple
    block: tuple
    C_bits: np.ndarray                    # (M, N) raw bits of the output
    unwritten: np.ndarray                 # (M, N) bool: never written (never_written: both poisons held)
    guard_damage: dict[str, int] = field(default_factory=dict)    # buffer -> guard or padding elements changed
    inputs_changed: dict[str, int] = field(default_factory=dict)  # "A"/"B" -> elements changed
    alpha: float = 1
    beta: float = 0
    C0: np.ndarray | None = None          # (M, N) float64 initial C when beta != 0 (else None: poison)
    leading_dimensions: dict[str, int] = field(default_factory=dict)  # "lda"/"ldb"/"ldc"/"ldd" -> value
    operands_text: str = ""               # layouts and leading dimensions, when not all row-major and tight
    launched: bool = True                 # False: M or N is 0, so nothing was launched (BLAS)
    c_fill: str = "poison"                # what C held before the launch at beta == 0: C_FILLS
    scales: dict = field(default_factory=dict)   # "scale_A"/"scale_B" -> float64 scale matrix given
    output: str = "C"                     # the buffer the result was read from: "C", or "D" (C_bits holds it)
    batch: int = 1                        # products launched (C_bits, unwritten, C0: theirs stacked by rows)
    epilogue: dict = field(default_factory=dict)  # a fused epilogue's bias, residual (float64), output_scale
    groups: tuple = ()                    # a grouped GEMM's rows per group (C_bits: theirs stacked by rows)

    @property
    def products(self) -> tuple[str, tuple[int, ...]]:
        """("group", rows per group), ("batch", M per product), or ("", (M,)) for one product."""
        if self.groups and (len(self.groups) > 1 or self.groups[0] != self.M):
            return "group", self.groups
        return ("batch", (self.M,) * self.batch) if self.batch > 1 else ("", (self.M,))

    @property
    def C(self) -> np.ndarray:
        """The output's values (D's, for a kernel that writes D)."""
        return dt.from_bits(self.C_bits, self.instance.types.D)


class GuardedGemm:
    """One problem on one instantiation: initialize once, run many times."""

    @timed("harness")   # guarded buffers, raw bits, uploads: where a small problem's time went
    def __init__(self, backend: Backend, instance: Instance, A: np.ndarray, B: np.ndarray,
                 C0: np.ndarray | None = None, *, alpha=1, beta=0, leading_dimensions: str = "tight",
                 guard_bits: int | None = None, poison_bits: int | None = None,
                 guard: int | None = None, c_fill: str = "default", scales: dict | None = None,
                 in_place: bool = False, batch: int = 1, broadcast: str = "", epilogue: dict | None = None,
                 groups: tuple = (), masked: int = 0):
        """`C0`: the initial C, read by the kernel when beta != 0 (required then, refused
        otherwise). `leading_dimensions`: 'tight' (ld == width) or 'padded' (ld > width;
        only for kernels that take lda/ldb/ldc). `guard` elements of guard band on each
        side of every buffer (default: enough for any TILE-rounded overshoot). guard=0
        gives exact-size allocations: what compute-sanitizer memcheck needs to see an
        out-of-bounds access as one. `c_fill`: what C holds at beta == 0: "poison" (NaN),
        "finite" (finite_garbage), "zeros", or "default" (default_c_fill: finite for a kernel that
        declares reads_c_at_beta_zero, zeros for one that adds into C, else poison). `guard_bits`, `poison_bits`: one pattern for every
        buffer's guards, and the output's poison, instead of each type's own. `scales`: the
        scale factors by role (Problem.scale_operands); a kernel that takes them and is given
        none gets the exact kind's at seed 0. `in_place`: D is C's buffer (d_aliases_c).
        `batch`: products in the launch (A, B and C0 theirs stacked by rows; a kernel that takes
        no `batch` runs one), `broadcast`: the operands ("A", "B") every product shares, stored
        once with stride 0. `epilogue`: a fused epilogue's inputs by role
        (Problem.epilogue_operands; a kernel given none gets the exact kind's at seed 0), the
        bias and residual in guarded buffers of their own, inputs like A and B. `groups`: a grouped
        GEMM's rows per group (A and C0 theirs stacked, B one K x N block per group, a guard band
        apart), their rows contiguous (the kernel's M their sum, an offsets array) or in `masked`
        slots of that many rows each (the kernel's M; a counts array; the rows past a group's
        count: the guard pattern in the output, ones in A)."""
        if groups and not instance.grouped:
            raise ValueError(f"{instance.id}: groups={tuple(groups)!r}: the kernel takes no group_offsets or "
                             f"group_counts (one product a launch)")
        if groups and (masked > 0) != (instance.grouped == "masked"):
            raise ValueError(f"{instance.id}: a {instance.grouped} grouped kernel given masked={masked}")
        if instance.grouped and not groups:   # one group of every row: a plain GEMM, as batch 1 is
            groups, masked = (A.shape[0],), A.shape[0] if instance.grouped == "masked" else 0
        if batch != 1 and not instance.batched:
            raise ValueError(f"{instance.id}: batch={batch}: the kernel takes no batch role (one product a launch)")
        if any(name not in "AB" for name in broadcast) or any(
                not np.array_equal(product_rows(X, b, batch), product_rows(X, 0, batch), equal_nan=True)
                for name, X in (("A", A), ("B", B)) if name in broadcast for b in range(batch)):
            raise ValueError(f"{instance.id}: broadcast={broadcast!r}: only A or B, the same matrix in every "
                             f"product (Problem.operands() makes them so)")
        packed = [name for name in broadcast if launch.packed_in_batch(instance.spec.roles, name)]
        if packed:
            raise ValueError(f"{instance.id}: broadcast={broadcast!r}: the kernel takes neither stride_{packed[0]} nor "
                             f"{packed[0]}_array, so it finds each product's {packed[0]} itself and cannot share one")
        self.batch, self.broadcast, self.groups = batch, broadcast, tuple(groups)
        products = len(groups) or batch
        stacked_rows = sum(groups) if groups else A.shape[0]
        M = (masked or stacked_rows) if groups else A.shape[0] // batch
        K, (K2, N) = A.shape[1], (B.shape[0] // products, B.shape[1])
        spec = instance.spec
        roles = spec.roles
        types = instance.types
        if K != K2:
            raise ValueError(f"A is {A.shape} and B is {B.shape}: inner dimensions differ")
        if spec.square_only and not (M == N == K):
            raise ValueError(f"{instance.id} takes square problems only; got M={M} N={N} K={K}")
        if (beta != 0) != (C0 is not None):
            raise ValueError(f"{instance.id}: beta={beta!r} with C0 {'given' if C0 is not None else 'missing'};"
                             f" pass C0 exactly when beta != 0 (Problem.operands() gives it)")
        if stacked_rows != A.shape[0] or products * K2 != B.shape[0] or (groups and not batch == 1):
            raise ValueError(f"{instance.id}: A {A.shape} and B {B.shape} are not {products} products stacked by rows")
        if C0 is not None and np.shape(C0) != (stacked_rows, N):
            raise ValueError(f"{instance.id}: C0 is {np.shape(C0)}, expected ({stacked_rows}, {N})")
        if c_fill not in C_FILLS:
            raise ValueError(f"c_fill={c_fill!r}; use one of {C_FILLS}")
        if leading_dimensions not in LEADING_DIMENSIONS:
            raise ValueError(f"leading_dimensions={leading_dimensions!r}; use one of {LEADING_DIMENSIONS}")
        if in_place and not spec.d_aliases_c:
            raise ValueError(f"{instance.id}: in_place: the kernel does not declare d_aliases_c")
        why = OperandVariant(leading_dimensions, alpha, beta).why_not(spec)
        if why:
            raise ValueError(f"{instance.id}: {why} (its roles: {', '.join(roles)})")
        self.backend, self.instance = backend, instance
        self.M, self.N, self.K = M, N, K
        self.alpha, self.beta = alpha, beta
        self.C0 = None if C0 is None else np.asarray(C0, dtype=np.float64)
        self.in_place = in_place
        # the buffer the kernel writes its result into: D, unless it takes none (or D is C)
        self.output = "D" if launch.takes_operand(roles, "D") and not in_place else "C"
        out = types.D
        self.guard_bits = out.guard_bits if guard_bits is None else guard_bits   # the output's; each buffer its type's
        self.poison_bits = out.poison_bits if poison_bits is None else poison_bits
        shapes = {"A": (M, K), "B": (K, N), "C": (M, N), "D": (M, N)}
        layouts = {name: spec.layouts.get(name, "row") for name in shapes}
        widths = {name: shape[1] if layouts[name] == "row" else shape[0]
                  for name, shape in shapes.items()}
        lds = {name: padded_leading_dimension(w) if leading_dimensions == "padded" else w
               for name, w in widths.items()}
        longest = max(M, N, K, *lds.values())
        g = guard_elements(longest, longest, longest, instance.tile) if guard is None else guard
        if c_fill == "default":
            c_fill = default_c_fill(spec)
        self.c_fill = c_fill if self.C0 is None else "poison"
        if self.C0 is not None:
            initial_C = dt.to_bits(self.C0, types.C)
        elif c_fill == "finite":
            initial_C = dt.to_bits(finite_garbage(stacked_rows, N, types.C), types.C)
        elif c_fill == "zeros":   # what a kernel that adds into C is given by its callers
            initial_C = dt.to_bits(np.zeros((stacked_rows, N)), types.C)
        else:
            initial_C = np.full((stacked_rows, N), self.poison_bits if self.output == "C" else types.C.poison_bits,
                                dtype=types.C.storage)

        def guarded_as(name, bits, d, **kw):
            place = {}
            # a grouped kernel computes the next group's place itself (g * K * N, g * M * K) unless
            # it takes stride_B: then a guard band lies between two groups' B
            if groups and name == "B":
                place = dict(copies=len(groups), unit="group", gap=None if "stride_B" in roles else 0)
            elif groups and masked and name in ("A", "C", "D"):
                place = dict(copies=len(groups), slot_rows=M, valid=self.groups, unit="group", gap=0)
            elif batch > 1 and name in OPERAND_NAMES:
                if name in broadcast:
                    bits = bits[:bits.shape[0] // batch]
                else:   # one after another, with no band where the kernel finds each product itself
                    place = dict(copies=batch, gap=0 if launch.packed_in_batch(roles, name) else None)
            return guarded(name, bits, g, d.guard_bits if guard_bits is None else guard_bits, **place, **kw)

        self.A = guarded_as("A", dt.to_bits(A, types.A), types.A, layout=layouts["A"], ld=lds["A"])
        if self.A.valid:
            # A's masked rows hold ones, not the guard pattern: a tail computed from them is a finite
            # value where C's masked rows hold the guard (a NaN guard's payload, carried through the
            # sum, would write the guard's own bits back, and zero guards zeros)
            one = dt.to_bits(np.ones(1), types.A)[0]
            for slot, counted in zip(self.A.matrices(self.A.bits), self.A.valid):
                slot[counted:] = one
        self.B = guarded_as("B", dt.to_bits(B, types.B), types.B, layout=layouts["B"], ld=lds["B"])
        self.C = guarded_as("C", initial_C, types.C, layout=layouts["C"], ld=lds["C"])
        self.D = None
        if self.output == "D":
            self.D = guarded_as("D", np.full((stacked_rows, N), self.poison_bits, dtype=out.storage), out,
                                layout=layouts["D"], ld=lds["D"])
        self.scales = {}
        if types.scales:
            self.scales = {role: np.asarray(v, dtype=np.float64) for role, v in (
                scales if scales is not None else Problem(M, N, K, types).scale_operands()).items()}
        self.scale_buffers = [guarded_as(s.role, dt.to_bits(self.scales[s.role], s.type), s.type, layout=s.major)
                              for s in types.scales if not launch.by_value(instance, s.role)]
        self.epilogue = {}
        if types.epilogue.roles:
            self.epilogue = dict(epilogue if epilogue is not None else Problem(M, N, K, types).epilogue_operands())
        self.epilogue_buffers = [
            guarded_as(role, dt.to_bits(np.asarray(self.epilogue[role], dtype=np.float64).reshape(shape), types.of(role)),
                       types.of(role))
            for role, shape in (("bias", (1, -1)), ("residual", (M, N))) if role in self.epilogue]
        # alpha, beta or output_scale a kernel takes through a pointer: in guarded buffers of the
        # pointer's type, inputs like the scales
        self.scalar_buffers = [
            guarded_as(role, _exact_bits(instance, role, value, t), t)
            for role, value in (("alpha", alpha), ("beta", beta), ("output_scale", self.epilogue.get("output_scale")))
            if value is not None and role in instance.spec.roles and (t := launch.scalar_pointee(instance, role))]
        self.group_buffers = []
        if groups:
            role, table = group_table(self.groups, bool(masked))
            table_type = launch.table_type(instance, role)   # as the kernel declares its table: int32, int64
            self.group_buffers = [guarded_as(role, dt.to_bits(table.astype(np.float64).reshape(1, -1), table_type),
                                             table_type)]
        self.scratch_buffers = [
            guarded(role, np.full((1, size), scratch_fill(spec), dtype=np.uint8), scratch_guard(g, size),
                    SCRATCH_GUARD_BYTE)
            for role, size in launch.scratch_bytes(instance, M, N, K, batch, len(groups) or 1).items()]
        out_buffer = self.D if self.output == "D" else self.C
        self.initial_C_bits = out_buffer.matrix(out_buffer.bits).copy()
        self.inputs = [self.A, self.B, *([self.C] if self.output == "D" else []), *self.scale_buffers,
                       *self.epilogue_buffers, *self.scalar_buffers, *self.group_buffers]
        for buf in self.buffers:
            buf.device = backend.to_device(buf.bits)
            # the output is reset from its pristine copy before every run; a large input is
            # compared with its own after every run (a small one is read back: _on_device)
            if buf is out_buffer or any(buf is s for s in self.scratch_buffers) or _on_device(buf):
                buf.pristine = backend.copy(buf.device)
        self.grid, self.block = instance.launch_shape(M, N, K, batch, len(groups) or 1)
        self._last_C = None   # (device buffer, what was read from it) of the last run
        self.pointer_array_buffers: list[GuardedBuffer] = []   # the last launch's (role_values)

    @property
    def buffers(self) -> list[GuardedBuffer]:
        """Every guarded buffer of the launch: A, B, C, D (when the kernel writes one), scales, a
        fused epilogue's bias and residual, scalars taken through pointers, a grouped kernel's
        table, scratch memory."""
        return [self.A, self.B, self.C, *([self.D] if self.D is not None else []), *self.scale_buffers,
                *self.epilogue_buffers, *self.scalar_buffers, *self.group_buffers, *self.scratch_buffers]

    @property
    def out(self) -> GuardedBuffer:
        """The buffer the kernel writes its result into (D, or C)."""
        return self.D if self.output == "D" else self.C

    @classmethod
    def for_problem(cls, backend: Backend, instance: Instance, problem, *, operands=None,
                    **kw) -> "GuardedGemm":
        """A GuardedGemm for a problems.Problem: its operands (`operands`, when the caller made
        them already: 1.7 s for a 4097 x 4160 normal pair), alpha, beta and scale factors."""
        operands = problem.operands() if operands is None else operands
        scales = problem.scale_operands() if instance.types.scales else None
        epilogue = problem.epilogue_operands() if instance.types.epilogue.roles else None
        return cls(backend, instance, *operands, alpha=problem.alpha, beta=problem.beta, scales=scales,
                   epilogue=epilogue, **problem.batching, **kw)

    @property
    def operands_text(self) -> str:
        """'A col-major lda 16 (padded), B row-major ldb 8 (padded), ...'; '' when every
        operand is row-major and tight (nothing to say)."""
        bufs = [b for b in self.buffers if b.name in LD_ROLES]
        def padded(b):   # an empty line's ld of 1 is BLAS's minimum, not padding
            return b.ld > max(b.width, 1)
        if all(b.layout == "row" and not padded(b) for b in bufs):
            return ""
        return ", ".join(f"{b.name} {b.layout}-major {LD_ROLES[b.name]} {b.ld}"
                         f" ({'padded' if padded(b) else 'tight'})" for b in bufs)

    @property
    def leading_dimensions(self) -> dict[str, int]:
        lds = {LD_ROLES[buf.name]: buf.ld for buf in self.buffers if buf.name in LD_ROLES}
        return {**lds, "ldd": lds["ldc"]} if self.in_place else lds

    def role_values(self) -> dict:
        """Every role's value: device views of A, B, C, D and the scale factors (a scale the
        kernel takes by value as its number); M, N, K and the leading dimensions as ints; alpha
        and beta as Python numbers; a batched kernel's batch and strides. gemmcheck.contract.launch.plan
        picks the kernel's."""
        views = {buf.name: buf.inner() for buf in self.buffers}
        if self.in_place:
            views["D"] = self.C.inner()
        views.update(self._pointer_arrays(views))
        by_value = {role: float(v.reshape(-1)[0]) for role, v in self.scales.items() if role not in views}
        if "output_scale" in self.epilogue:
            by_value["output_scale"] = self.epilogue["output_scale"]
        numbers = {**by_value, "alpha": self.alpha, "beta": self.beta}   # a scalar's buffer in views wins
        return {**numbers, **views, "M": self.M, "N": self.N, "K": self.K, **self.leading_dimensions,
                **(self.batch_strides if self.instance.batched else {}),
                **({"groups": len(self.groups), "stride_B": self.B.batch_stride or self.B.span} if self.groups else {})}

    def _pointer_arrays(self, views: dict) -> dict:
        """A_array ... D_array of a pointer-array batch: one pointer per product into its operand's
        storage in `views` (as the backend addresses it now: the output's buffer is a new one every
        run), each array in a guarded buffer of its own (pointer_array_buffers), uploaded now."""
        self.pointer_array_buffers = []
        for operand in self.instance.pointer_arrays:
            storage = self.C if operand == "D" and self.in_place else getattr(self, operand)
            # one stored matrix (a broadcast operand, or batch 1): the same pointer for every product
            step = storage.batch_stride * storage.bits.itemsize if storage.copies > 1 else 0
            base = self.backend.address_of(views[operand])
            buf = guarded(f"{operand}_array", product_pointers(base, step, self.batch).reshape(1, -1), self.A.guard,
                          POINTER_GUARD_BITS)
            buf.device = self.backend.to_device(buf.bits)
            self.pointer_array_buffers.append(buf)
        return {buf.name: buf.inner() for buf in self.pointer_array_buffers}

    @property
    def batch_strides(self) -> dict[str, int]:
        """batch and stride_A ... stride_D: the elements from one product's matrix to the next
        (0 for a broadcast operand; one matrix's span at batch 1, as a caller passes it)."""
        strides = {STRIDE_ROLES[b.name]: b.batch_stride if b.copies > 1 else (0 if b.name in self.broadcast else b.span)
                   for b in self.buffers if b.name in STRIDE_ROLES}
        if self.in_place:
            strides["stride_D"] = strides["stride_C"]
        return {"batch": self.batch, **strides}

    @timed("harness")   # the launch and the copies back are "launch" (phases are exclusive)
    def run(self) -> Run:
        """Reset the output (poison, or C0 when beta != 0), launch, and read back what the
        kernel did to every buffer."""
        self.out.device = self.backend.copy(self.out.pristine)
        # M or N = 0: BLAS returns at once. A grid with a zero dimension is a launch error: a
        # plan that gives one for a non-empty C (a split-K grid over ceil(K / BK) at K = 0) is
        # not launched either, and C shows what the kernel would have left: nothing written.
        launched = self.M > 0 and self.N > 0 and all(int(g) > 0 for g in self.grid)
        if launched:
            try:
                self._launch()
            except KernelLaunchError as exc:
                name_the_problem(exc, self.M, self.N, self.K)
                raise
        try:
            c_bits, unwritten, c_damage = self._read_C(confirm=launched)
        except KernelLaunchError as exc:   # the confirming launch's (_never_written)
            name_the_problem(exc, self.M, self.N, self.K)
            raise
        damage, changed = dict(c_damage), {}
        for buf in [*self.inputs, *self.pointer_array_buffers]:
            # A large one is compared where it lives and copied back only when changed: at the
            # nightly's 2048^2 race launches each is up to 32 MB, read back ten times a row.
            if _on_device(buf) and self.backend.same(buf.device, buf.pristine):
                damage[buf.name] = changed[buf.name] = 0
                continue
            now = self.backend.to_host(buf.device)
            damage.update(buf.damage(now))
            changed[buf.name] = int(np.count_nonzero(buf.matrix(now) != buf.matrix(buf.bits)))
        for buf in self.scratch_buffers:   # its guards only: read back without what lies between them
            ends = (buf.device[:buf.guard], buf.device[buf.guard + buf.span:])
            damage[buf.name] = sum(int(np.count_nonzero(self.backend.to_host(end) != SCRATCH_GUARD_BYTE))
                                   for end in ends)
        return Run(self.instance, self.M, self.N, self.K, self.grid, self.block,
                   c_bits, unwritten, damage, changed,
                   self.alpha, self.beta, self.C0, self.leading_dimensions, self.operands_text,
                   launched, self.c_fill, self.scales, self.output, self.batch, self.epilogue, self.groups)

    def _launch(self) -> None:
        """One launch on the buffers as they are, scratch memory reset first (as its callers leave
        it before every launch: a kernel that counts arrivals there counts from its fill)."""
        for buf in self.scratch_buffers:
            buf.device = self.backend.copy(buf.pristine)
        self.backend.launch(self.instance, launch.plan(self.instance, self.role_values()))

    def _read_C(self, confirm: bool = True):
        """(the output's bits, unwritten, guard elements changed) after a launch, read-only; an
        element that holds the poison is launched again to be called unwritten (`confirm`: a
        launch that did not happen wrote nothing, proof enough). When the
        whole buffer holds the last run's bits (compared on the device), the last run's arrays
        are shared, not read back again: a kill-matrix row at the nightly's race sizes
        launches each problem ten times, 16 MB of C at 2048^2 float32 each, nearly always
        the same bits (and detectors skip comparing an array with itself)."""
        out = self.out
        if (self._last_C is not None and _on_device(out)
                and self.backend.same(out.device, self._last_C[0])):
            read = self._last_C[1]
        else:
            c_flat = self.backend.to_host(out.device)
            c_bits = out.matrix(c_flat).copy()
            unwritten = c_bits == self.initial_C_bits
            if self.output == "C" and self.c_fill == "zeros":   # (c_fill is "poison" wherever C0 is given)
                unwritten[:] = False   # 0 is also a right result: an element left unwritten shows as a wrong 0
            if confirm and unwritten.any() and self._output_poisoned:
                unwritten &= self._never_written()
            for X in (c_bits, unwritten):
                X.setflags(write=False)   # shared by every run that left the same bits
            read = c_bits, unwritten, out.damage(c_flat)
        self._last_C = out.device, read
        return read


    @property
    def _output_poisoned(self) -> bool:
        """Whether the output starts as the poison: D always (C0 is C's), C at beta == 0 unless
        it is filled with finite garbage."""
        return self.output == "D" or (self.C0 is None and self.c_fill == "poison")

    def _never_written(self) -> np.ndarray:
        """(M, N) bool: the elements that hold the second poison after a launch with the output
        (C, or D) filled with it (confirming_poison), on a buffer of its own (the run's stays as
        it was read; C, an input beside D, keeps its first poison). With the first launch's
        poison mask, what was never written (never_written): a NaN whose payload an element
        only carried through arithmetic holds the first poison again."""
        out = self.out
        second = confirming_poison(self.instance.types.D, self.poison_bits, self.guard_bits)
        flat = out.bits.copy()
        out.fill(flat, second)
        kept, out.device = out.device, self.backend.to_device(flat)
        try:
            self._launch()
            return out.matrix(self.backend.to_host(out.device)) == second
        finally:
            out.device = kept


def _exact_bits(instance: Instance, role: str, value, dtype: dt.DType) -> np.ndarray:
    """`value` (alpha, beta, output_scale) as one element of `dtype`, the type the kernel's
    pointer declares; a value it cannot hold exactly is refused, as launch._scalar refuses one
    passed by value (the oracle would judge a product the kernel was never asked for)."""
    bits = dt.to_bits(np.full((1, 1), float(value)), dtype)
    held = float(np.asarray(dt.from_bits(bits, dtype)).reshape(-1)[0])
    if held != float(value) and float(value) == float(value):
        raise launch.LaunchError(f"{instance.id}: {role} = {value!r} is {held!r} in the {dtype.c_type} the kernel's "
                                 f"pointer holds; pass a value {dtype.c_type} holds exactly")
    return bits


def never_written(output: str = "C") -> str:
    """What "never written" means, the one definition (the poison detector's and the oracle's
    words): an element of `output` that held the poison after a launch, and the second poison
    after a launch with `output` filled with it. One poison alone is not proof: a quiet NaN's
    payload survives arithmetic."""
    return (f"never written (the poison bits after the launch, and a second poison after a launch with "
            f"{output} filled with it)")


def confirming_poison(d: dt.DType, poison_bits: int, guard_bits: int) -> int:
    """The second poison: `poison_bits` with one bit flipped (a payload bit, else the sign), of
    the poison's kind: a NaN for a NaN poison (neither the guard bits nor a NaN a kernel's
    arithmetic makes: the CPU's canonical one, the GPU's all-ones one; never an infinity, as
    e5m2's 0x7D with its last bit cleared would be), a finite value for a finite one
    (float8_e4m3fn's -2^-9 gives -3 x 2^-9; int32's its neighbour), never zero (0x81 ^ 1 is
    e4m3's -0, which a kernel writes)."""
    made = {(1 << (8 * d.itemsize - 1)) - 1}
    if not d.is_integer:
        made.add(int(np.array([np.nan], dtype=d.numpy).view(d.storage)[0]))

    def value(bits: int) -> float:
        return float(dt.from_bits(np.array([bits], dtype=d.storage), d)[0])

    poison_is_nan = np.isnan(value(poison_bits))
    sign = 1 << (8 * d.itemsize - 1)
    return next(b for b in (poison_bits ^ 1, poison_bits ^ 2, poison_bits ^ 4, poison_bits ^ sign)
                if b not in (guard_bits, *made) and np.isnan(value(b)) == poison_is_nan
                and not np.isinf(value(b)) and value(b) != 0)


def default_c_fill(spec) -> str:
    """What C holds before a launch at beta == 0: NaN (poison), finite garbage for a kernel whose
    callers always initialize C (reads_c_at_beta_zero), zeros for one that adds into C (adds_into_c)."""
    if getattr(spec, "adds_into_c", False):
        return "zeros"
    return "finite" if getattr(spec, "reads_c_at_beta_zero", False) else "poison"


def finite_garbage(M: int, N: int, d: dt.DType, seed: int = 0) -> np.ndarray:
    """What C holds before a launch when it must be finite at beta == 0: random signs times
    values in [max/2, max] of the dtype (float64, exactly representable). No correct result of
    gemmcheck's problems comes near them (the generators keep results far below the largest
    finite value), so an element that still holds them was never written; and 0 * them is 0."""
    rng = np.random.default_rng(seed)
    if d.is_integer:   # int32: above every judged result (below 2^30, problem.INTEGER_RESULT_LIMIT)
        return rng.choice((-1.0, 1.0), (M, N)) * rng.integers(int(d.largest) // 2 + 1, int(d.largest), (M, N))
    largest = float(dt.finfo(d).max)
    values = rng.choice((-1.0, 1.0), (M, N)) * largest * rng.uniform(0.5, 1.0, (M, N))
    return dt.round_draws(values, d)


# Buffers from this size on are compared on the device before anything is copied back;
# smaller ones are read back at once: a compare (Backend.same: a memset, a kernel, a flag read
# back) costs more than reading back a few kilobytes (every buffer compared on the device, then
# through CuPy's array_equal, took the harness phase of the H200's ci run from 4.7 to 14.4 s).
DEVICE_COMPARE_BYTES = 1 << 22


def _on_device(buf: GuardedBuffer) -> bool:
    return buf.bits.nbytes >= DEVICE_COMPARE_BYTES


def name_the_problem(exc: KernelLaunchError, M: int, N: int, K: int) -> KernelLaunchError:
    """`exc` naming the problem that showed the crash or hang (a backend knows the grid, not
    the problem): in its message, and as its `problem` (the verdict's); same class and
    attributes (context_lost) kept."""
    if exc.args and isinstance(exc.args[0], str) and "; problem M" not in exc.args[0]:
        exc.args = (f"{exc.args[0]}; problem M{M} N{N} K{K}", *exc.args[1:])
    if not getattr(exc, "problem", ""):
        exc.problem = problem_label(M, N, K)
    return exc


def problem_label(M: int, N: int, K: int) -> str:
    """How a verdict names a problem it saw: ``M4096xN4096xK4096``."""
    return f"M{M}xN{N}xK{K}"


# -- a plain launch: no guard bands, nothing read back ------------------------------------------

PLAIN_POOL = 4099   # values drawn for a plain launch's A and B, repeated to their size


def plain_bits(d: dt.DType, count: int, rng: np.random.Generator) -> np.ndarray:
    """`count` elements of `d` as raw host bits holding finite values: PLAIN_POOL draws in
    (-1, 1) (integer types: small integers) rounded to `d`, repeated to `count` (drawing each
    element of an 8192^2 operand would cost seconds)."""
    pool = rng.integers(-3, 4, PLAIN_POOL).astype(np.float64) if d.is_integer else rng.uniform(-1, 1, PLAIN_POOL)
    return np.resize(dt.to_bits(dt.round_draws(pool, d), d), count)


# alpha, beta and the output scale of a plain launch
PLAIN_SCALARS = {"alpha": 1, "beta": 0, "output_scale": 1.0}


def plain_scalars(backend: Backend, instance: Instance) -> dict:
    """PLAIN_SCALARS for a kernel that takes them through pointers (launch.scalar_pointee):
    device buffers of the pointer's type, uploaded (never inside a timed loop)."""
    return {role: backend.to_device(dt.to_bits(np.full(1, float(value)), t))
            for role, value in PLAIN_SCALARS.items()
            if role in instance.spec.roles and (t := launch.scalar_pointee(instance, role)) is not None}


def plain_values(instance: Instance, M: int, N: int, K: int, A, B, C, D=None, scales=None, *,
                 batch: int = 1, epilogue=None, groups=None, arrays=None, scalars=None, scratch=None) -> dict:
    """Every role's value for a plain launch: A, B, C (and D, the scale factors: buffers or
    numbers, by role) as given, tight leading dimensions and batch strides (`batch` products
    back to back), alpha 1 and beta 0; `epilogue`: the fused epilogue's roles (bias, residual,
    output_scale); `groups`: (count, table role, table) of a grouped kernel, whose M is all its
    groups' rows (contiguous) or a slot's (masked); `arrays`: a pointer-array batch's A_array ...
    (plain_pointer_arrays); `scalars`: the buffers of scalars taken through pointers
    (plain_scalars); `scratch`: scratch memory by role, as its callers leave it (plain_scratch).
    How the performance suite launches, and the isolated probe at its sizes (plain_operands)."""
    values = {"A": A, "B": B, "C": C, **({"D": D} if D is not None else {}), **(scales or {}), **(arrays or {}),
              "M": M, "N": N, "K": K, **launch.tight_leading_dimensions(instance.spec.layouts, M, N, K),
              "alpha": PLAIN_SCALARS["alpha"], "beta": PLAIN_SCALARS["beta"],
              **launch.tight_batch_strides(M, N, K, batch), **(epilogue or {}), **(scalars or {}),
              **(scratch or {})}
    if groups:
        count, role, table = groups
        values.update({"groups": count, role: table})
    return values


def plain_pointer_arrays(backend: Backend, instance: Instance, storage: dict, batch: int = 1) -> dict:
    """A_array ... D_array of a plain launch of a pointer-array batch: one pointer per product
    into `storage`'s A, B, C, D (device buffers of `batch` tight products back to back), uploaded."""
    out = {}
    for operand in instance.pointer_arrays:
        buffer = storage[operand]
        base, step = backend.address_of(buffer), buffer.nbytes // batch
        out[f"{operand}_array"] = backend.to_device(product_pointers(base, step, batch))
    return out


def plain_scratch(backend: Backend, instance: Instance, M: int, N: int, K: int, batch: int = 1,
                  groups: int = 1) -> dict:
    """Scratch memory by role for a plain launch, as its callers leave it (scratch_fill), uploaded:
    a launch that changes it gets a fresh copy (plain_launch; the performance suite resets it
    outside its timed span)."""
    return {role: backend.to_device(bits) for role, bits in scratch_contents(instance, M, N, K, batch, groups).items()}


def scratch_contents(instance: Instance, M: int, N: int, K: int, batch: int = 1, groups: int = 1) -> dict:
    """Each scratch buffer of an exact-size launch, as its callers leave it (scratch_fill), on the
    host; one byte at least, so that an empty one still has an address."""
    fill = scratch_fill(instance.spec)
    return {role: np.full(max(size, 1), fill, dtype=np.uint8)
            for role, size in launch.scratch_bytes(instance, M, N, K, batch, groups).items()}


def plain_operands(backend: Backend, instance: Instance, M: int, N: int, K: int, seed: int = 0, *,
                   batch: int = 1, groups: tuple = (), masked: bool = False) -> dict:
    """plain_values' buffers and settings for a launch watched only for a fault or a hang (the
    isolated probe at the performance suite's sizes), in `instance`'s operand types and as many
    products as the timed launch holds (a strided `batch`, or `groups` of rows: contiguous, M
    their total, or `masked` in slots of M rows): A and B finite values (plain_bits), C (and
    D, for a kernel that writes a separate D) the poison bits, each scale factor and the output
    scale 1, a bias and a residual zeros, a grouped kernel its table of offsets or counts, a
    pointer-array batch its arrays, scratch memory as its callers leave it."""
    types = instance.types
    rng = np.random.default_rng(seed)
    rows = len(groups) * M if masked else (M if groups else batch * M)   # the output's rows, every product
    products = len(groups) or batch

    def filled(d: dt.DType, n: int, bits=None):
        return backend.to_device(np.full(n, d.poison_bits if bits is None else bits, dtype=d.storage))

    def zeros(role: str, n: int):
        return filled(types.of(role), n, dt.to_bits(np.zeros(1), types.of(role))[0])

    scales = {}
    for scale in types.scales:
        shape = scale.shape(*((rows, K) if scale.operand == "A" else (products * K, N)))
        scales[scale.role] = (1.0 if launch.by_value(instance, scale.role) else
                              backend.to_device(dt.to_bits(np.ones(shape), scale.type).reshape(-1)))
    epilogue = {}
    if types.epilogue.bias:
        epilogue["bias"] = zeros("bias", M if types.epilogue.bias == "row" else N)
    if types.epilogue.residual:
        epilogue["residual"] = zeros("residual", rows * N)
    if types.epilogue.output_scale:
        epilogue["output_scale"] = PLAIN_SCALARS["output_scale"]
    table = None
    if groups:
        role, counts = group_table(groups, masked)
        table = (len(groups), role, backend.to_device(dt.to_bits(counts.astype(np.float64),
                                                                 launch.table_type(instance, role))))
    operands = {"A": backend.to_device(plain_bits(types.A, rows * K, rng)),
                "B": backend.to_device(plain_bits(types.B, products * K * N, rng)),
                "C": filled(types.C, rows * N),
                "D": filled(types.D, rows * N) if launch.takes_operand(instance.spec.roles, "D") else None}
    return {**operands, "scales": scales, "batch": batch, "epilogue": epilogue, "groups": table,
            "arrays": plain_pointer_arrays(backend, instance, operands, batch),
            "scalars": plain_scalars(backend, instance),
            "scratch": plain_scratch(backend, instance, M, N, K, batch, len(groups) or 1)}


def plain_launch(backend: Backend, instance: Instance, M: int, N: int, K: int, operands: dict) -> None:
    """One launch of `instance` on plain `operands` (plain_operands), waited for: a crash or a
    hang raises the backend's KernelLaunchError, naming the problem (name_the_problem). Scratch
    memory is a fresh copy of the operands' each time, as its callers leave it before every launch."""
    fresh = {role: backend.copy(buffer) for role, buffer in operands.get("scratch", {}).items()}
    try:
        backend.launch(instance, launch.plan(instance, plain_values(instance, M, N, K, **{**operands, "scratch": fresh})))
    except KernelLaunchError as exc:
        raise name_the_problem(exc, M, N, K)


def run_once(backend: Backend, instance: Instance, A: np.ndarray, B: np.ndarray,
             C0: np.ndarray | None = None, **kw) -> Run:
    """Initialize and run a problem once."""
    return GuardedGemm(backend, instance, A, B, C0, **kw).run()


def run_problem(backend: Backend, instance: Instance, problem, **kw) -> Run:
    """Initialize and run a problems.Problem once (its operands, alpha and beta)."""
    return GuardedGemm.for_problem(backend, instance, problem, **kw).run()
