"""What a kernel's parameters are, read from their names and types as published: ``const float
*A``, ``float* __restrict__ matC``, ``d_B``, ``int m``, ``size_k``, ``lda``, ``alpha``, a linear
layer's ``inp`` and ``weight``, a textbook lab's ``numARows``, scale factors, batches, groups,
fused epilogues and tensor maps by their common spellings (role_of)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from gemmcheck.contract import launch, parameters

# Floating-point types the suite knows, as C spells them -> dtype names of gemmcheck.contract.dtypes.
C_TYPES = {"float": "float32", "double": "float64", "__half": "float16", "half": "float16",
           "__nv_bfloat16": "bfloat16", "nv_bfloat16": "bfloat16"}

# Names that usually hold the tile edge, most likely first.
TILE_NAMES = ("TILE", "TILE_SIZE", "TILE_WIDTH", "TILE_DIM", "BLOCK_SIZE", "BLOCKSIZE", "BLOCK", "BS", "BM", "TS")
_PREFIXES = ("d_", "gmem_", "g_", "dev_", "p_", "ptr_", "matrix_", "matrix", "mat_", "mat", "size_", "num_", "dim_",
             "n_")
_SUFFIXES = ("_ptr", "ptr", "_d", "_dev", "_mat", "mat", "_matrix", "_size", "_dim", "dim", "_out")
_POINTER_NAMES = {"a": "A", "b": "B", "c": "C", "out": "C", "output": "C", "result": "C", "res": "C", "d": "D",
                  "lhs": "A", "rhs": "B", "mat1": "A", "mat2": "B", "dst": "C"}   # XLA's, PyTorch's mm names
# A or B named as held transposed (Bt, b_t): a layout TODO says what that means
TRANSPOSED_NAMES = {f"{o}{t}": o.upper() for o in "ab" for t in ("t", "_t", "_trans", "trans", "_transposed")}
_POINTER_NAMES.update(TRANSPOSED_NAMES)
# The output's other names: D when the kernel also takes a C (D = alpha A B + beta C, C only read).
_OUTPUT_NAMES = ("out", "output", "result", "res")
_SCALE_NAMES = {f"{form}": f"scale_{o.upper()}" for o in "ab" for form in (
    f"scale_{o}", f"{o}_scale", f"scales_{o}", f"{o}_scales", f"sf{o}", f"sf_{o}", f"scale{o}", f"{o}scale",
    f"scale_inv_{o}", f"{o}_scale_inv")}
# a weight's and an activation's scales (W8A8, fp8 linear layers): B's and A's
_SCALED_NAMES = {"scale_B": ("w", "weight"), "scale_A": ("x", "input", "act")}
_SCALE_NAMES.update({name: role for role, names in _SCALED_NAMES.items() for who in names
                     for name in (f"{who}_scale", f"{who}_scales", f"{who}scale", f"scale_{who}")})
INT_NAMES = {"m": "M", "n": "N", "k": "K", "lda": "lda", "ldb": "ldb", "ldc": "ldc", "ldd": "ldd",
              "ld_a": "lda", "ld_b": "ldb", "ld_c": "ldc", "ld_d": "ldd", "rows": "M", "cols": "N", "width": "N",
              "m_ld": "M", "n_ld": "N", "k_ld": "K"}
INT_NAMES.update({name: "batch" for name in ("batch", "batch_count", "batchcount", "batch_size", "batchsize",
                                              "num_batches", "nbatch", "batches")})
INT_NAMES.update({name: f"stride_{o.upper()}" for o in "abcd" for name in (
    f"stride_{o}", f"stride{o}", f"{o}_stride", f"ld{o}_batch", f"batch_stride_{o}", f"batchstride{o}",
    f"{o}_batch_stride", f"stride_{o}_batch")})
INT_NAMES.update({name: "groups" for name in ("groups", "num_groups", "group_count", "num_experts", "experts",
                                               "num_expert", "n_experts", "problem_count", "num_problems")})
# a fused epilogue's and a grouped GEMM's arrays, by their common names
_POINTER_NAMES.update({"bias": "bias", "biases": "bias", "residual": "residual", "resid": "residual",
                       "skip": "residual", **{name: "group_offsets" for name in (
                           "group_offsets", "expert_offsets", "offsets", "seg_offsets", "segment_offsets",
                           "problem_offsets", "m_offsets", "expert_offset", "group_offset")},
                       **{name: "group_counts" for name in (
                           "group_counts", "masked_m", "expert_counts", "tokens_per_expert", "counts",
                           "group_sizes", "m_per_group", "num_tokens_per_expert")}})
# an array of pointers to a batch's products (cuBLAS's gemmBatched: Aarray, Barray, Carray)
ARRAY_NAMES = {name: o.upper() for o in "abcd" for name in (
    f"{o}array", f"{o}_array", f"{o}_arrays", f"{o}arr", f"{o}_arr", f"{o}_ptrs", f"{o}ptrs", f"{o}_list",
    f"{o}_pointers", f"{o}_batch", f"{o}batch", f"d{o}_array", f"d{o}array")}   # MAGMA's dA_array
# MAGMA's and many tutorials' device names: dA, dB, dC; ldda, lddb, lddc
_POINTER_NAMES.update({f"d{o}": o.upper() for o in "abc"})
# a linear layer's names (llm.c, PyTorch extensions): out = inp weight^T + bias
WEIGHT_NAMES = ("weight", "weights", "w")
_POINTER_NAMES.update({"inp": "A", "input": "A", "x": "A", "y": "C", **{name: "B" for name in WEIGHT_NAMES}})
# ... and its sizes (torch.nn.Linear's in_features and out_features, llm.c's BT, C and OC): the
# batch of a linear layer is its rows, M, not a batch of products. Read so only in a kernel
# that takes a weight.
LINEAR_INT_NAMES = {**{name: "K" for name in ("in_features", "infeatures", "in_dim", "in_size", "input_size",
                                               "input_dim", "c", "ic")},
                    **{name: "N" for name in ("out_features", "outfeatures", "out_dim", "out_size", "output_size",
                                               "output_dim", "oc")},
                    **{name: "M" for name in ("bt", "batch", "batch_size", "batchsize", "tokens", "rows")}}
INT_NAMES.update({f"ldd{o}": f"ld{o}" for o in "abc"})
# an operand's rows and columns (numARows, numBColumns as textbook labs write them; wA, hA as the CUDA
# samples do): A is M x K, B is K x N, C is M x N
_EXTENT = {"rows": 0, "row": 0, "height": 0, "h": 0, "columns": 1, "column": 1, "cols": 1, "col": 1,
           "width": 1, "w": 1}
_EXTENT_ROLES = {"a": ("M", "K"), "b": ("K", "N"), "c": ("M", "N")}
_WORDS = "|".join(e for e in _EXTENT if len(e) > 1)   # h and w only before the letter (hA, wB): bh is batch x heads
_OPERAND_EXTENT = re.compile(rf"(?:num|n)?(?:(?P<x>[abc])(?P<e>{_WORDS})|(?P<e2>{'|'.join(_EXTENT)})(?P<x2>[abc]))")


def _extent_role(name: str) -> str | None:
    """M, N or K for a parameter named for an operand's rows or columns (numARows, wB, rows_c)."""
    m = _OPERAND_EXTENT.fullmatch(name.lower().replace("_", ""))
    if not m:
        return None
    operand, extent = (m["x"], m["e"]) if m["x"] else (m["x2"], m["e2"])
    return _EXTENT_ROLES[operand][_EXTENT[extent]]


_SCALAR_NAMES = {"alpha": "alpha", "beta": "beta", "output_scale": "output_scale", "out_scale": "output_scale",
                 "scale_out": "output_scale", "scale_d": "output_scale", "d_scale": "output_scale"}
_QUALIFIERS = re.compile(r"\b(const|volatile|__restrict__|__restrict|restrict|struct|unsigned|signed)\b")
_CV = re.compile(r"\b(const|volatile|__restrict__|__restrict|restrict|struct)\b")


@dataclass
class Param:
    text: str
    name: str
    type: str
    pointer: bool
    array: bool = False    # an array declarator (float *A[]): one more level of pointer

    @property
    def element_type(self) -> str:
        return " ".join(_QUALIFIERS.sub(" ", self.type).replace("*", " ").replace("&", " ").split())

    @property
    def pointer_to_pointers(self) -> bool:
        """``const float *const *A`` or ``const float *const A[]``: an array of pointers."""
        return self.type.count("*") + self.array >= 2

    @property
    def pointee(self) -> str:
        """What the pointer points to, signedness kept (``unsigned char``)."""
        return " ".join(_CV.sub(" ", self.type).replace("*", " ").replace("&", " ").split())


def parse_params(params: str) -> list[Param]:
    """The parameters of a declaration, as gemmcheck.contract.parameters reads them; an unnamed
    one goes by its text."""
    return [Param(p.text, p.name or p.text, p.type, p.pointer, p.array) for p in parameters.declared_parameters(params)]


def struct_members(params: list[Param], definitions: dict, names: dict[str, str]) -> tuple[list[Param], list[str]]:
    """`params` with each struct the kernel takes by value as its members (one role each, in the
    order the struct declares them; `definitions`: the file's, gemmcheck.contract.structs), and a
    note per struct; a struct
    the suite cannot lay out stays one parameter (its reason in the draft's TODO)."""
    out, notes = [], []
    for p in params:
        definition, _ = parameters.struct_of(parameters.read_type(p.type, names, pointer=p.array), definitions, names)
        if definition is None or definition.unpackable or not definition.members:
            out.append(p)
            continue
        # a template struct's parameters as the kernel writes its arguments (Args<T>: the kernel's T)
        written = re.search(r"<(.*)>", p.type)
        given = parameters.split_top_level(written[1]) if written and definition.template else []
        renamed = {name: arg for (_, name, _), arg in zip(parameters.template_parameters(definition.template), given)}
        retyped = lambda text: re.sub(r"\b[A-Za-z_]\w*\b", lambda w: renamed.get(w[0], w[0]), text)
        members = [Param(retyped(m.declared), m.name, retyped(m.type), "*" in m.type) for m in definition.members]
        out.extend(members)
        notes.append(f"{', '.join(m.name for m in members)}: the members of {p.text!r}, one role each in the order "
                     f"{definition.name} declares them")
    return out, notes


def template_params(head: str) -> list[tuple[str, str]]:
    """(kind, name) of each template parameter: kind "type" or "value"."""
    return [(kind, name) for kind, name, _ in parameters.template_parameters(head)]


def normalized(name: str) -> str:
    n = name.lower()
    for p in _PREFIXES:
        if n.startswith(p) and len(n) > len(p):
            n = n[len(p):]
            break
    for s in _SUFFIXES:
        if n.endswith(s) and len(n) > len(s):
            n = n[:-len(s)]
            break
    return n.strip("_")


# Scratch memory a caller provides and zeroes (a split-K or stream-K workspace, its semaphores,
# locks or tile counters, partial sums): the roles workspace and semaphores (launch.SCRATCH_ROLES).
_COUNTERS = r"semaphores?|sema|locks?|flags?|barriers?|(tile_)?counters?"
_SCRATCH = re.compile(rf"(work_?space|ws|scratch|{_COUNTERS}|partials?|partial_sums|reduction_buffer|accum_buffer)"
                      r"(_\w+)?")
_COUNTER_NAMES = re.compile(rf"({_COUNTERS})(_\w+)?")


def is_scratch(param: Param) -> bool:
    """A pointer named as scratch memory (``float* workspace``, ``int* semaphores``, ``locks``)."""
    return param.pointer and bool(_SCRATCH.fullmatch(normalized(param.name)))


def scratch_role(param: Param) -> str | None:
    """The scratch role a pointer's name says: semaphores for counters, locks and flags,
    workspace for partial sums and other scratch; None for a pointer not named as scratch."""
    if not is_scratch(param):
        return None
    return "semaphores" if _COUNTER_NAMES.fullmatch(normalized(param.name)) else "workspace"


_TENSOR_MAP_AFFIXES = re.compile(r"^(tensor_?map|tmap|tma|desc|map)_?|_?(tensor_?map|tmap|tma|desc|map)$")


def is_tensor_map(param: Param) -> bool:
    """A CUtensorMap taken by value (``const __grid_constant__ CUtensorMap map_A``)."""
    return param.element_type.split()[-1:] == ["CUtensorMap"] and not param.pointer


# the textbook's names (Kirk and Hwu's MatrixMulKernel(float* M, float* N, float* P, int Width);
# Md, Nd, Pd in its first edition): M x N = P
TEXTBOOK_POINTER_NAMES = {"m": "A", "n": "B", "p": "C", "md": "A", "nd": "B", "pd": "C"}


def names_of_kernel(params: list[Param]) -> dict[str, str]:
    """Names that mean a role only beside the kernel's other parameters: a linear layer's sizes
    in a kernel that takes a weight; the textbook's M, N, P pointers when it takes all three."""
    pointers = {normalized(p.name) for p in params if p.pointer}
    named = {INT_NAMES.get(normalized(p.name)) or _extent_role(p.name) for p in params if not p.pointer}
    # a size the kernel also takes by its usual name (a batched layer's batch beside its M) keeps that
    names = {k: r for k, r in LINEAR_INT_NAMES.items() if r not in named} if pointers & set(WEIGHT_NAMES) else {}
    if {"m", "n", "p"} <= pointers or {"md", "nd", "pd"} <= pointers:
        names.update(TEXTBOOK_POINTER_NAMES)
    return names


def role_of(param: Param, scalar_types: set[str], takes_c: bool = False,
            kernel_names: dict[str, str] | None = None) -> str | None:
    """The catalog role a parameter's name says, or None. `takes_c`: the kernel has a pointer
    named for C, so an output named d or out is the separate D; `kernel_names`: names_of_kernel,
    read first."""
    own = (kernel_names or {}).get(normalized(param.name)) or (kernel_names or {}).get(param.name.lower())
    if own and (own in launch.OPERAND_ROLES) == (param.pointer and not param.pointer_to_pointers):
        return own     # a pointer for an operand, an integer for a size
    n = normalized(param.name)
    if is_tensor_map(param):
        operand = _POINTER_NAMES.get(_TENSOR_MAP_AFFIXES.sub("", param.name.lower()).strip("_"))
        return f"tensor_map_{operand}" if operand else None
    scale = _SCALE_NAMES.get(n) or _SCALE_NAMES.get(param.name.lower())
    if scale and (param.pointer or param.element_type in C_TYPES):
        return scale
    if param.pointer and param.pointer_to_pointers:
        operand = ARRAY_NAMES.get(n) or ARRAY_NAMES.get(param.name.lower()) or _POINTER_NAMES.get(n)
        operand = "D" if takes_c and n in _OUTPUT_NAMES else operand
        return f"{operand}_array" if operand in launch.OPERAND_ROLES else None
    if param.pointer and (n in _SCALAR_NAMES or param.name.lower() in _SCALAR_NAMES) \
            and param.element_type in C_TYPES.keys() | {"int"}:
        return _SCALAR_NAMES.get(n) or _SCALAR_NAMES[param.name.lower()]   # through a device pointer (cuBLAS's)
    if param.pointer:
        return "D" if takes_c and n in _OUTPUT_NAMES else _POINTER_NAMES.get(n) or _POINTER_NAMES.get(param.name.lower())
    if n in _SCALAR_NAMES or param.name.lower() in _SCALAR_NAMES:
        return _SCALAR_NAMES.get(n) or _SCALAR_NAMES[param.name.lower()]
    if param.element_type in scalar_types:
        return None
    return INT_NAMES.get(n) or INT_NAMES.get(param.name.lower()) or _extent_role(param.name)
