"""The one launch path: a catalog instantiation and a problem's values become a Launch.

``plan(instance, values)`` is the only place that orders a kernel's arguments
(by the roles its catalog entry lists), converts each to the C type the kernel
declares for it (``packed_types``: an int, a size_t, a __half alpha ...), and
computes grid, block and dynamic shared memory from the entry's geometry. Backends
only run what it returns: ``backend.launch(instance, launch)``.

Geometry and shape claims are arithmetic over M, N, K and the compile-time
parameters, read by a small evaluator over Python's ``ast`` with a whitelist
(never ``eval``). Values are exact fractions while evaluating, so ``/`` is
allowed where it divides exactly or inside ``ceil``/``floor``; anything else is
an error naming the expression. Grid and block are (x, y, z) in CUDA's order:
x runs along the columns of C (N), y along its rows (M).
"""

from __future__ import annotations

import ast
import math
import operator
from dataclasses import dataclass
from fractions import Fraction
from typing import Mapping

import numpy as np

from gemmcheck.contract import parameters, tensor_map
from gemmcheck.contract.parameters import FLOATING, INTEGER, POINTER, TENSOR_MAP, UNKNOWN, CType, Parameter

Dim3 = tuple[int, int, int]

OPERAND_ROLES = ("A", "B", "C", "D")        # matrices: D, when listed, is the output and C only read
SCALE_ROLES = ("scale_A", "scale_B")       # scale factors: a pointer, or a per-tensor value
EPILOGUE_POINTER_ROLES = ("bias", "residual")   # a fused epilogue's inputs (gemmcheck.contract.epilogue)
# A grouped GEMM: `groups` products, group g's rows of A and C at group_offsets[g] ..
# group_offsets[g + 1] (contiguous), or the first group_counts[g] rows of its slot of M (masked);
# integer arrays in the type the kernel declares (table_type: int32, int64). B of group g at
# B + g * stride_B.
GROUP_POINTER_ROLES = ("group_offsets", "group_counts")
# A pointer-array batch (cuBLAS's gemmBatched): A_array ... D_array hold one pointer per product,
# `batch` of them; an operand is passed either this way or as X itself, never both.
ARRAY_ROLES = tuple(f"{name}_array" for name in OPERAND_ROLES)
# Scratch memory the caller provides (a split-K or stream-K kernel's partial sums, its semaphores
# or locks): raw bytes, neither input nor output. The catalog's `scratch` gives each one's size,
# `scratch_zeroed` whether callers zero it before every launch (gemmcheck.problems.harness).
SCRATCH_ROLES = ("workspace", "semaphores")
POINTER_ROLES = OPERAND_ROLES + SCALE_ROLES + EPILOGUE_POINTER_ROLES + GROUP_POINTER_ROLES + ARRAY_ROLES + SCRATCH_ROLES
# A strided batch: `batch` products in one launch, operand X of product b at X + b * stride_X
# (a stride of 0 broadcasts one matrix to every product); the geometry may name `batch`.
BATCH_ROLES = ("batch", "stride_A", "stride_B", "stride_C", "stride_D")
INT_ROLES = ("M", "N", "K", "lda", "ldb", "ldc", "ldd") + BATCH_ROLES + ("groups",)
SCALAR_ROLES = ("alpha", "beta", "output_scale")
TENSOR_MAP_ROLES = tensor_map.ROLES        # a CUtensorMap of A, B, C or D, passed by value
ROLES = OPERAND_ROLES + SCALE_ROLES + INT_ROLES + ("alpha", "beta") + TENSOR_MAP_ROLES + \
    EPILOGUE_POINTER_ROLES + ("output_scale",) + GROUP_POINTER_ROLES + ARRAY_ROLES + SCRATCH_ROLES
DIMENSIONS = ("M", "N", "K")
GEOMETRY_NAMES = DIMENSIONS + ("batch", "groups")   # what grid, block and shared_bytes may name besides parameters

MAX_THREADS_PER_BLOCK = 1024
MAX_BLOCK_DIMS = (1024, 1024, 64)
MAX_STATIC_SHARED_BYTES = 48 * 1024          # without opting in, on every CUDA device
MAX_DYNAMIC_SHARED_BYTES = 227 * 1024        # the opt-in limit of sm_90 (H100/H200); backends check their own
MAX_PORTABLE_CLUSTER = 8                     # blocks per cluster every cluster-capable GPU launches
# The largest M, N, K or leading dimension the suite passes a kernel in any profile: the nightly
# profile's timed 8192, padded to the next multiple of 8 above it (tests/test_parameters.py holds
# the profiles to it). A parameter that takes a size must hold it.
LARGEST_DIMENSION = 8200


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


class ExpressionError(ValueError):
    """An expression is malformed or cannot be evaluated; the message says which and why."""


# -- the safe evaluator ------------------------------------------------------------------

_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}
_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
            ast.Gt: operator.gt, ast.GtE: operator.ge}
_FUNCTIONS = {"ceil": (1, math.ceil), "floor": (1, math.floor), "min": (None, min), "max": (None, max)}
_SYMBOLS = "ceil, floor, min, max, + - * / // %, comparisons, and/or/not"


@dataclass(frozen=True)
class Expression:
    """Arithmetic over named integers: ``ceil(N / BN)``, ``M % BM == 0 and K % BK == 0``."""

    text: str

    def __post_init__(self):
        tree = _parse(self.text)
        object.__setattr__(self, "_tree", tree)
        object.__setattr__(self, "names", frozenset(
            n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id not in _FUNCTIONS))

    def value(self, env: Mapping[str, int]):
        """The exact value (Fraction or bool) with `env` binding every name."""
        try:
            return _eval(self._tree.body, env)
        except ZeroDivisionError:
            raise ExpressionError(f"{self.text!r} divides by zero with {_bindings(self, env)}") from None

    def integer(self, env: Mapping[str, int]) -> int:
        """The value as a whole number; a fraction is an error (use ceil, floor or //)."""
        v = self.value(env)
        if isinstance(v, bool) or Fraction(v).denominator != 1:
            raise ExpressionError(f"{self.text!r} is {v} with {_bindings(self, env)}, not a whole number; "
                                  "write ceil(a / b), floor(a / b) or a // b")
        return int(v)

    def holds(self, env: Mapping[str, int]) -> bool:
        return bool(self.value(env))

    def unknown(self, known) -> list[str]:
        """Names the expression uses that are not in `known`."""
        return sorted(self.names - set(known))


def _bindings(expr: Expression, env) -> str:
    return ", ".join(f"{n}={env[n]}" for n in sorted(expr.names) if n in env) or "no names"


def _parse(text: str) -> ast.Expression:
    if not isinstance(text, str) or not text.strip():
        raise ExpressionError(f"expression {text!r} is empty; write arithmetic such as 'ceil(N / BN)'")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ExpressionError(f"{text!r} is not an expression: {exc.msg}") from None
    for node in ast.walk(tree):
        ok = isinstance(node, (ast.Expression, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.Name,
                               ast.Load, ast.And, ast.Or, ast.Not, ast.USub, ast.UAdd, *_BINARY, *_COMPARE))
        if isinstance(node, ast.Constant):
            ok = type(node.value) is int
        if isinstance(node, ast.Call):
            ok = (isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS and not node.keywords
                  and (_FUNCTIONS[node.func.id][0] in (None, len(node.args))) and len(node.args) >= 1)
        if not ok:
            raise ExpressionError(f"{text!r}: {ast.unparse(node) if isinstance(node, ast.expr) else type(node).__name__}"
                                  f" is not allowed; use integers, names, {_SYMBOLS}")
    return tree


def _eval(node, env):
    if isinstance(node, ast.Constant):
        return Fraction(node.value)
    if isinstance(node, ast.Name):
        if node.id not in env:
            raise ExpressionError(f"unknown name {node.id!r}; known: {', '.join(sorted(env))}")
        return Fraction(env[node.id])
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left, env), _eval(node.right, env)
        result = _BINARY[type(node.op)](left, right)
        return Fraction(result)
    if isinstance(node, ast.UnaryOp):
        v = _eval(node.operand, env)
        return (not v) if isinstance(node.op, ast.Not) else (-v if isinstance(node.op, ast.USub) else v)
    if isinstance(node, ast.BoolOp):
        values = (_eval(v, env) for v in node.values)
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.Compare):
        left = _eval(node.left, env)
        for op, comparator in zip(node.ops, node.comparators):
            right = _eval(comparator, env)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.Call):
        fn = _FUNCTIONS[node.func.id][1]
        return Fraction(fn(*(_eval(a, env) for a in node.args)))
    raise ExpressionError(f"cannot evaluate {ast.unparse(node)}")  # _parse admits nothing else


# -- geometry ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Geometry:
    """Grid, block (1 to 3 expressions each, x first) and dynamic shared memory in bytes."""

    grid: tuple[Expression, ...]
    block: tuple[Expression, ...]
    shared_bytes: Expression = Expression("0")

    @classmethod
    def of(cls, grid, block, shared_bytes="0") -> "Geometry":
        return cls(tuple(Expression(g) for g in grid), tuple(Expression(b) for b in block),
                   Expression(str(shared_bytes)))

    @property
    def names(self) -> frozenset[str]:
        return frozenset().union(*(e.names for e in (*self.grid, *self.block, self.shared_bytes)))

    def block_dims(self, env) -> Dim3:
        return _dim3(self.block, env)

    def evaluate(self, env) -> tuple[Dim3, Dim3, int]:
        return _dim3(self.grid, env), _dim3(self.block, env), self.shared_bytes.integer(env)


def _dim3(exprs, env) -> Dim3:
    dims = [e.integer(env) for e in exprs] + [1] * (3 - len(exprs))
    return tuple(dims)  # type: ignore[return-value]


def check_block(block: Dim3) -> str | None:
    """Why CUDA would refuse this block shape, or None."""
    threads = block[0] * block[1] * block[2]
    if min(block) < 1:
        return f"block {block} has {threads} threads; every dimension must be >= 1"
    if threads > MAX_THREADS_PER_BLOCK:
        return f"block {block} has {threads} threads per block (max {MAX_THREADS_PER_BLOCK})"
    for axis, (d, limit) in enumerate(zip(block, MAX_BLOCK_DIMS)):
        if d > limit:
            return f"block {block}: dimension {'xyz'[axis]} is {d} (max {limit})"
    return None


def check_cluster(grid: Dim3, cluster: Dim3) -> str | None:
    """Why a cluster launch of `grid` with `cluster` is invalid, or None."""
    size = cluster[0] * cluster[1] * cluster[2]
    if min(cluster) < 1:
        return f"cluster {cluster}: every dimension must be >= 1"
    if size > MAX_PORTABLE_CLUSTER:
        return (f"cluster {cluster} has {size} blocks; gemmcheck launches portable clusters only "
                f"(at most {MAX_PORTABLE_CLUSTER} blocks)")
    if any(g % c for g, c in zip(grid, cluster)):
        return (f"grid {grid} is not a multiple of cluster {cluster} in every dimension; "
                "round the grid up to whole clusters, e.g. grid = [\"2 * ceil(N / (2 * BN))\", ...]")
    return None


def check_shared(shared_bytes: int, limit: int = MAX_DYNAMIC_SHARED_BYTES) -> str | None:
    if shared_bytes < 0:
        return f"dynamic shared memory is {shared_bytes} bytes; it must be >= 0"
    if shared_bytes > limit:
        return f"{shared_bytes} bytes of dynamic shared memory (the device allows {limit})"
    return None


@dataclass(frozen=True)
class Policy:
    """A named geometry: the shorthands catalogs used before expressions."""

    name: str
    description: str
    grid: tuple[str, str]

    def geometry(self, tile: str = "TILE") -> Geometry:
        rename = lambda text: text.replace("TILE", tile)
        return Geometry.of([rename(g) for g in self.grid], [tile, tile])

    def shape(self, M: int, N: int, K: int, tile: int) -> tuple[Dim3, Dim3]:
        grid, block, _ = self.geometry().evaluate({"M": M, "N": N, "K": K, "TILE": tile})
        return grid, block

    def threads_per_block(self, tile: int) -> int:
        return tile * tile


POLICIES: dict[str, Policy] = {
    p.name: p
    for p in (
        Policy("seed", "grid (N / TILE, N / TILE) rounded down, block (TILE, TILE): the seed's host code",
               ("N // TILE", "N // TILE")),
        Policy("tile2d", "grid (ceil(N / TILE), ceil(M / TILE)), block (TILE, TILE)",
               ("ceil(N / TILE)", "ceil(M / TILE)")),
        Policy("floor2d", "grid (N / TILE, M / TILE) rounded down, block (TILE, TILE)",
               ("N // TILE", "M // TILE")),
        Policy("naive", "one thread per output: grid (ceil(N / TILE), ceil(M / TILE)), block (TILE, TILE);"
               " TILE is only the block edge", ("ceil(N / TILE)", "ceil(M / TILE)")),
    )
}


# -- arguments ---------------------------------------------------------------------------

def tight_leading_dimensions(layouts: Mapping[str, str], M: int, N: int, K: int) -> dict[str, int]:
    """lda, ldb, ldc, ldd with no padding: the row length of each operand as stored."""
    shapes = {"A": (M, K), "B": (K, N), "C": (M, N), "D": (M, N)}
    return {f"ld{name.lower()}": (cols if layouts.get(name, "row") == "row" else rows)
            for name, (rows, cols) in shapes.items()}


def tight_batch_strides(M: int, N: int, K: int, batch: int = 1) -> dict[str, int]:
    """batch and stride_A ... stride_D of `batch` tight products stored back to back."""
    return {"batch": batch, "stride_A": M * K, "stride_B": K * N, "stride_C": M * N, "stride_D": M * N}


def array_operand(role) -> str | None:
    """The operand a pointer-array role passes (A for A_array), else None."""
    return role.removesuffix("_array") if role in ARRAY_ROLES else None


def pointer_arrays(roles) -> tuple[str, ...]:
    """The operands `roles` pass as arrays of pointers, one per product (a pointer-array batch)."""
    return tuple(array_operand(r) for r in roles if r in ARRAY_ROLES)


def packed_in_batch(roles, operand: str) -> bool:
    """Whether a batched kernel taking `roles` finds product b's `operand` itself, packed after
    product b - 1's (``A + b * M * K``): it takes `batch` (or names it in its grid) but neither
    stride_X nor X_array. Such an operand cannot be broadcast (the kernel never reads a stride 0)."""
    return f"stride_{operand}" not in roles and f"{operand}_array" not in roles


def takes_operand(roles, operand: str) -> bool:
    """Whether a kernel taking `roles` is given `operand` in any form: its pointer, an array of
    pointers to a batch's products, or its tensor map."""
    return bool({operand, f"{operand}_array", f"tensor_map_{operand}"} & set(roles))


def missing_operands(roles) -> list[str]:
    """The operands a kernel taking `roles` lacks: A and B, and C or D (the output; a kernel
    with D only reads C, or takes none); a tensor map of an operand, or an array of pointers
    to its products, stands for its pointer."""
    given = {r for r in OPERAND_ROLES if takes_operand(roles, r)}
    return [r for r in ("A", "B") if r not in given] + ([] if given & {"C", "D"} else ["C"])


def role_kind(role) -> str:
    """How a role is passed: a pointer, an integer (sizes and literals), a floating-point
    scalar (alpha, beta) or a tensor map. (A per-tensor scale may be a floating-point value
    instead of a pointer, as its kernel declares: misfit and packed_types.)"""
    if isinstance(role, int) or role in INT_ROLES:
        return INTEGER
    return {**dict.fromkeys(POINTER_ROLES, POINTER), **dict.fromkeys(SCALAR_ROLES, FLOATING)}.get(role, TENSOR_MAP)


def default_type(instance, role) -> CType:
    """The C type a role is passed as where the kernel's declaration cannot be read: int for
    sizes and literals, the type of alpha and beta (the accumulator's unless the catalog says;
    float for an integer one), a pointer to the role's element type."""
    kind, types = role_kind(role), instance.types
    if kind == INTEGER:
        return parameters.INT32
    if kind == FLOATING:
        scalar = types.scalar.c_type
        return parameters.floating(scalar if scalar in parameters.FLOATING_TYPES else "float")
    if kind == POINTER:
        stars = " **" if role in ARRAY_ROLES else " *"
        return CType(f"{types.of(array_operand(role) or role).c_type}{stars}", POINTER, 8, False)
    return CType("CUtensorMap", TENSOR_MAP, parameters.TENSOR_MAP_BYTES)


_PASSED_AS = {POINTER: "a pointer", INTEGER: "an integer",
              FLOATING: "a floating-point value (float, double, __half or __nv_bfloat16)",
              TENSOR_MAP: "a CUtensorMap by value (const __grid_constant__ CUtensorMap, 128 bytes)"}


def misfit(role, parameter: Parameter, kernel: str = "") -> str | None:
    """Why the declared `parameter` (of `kernel`, as the message names it) cannot take `role` (a
    pointer role on an integer, an integer role on a pointer, a tensor map role on a pointer,
    an integer too small for the sizes the suite passes), or None."""
    kind, declared = role_kind(role), parameter.type
    if declared.kind == UNKNOWN:
        return None   # packed in the role's own type; the compilers check the size (parameters.py)
    if role in SCALE_ROLES and declared.kind == FLOATING:
        return None   # a per-tensor scale by value (the catalog loader checks the granularity)
    if role in ("alpha", "beta") and declared.kind == INTEGER:
        return None   # cuBLAS's int32 alpha and beta of an int8 GEMM: the suite's are integers (_scalar checks)
    if role in SCALAR_ROLES and declared.kind == POINTER:
        pointee = _pointee(declared)
        if declared.spelling.count("*") == 1 and pointee is not None and pointee.spelling in _SCALAR_POINTEES:
            return None   # through a device pointer, as cuBLAS's pointer mode device passes it (scalar_pointee)
        what = "a pointer to pointers" if declared.spelling.count("*") > 1 else f"a pointer to {pointee}"
        return (f"role {role!r} is {parameter.describe(kernel)}, {what}; {role} is passed as a number, or "
                f"through a pointer to one of {', '.join(_SCALAR_POINTEES)}")
    if declared.kind != kind:
        what = _PASSED_AS.get(declared.kind, f"a {declared} by value, which the suite cannot pack"
                                             + (f" ({declared.why})" if declared.why else ""))
        hint = {(TENSOR_MAP, POINTER): f"; declare it const __grid_constant__ CUtensorMap, or give the role "
                                       f"{tensor_map.operand_of(role) if role in TENSOR_MAP_ROLES else 'A'}",
                (POINTER, TENSOR_MAP): f"; give it the role tensor_map_{role}"}.get((kind, declared.kind), "")
        return (f"role {role!r} is {parameter.describe(kernel)}, {what}; {role} is passed as {_PASSED_AS[kind]}"
                f"{hint or ('' if declared.why else '; list the roles in the order the kernel declares its parameters')}")
    if kind == POINTER and (declared.spelling.count("*") > 1) != (role in ARRAY_ROLES):
        if role in ARRAY_ROLES:
            return (f"role {role!r} is {parameter.describe(kernel)}, a pointer to elements; {role} is passed as an "
                    f"array of pointers, one per product (declared like const float *const *{role}); give the "
                    f"parameter the role {array_operand(role)} for one matrix, or a strided batch's")
        hint = (f"; give it the role {role}_array" if role in OPERAND_ROLES else
                f"; {role} is passed as {_PASSED_AS[kind]}")
        return (f"role {role!r} is {parameter.describe(kernel)}, an array of pointers (a pointer-array batch: "
                f"one pointer per product){hint}")
    if kind == INTEGER:
        low, high = declared.range
        if isinstance(role, int) and not low <= role <= high:
            return f"the literal {role} is {parameter.describe(kernel)}, which holds {low} to {high}"
        if not isinstance(role, int) and high < LARGEST_DIMENSION:
            return (f"role {role!r} is {parameter.describe(kernel)}, which holds at most {high}; the suite passes "
                    f"{role} up to {LARGEST_DIMENSION}: declare it int (or wider)")
    return None


def table_type(instance, role: str):
    """The element type of a grouped kernel's table (group_offsets or group_counts) as its kernel
    declares the pointer (``const int *``: int32, ``const int64_t *``: int64); int32 where the
    declaration cannot be read. The loader refuses any other pointee (pointee_misfit)."""
    from gemmcheck.contract import dtypes as dt

    pointee = _pointee(next((t for r, t in zip(instance.spec.roles, packed_types(instance)) if r == role), None))
    if pointee is None or pointee.kind != INTEGER:
        return dt.TABLE_TYPES["int32"]
    return dt.TABLE_TYPES[f"{'' if pointee.signed else 'u'}int{8 * pointee.size}"]


def _pointee(ctype: CType | None) -> CType | None:
    """What a pointer type points to, past every level (``float **``: float); None for a non-pointer."""
    if ctype is None or ctype.kind != POINTER:
        return None
    return parameters.read_type(ctype.spelling.replace("*", " "))


# The floating-point element types a pointer may be declared to: a mismatch with the role's own
# type is a catalog whose dtypes do not say what the kernel reads. (A pointer to integers or to
# vectors, float4 or half2, packs elements; it is not compared.)
_FLOATING_ELEMENTS = ("float", "double", "__half", "__nv_bfloat16", "__nv_fp8_e4m3", "__nv_fp8_e5m2")


def pointee_misfit(instance, role: str, parameter: Parameter) -> str | None:
    """Why what `parameter` points to does not hold what the suite writes for `role`, or None: a
    grouped kernel's table is 32- or 64-bit integers (table_type); an operand, scale, bias or
    residual of a floating-point type is the type `instance` gives the role (``const __half *A``
    in a float32 instantiation is refused; a pointer to integers or vectors packs elements)."""
    pointee = _pointee(parameter.type)
    if pointee is None or pointee.kind == UNKNOWN:
        return None
    where = f"role {role!r} is {parameter.describe(instance.name_expression)}, a pointer to {pointee}"
    if role in GROUP_POINTER_ROLES:
        if pointee.kind == INTEGER and pointee.size in (4, 8):
            return None
        return f"{where}; the suite writes {role} as 32- or 64-bit integers: declare it const int * or const int64_t *"
    if role not in OPERAND_ROLES + ARRAY_ROLES + SCALE_ROLES + EPILOGUE_POINTER_ROLES:
        return None
    pointee = pointee.spelling
    if pointee not in _FLOATING_ELEMENTS:
        return None
    expected = instance.types.of(array_operand(role) or role)
    if pointee == expected.c_type:
        return None
    fix = {"scale_A": "give scales.A its type (type = \"float64\", ...)",
           "scale_B": "give scales.B its type (type = \"float64\", ...)",
           "bias": "give the epilogue its bias_type",
           "residual": "the residual is C's type: list a dtype whose C is the residual's"}.get(
        role, "list the dtypes the kernel reads (e.g. a combination such as \"f16f16f32\")")
    return (f"{where}, but dtype {instance.dtype!r} makes {role} {expected.name} ({expected.c_type}): {fix}, or give "
            "the parameter its own role")


# What a kernel may take alpha, beta or output_scale through a pointer to (scalar_pointee).
_SCALAR_POINTEES = ("float", "double", "__half", "__nv_bfloat16", "int")


def scalar_pointee(instance, role: str):
    """The element type (gemmcheck.contract.dtypes) of alpha, beta or output_scale where the
    kernel takes it through a pointer (``const float *alpha``: cuBLAS's pointer mode device),
    so the suite passes the value in a buffer of that type; None where it takes a number."""
    from gemmcheck.contract import dtypes as dt

    pointee = _pointee(next((t for r, t in zip(instance.spec.roles, packed_types(instance)) if r == role), None))
    if pointee is None:
        return None
    return next(d for d in dt.ELEMENT_TYPES.values() if d.c_type == pointee.spelling)


def by_value(instance, role: str) -> bool:
    """Whether a scale role is passed as a floating-point value (``float scale_a``), not a pointer."""
    return any(r == role and t.kind == FLOATING for r, t in zip(instance.spec.roles, packed_types(instance)))


def packed_types(instance) -> tuple[CType, ...]:
    """The C type of each argument of `instance`, in its roles' order: as its kernel declares
    the parameter, or the role's default_type where the declaration cannot be read (or does
    not fit: the catalog loader refuses that for an entry it loads)."""
    declared = instance.parameters or ()
    out = []
    for position, role in enumerate(instance.spec.roles):
        parameter = declared[position] if position < len(declared) else None
        usable = parameter is not None and parameter.type.kind != UNKNOWN and misfit(role, parameter) is None
        out.append(parameter.type if usable else default_type(instance, role))
    return tuple(out)


def compiler_disagreement(instance, symbol: str) -> str | None:
    """Where the types `instance`'s arguments are packed in (packed_types) differ from the
    compiler's own view of its parameters (the mangled `symbol` of its build), in one line;
    None where they agree, or the symbol names no types (``extern "C"``) or only a dependent
    one (``typename accumulator<T>::type alpha``)."""
    compiled = parameters.compiled_types(symbol)
    if compiled is None:
        return None
    text, theirs = compiled
    packed = packed_by_parameter(instance)
    if len(theirs) != len(packed):
        return (f"the catalog lists {len(instance.spec.roles)} roles for {len(packed)} parameters, the compiler's "
                f"{text} takes {len(theirs)} parameters")
    for position, ((roles, ours), compiled_type) in enumerate(zip(packed, theirs)):
        # a type the symbol spells through a trait (accumulator<float>::type) says no size here;
        # the CPU simulator's build checks its size (a static_assert against g++'s), and a
        # struct's layout member by member
        if ours.kind == parameters.STRUCT:   # the same struct (a template's arguments as the demangler spells them)
            agrees = compiled_type.kind in (parameters.OTHER, UNKNOWN) and \
                compiled_type.spelling.split("<")[0].strip() == ours.spelling.split("<")[0].strip()
        else:
            agrees = compiled_type.kind == UNKNOWN or ours.same_layout(compiled_type)
        if not agrees:
            return (f"parameter {position + 1} ({', '.join(map(str, roles))}) is packed as {ours} ({ours.kind}, "
                    f"{ours.size} bytes); the compiler's {text} declares {compiled_type} ({compiled_type.kind}, "
                    f"{compiled_type.size} bytes)")
    return None


def packed_by_parameter(instance) -> list[tuple[tuple, CType]]:
    """(roles, packed C type) per kernel parameter: a struct's members' roles as one, typed as
    the struct."""
    out: list[tuple[tuple, CType]] = []
    holders: list = []
    for role, ctype, declared in zip(instance.spec.roles, packed_types(instance), declared_by_role(instance)):
        holder = declared.member_of if declared is not None else None
        if holder is not None and holders and holders[-1] is holder:
            out[-1] = ((*out[-1][0], role), out[-1][1])
            continue
        holders.append(holder)
        out.append(((role,), holder.type if holder is not None else ctype))
    return out


def _integer(instance, role, value, ctype: CType) -> np.integer:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{instance.id}: argument {role!r} must be an integer, got {value!r}")
    low, high = ctype.range
    if not low <= int(value) <= high:
        raise OverflowError(f"{instance.id}: argument {role!r} = {value} does not fit the kernel's {ctype} "
                            f"({low} to {high})")
    return ctype.numpy.type(value)


def _scalar(instance, role, value, ctype: CType) -> np.generic:
    """alpha or beta in the kernel's type; a value that type cannot hold exactly is refused (the
    oracle would judge a product the kernel was never asked for)."""
    packed = ctype.numpy.type(value)
    if float(packed) != float(value) and float(value) == float(value):
        raise LaunchError(f"{instance.id}: {role} = {value!r} is {float(packed)!r} in the kernel's {ctype}; "
                          f"pass a value {ctype} holds exactly")
    return packed


@dataclass(frozen=True)
class StructArgument:
    """A struct the kernel takes by value, filled with its members' arguments: `members` are
    (offset, C type, argument as plan packs a role: a device buffer for a pointer, else a numpy
    scalar) in the struct's `size` bytes (gemmcheck.contract.structs)."""

    size: int
    members: tuple

    def packed(self, address) -> bytes:
        """The struct's bytes, each pointer member the device address `address(buffer)` gives."""
        out = bytearray(self.size)
        for offset, ctype, value in self.members:
            data = np.uint64(address(value)).tobytes() if ctype.kind == POINTER else np.asarray(value).tobytes()
            out[offset:offset + len(data)] = data
        return bytes(out)


@dataclass(frozen=True)
class Launch:
    """Everything a backend needs for one launch. `args`: one per role, in the kernel's own
    order (a struct's members one by one); `parameters` gives them as the kernel's parameters.
    `cluster`: thread-block cluster dimensions, or None for a plain launch; a tensor map
    argument is a tensor_map.TensorMapRequest, which the backend encodes. `reached`: (operand,
    buffer) for each operand the kernel reaches only through a pointer array (its products'
    storage), which a backend whose memory is not global (the simulator) must map too.
    `structs`: (first role index, member count, struct size) of each struct taken by value."""

    grid: Dim3
    block: Dim3
    shared_bytes: int
    args: tuple
    cluster: Dim3 | None = None
    reached: tuple = ()
    structs: tuple = ()
    offsets: tuple = ()   # each role's offset in its struct (0 outside one)
    types: tuple = ()     # each role's packed C type

    @property
    def parameters(self) -> tuple:
        """One argument per kernel parameter: `args`, each struct's members as one StructArgument."""
        starts = {first: (count, size) for first, count, size in self.structs}
        out, index = [], 0
        while index < len(self.args):
            if index in starts:
                count, size = starts[index]
                out.append(StructArgument(size, tuple(zip(self.offsets[index:index + count],
                                                          self.types[index:index + count],
                                                          self.args[index:index + count]))))
                index += count
            else:
                out.append(self.args[index])
                index += 1
        return tuple(out)

    @property
    def tensor_maps(self) -> tuple:
        return tuple(a for a in self.args if isinstance(a, tensor_map.TensorMapRequest))

    @property
    def extended(self) -> bool:
        """Whether the launch needs cuLaunchKernelEx (a cluster, a by-value tensor map or struct)."""
        return self.cluster is not None or bool(self.tensor_maps) or bool(self.structs)


class LaunchError(ValueError):
    """A launch cannot be planned; the message names the kernel, the values and the fix."""


def plan(instance, values: Mapping[str, object]) -> Launch:
    """The Launch of `instance` on a problem: arguments by role, geometry from the catalog.

    `values` maps roles to values: "A", "B", "C", "D", "scale_A", "scale_B" (device buffers; a
    scale a kernel takes by value, a number), "M", "N", "K", "lda", "ldb", "ldc" (ints),
    "alpha", "beta" (numbers), "batch" and "stride_A" ... "stride_D" (ints: a strided batch;
    batch 1 where none is given, for the geometry), "A_array" ... "D_array" (device arrays of
    pointers, one per product: a pointer-array batch; with "A" ... "D", the products' storage
    they point into). M, N and K are always
    needed (the geometry uses them); other roles only when the kernel lists them. A
    tensor map role needs its operand's buffer (and uses its leading dimension when given).
    """
    spec = instance.spec
    needed = [tensor_map.operand_of(r) if r in TENSOR_MAP_ROLES else r for r in spec.roles if isinstance(r, str)]
    needed += pointer_arrays(spec.roles)
    missing = [r for r in (*DIMENSIONS, *needed) if r not in values]
    if missing:
        raise LaunchError(f"{instance.id}: no value for {', '.join(dict.fromkeys(missing))}; "
                          f"the kernel takes {', '.join(map(str, spec.roles))}")
    env = {**instance.params, **{d: int(values[d]) for d in DIMENSIONS}, "batch": int(values.get("batch", 1)),
           "groups": int(values.get("groups", 1))}
    cluster = None
    try:
        grid, block, shared = spec.geometry.evaluate(env)
        if spec.cluster is not None:
            cluster = _dim3(spec.cluster, env)
    except ExpressionError as exc:
        raise LaunchError(f"{instance.id}: launch geometry: {exc}") from None
    why = check_block(block) or check_shared(shared)
    if why is None and min(grid) < 0:
        why = f"grid {grid} has a negative dimension"
    if why is None and cluster is not None:
        why = check_cluster(grid, cluster)
    if why:
        raise LaunchError(f"{instance.id} at M={env['M']} N={env['N']} K={env['K']}: {why}")
    args = []
    for role, ctype in zip(spec.roles, packed_types(instance)):
        if isinstance(role, int):
            args.append(_integer(instance, str(role), role, ctype))
        elif role in POINTER_ROLES and ctype.kind == POINTER:
            args.append(values[role])
        elif role in INT_ROLES:
            args.append(_integer(instance, role, values[role], ctype))
        elif role in TENSOR_MAP_ROLES:
            args.append(_tensor_map(instance, role, values, env))
        elif role in SCALAR_ROLES and ctype.kind == POINTER:
            args.append(values[role])   # a device buffer holding the value (scalar_pointee)
        else:
            args.append(_scalar(instance, role, values[role], ctype))
    return Launch(grid, block, shared, tuple(args), cluster,
                  tuple((operand, values[operand]) for operand in pointer_arrays(spec.roles)),
                  *_struct_packing(instance))


def scratch_bytes(instance, M: int, N: int, K: int, batch: int = 1, groups: int = 1) -> dict[str, int]:
    """The bytes of each scratch buffer `instance` takes (its catalog's `scratch`), at this
    problem: the sizes evaluated as the geometry is (M, N, K, batch, groups, the compile-time
    parameters)."""
    env = {**instance.params, "M": M, "N": N, "K": K, "batch": batch, "groups": groups}
    sizes = {}
    for role, size in instance.spec.scratch.items():
        try:
            sizes[role] = size.integer(env)
        except ExpressionError as exc:
            raise LaunchError(f"{instance.id}: scratch.{role}: {exc}") from None
        if sizes[role] < 0:
            raise LaunchError(f"{instance.id}: scratch.{role} = {size.text!r} is {sizes[role]} bytes at "
                              f"M={M} N={N} K={K}; a size must be >= 0")
    return sizes


def _struct_packing(instance) -> tuple[tuple, tuple, tuple]:
    """(Launch.structs, Launch.offsets, Launch.types) of `instance`: () where it takes no struct."""
    if not any(p.member_of is not None for p in instance.parameters or ()):
        return (), (), ()
    structs, index = [], 0
    for roles, ctype in packed_by_parameter(instance):
        if ctype.kind == parameters.STRUCT:
            structs.append((index, len(roles), ctype.size))
        index += len(roles)
    offsets = tuple(p.offset if p is not None else 0 for p in declared_by_role(instance))
    return tuple(structs), offsets, packed_types(instance)


def declared_by_role(instance) -> list[Parameter | None]:
    """The declared parameter (a struct's member, where it takes one) in each role's place."""
    declared = instance.parameters or ()
    return [declared[i] if i < len(declared) else None for i in range(len(instance.spec.roles))]


def _tensor_map(instance, role: str, values, env) -> "tensor_map.TensorMapRequest":
    """The tensor map of the role's operand; a problem TMA cannot encode is a LaunchError that
    says which rule and what to claim instead (never the driver's error code)."""
    operand = tensor_map.operand_of(role)
    ld = values.get(f"ld{operand.lower()}")
    req = tensor_map.request(instance, operand, instance.spec.tensor_maps[operand],
                             env["M"], env["N"], env["K"], ld, buffer=values.get(operand))
    why = tensor_map.encoding_problem(req)
    if why:
        raise LaunchError(f"{instance.id} at M={env['M']} N={env['N']} K={env['K']}: {why}")
    return req
