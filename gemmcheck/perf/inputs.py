"""The inputs the performance suite times on: Problems, rotated so caches stay cold.

Each set's A and B are exactly what ``problems.Problem(N, N, N, dtype, "uniform",
seed).operands()`` gives (one definition of how inputs are made: generated on
the host in float64, exact in the dtype, uploaded as raw bits; made afresh with
``make_operands``, not kept in Problem's cache of shared large operands); set i uses seed
``seed + i``. Enough sets rotate that the others hold >= 2 x L2 between two uses
of one set (``n_input_sets``), so no launch finds its operands cached. One more
set (``check_set``), never timed, is the one the first launch is checked on: the
last timed launch always runs on other inputs, so a kernel that replays its
first result cannot pass both checks.

A kernel with a type per operand (gemmcheck.contract.operand_types) gets A and B in their
types, its output (D when it writes a separate D, else C) in the output type, a C it only reads
(poison: at beta = 0 it must not be read), and each set its scale factors (the Problem's,
[1/2, 2)): a device buffer each, or a number for a kernel that takes the scale by value.

A strided-batched kernel's sets hold `batch` products each (``Problem(..., batch=batch)``:
product b's operands from a seed of its own, stacked along the rows, tight strides: product b of
X at X + b * its matrix's elements); the reference is product by product. A kernel with a fused
epilogue gets each set's bias and residual (the Problem's epilogue_operands, device buffers of
their types) and its output scale; its reference is the epilogue applied to A B, its bound the
correctness oracle's epilogue bound.

A grouped kernel's sets hold ragged groups (``ragged_groups``: half and one and a half times N
rows by turns, N x N x N on average) of one problem (``Problem(..., groups=...)``): contiguous,
the groups' rows one after another and an offsets table (G + 1 prefix sums); masked, each group
in a slot of the largest group's rows, its first rows counted (a counts table), the rest zeros
a correct kernel never reads. Grouped kernels are timed row-major.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from gemmcheck.contract import dtypes as dt
from gemmcheck.contract import operand_types
from gemmcheck.phases import phase
from gemmcheck.problems.problem import Problem, group_table, product_rows, scaled_operands, split_rows, stacked_matmul

VALUES = "uniform"   # U(-1, 1) rounded to the dtype: judged against the oracle's bound


def n_input_sets(set_bytes: int, l2_bytes: int, *, factor: int = 2) -> int:
    """Sets to rotate so the others hold >= factor x L2 between two uses of one set."""
    if set_bytes <= 0 or l2_bytes < 0:
        raise ValueError(f"set_bytes must be positive and l2_bytes non-negative, got {set_bytes}, {l2_bytes}")
    return max(2, 1 + math.ceil(factor * l2_bytes / set_bytes))


def ragged_groups(size: int, groups: int) -> tuple[int, ...]:
    """Rows per group of a grouped kernel's timed launch: size // 2 and the rest of 2 size by
    turns (an odd last group: size), so `groups` groups hold groups x size rows, the work of as
    many N x N x N products (the batched ceiling's)."""
    pair = (size // 2, 2 * size - size // 2)
    return tuple(pair[g % 2] for g in range(groups - groups % 2)) + ((size,) if groups % 2 else ())


def timed_products(instance, size: int, products: int) -> dict:
    """How a timed launch of `instance` at `size` holds its `products` (Timing.products): as a
    strided batch, or as ragged groups (contiguous or masked) of as much work (InputSets' and
    Problem's batch, groups and masked)."""
    if instance.grouped:
        return {"groups": ragged_groups(size, products), "masked": instance.grouped == "masked"}
    return {"batch": products}


def kernel_M(size: int, batch: int = 1, groups: tuple = (), masked: bool = False) -> int:
    """The M a timed launch passes: a product's rows, all the groups' (contiguous) or a slot's
    (the largest group's rows: masked)."""
    return (max(groups) if masked else sum(groups)) if groups else size


class InputSets:
    """Rotating (A, B, C) sets for one dtype and size on the array module ``xp`` (CuPy, or numpy
    in tests): ``sets[:n_sets]`` rotate, ``sets[check_set]`` is for the first check. Buffers hold
    raw bits (``dtype.storage``), as every backend launches them. Made on the host; `upload`
    puts them on the device (a worker that shares its GPU uploads in its turn, and draws the
    values beside the others)."""

    def __init__(self, xp, dtype, size: int, l2_bytes: int, seed: int, layouts=None, separate_d: bool = False,
                 scales_by_value=(), batch: int = 1, groups: tuple = (), masked: bool = False,
                 table: str = "int32") -> None:
        """`dtype`: a DType, or the kernel's operand types (an OperandTypes or its spelling).
        `layouts`: the kernel's {"A"|"B"|"C"|"D": "row"|"col"}; a column-major operand's buffer
        holds its transpose's rows (what column-major means), so the product judged is A @ B.
        `separate_d`: the kernel writes D and only reads C. `scales_by_value`: the scale roles
        it takes as numbers. `batch`: products per set (a strided batch). `groups`: rows per
        group (a grouped kernel), `masked`: in slots of the largest group's rows, `table`: the
        integer type its kernel declares its table of offsets or counts in (launch.table_type)."""
        self.xp, self.size, self.seed, self.batch = xp, size, seed, batch
        self.groups, self.masked = tuple(groups), masked
        self.table_type = dt.TABLE_TYPES[table]
        self.rows = self.groups or (size,) * batch      # each product's counted rows, stacked
        self.slot = max(self.groups) if masked else 0   # a masked group's rows in the buffers (M)
        self.M = kernel_M(size, batch, self.groups, masked)
        self.types = operand_types.coerce(dtype)
        self.dtype = self.types.D             # the output's type: what is poisoned, read and judged
        self.output = "D" if separate_d else "C"
        self.layouts = {o: (layouts or {}).get(o, "row") for o in "ABCD"}
        if self.groups and any(self.layouts[o] != "row" for o in "ACD"):
            raise ValueError(f"grouped kernels are timed with A, C and D row-major (B either way), not with the "
                             f"layouts {self.layouts}")
        self.scales_by_value = frozenset(scales_by_value)
        t = self.types
        residual = t.C.itemsize if t.epilogue.residual else 0
        rows = sum(self.rows)
        self.n_sets = n_input_sets(rows * size * (t.A.itemsize + t.D.itemsize + residual)
                                   + len(self.rows) * size * size * t.B.itemsize, l2_bytes)
        self.check_set = self.n_sets          # the extra set, outside the rotation
        self.problems = [Problem(self.M, size, size, t.spelling, VALUES, seed + i, batch=batch, groups=self.groups,
                                 masked=masked) for i in range(self.n_sets + 1)]
        self.group_tables = []                # each set's offsets or counts (device, table_type), grouped kernels
        self.sets = []
        self.C_read = None                    # the C a kernel with a separate D reads (never, at beta = 0)
        self.scales: list[dict] = []          # each set's scale roles' values (device buffers or numbers)
        self._operands64 = _operands_side_by_side(self.problems)
        with phase("inputs"):   # the bits too, on the host: a turn on the GPU only copies them
            self._operand_bits = [(self._bits(A, "A", t.A), self._bits(B, "B", t.B)) for A, B in self._operands64]
        self._scales64 = [p.scale_operands() for p in self.problems]
        self._epilogue64 = [p.epilogue_operands() for p in self.problems]
        self.epilogue: list[dict] = []        # each set's epilogue roles' values (device buffers or numbers)
        self._references: dict[int, tuple] = {}
        self._finite_C = None

    def upload(self) -> "InputSets":
        """The sets on the device (once)."""
        if not self.sets:
            size, xp, t = self.size, self.xp, self.types
            rows = len(self.rows) * self.slot or sum(self.rows)   # the output's rows in its buffer
            self.sets = [(xp.asarray(A), xp.asarray(B), xp.zeros((rows, size), dtype=self.dtype.storage))
                         for A, B in self._operand_bits]
            self._operand_bits = None   # on the device now (8192^2 sets: gigabytes of host memory)
            if self.groups:
                role, table = group_table(self.groups, self.masked)
                self.group_tables = [xp.asarray(dt.to_bits(table.astype(np.float64), self.table_type))] * len(self.sets)
            if self.output == "D":
                self.C_read = xp.full((rows, size), t.C.poison_bits, dtype=t.C.storage)
            self.scales = [{s.role: self._scale(s, values[s.role]) for s in t.scales} for values in self._scales64]
            self.epilogue = [{role: self._epilogue_input(role, value) for role, value in values.items()}
                             for values in self._epilogue64]
        return self

    @property
    def group_role(self) -> str:
        """The role of a grouped kernel's table: group_counts (masked) or group_offsets."""
        return group_table(self.groups, self.masked)[0]

    @property
    def flops(self) -> int:
        """The work of one launch: 2 N K per counted row of every product."""
        return 2 * sum(self.rows) * self.size * self.size

    def _bits(self, X, operand: str, d: dt.DType) -> np.ndarray:
        """An operand's buffer on the host: its values stored as the kernel reads them, as bits
        (a grouped kernel's B: one K x N block per group, each its transpose when column-major)."""
        products = len(self.groups) if self.groups and operand == "B" else self.batch
        stored = self._stored(X, self.layouts[operand], products)
        if self.masked and operand == "A":   # each group's rows at the start of its slot
            stored = self._slotted(stored)
        return dt.to_bits(stored, d)

    def _slotted(self, X):
        """A stacked operand of masked groups in slots of `slot` rows (zeros past a group's rows)."""
        out = np.zeros((len(self.groups) * self.slot, X.shape[1]))
        for g, part in enumerate(split_rows(X, self.groups)):
            out[g * self.slot:g * self.slot + len(part)] = part
        return out

    def _stored(self, X, layout: str, products: int):
        """Rows of `products` equal products as stored: each transposed for a column-major operand
        (its buffer holds the transpose's rows), products one after another."""
        if layout == "row":
            return np.ascontiguousarray(X)
        return np.ascontiguousarray(np.concatenate([product_rows(X, b, products).T for b in range(products)]))

    def _epilogue_input(self, role: str, value):
        """An epilogue role as the kernel takes it: the output scale's number, a buffer of the
        bias's or residual's bits (row-major, as the correctness harness passes them)."""
        if role == "output_scale":
            return float(value)
        return self.xp.asarray(dt.to_bits(np.ascontiguousarray(value), self.types.of(role)))

    def _scale(self, scale: operand_types.Scale, values):
        """A scale's factors as the kernel takes them: its number, or a buffer of its type's bits
        in its storage order."""
        if scale.role in self.scales_by_value:
            return float(values.reshape(-1)[0])
        stored = values if scale.major == "row" else values.T
        return self.xp.asarray(dt.to_bits(np.ascontiguousarray(stored), scale.type))

    def result(self, index: int):
        """Set ``index``'s output as float64 values, rows of it (whatever the kernel's layout;
        a batch's products stacked along the rows)."""
        out = self.to_float64(self.sets[index][2])
        if self.masked:   # each group's counted rows of its slot
            xp = self.xp
            return xp.concatenate([out[g * self.slot:g * self.slot + rows] for g, rows in enumerate(self.groups)])
        if self.layouts[self.output] == "row":
            return out
        if self.batch == 1:
            return out.T
        xp, cols = self.xp, out.shape[0] // self.batch   # each product stored as its transpose
        return xp.concatenate([out[b * cols:(b + 1) * cols].T for b in range(self.batch)])

    def poison(self, index: int, fill: str = "poison") -> None:
        """Fill set ``index``'s C as the correctness harness does (harness.default_c_fill): the
        poison bits, so an element the launch does not write shows; ``finite`` (a kernel that
        declares reads_c_at_beta_zero: its callers always initialize C), the harness's finite
        garbage, far above any result; ``zeros`` (a kernel that adds into C, which its callers
        zero)."""
        C = self.sets[index][2]
        if fill == "zeros":
            C.fill(0)
            return
        if fill == "poison":
            C.fill(self.dtype.poison_bits)
            return
        if self._finite_C is None:   # made once a size: drawing it per sample would cost seconds
            from gemmcheck.problems.harness import finite_garbage

            garbage = finite_garbage(self.sets[index][2].shape[0], self.size, self.dtype)
            self._finite_C = self.xp.asarray(dt.to_bits(garbage, self.dtype))
        C[...] = self._finite_C

    def to_float64(self, bits):
        """Raw bits of the dtype as float64 values, exact (dtypes.from_bits: on CuPy too)."""
        return dt.from_bits(bits, self.dtype).astype(self.xp.float64)

    def as_values(self, bits):
        """The buffer as cupy.matmul should see it: the dtype's values, not raw bits."""
        return bits.view(self.dtype.numpy)

    def reference(self, index: int = 0):
        """(A B, |sA A||sB B|) for set ``index``, in float64 on ``xp``, product by product;
        computed once per set (a fused epilogue is applied to it by the check:
        epilogue_values)."""
        if index not in self._references:
            xp = self.xp
            A, B = (xp.asarray(x) for x in self._operands64[index])
            A, B = scaled_operands(self.types, A, B, self._scales64[index])
            self._references[index] = (stacked_matmul(A, B, self.rows), stacked_matmul(xp.abs(A), xp.abs(B), self.rows))
        return self._references[index]

    def epilogue_values(self, index: int) -> dict:
        """Set ``index``'s epilogue inputs as float64 values by role (empty without an epilogue)."""
        return self._epilogue64[index]


def _operands_side_by_side(problems) -> list:
    """Each problem's operands, drawn on threads of their own (numpy's generators and ufuncs
    release the GIL): the host drew the nightly's 8192^2 sets one after the other, 46 s of
    the performance tests' time over half the nightly on an H200."""
    with phase("inputs"), ThreadPoolExecutor(len(problems)) as pool:
        return list(pool.map(Problem.make_operands, problems))
