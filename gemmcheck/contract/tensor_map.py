"""TMA tensor maps (CUtensorMap) of the operands, as the suite builds them on the host.

A kernel that takes a role ``tensor_map_A`` gets a rank-2 tiled tensor map of A as it lies in
the suite's guarded buffer (``tensor_map_C`` and ``tensor_map_D``: the output's, for a TMA
store; each in its operand's own element type): the global address is the matrix's first
element, the dimensions are (contiguous extent, other extent), the stride is the leading
dimension in bytes. So TMA
loads zero-fill outside the matrix and TMA stores clip at its edge, exactly as they would on
the caller's own allocation; the guard bands around it still catch a plain store past it.

This module is the pure part: what to encode for a problem (``TensorMapRequest``) and which
of TMA's encoding rules a request breaks (``encoding_problem``), each said as what to claim
instead. The driver call that makes the 128 bytes is gemmcheck.backends.tensor_map_encoding.
"""

from __future__ import annotations

from dataclasses import dataclass, field

OPERANDS = ("A", "B", "C", "D")
ROLES = tuple(f"tensor_map_{name}" for name in OPERANDS)
SWIZZLES = {"none": 0, "32B": 32, "64B": 64, "128B": 128}   # name -> the swizzle span in bytes
ALIGNMENT = 16            # bytes: the global address and every stride
MAX_BOX = 256             # elements per box dimension
MAX_STRIDE = 1 << 40      # bytes
MAX_DIM = 1 << 32         # elements

# The dimension that runs along an operand's lines (its contiguous extent), by layout.
_CONTIGUOUS = {("A", "row"): "K", ("A", "col"): "M", ("B", "row"): "N", ("B", "col"): "K",
               ("C", "row"): "N", ("C", "col"): "M", ("D", "row"): "N", ("D", "col"): "M"}
_OTHER = {("A", "row"): "M", ("A", "col"): "K", ("B", "row"): "K", ("B", "col"): "N",
          ("C", "row"): "M", ("C", "col"): "N", ("D", "row"): "M", ("D", "col"): "N"}
_LD = {"A": "lda", "B": "ldb", "C": "ldc", "D": "ldd"}


def operand_of(role: str) -> str:
    """"tensor_map_B" -> "B"."""
    return role.rsplit("_", 1)[1]


@dataclass(frozen=True)
class TensorMapSpec:
    """A catalog's ``tensor_maps`` entry for one operand: the box ([inner, outer] extents in
    elements, expressions over the compile-time parameters) and the swizzle."""

    box: tuple            # two launch.Expression
    swizzle: str = "none"

    def box_at(self, params) -> tuple[int, int]:
        return tuple(e.integer(params) for e in self.box)   # type: ignore[return-value]


@dataclass(frozen=True)
class TensorMapRequest:
    """Everything cuTensorMapEncodeTiled is given for one operand of one problem, but the
    address (the backend reads it off ``buffer``, the device view of the matrix)."""

    kernel: str               # the instantiation's id, for messages
    operand: str              # "A", "B", "C" or "D"
    dtype: str                # the operand's element type
    itemsize: int
    layout: str               # "row" | "col"
    dims: tuple[int, int]     # (contiguous extent, other extent) in elements
    ld: int                   # elements from one line to the next
    box: tuple[int, int]      # (inner, outer) in elements
    swizzle: str
    sizes: dict = field(default_factory=dict, compare=False)   # M, N, K, for messages
    buffer: object = field(default=None, compare=False, repr=False)

    @property
    def stride_bytes(self) -> int:
        """The line stride in bytes. With a single line TMA never steps it, but the driver
        still wants a multiple of 16: it is rounded up then."""
        stride = self.ld * self.itemsize
        return -(-stride // ALIGNMENT) * ALIGNMENT if self.dims[1] <= 1 else stride

    @property
    def contiguous(self) -> str:
        """The problem dimension along the operand's lines: K for a row-major A."""
        return _CONTIGUOUS[(self.operand, self.layout)]

    @property
    def line(self) -> str:
        return "row" if self.layout == "row" else "column"


def request(instance, operand: str, spec: TensorMapSpec, M: int, N: int, K: int, ld: int | None,
            buffer=None) -> TensorMapRequest:
    """The tensor map of `operand` for a problem; `ld` None means tight (ld = the line's length)."""
    layout = instance.spec.layouts.get(operand, "row")
    sizes = {"M": M, "N": N, "K": K}
    contiguous = sizes[_CONTIGUOUS[(operand, layout)]]
    other = sizes[_OTHER[(operand, layout)]]
    element = instance.types.of(operand)
    return TensorMapRequest(kernel=instance.id, operand=operand, dtype=element.name,
                            itemsize=element.itemsize, layout=layout, dims=(contiguous, other),
                            ld=max(contiguous, 1) if ld is None else int(ld),
                            box=spec.box_at(instance.params), swizzle=spec.swizzle, sizes=sizes,
                            buffer=buffer)


def box_problem(box: tuple[int, int], itemsize: int, swizzle: str) -> str | None:
    """Why TMA refuses this box at this element size and swizzle (None: it takes it). Depends
    only on compile-time parameters and the dtype, so the catalog is checked with it."""
    if any(not 1 <= b <= MAX_BOX for b in box):
        return f"box {list(box)} must have every extent between 1 and {MAX_BOX} elements"
    inner = box[0] * itemsize
    if inner % ALIGNMENT:
        return (f"box {list(box)}: its inner extent is {inner} bytes, not a multiple of {ALIGNMENT}; "
                f"make it a multiple of {ALIGNMENT // itemsize} elements")
    span = SWIZZLES[swizzle]
    if span and inner > span:
        return (f"box {list(box)}: its inner extent is {inner} bytes, more than the {swizzle} swizzle's "
                f"span; at most {span // itemsize} elements")
    return None


def encoding_problem(req: TensorMapRequest, address: int | None = None) -> str | None:
    """Which of TMA's encoding rules `req` breaks, as one line naming the operand, the rule, the
    value and what to claim instead; None when it can be encoded. `address` is checked when given."""
    where = f"tensor map for {req.operand}"
    per_16 = max(ALIGNMENT // req.itemsize, 1)
    for extent, name in zip(req.dims, (req.contiguous, _OTHER[(req.operand, req.layout)])):
        if extent < 1:
            return (f"{where}: {name} = 0 gives an empty dimension, which a tensor map cannot describe; "
                    f"claim shapes with {name} > 0")
        if extent >= MAX_DIM:
            return f"{where}: {name} = {extent} is beyond TMA's {MAX_DIM} elements; claim smaller shapes"
    stride = req.stride_bytes
    if req.dims[1] > 1 and stride % ALIGNMENT:
        ld = _LD[req.operand]
        tight = req.ld == req.dims[0]
        return (f"{where}: {req.line} stride {stride} bytes ({ld} {req.ld} x {req.itemsize} bytes) is not a "
                f"multiple of {ALIGNMENT}; claim shapes with {req.contiguous} % {per_16} == 0"
                + ("" if tight else f" and leading dimensions that are multiples of {per_16}"))
    if stride >= MAX_STRIDE:
        return f"{where}: {req.line} stride {stride} bytes is beyond TMA's {MAX_STRIDE}; claim smaller shapes"
    if address is not None and address % ALIGNMENT:
        return (f"{where}: global address {address:#x} is not {ALIGNMENT}-byte aligned "
                f"(it is {address % ALIGNMENT} bytes past a multiple of {ALIGNMENT})")
    why = box_problem(req.box, req.itemsize, req.swizzle)
    return f"{where}: {why}" if why else None
