"""The type of each operand of a GEMM, resolved once per instantiation: A, B, C, D, the
accumulator, alpha and beta, the scale factors, and how the output is converted.

A kernel computes D = alpha (sA A)(sB B) + beta C: A and B in their input types (scaled by
sA and sB when it takes scale factors), partial sums in the accumulator, D (or C, when the
kernel writes its result over C) in the output type. One record, ``OperandTypes``, says all
of it; the harness, the oracle and the backends read their types from it and nowhere else.

How a catalog names a combination (``dtypes = [...]``):

- one element type, ``"float16"``: A, B, C and D of that type, the accumulator its own
  (float32 for float16 and bfloat16), alpha and beta in the accumulator's type;
- a combination of short names, A B and the output (C and D alike) or A B C D:
  ``"f16f16f32"`` (half inputs, float output), ``"bf16bf16bf16"``, ``"s8s8s32"`` (int8 in,
  int32 out), ``"e4m3e4m3bf16"``, ``"f16f16f32bf16"`` (C float, D bfloat16), ``"tf32"`` or
  ``"tf32tf32f32"`` (float32 data rounded to TF32 before the products). The accumulator is
  int32 when the inputs are integers, float64 when an operand is, else float32.

The catalog's ``accumulator``, ``scalar`` (the type of alpha and beta), ``scales`` and
``saturates_output`` fields complete the record for every combination of the entry, and
its ``sums`` field says what adds the products when it is not the accumulator's own
arithmetic (SUMS): ``tensor-core-fp8``, Hopper's fp8 tensor cores, which add each k-step
of 32 products to the running sum with the addends aligned to the largest exponent and
only about 14 significant bits kept; ``chain`` is how many products of K they sum before
the kernel adds the partial sum into its float32 accumulator (0: the whole K, never
promoted). The oracle's bound and exactness read both (gemmcheck.judge.oracle.bound). The
record's ``spelling`` (the name, then what differs from what the name alone says) is what a
Problem carries, so ``Problem(...)`` rebuilds a mixed kernel's inputs from its repr.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from gemmcheck import arrays
from gemmcheck.contract import dtypes as dt
from gemmcheck.contract import epilogue as epilogues
from gemmcheck.contract.launch import SCRATCH_ROLES

OPERANDS = ("A", "B", "C", "D")
SCALED = ("A", "B")                 # the operands a scale factor may apply to
GRANULARITIES = ("tensor", "row", "col")
WHOLE = 0                           # a block extent that spans the operand's whole dimension
MAJORS = ("row", "col")
DEFAULT_SCALE_TYPE = "float32"

# What adds the products: the accumulator's own rounded arithmetic, or fp8 tensor cores.
ACCUMULATOR_SUMS = "accumulator"
TENSOR_CORE_FP8 = "tensor-core-fp8"
SUMS = (ACCUMULATOR_SUMS, TENSOR_CORE_FP8)
TENSOR_CORE_K_STEP = 32     # products per fp8 wgmma k-step (m64nNk32.e4m3 / .e5m2)
# Significant bits an fp8 tensor core keeps of its aligned addends: about 14 measured on
# Hopper (DeepSeek-V3 report, sec. 3.3.2); 13, one less, leaves room for a rounding mode or
# an internal split of the k-step that the measurements do not resolve.
TENSOR_CORE_FP8_BITS = 13

# The floating-point outputs integer sums may be dequantized into: the kernel converts its int32
# sum to float32 and scales it there (DEQUANTIZE_ARITHMETIC), then stores it in D's type.
DEQUANTIZED = ("float32", "float16", "bfloat16")
DEQUANTIZE_ARITHMETIC = "float32"

_SHORT = {d.short: d for d in dt.ELEMENT_TYPES.values()}
_SHORT_NAME = re.compile("|".join(sorted(map(re.escape, _SHORT), key=len, reverse=True)))


class TypesError(ValueError):
    """A combination of operand types the suite cannot judge, or a spelling it cannot read."""


@dataclass(frozen=True)
class Scale:
    """The scale factors of one operand: a matrix of `type` values, one per block of
    `block` = (rows, columns) of the operand (WHOLE: the whole dimension), stored row- or
    column-major (`major`). Per tensor: (WHOLE, WHOLE); per row of A: (1, WHOLE); per column
    of B: (WHOLE, 1); 128 x 128 blocks of B: (128, 128)."""

    operand: str
    block: tuple[int, int]
    major: str = "row"
    type: dt.DType = dt.DTYPES[DEFAULT_SCALE_TYPE]

    @property
    def granularity(self) -> str:
        """"tensor", "row", "col", or "block" for any other block shape."""
        return {(WHOLE, WHOLE): "tensor", (1, WHOLE): "row", (WHOLE, 1): "col"}.get(self.block, "block")

    @property
    def role(self) -> str:
        return f"scale_{self.operand}"

    def shape(self, rows: int, cols: int) -> tuple[int, int]:
        """The scale matrix's shape for an operand of rows x cols."""
        return tuple(1 if b == WHOLE else -(-n // b) for n, b in zip((rows, cols), self.block))

    def expanded(self, scales, rows: int, cols: int):
        """The scale of every element of a rows x cols operand (on the array module of
        `scales`): element (r, c) is scaled by scales[r // block_rows, c // block_cols]."""
        xp = arrays.module_of(scales)
        out = scales
        for axis, (n, b) in enumerate(zip((rows, cols), self.block)):
            positions = xp.zeros(n, dtype=xp.int64) if b == WHOLE else xp.arange(n) // b
            out = xp.take(out, positions, axis=axis)
        return out

    @property
    def spelling(self) -> str:
        """``tensor``, ``row``, ``col`` or ``1x128``, then ``/col`` (column-major storage) and
        ``/<type>`` when not float32."""
        word = self.granularity if self.granularity != "block" else \
            "x".join("all" if b == WHOLE else str(b) for b in self.block)
        return word + ("/col" if self.major == "col" else "") + \
            (f"/{self.type.name}" if self.type.name != DEFAULT_SCALE_TYPE else "")

    def describe(self) -> str:
        what = {"tensor": "one per tensor", "row": f"one per row of {self.operand}",
                "col": f"one per column of {self.operand}"}.get(
            self.granularity, f"one per {self.block[0]} x {self.block[1]} block of {self.operand}")
        return f"{self.role}: {what} ({self.type.name})"


def parse_scale(operand: str, text: str) -> Scale:
    """A Scale from its spelling (``tensor``, ``row``, ``1x128/col``); TypesError otherwise."""
    word, *rest = text.split("/")
    blocks = {"tensor": (WHOLE, WHOLE), "row": (1, WHOLE), "col": (WHOLE, 1)}
    if word in blocks:
        block = blocks[word]
    elif re.fullmatch(r"(\d+|all)x(\d+|all)", word):
        block = tuple(WHOLE if b == "all" else int(b) for b in word.split("x"))
        if 0 in [b for b, w in zip(block, word.split("x")) if w != "all"]:
            raise TypesError(f"scale_{operand}: block {word}: each extent must be >= 1")
    else:
        raise TypesError(f"scale_{operand}: {text!r}; use tensor, row, col or a block RxC such as 1x128")
    major, type_name = "row", DEFAULT_SCALE_TYPE
    for part in rest:
        if part in MAJORS:
            major = part
        else:
            type_name = part
    return Scale(operand, block, major, _element(type_name, f"scale_{operand}"))


@dataclass(frozen=True)
class OperandTypes:
    """Every operand's type in one instantiation (see the module's docstring)."""

    name: str                           # as the catalog lists it and test ids show it
    A: dt.DType
    B: dt.DType
    C: dt.DType
    D: dt.DType
    accumulator: dt.DType
    scalar: dt.DType                    # alpha and beta
    scales: tuple[Scale, ...] = ()
    saturate: bool = False              # the output conversion saturates to the finite range
    epilogue: epilogues.Epilogue = epilogues.NONE   # a fused epilogue (bias, activation, ...)
    sums: str = ACCUMULATOR_SUMS        # what adds the products (SUMS)
    chain: int = 0                      # tensor-core sums: products per partial sum (0: the whole K)

    def __post_init__(self):
        inputs = (self.A, self.B)
        if any(d.is_integer for d in inputs) != all(d.is_integer for d in inputs):
            raise TypesError(f"{self.name}: A is {self.A.name} and B {self.B.name}; integer and floating-point "
                             "inputs do not mix")
        if any(d.is_integer for d in inputs) != self.accumulator.is_integer:
            needed = "an integer" if self.A.is_integer else "a floating-point"
            raise TypesError(f"{self.name}: {self.A.name} inputs need {needed} accumulator, not {self.accumulator.name}")
        if self.accumulator.is_integer and self.accumulator.name != "int32":
            raise TypesError(f"{self.name}: integer inputs accumulate in int32, not {self.accumulator.name}")
        for role in ("C", "D"):
            d = getattr(self, role)
            # integer sums may be dequantized into a floating-point output (an int8 GEMM with scales into bfloat16)
            fits = d.is_integer == self.accumulator.is_integer or (self.accumulator.is_integer and d.name in DEQUANTIZED)
            if not fits or d.name == "tf32" or d.itemsize == 1 and d.is_integer:
                kind = (f"int32, or one of {', '.join(DEQUANTIZED)} (dequantized)" if self.accumulator.is_integer
                        else "a floating-point type (float32, float16, ...)")
                raise TypesError(f"{self.name}: {role} is {d.name}; an output of {self.accumulator.name} sums is {kind}")
        if self.accumulator.is_integer and self.C.is_integer != self.D.is_integer:
            raise TypesError(f"{self.name}: C is {self.C.name} and D {self.D.name}; an integer GEMM's C and D are both "
                             "int32, or both floating-point (dequantized)")
        if self.accumulator.conversion_roundoff or self.accumulator.itemsize == 1:
            raise TypesError(f"{self.name}: the accumulator cannot be {self.accumulator.name}")
        for scale in self.scales:
            if scale.operand not in SCALED:
                raise TypesError(f"{self.name}: scale factors apply to A or B, not {scale.operand}")
        if self.epilogue != epilogues.NONE and (self.accumulator.is_integer or self.scales or self.saturate):
            raise TypesError(f"{self.name}: a fused epilogue is judged on floating-point GEMMs without scale "
                             "factors or a saturating output")
        if self.sums not in SUMS:
            raise TypesError(f"{self.name}: sums={self.sums!r}; use {' or '.join(SUMS)}")
        if self.tensor_core_sums and not (self.A.itemsize == self.B.itemsize == 1 and not self.A.is_integer
                                          and self.accumulator.name == "float32"):
            raise TypesError(f"{self.name}: sums={self.sums} needs 8-bit float A and B and a float32 accumulator, "
                             f"not {self.A.name}, {self.B.name} and {self.accumulator.name}")
        if self.chain < 0 or self.chain % TENSOR_CORE_K_STEP or (self.chain and not self.tensor_core_sums):
            raise TypesError(f"{self.name}: chain={self.chain}: a tensor-core partial sum spans a multiple of "
                             f"{TENSOR_CORE_K_STEP} products of K (0: the whole K), and only with sums={TENSOR_CORE_FP8}")

    # -- reading ----------------------------------------------------------------------------

    def of(self, role: str) -> dt.DType:
        """The element type behind a pointer role: an operand's, or a scale's."""
        if role in OPERANDS:
            return getattr(self, role)
        if role == "bias":
            return self.epilogue.bias_type or self.D
        if role == "residual":
            return self.C
        if role in ("group_offsets", "group_counts"):
            return dt.get("int32")
        if role in SCRATCH_ROLES:   # raw bytes
            return dt.get("uint8")
        scale = self.scale(role.removeprefix("scale_"))
        if scale is None:
            raise KeyError(f"{self.name} has no {role}")
        return scale.type

    def scale(self, operand: str) -> Scale | None:
        return next((s for s in self.scales if s.operand == operand), None)

    @property
    def uniform(self) -> bool:
        """Whether it is a one-type kernel's record: A, B, C and D of one type, no scales."""
        return len({self.A, self.B, self.C, self.D}) == 1 and not self.scales

    @property
    def inputs_integer(self) -> bool:
        return self.A.is_integer

    @property
    def dequantizes(self) -> bool:
        """Whether integer sums go into a floating-point output (converted to float32, scaled, stored)."""
        return dequantized(self.accumulator, self.D)

    @property
    def arithmetic(self) -> dt.DType:
        """The type the steps after the sums are done in: the accumulator's, or float32 where the
        kernel dequantizes its integer sums."""
        return arithmetic_of(self.accumulator, self.D)

    @property
    def product_exact(self) -> bool:
        """Whether a product of an A and a B element is exact in the accumulator."""
        return self.inputs_integer or self.A.significand_bits + self.B.significand_bits <= \
            self.accumulator.significand_bits

    @property
    def tensor_core_sums(self) -> bool:
        """Whether fp8 tensor cores add the products (aligned, TENSOR_CORE_FP8_BITS kept)."""
        return self.sums == TENSOR_CORE_FP8

    @property
    def sum_bits(self) -> int:
        """The significant bits a partial sum of products keeps: TENSOR_CORE_FP8_BITS with
        tensor-core sums, else the accumulator's significand."""
        return TENSOR_CORE_FP8_BITS if self.tensor_core_sums else self.accumulator.significand_bits

    def chain_length(self, K: int) -> int:
        """How many products of K one partial sum adds before it reaches the accumulator."""
        return min(self.chain, K) if self.chain else K

    @property
    def sums_spelling(self) -> str:
        """``tensor-core-fp8`` or ``tensor-core-fp8/128`` (with its chain)."""
        return sums_spelling(self.sums, self.chain)

    def with_sums(self, sums: str, chain: int = 0) -> "OperandTypes":
        """This record with what adds the products (`chain`: products per partial sum, 0 the whole K)."""
        return of(f"{self.spelling} sums={sums_spelling(sums, chain)}")

    @property
    def output_rounds(self) -> bool:
        """Whether storing an accumulated sum into D rounds it."""
        return self.D.numpy != self.accumulator.numpy

    @property
    def spelling(self) -> str:
        """The name, then every field the name alone does not give, as ``key=value``:
        ``e4m3e4m3bf16 scale_A=tensor scale_B=tensor``."""
        plain = of(self.name)
        extra = [f"{key}={getattr(self, key).name}" for key in ("C", "D", "accumulator", "scalar")
                 if getattr(self, key) != getattr(plain, key)]
        extra += [f"{s.role}={s.spelling}" for s in self.scales]
        extra += ["saturate"] if self.saturate else []
        extra += [f"epilogue={self.epilogue.spelling}"] if self.epilogue.spelling else []
        extra += [f"sums={self.sums_spelling}"] if self.tensor_core_sums else []
        return " ".join([self.name, *extra])

    def __repr__(self) -> str:
        return f"operand_types.of({self.spelling!r})"

    def describe(self) -> str:
        """``A float16, B float16, C float32, D float32, accumulator float32``, and the scales."""
        parts = [f"{role} {getattr(self, role).name}" for role in OPERANDS]
        parts.append(f"accumulator {self.accumulator.name}")
        parts += [s.describe() for s in self.scales]
        if self.saturate:
            parts.append("output saturating")
        if self.epilogue.spelling:
            parts.append(self.epilogue.describe())
        if self.tensor_core_sums:
            chain = f"{self.chain} products" if self.chain else "the whole K"
            parts.append(f"sums by fp8 tensor cores ({TENSOR_CORE_FP8_BITS} bits kept), promoted every {chain}")
        return ", ".join(parts)


def batch_not_modelled(types) -> str | None:
    """Why a batch of products of these types is not modelled (None: it is). An epilogue's steps
    that act element by element (an activation, the output scale) are; scale factors, a bias and
    a residual, which a batch would have to share or stack per product, are not yet."""
    if types.scales:
        return "scale factors"
    if types.epilogue.bias or types.epilogue.residual:
        return "a fused bias or residual"
    return None


def dequantized(accumulator: dt.DType, D: dt.DType) -> bool:
    """Whether integer sums go into a floating-point D."""
    return accumulator.is_integer and not D.is_integer


def arithmetic_of(accumulator: dt.DType, D: dt.DType) -> dt.DType:
    """The type the steps after the sums are done in: the accumulator's, or float32 (DEQUANTIZE_ARITHMETIC)
    for integer sums dequantized into a floating-point D."""
    return dt.get(DEQUANTIZE_ARITHMETIC) if dequantized(accumulator, D) else accumulator


def _element(name: str, what: str) -> dt.DType:
    try:
        return dt.get(name)
    except ValueError:
        short = _SHORT.get(name)
        if short is not None:
            return short
        raise TypesError(f"{what}: unknown element type {name!r}; known: {', '.join(dt.ELEMENT_TYPES)}") from None


def default_accumulator(*types: dt.DType) -> dt.DType:
    """int32 for integer inputs, float64 when any operand is float64, else float32."""
    if types[0].is_integer:
        return dt.get("int32")
    return dt.get("float64") if any(d.name == "float64" for d in types) else dt.get("float32")


def combination(name: str) -> tuple[dt.DType, ...] | None:
    """The operand types a combination's name lists (A, B, C, D), or None when it is none."""
    if name in dt.DTYPES:
        d = dt.DTYPES[name]
        return (d, d, d, d)
    if name == "tf32":
        single = dt.get("float32")
        return (dt.get("tf32"), dt.get("tf32"), single, single)
    parts = _SHORT_NAME.findall(name)
    if "".join(parts) != name or len(parts) not in (3, 4):
        return None
    A, B, *out = (_SHORT[p] for p in parts)
    return (A, B, out[0], out[-1])


@functools.lru_cache(maxsize=256)
def of(spelling: str) -> OperandTypes:
    """The OperandTypes a spelling names: a combination's name, then ``key=value`` fields
    (A, B, C, D, accumulator, scalar, scale_A, scale_B, sums) and ``saturate``."""
    name, *fields = spelling.split()
    listed = combination(name)
    if listed is None:
        raise TypesError(f"unknown dtype {name!r}; use one of {', '.join(dt.DTYPES)}, tf32, or a combination of "
                         f"A, B and the output (C and D) or A, B, C, D in short names ({', '.join(_SHORT)}), "
                         "e.g. 'f16f16f32', 's8s8s32', 'e4m3e4m3bf16'")
    types = dict(zip(OPERANDS, listed))
    scales, saturate, epilogue, sums = [], False, epilogues.NONE, {}
    for field in fields:
        key, _, value = field.partition("=")
        if key == "saturate" and not value:
            saturate = True
        elif key == "epilogue" and value:
            try:
                epilogue = epilogues.parse(value)
            except (epilogues.EpilogueError, ValueError) as exc:
                raise TypesError(str(exc)) from None
        elif key == "sums" and value:
            sums = parse_sums(value)
        elif key in (*OPERANDS, "accumulator", "scalar") and value:
            types[key] = _element(value, key)
        elif key in ("scale_A", "scale_B") and value:
            scales.append(parse_scale(key[-1], value))
        else:
            raise TypesError(f"{spelling!r}: cannot read {field!r}; fields are A=, B=, C=, D=, accumulator=, "
                             "scalar=, scale_A=, scale_B=, epilogue=, sums= and saturate")
    accumulator = types.pop("accumulator", None) or default_accumulator(*(types[r] for r in OPERANDS))
    # alpha and beta: in the arithmetic after the sums (the accumulator's; float32 for dequantized integers)
    scalar = types.pop("scalar", None) or arithmetic_of(accumulator, types["D"])
    return OperandTypes(name, types["A"], types["B"], types["C"], types["D"], accumulator, scalar,
                        tuple(sorted(scales, key=lambda s: s.operand)), saturate, epilogue, **sums)


def sums_spelling(sums: str, chain: int) -> str:
    return sums + (f"/{chain}" if chain else "")


def parse_sums(text: str) -> dict:
    """{"sums": ..., "chain": ...} from ``tensor-core-fp8`` or ``tensor-core-fp8/128``."""
    unit, _, chain = text.partition("/")
    if unit not in SUMS or (chain and not chain.isdigit()):
        raise TypesError(f"sums={text!r}; use {' or '.join(SUMS)}, the tensor cores' with /CHAIN (products "
                         "between promotions to float32), e.g. tensor-core-fp8/128")
    return {"sums": unit, "chain": int(chain or 0)}


def resolve(name: str, *, accumulator: str | None = None, scalar: str | None = None, scales=(),
            saturate: bool = False, epilogue: epilogues.Epilogue = epilogues.NONE,
            sums: str | None = None) -> OperandTypes:
    """The record of one `dtypes` entry of a catalog with the entry's own fields (`sums`: its
    spelling, ``tensor-core-fp8/64``)."""
    fields = [name]
    fields += [f"accumulator={accumulator}"] if accumulator else []
    fields += [f"scalar={scalar}"] if scalar else []
    fields += [f"scale_{s.operand}={s.spelling}" for s in scales]
    fields += ["saturate"] if saturate else []
    fields += [f"epilogue={epilogue.spelling}"] if epilogue.spelling else []
    fields += [f"sums={sums}"] if sums else []
    return of(" ".join(fields))


def coerce(value) -> OperandTypes:
    """An OperandTypes from itself, a DType, or a spelling (``"float16"``, ``"f16f16f32 ..."``)."""
    if isinstance(value, OperandTypes):
        return value
    if isinstance(value, dt.DType):
        return of(value.name)
    return of(str(value))
