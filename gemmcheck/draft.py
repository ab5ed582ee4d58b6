"""A catalog entry drafted from a kernel source: ``python -m gemmcheck draft path/to/file.cu``.

For each kernel the source declares (found after preprocessing, as the compiler finds
them), the draft reads what the source says:

- argument roles from parameter names (``M``, ``N``, ``K``, ``alpha``, ``beta``, ``A``,
  ``B``, ``C``, ``lda``, ``ldb``, ``ldc`` in the common spellings: ``int m``,
  ``const float *A``, ``float* __restrict__ matC``, ``d_A``, ``A_ptr`` ...); an output named
  ``d``, ``D`` or ``out`` beside a ``c`` is the separate output D; scale factors named
  ``scale_a``, ``a_scale``, ``sfa`` (and B's) are scale_A and scale_B; a strided batch's
  ``batch`` / ``batch_count`` and ``stride_a`` / ``strideA`` / ``lda_batch`` (and B's, C's, D's),
  a fused epilogue's ``bias``, ``residual`` and ``out_scale``, a grouped GEMM's ``groups`` /
  ``num_experts``, ``group_offsets`` / ``expert_offsets`` and ``group_counts`` / ``masked_m``
  (with an ``epilogue`` TODO for what the epilogue does);
- the dtype from the pointers' element types: one name when A, B and the output share it
  (``float16``), else the combination of A, B and the output (``f16f16f32``: half A and B, a
  float C and D; ``e4m3e4m3bf16``, ``s8s8s32``; a ``float4 *`` operand holds float32, its rows
  whole vectors as the shape claim; a half kernel that sums in half, ``accumulator =
  "float16"``); template parameters as params (values from
  the file's own launches, ``kernel<32><<<...>>>``), integer ``#define``s the file uses as
  params, ``__launch_bounds__`` as a hint for the block;
- the launch geometry from the file's own launch (``dim3 grid(CEIL_DIV(M, 32), ...)``),
  when its expressions are over M, N, K and the parameters.

Everything it could not read is marked with a ``# TODO: ...`` line saying what to fill in.
The output is valid TOML; once the TODOs are filled, the catalog loader accepts it.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from gemmcheck.contract import cuda_source, launch, operand_types, parameters, tensor_map
from gemmcheck.contract import dtypes as dt
from gemmcheck.host_launches import (CONSTANT_ASSIGNMENT, Launch, explicit_instantiations, host_expression, launches,
                                     split_top_level)

# Floating-point types the suite knows, as C spells them -> dtype names of gemmcheck.contract.dtypes.
C_TYPES = {"float": "float32", "double": "float64", "__half": "float16", "half": "float16",
           "__nv_bfloat16": "bfloat16", "nv_bfloat16": "bfloat16"}
# What an operand's pointer may point to, as C spells it -> element type names.
# fp8 operands kept as raw bytes (__nv_fp8_storage_t) read as e4m3, with a TODO (FP8_STORAGE)
FP8_STORAGE = "__nv_fp8_storage_t"
ELEMENT_TYPES = {**C_TYPES, "__nv_fp8_e4m3": "float8_e4m3fn", "__nv_fp8_e5m2": "float8_e5m2",
                 FP8_STORAGE: "float8_e4m3fn",
                 "int8_t": "int8", "signed char": "int8", "char": "int8", "uint8_t": "uint8",
                 "unsigned char": "uint8", "int": "int32", "int32_t": "int32"}
# The problem's sizes, and the #define names textbooks give one square size compiled into a kernel
# that takes none (``#define N 64``, ``#define MATRIX_SIZE 1024``).
SIZES = ("M", "N", "K")
_SQUARE_SIZE_NAMES = ("N", "SIZE", "MATRIX_SIZE", "MAT_SIZE", "MATRIX_DIM", "MAT_DIM", "DIM", "MATRIX_WIDTH")
# Vector types a kernel may take its operands as (``const float4 *A``): (element type, width).
VECTOR_TYPES = {"float2": ("float", 2), "float4": ("float", 4), "double2": ("double", 2), "half2": ("half", 2),
                "__half2": ("__half", 2), "__nv_bfloat162": ("__nv_bfloat16", 2), "nv_bfloat162": ("nv_bfloat16", 2),
                "char4": ("signed char", 4), "uchar4": ("unsigned char", 4)}
# The size along an operand's rows (row-major): what a vector of its elements must divide.
_ROW_LENGTH = {"A": "K", "B": "N", "C": "N", "D": "N"}
# Names that usually hold the tile edge, most likely first.
TILE_NAMES = ("TILE", "TILE_SIZE", "TILE_WIDTH", "TILE_DIM", "BLOCK_SIZE", "BLOCKSIZE", "BLOCK", "BS", "BM", "TS")
_PREFIXES = ("d_", "gmem_", "g_", "dev_", "p_", "ptr_", "matrix_", "matrix", "mat_", "mat", "size_", "num_", "dim_",
             "n_")
_SUFFIXES = ("_ptr", "ptr", "_d", "_dev", "_mat", "mat", "_matrix", "_size", "_dim", "dim", "_out")
_POINTER_NAMES = {"a": "A", "b": "B", "c": "C", "out": "C", "output": "C", "result": "C", "res": "C", "d": "D",
                  "lhs": "A", "rhs": "B", "mat1": "A", "mat2": "B", "dst": "C"}   # XLA's, PyTorch's mm names
# A or B named as held transposed (Bt, b_t): a layout TODO says what that means
_TRANSPOSED_NAMES = {f"{o}{t}": o.upper() for o in "ab" for t in ("t", "_t", "_trans", "trans", "_transposed")}
_POINTER_NAMES.update(_TRANSPOSED_NAMES)
# The output's other names: D when the kernel also takes a C (D = alpha A B + beta C, C only read).
_OUTPUT_NAMES = ("out", "output", "result", "res")
_SCALE_NAMES = {f"{form}": f"scale_{o.upper()}" for o in "ab" for form in (
    f"scale_{o}", f"{o}_scale", f"scales_{o}", f"{o}_scales", f"sf{o}", f"sf_{o}", f"scale{o}", f"{o}scale",
    f"scale_inv_{o}", f"{o}_scale_inv")}
# a weight's and an activation's scales (W8A8, fp8 linear layers): B's and A's
_SCALED_NAMES = {"scale_B": ("w", "weight"), "scale_A": ("x", "input", "act")}
_SCALE_NAMES.update({name: role for role, names in _SCALED_NAMES.items() for who in names
                     for name in (f"{who}_scale", f"{who}_scales", f"{who}scale", f"scale_{who}")})
_INT_NAMES = {"m": "M", "n": "N", "k": "K", "lda": "lda", "ldb": "ldb", "ldc": "ldc", "ldd": "ldd",
              "ld_a": "lda", "ld_b": "ldb", "ld_c": "ldc", "ld_d": "ldd", "rows": "M", "cols": "N", "width": "N",
              "m_ld": "M", "n_ld": "N", "k_ld": "K"}
_INT_NAMES.update({name: "batch" for name in ("batch", "batch_count", "batchcount", "batch_size", "batchsize",
                                              "num_batches", "nbatch", "batches")})
_INT_NAMES.update({name: f"stride_{o.upper()}" for o in "abcd" for name in (
    f"stride_{o}", f"stride{o}", f"{o}_stride", f"ld{o}_batch", f"batch_stride_{o}", f"batchstride{o}",
    f"{o}_batch_stride", f"stride_{o}_batch")})
_INT_NAMES.update({name: "groups" for name in ("groups", "num_groups", "group_count", "num_experts", "experts",
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
_ARRAY_NAMES = {name: o.upper() for o in "abcd" for name in (
    f"{o}array", f"{o}_array", f"{o}_arrays", f"{o}arr", f"{o}_arr", f"{o}_ptrs", f"{o}ptrs", f"{o}_list",
    f"{o}_pointers", f"{o}_batch", f"{o}batch", f"d{o}_array", f"d{o}array")}   # MAGMA's dA_array
# MAGMA's and many tutorials' device names: dA, dB, dC; ldda, lddb, lddc
_POINTER_NAMES.update({f"d{o}": o.upper() for o in "abc"})
# a linear layer's names (llm.c, PyTorch extensions): out = inp weight^T + bias
_WEIGHT_NAMES = ("weight", "weights", "w")
_POINTER_NAMES.update({"inp": "A", "input": "A", "x": "A", "y": "C", **{name: "B" for name in _WEIGHT_NAMES}})
_INT_NAMES.update({f"ldd{o}": f"ld{o}" for o in "abc"})
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


@dataclass
class Draft:
    """One kernel's entry: fields in order, with the TODO lines that go before each."""

    fields: list = field(default_factory=list)    # (key, toml value or None, [comment lines])

    def add(self, key: str, value, *comments: str) -> None:
        self.fields.append((key, value, list(comments)))

    def toml(self) -> str:
        lines = ["[[kernel]]"]
        for key, value, comments in self.fields:
            lines += [f"# {c}" for c in comments]
            if value is not None:
                lines.append(f"{key} = {value}")
        return "\n".join(lines)


def parse_params(params: str) -> list[Param]:
    """The parameters of a declaration, as gemmcheck.contract.parameters reads them; an unnamed
    one goes by its text."""
    return [Param(p.text, p.name or p.text, p.type, p.pointer, p.array) for p in parameters.declared_parameters(params)]


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


_TENSOR_MAP_AFFIXES = re.compile(r"^(tensor_?map|tmap|tma|desc|map)_?|_?(tensor_?map|tmap|tma|desc|map)$")


def _is_tensor_map(param: Param) -> bool:
    """A CUtensorMap taken by value (``const __grid_constant__ CUtensorMap map_A``)."""
    return param.element_type.split()[-1:] == ["CUtensorMap"] and not param.pointer


def role_of(param: Param, scalar_types: set[str], takes_c: bool = False) -> str | None:
    """The catalog role a parameter's name says, or None. `takes_c`: the kernel has a pointer
    named for C, so an output named d or out is the separate D."""
    n = normalized(param.name)
    if _is_tensor_map(param):
        operand = _POINTER_NAMES.get(_TENSOR_MAP_AFFIXES.sub("", param.name.lower()).strip("_"))
        return f"tensor_map_{operand}" if operand else None
    scale = _SCALE_NAMES.get(n) or _SCALE_NAMES.get(param.name.lower())
    if scale and (param.pointer or param.element_type in C_TYPES):
        return scale
    if param.pointer and param.pointer_to_pointers:
        operand = _ARRAY_NAMES.get(n) or _ARRAY_NAMES.get(param.name.lower()) or _POINTER_NAMES.get(n)
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
    return _INT_NAMES.get(n) or _INT_NAMES.get(param.name.lower()) or _extent_role(param.name)


def _toml(value) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    return str(value)


# -- the draft ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Drafted:
    """What `draft` made of a file: the TOML, how many kernels it drafted, and the file's own
    ``#include "..."`` headers it could not open (their kernels and macros are not in it)."""

    toml: str
    kernels: int
    unopened: tuple[str, ...]


def draft_source(source: Path, relative_to: Path | None = None, include_dirs=()) -> str:
    """The drafted catalog (TOML) for every kernel of `source`."""
    return draft(source, relative_to, include_dirs).toml


def draft(source: Path, relative_to: Path | None = None, include_dirs=()) -> Drafted:
    """The draft of every kernel of `source`, its headers searched beside it and in
    `include_dirs` (written to each entry's ``include_dirs``, relative to the catalog).
    Raises cuda_source.SourceNotText for a file that is not text."""
    source = source.resolve()
    text = cuda_source.read_source(source)
    include_dirs = [Path(d).resolve() for d in include_dirs]
    searched = (source.parent, *include_dirs)
    kernels = cuda_source.find_kernels(text, str(source), searched)
    unopened = tuple(cuda_source.unopened_headers(text, str(source), searched))
    where = Path((relative_to or source.parent)).resolve()
    rel = _relative(source, where)
    header = [f"# Drafted by `python -m gemmcheck draft {source.name}`: fill in each TODO and check every value.",
              f"# source paths are relative to the catalog file: this draft is for a catalog in {_shown(where)}.",
              "# What each field means: docs/published-sources.md."]
    header += [f"# TODO: {unopened_note(source.name, h)}" for h in unopened]
    if not kernels:
        return Drafted("\n".join(header + [f"# TODO: {source.name} declares no __global__ function (after preprocessing)"]) + "\n",
                       0, unopened)
    host = cuda_source.code_only(cuda_source.preprocessed(text, str(source), searched))
    constants = {m["name"]: int(m["value"] or m["braced"]) for m in CONSTANT_ASSIGNMENT.finditer(host)}
    file_defines = {k: v for k, v in cuda_source.defines(text).items()
                    if re.search(rf"\b{k}\b", _without_define_lines(text))}
    drafts = [draft_kernel(k, rel, host, constants, file_defines, source_text=text) for k in kernels]
    if include_dirs:
        for d in drafts:   # after `entry`, as the catalog contract lists them
            at = next(i for i, f in enumerate(d.fields) if f[0] == "entry") + 1
            d.fields.insert(at, ("include_dirs", _toml([os.path.relpath(i, where) for i in include_dirs]),
                                 ["headers are searched beside the source, then here (-I)"]))
    return Drafted("\n".join(header) + "\n\n" + "\n\n".join(d.toml() for d in drafts) + "\n",
                   len(drafts), unopened)


def unopened_note(source_name: str, header: str) -> str:
    """One line on a header of the file's own that the draft could not open."""
    return (f"{source_name}: could not open #include \"{header}\" (neither beside it nor in an -I directory): "
            "kernels and macros it declares are not drafted; give its directory with -I DIR")


def _relative(path: Path, where: Path) -> str:
    try:
        return str(path.relative_to(where)) or "."
    except ValueError:
        return str(path)


def _shown(directory: Path) -> str:
    """A directory as the user would type it: relative to the current one where it is below it."""
    try:
        return str(directory.relative_to(Path.cwd().resolve())) or "."
    except ValueError:
        return str(directory)


def _without_define_lines(text: str) -> str:
    return re.sub(r"^[ \t]*#[ \t]*define[^\n]*", "", cuda_source.code_only(text), flags=re.M)


def draft_kernel(kernel: cuda_source.Kernel, rel_source: str, host: str, constants: dict[str, int],
                 file_defines: dict[str, int], source_text: str = "") -> Draft:
    d = Draft()
    params = parse_params(kernel.params)
    tparams = template_params(kernel.head)
    type_params = {name for kind, name in tparams if kind == "type"}
    value_params = [name for kind, name in tparams if kind == "value"]
    element_types = {p.element_type for p in params if p.pointer}
    scalar_types = set(C_TYPES) | type_params

    d.add("name", _toml(kernel.name))
    d.add("description", _toml(""), "TODO: description: one line on what the kernel does (optional)")
    d.add("source", _toml(rel_source))
    d.add("entry", _toml(kernel.name))

    kernel_launches = launches(host, kernel.name)
    roles, unknown, todo_args = [], [], []
    # the type each parameter is passed as (a type parameter read as a floating type: an element type)
    names = {**parameters.typedefs(host), **{t: "float" for t in type_params}}
    takes_c = any(p.pointer and (normalized(p.name) == "c" or _ARRAY_NAMES.get(normalized(p.name)) == "C")
                  for p in params)
    for p in params:
        passed = parameters.read_type(p.type, names, pointer=p.array)
        role = role_of(p, scalar_types, takes_c) if passed.kind not in (parameters.OTHER, parameters.UNKNOWN) else None
        if passed.kind in (parameters.OTHER, parameters.UNKNOWN):
            todo_args.append(f"TODO: args: {p.text!r} is a {passed} by value, which the suite cannot pack (it passes "
                             "pointers, integers, floating-point alpha and beta, and CUtensorMaps): this kernel "
                             "takes what no role is")
        if role is None or (role in roles and role not in launch.INT_ROLES):   # a size may be passed twice
            unknown.append(p.text)
            role = f"TODO {p.name}"
        roles.append(role)
    missing = launch.missing_operands(roles)
    if unknown:
        todo_args.append(f"TODO: args: the role of {', '.join(repr(u) for u in unknown)}: one of "
                         f"{', '.join(launch.ROLES)}, or an integer literal passed as is")
        call = next(iter(kernel_launches), None)
        passed = [f"{p.name} = {constants[arg]}" for p, role, arg in zip(params, roles, (call.args or ()) if call else ())
                  if str(role).startswith("TODO") and arg in constants]
        if passed:
            todo_args.append(f"the file's launch passes {', '.join(passed)}: a literal passes the same")
    if missing:
        todo_args.append(f"TODO: args: no parameter reads as {', '.join(missing)}; name the pointers' roles")
    d.add("args", _toml(roles), *todo_args)
    _draft_hopper(d, kernel, roles, params, source_text)

    dtypes, dtype_comments, placeholders = _dtypes(params, roles, type_params)
    if type_params and (found := _instantiated_types(kernel_launches, host, tparams)):
        dtypes, dtype_comments = found[0], [found[1]]
    type_fields = _draft_types(roles, params, dtypes)

    # compile-time parameters: template values from the file's launches and explicit
    # instantiations, #defines the file uses
    defaults = {name: default for kind, name, default in parameters.template_parameters(kernel.head)
                if kind == "value" and default is not None}

    def values_of(template_args: list[str]) -> dict[str, int] | None:
        given = dict(zip([name for name, _ in zip((n for _, n in tparams), template_args)], template_args))
        value_args = [given.get(name, defaults.get(name, "")).strip() for name in value_params]   # omitted: the default
        values = {name: int(re.sub(r"[uUlL]+$", "", arg)) if re.fullmatch(r"\d+[uUlL]*", arg) else
                  _BOOLS.get(arg, constants.get(arg)) for name, arg in zip(value_params, value_args)}
        return values if len(values) == len(value_params) and None not in values.values() else None

    launched = [v for call in kernel_launches if (v := values_of(call.template_args))]
    instantiated = explicit_instantiations(host, kernel.name)
    configs = list(_unique(launched + [v for t in instantiated if (v := values_of(t))]))
    if len(configs) == len(_unique(launched)):
        instantiated = []   # named only where they add values to the launches'
    takes_sizes = bool(set(SIZES) & set(roles)) or bool(unknown)   # a parameter of unknown role may be one
    defines_used = {k: v for k, v in file_defines.items() if k not in value_params}
    sizes, sizes_note = (None, []) if takes_sizes else _compiled_sizes(value_params, configs, defines_used)
    if sizes:   # compiled-in sizes are the shape, not parameters: their values go in template_args as written
        fixed = [n for n in value_params if n in SIZES]
        literals = {n: str(configs[0][n]) for n in fixed}
        value_params = [n for n in value_params if n not in fixed]
        configs = [{k: v for k, v in c.items() if k not in fixed} for c in configs]
        defines_used = {k: v for k, v in defines_used.items() if k not in sizes_note[1]}
    else:
        literals = {}
    template_args = ", ".join("{" + placeholders.get(name, "T") + "}" if kind == "type" else
                              literals.get(name, "{" + name + "}") for kind, name in tparams)
    if tparams:
        d.add("template_args", _toml(template_args))
    param_values: dict[str, list[int]] = {name: [v] for name, v in defines_used.items()}
    if value_params:
        if configs:
            for name in value_params:
                param_values[name] = sorted({c[name] for c in configs})
            note = [f"the values the file {how}" for how in (
                f"launches it with: {', '.join(c.rstrip() for c in _launch_texts(kernel_launches))}" if kernel_launches
                else "",
                "instantiates it with: " + "; ".join(f"{kernel.name}<{', '.join(t)}>" for t in instantiated)
                if instantiated else "") if how]
        else:
            for name in value_params:
                param_values[name] = []
            note = [f"TODO: params: the values of {', '.join(value_params)} to test (the file neither launches nor "
                    "instantiates it with literal values)"]
        if len(configs) > 1 and len(value_params) > 1:
            # several whole assignments: named configs keep them together
            named = [{"name": "_".join(f"{k}{v}" for k, v in c.items()), **c} for c in configs]
            d.add("configs", "[\n" + "".join(f"    {_toml(c)},\n" for c in named) + "]", *note)
            param_values = {k: v for k, v in param_values.items() if k not in value_params}
            if param_values:
                d.add("params", _toml(param_values))
        else:
            d.add("params", _toml(param_values), *note)
    elif param_values:
        d.add("params", _toml(param_values), "from the file's #defines")
    all_params = [*value_params, *defines_used]
    tile = next((n for n in TILE_NAMES if n in all_params), None)
    if tile and tile != cuda_source_default_tile():
        d.add("tile", _toml(tile), "the parameter that is the tile edge (shape generators use it)")

    # launch geometry: the file's own launch, else a guess
    known = {*all_params, *launch.GEOMETRY_NAMES}
    grid = block = None
    if kernel_launches:
        call = kernel_launches[0]
        names = {**_host_names(call, tparams, host), **_passed_names(call, roles)}
        literals = {**_unique_values(defines_used), **_literals(call, tparams)}
        grid = _expressions(call.grid, names, constants, known, literals)
        block = _expressions(call.block, names, constants, known, literals)
    bounds = re.search(r"__launch_bounds__\s*\((?P<args>.*)\)", kernel.head)
    hint = [f"__launch_bounds__({bounds['args']}): at most {split_top_level(bounds['args'])[0]} threads per block"] \
        if bounds else []
    if grid and block:
        d.add("grid", _toml(grid), f"from the file's launch: {kernel_launches[0].written}")
        d.add("block", _toml(block), *hint)
    else:
        seen = [line for c in kernel_launches[:1] for line in _launch_reading(c, params)]
        if "BM" in all_params and "BN" in all_params:
            guess_grid = ["ceil(N / BN)", "ceil(M / BM)"]
        elif tile:
            guess_grid = [f"ceil(N / {tile})", f"ceil(M / {tile})"]
        else:
            guess_grid = ["ceil(N / 32)", "ceil(M / 32)"]
        most = split_top_level(bounds["args"])[0] if bounds else None
        guess_block = [int(most) if most.isdigit() else most] if most else ([tile, tile] if tile else [32, 32])
        # a batch's products, or a grouped GEMM's groups, usually along z
        guess_grid += [z for z in ("batch", "groups") if z in roles][:1]
        d.add("grid", _toml(guess_grid), "TODO: grid: blocks in x, y (, z) over M, N, K and the parameters "
              "(a guess)", *seen)
        d.add("block", _toml(guess_block), "TODO: block: threads in x, y (, z) (a guess)", *hint)
    _draft_dynamic_shared(d, kernel, kernel_launches, names if kernel_launches else {}, constants, known,
                          literals if kernel_launches else {}, source_text, host)
    d.add("dtypes", _toml(dtypes), *dtype_comments)
    if dtypes == ["float16"] and source_text and (how := _half_sums(kernel.name, source_text)):
        d.add("accumulator", _toml("float16"), f"the kernel sums in half ({how}): judged by half sums' error "
              "bound, not float32's")
    halves = [t for t in dtypes if t in ("float16", "bfloat16")]
    if len(dtypes) > 1 and halves and len(type_params) == 1 and source_text and \
            (how := _half_sums(kernel.name, source_text, next(iter(type_params)))):
        d.add("accumulator", "{ " + ", ".join(f'{t} = "{t}"' for t in halves) + " }",
              f"the kernel sums in its element type ({how}): at {' and '.join(halves)} it sums in that type, "
              "judged by that type's sums' error bound")
    for key, value, comments in type_fields:
        d.add(key, value, *comments)
    transposed = [(p.name, r) for p, r in zip(params, roles) if r in ("A", "B") and p.pointer
                  and (normalized(p.name) in _TRANSPOSED_NAMES or p.name.lower() in _TRANSPOSED_NAMES)]
    if transposed and not any(r.startswith("ld") for r in roles if isinstance(r, str)):
        d.add("layout", None, f"TODO: layout: {', '.join(f'{r} is {n!r}' for n, r in transposed)}: if it holds the "
              "operand transposed (B^T is N x K row-major), that is the operand column-major:",
              "layout = { " + ", ".join(f'{r} = "col"' for _, r in transposed) + " }")
    weight = next((p.name for p, r in zip(params, roles) if r == "B" and normalized(p.name) in _WEIGHT_NAMES), None)
    if weight and "ldb" not in roles:
        d.add("layout", None, f"TODO: layout: B is {weight!r}; a linear layer keeps its weight as N x K (out "
              "features x in features, as torch.nn.Linear does), which is B column-major:",
              'layout = { B = "col" }')
    if any(r in roles for r in ("lda", "ldb", "ldc")):
        d.add("layout", None, "TODO: layout: the operands are read row-major unless you say otherwise; for "
              "cuBLAS-style column-major operands add", 'layout = { A = "col", B = "col", C = "col" }')
    if sizes:
        d.add("sizes", _toml(sizes), sizes_note[0])
    elif not takes_sizes:
        d.add("shapes", _toml("square-tile-multiple"), "TODO: shapes: the kernel takes no size argument: if its "
              "sizes are compiled in, give them instead of shapes:", "sizes = { M = 64, N = 64, K = 64 }",
              "if it reads them from its launch (gridDim * blockDim), square tile multiples are its claim")
    elif "N" in roles and not {"M", "K"} & set(roles):
        d.add("shapes", _toml("square-tile-multiple"), "one size argument: square problems, N a multiple of "
              "the tile (the only claim such a kernel can make)")
    elif (vectors := _whole_vectors(params, roles)):
        d.add("shapes", _toml(vectors[1]), f"TODO: shapes: {vectors[0]}, read a vector at a time: each row a whole "
              "number of vectors, so every row starts aligned; add what else it needs, e.g. \"and M % BM == 0\"")
    else:
        d.add("shapes", _toml("any"), "TODO: shapes: \"any\" claims every M, N, K >= 0 (K = 0 gives beta C); a "
              "kernel without bounds guards claims less, e.g. \"M % BM == 0 and N % BN == 0 and K % BK == 0 "
              "and K > 0\"")
    output = next((p.name for p, r in zip(params, roles) if r == "C"), None)
    if output and "beta" not in roles and "D" not in roles and source_text and any(
            re.search(rf"\batomicAdd\s*\(\s*(?:&\s*{re.escape(output)}\s*\[|{re.escape(output)}\s*\+)", body)
            for is_kernel, body in _kernel_bodies(source_text).get(kernel.name, []) if is_kernel):
        d.add("adds_into_c", None, f"TODO: the kernel atomicAdds into {output}: if its callers zero it first (a "
              "split-K), say so, and that float atomics add in any order:", "adds_into_c = true",
              "deterministic = false")
    if "beta" in roles:
        d.add("reads_c_at_beta_zero", None, "TODO: at beta = 0 BLAS never reads C; if the kernel does "
              "(C = alpha * acc + beta * C[i]) and its callers always initialize C, say so:",
              "reads_c_at_beta_zero = true")
    d.add("expect", _toml("correct"))
    return d


def _whole_vectors(params: list[Param], roles: list) -> tuple[str, str] | None:
    """(what the operands are, the shape claim) for a kernel taking operands as vectors
    (``const float4 *A``): each row must be a whole number of vectors (row-major A's rows are K
    long, B's, C's and D's N)."""
    vectors = {role: p.pointee for p, role in zip(params, roles)
               if role in _ROW_LENGTH and p.pointee in VECTOR_TYPES and not p.pointer_to_pointers}
    if not vectors:
        return None
    claim = " and ".join(f"{size} % {width} == 0" for size, width in sorted(
        {(_ROW_LENGTH[r], VECTOR_TYPES[t][1]) for r, t in vectors.items()}))
    return ", ".join(f"{r} is {t} *" for r, t in vectors.items()), claim


_BOOLS = {"false": 0, "true": 1}   # a bool template parameter takes 0 and 1 as false and true


def _unique(dicts: list[dict]) -> list[dict]:
    return [d for at, d in enumerate(dicts) if d not in dicts[:at]]


def _compiled_sizes(value_params: list[str], configs: list[dict], defines: dict[str, int]) -> tuple[dict | None, tuple]:
    """For a kernel that takes no size argument: ({M, N, K}, (the note, the #define names
    used)) when its sizes are compiled in, as template parameters named M, N, K with one
    instantiation, or as the file's #defines (``#define N 64``: square, as textbooks write it);
    (None, ()) when neither says them."""
    named = [n for n in value_params if n in SIZES]
    if named:
        if len(configs) != 1 or not set(SIZES) <= set(configs[0]):
            return None, ()
        return {n: configs[0][n] for n in SIZES}, (
            f"the sizes are its template parameters {', '.join(SIZES)}, instantiated at "
            f"{', '.join(str(configs[0][n]) for n in SIZES)}: it computes that one shape", ())
    given = {n: defines[n] for n in SIZES if n in defines}
    square = next((n for n in _SQUARE_SIZE_NAMES if n in defines), None)
    if not given and square is None:
        return None, ()
    if given and set(given) != set(SIZES) and not (set(given) == {"N"}):
        return None, ()
    value = defines[square] if not given else None
    sizes = {n: given.get(n, given.get("N", value)) for n in SIZES}
    used = tuple(given) or (square,)
    said = ", ".join(f"#define {n} {defines[n]}" for n in used)
    return sizes, (f"the kernel takes no size: the file's {said} is compiled into it; it computes that one shape",
                   used)


def _instantiated_types(calls: list[Launch], host: str, tparams) -> tuple[list[str], str] | None:
    """(dtypes, the note saying whence) for a kernel with one type parameter that the file launches
    from a host template (``launch_gemm<T>(...) { gemm<T, 32><<<...>>> }``) it instantiates
    explicitly (``template void launch_gemm<float>(...);``): the dtypes of those types."""
    kinds = [kind for kind, _ in tparams]
    if kinds.count("type") != 1:
        return None
    at = kinds.index("type")
    blocks = list(cuda_source.top_level_blocks(host))
    types = []
    for call in calls:
        passed = call.template_args[at].strip() if len(call.template_args) > at else None
        head = next((h for h, _, open_at, end in blocks if open_at <= call.at < end), None)
        if not passed or head is None:
            continue
        outer = parameters.template_parameters(head)
        names = re.findall(r"\b([A-Za-z_]\w*)\s*\(", re.sub(r"template\s*<[^{]*?>", "", head))
        position = next((i for i, (kind, name, _) in enumerate(outer) if kind == "type" and name == passed), None)
        if position is None or not names:
            continue
        for instantiated in explicit_instantiations(host, names[0]):
            if len(instantiated) > position and (t := instantiated[position].strip()) not in types:
                types.append(t)
        launcher = names[0]
    dtypes = [ELEMENT_TYPES[t] for t in types if t in ELEMENT_TYPES and ELEMENT_TYPES[t] in dt.DTYPES]
    if not dtypes or len(dtypes) != len(types):
        return None
    return dtypes, f"the types the file instantiates {launcher}, which launches it, with: {', '.join(types)}"


def _dtypes(params: list[Param], roles: list, type_params: set[str]) -> tuple[list[str], list[str], dict]:
    """(dtypes, TODO lines, {type parameter: its template_args placeholder}) from the operands'
    pointers: one element type for all, or the combination of A, B and the output (C and D,
    or C, D when they differ); a template parameter is a placeholder ({T}, or {A}, {C} ...
    when several type the operands) and a TODO."""
    of = {launch.array_operand(role) or role: p.pointee for p, role in zip(params, roles)
          if role in launch.OPERAND_ROLES + launch.ARRAY_ROLES}
    comments, placeholders = [], {}
    of = {role: VECTOR_TYPES.get(t, (t,))[0] for role, t in of.items()}   # a float4 * operand holds float32
    used = [t for t in dict.fromkeys(of.values()) if t in type_params]
    for role, t in of.items():
        if t in type_params:
            placeholders.setdefault(t, "T" if len(used) == 1 else role)
    if used:
        what = "is a template parameter" if len(used) == 1 else "are template parameters"
        comments.append(f"TODO: dtypes: {', '.join(used)} {what}"
                        f" ({', '.join(f'{r} is {t}' for r, t in of.items() if t in type_params)}); list the dtypes to "
                        "test: float32, float16, ..., or combinations of A, B and the output such as f16f16f32")
        return ["float32"], comments, placeholders
    unknown = sorted({t for t in of.values() if t not in ELEMENT_TYPES})
    if unknown:
        comments.append(f"TODO: dtypes: element type {', '.join(map(repr, unknown))} is not one gemmcheck knows; "
                        f"use {', '.join(dt.ELEMENT_TYPES)}")
        return ["float32"], comments, placeholders
    names = {role: dt.get(ELEMENT_TYPES[t]) for role, t in of.items()}
    raw = [role for role, t in of.items() if t == FP8_STORAGE]
    if raw:
        comments.append(f"TODO: dtypes: {' and '.join(raw)} {'is' if len(raw) == 1 else 'are'} {FP8_STORAGE} (fp8 as "
                        "raw bytes), drafted as e4m3; write e5m2 for an operand the kernel converts with __NV_E5M2")
    output = names.get("D", names.get("C"))
    if output is None or "A" not in names or "B" not in names:
        # operands whose roles are TODOs: their one element type, if they share one
        shared = {VECTOR_TYPES.get(p.pointee, (p.pointee,))[0] for p in params if p.pointer and not p.pointer_to_pointers}
        if len(shared) == 1 and (t := shared.pop()) in ELEMENT_TYPES and ELEMENT_TYPES[t] in dt.DTYPES:
            comments.append(f"every pointer is {t}: {ELEMENT_TYPES[t]}, unless the operands' roles say otherwise")
            return [ELEMENT_TYPES[t]], comments, placeholders
        return ["float32"], comments, placeholders
    C = names.get("C", output)
    listed = [names["A"], names["B"], *([C] if C != output else []), output]
    if len(set(listed)) == 1 and listed[0].name in dt.DTYPES:
        return [listed[0].name], comments, placeholders
    combination = "".join(d.short for d in listed)
    try:
        operand_types.of(combination)
    except operand_types.TypesError as exc:
        comments.append(f"TODO: dtypes: {exc}")
    return [combination], comments, placeholders


def _draft_types(roles: list, params: list[Param], dtypes: list[str]) -> list[tuple[str, object, list[str]]]:
    """The fields a kernel with scale factors, a separate D or an 8-bit output needs:
    (key, TOML value or None for a commented hint, TODO lines)."""
    out = []
    scales = {}
    for p, role in zip(params, roles):
        if role in launch.SCALE_ROLES:
            scales[role[-1]] = "tensor"
    if scales:
        by_value = [r for p, r in zip(params, roles) if r in launch.SCALE_ROLES and not p.pointer]
        out.append(("scales", _toml(scales), [
            "TODO: scales: how each operand's scale factors apply: \"tensor\" (one value"
            + (f"; {', '.join(by_value)} taken by value: that is certain), " if by_value else "), ")
            + "\"row\" (one per row), \"col\" (one per column), or { block = [1, 128] } (rows x columns of the "
            "operand each covers; major = \"col\" when the scale matrix is stored transposed)"]))
    fused = [r for r in roles if r in ("bias", "residual", "output_scale")]
    if fused:
        out.append(("epilogue", None, [
            f"TODO: epilogue: the kernel takes {', '.join(fused)}: say what it fuses, in this order (the "
            "reference's): bias = \"row\" (bias[i]) or \"col\" (bias[j]) and bias_type when not D's; activation = "
            "\"relu\", \"gelu_tanh\", \"gelu_erf\" or \"silu\"; residual = true; output_scale = true, e.g.",
            "epilogue = { " + ", ".join(
                {"bias": 'bias = "row"', "residual": "residual = true", "output_scale": "output_scale = true"}[r]
                for r in fused) + ', activation = "relu" }']))
    if launch.takes_operand(roles, "C") and launch.takes_operand(roles, "D"):
        out.append(("d_aliases_c", None, ["TODO: D is written, C only read (at beta != 0); if callers may pass "
                                          "D == C (an in-place update), say so:", "d_aliases_c = true"]))
    names = operand_types.combination(dtypes[0]) if dtypes else None
    if names and names[3].itemsize == 1:
        out.append(("saturates_output", None, ["TODO: an 8-bit output: if the kernel converts it saturating "
                                               "(__NV_SATFINITE; the __nv_fp8_e4m3(x) constructor does), say so:",
                                               "saturates_output = true"]))
    return out


def _draft_dynamic_shared(d: Draft, kernel: cuda_source.Kernel, calls: list[Launch], names, constants, known,
                          literals, code: str, host: str = "") -> None:
    """shared_bytes from the launch's third argument (a variable: its initializer before the
    launch, ``const size_t smem = (BM * BK + BK * BN) * sizeof(float);``); without one, a TODO
    where the kernel (or, less surely, the file) declares extern __shared__ memory: launched with
    none, it reads and writes past its shared memory."""
    given = calls[0].shared if calls else None
    sized = given
    if given and re.fullmatch(r"[A-Za-z_]\w*", given) and calls[0].at >= 0:
        found = list(re.finditer(rf"\b{given}\s*(?:=\s*(?P<assigned>[^;{{}}]+)|\{{(?P<braced>[^;{{}}]+)\}})\s*;",
                                 host[:calls[0].at]))
        sized = (found[-1]["assigned"] or found[-1]["braced"]).strip() if found else given
    sized = sized and re.sub(r"sizeof\s*\(\s*(\w+)\s*\)", lambda m: str(_SIZES.get(m[1], m[0])), sized)
    expression = _expressions([sized], names, constants, known, literals) if sized else None
    if expression:
        d.add("shared_bytes", _toml(expression[0]), f"dynamic shared memory, from the file's launch: {given}")
        return
    if given or _uses_dynamic_shared(kernel.name, code):
        d.add("shared_bytes", None, "TODO: shared_bytes: the kernel uses dynamic (extern __shared__) memory: say how "
              "many bytes a launch gives it, over M, N, K and the parameters"
              + (f" (the file launches it with {given})" if given else "") + ", e.g.",
              'shared_bytes = "STAGES * (BM + BN) * BK * 2"')


_SIZES = {"float": 4, "int": 4, "unsigned": 4, "double": 8, "half": 2, "__half": 2, "__nv_bfloat16": 2,
          "float2": 8, "float4": 16}
_EXTERN_SHARED = re.compile(r"\bextern\s+__shared__")


def _kernel_bodies(code: str) -> dict[str, list[tuple[bool, str]]]:
    """Each top-level function of `code` by name: (whether it is a __global__ one, its body)."""
    bodies = {}
    for head, _, open_at, end in cuda_source.top_level_blocks(cuda_source.code_only(code)):
        names = [n for n in re.findall(r"\b(\w+)\s*\(", re.sub(r"template\s*<[^{]*?>", "", head))
                 if not n.startswith("__")]
        if names:
            bodies.setdefault(names[0], []).append(("__global__" in head, code[open_at:end]))
    return bodies


_HALF_FRAGMENT = re.compile(r"\bfragment\s*<\s*(?:\w+::)*accumulator\s*,[^;>]*?\b(?:__half|half)\s*>")
_SUM_NAMES = r"(?P<name>(?:acc|sum|partial|c_val|cval)\w*)\s*(?:=|;|\[|\{)"
_HALF_SUM = re.compile(rf"\b(?:__half|half)\s+{_SUM_NAMES}")


def _half_sums(kernel: str, code: str, type_param: str | None = None) -> str | None:
    """How the __global__ `kernel` (or a function of the file it calls) sums in half, if it
    does: a WMMA accumulator fragment of __half, or an accumulator variable declared half; or,
    given its `type_param`, declared in that type (``T sum``: half where T is)."""
    bodies = _kernel_bodies(code)
    own = [body for is_kernel, body in bodies.get(kernel, []) if is_kernel]
    called = [body for name, found in bodies.items() if name != kernel
              and any(re.search(rf"\b{re.escape(name)}\s*[<(]", b) for b in own) for _, body in found]
    in_type = re.compile(rf"\b{re.escape(type_param)}\s+{_SUM_NAMES}") if type_param else None
    for body in own + called:
        if type_param is None and _HALF_FRAGMENT.search(body):
            return "a wmma accumulator fragment of __half"
        if (m := (in_type or _HALF_SUM).search(body)):
            return f"its accumulator {m['name']} is declared {type_param or 'half'}"
    return None


def _uses_dynamic_shared(kernel: str, code: str) -> bool:
    """Whether the __global__ `kernel` declares extern __shared__ memory, or calls a function of
    the file that does (a kernel that hands its work to a __device__ function)."""
    bodies = _kernel_bodies(code)
    declaring = {name for name, found in bodies.items() if any(_EXTERN_SHARED.search(b) for _, b in found)}
    return any(_EXTERN_SHARED.search(body) or any(re.search(rf"\b{re.escape(n)}\s*[<(]", body) for n in declaring)
               for is_kernel, body in bodies.get(kernel, []) if is_kernel)


def _draft_hopper(d: Draft, kernel: cuda_source.Kernel, roles: list, params: list[Param], code: str) -> None:
    """tensor_maps for CUtensorMap parameters, cluster from __cluster_dims__, arch when the file
    (`code`, as written: inline PTX is in strings) uses wgmma or setmaxnreg."""
    maps = [tensor_map.operand_of(r) for r in roles if r in launch.TENSOR_MAP_ROLES]
    if len(maps) < sum(map(_is_tensor_map, params)):
        d.add("tensor_maps", None, "TODO: tensor_maps: a CUtensorMap parameter's operand is not in its name; "
              "name its role tensor_map_A, _B, _C or _D in args and describe it here")
    if maps:
        d.add("tensor_maps", _toml({m: {"box": [64, 64], "swizzle": "none"} for m in maps}),
              "TODO: tensor_maps: box = [inner, outer] elements of the box the kernel loads (its shared tile, "
              "e.g. [\"BK\", \"BM\"]; inner along the operand's contiguous dimension); swizzle as the kernel "
              "reads its tiles: \"none\", \"32B\", \"64B\" or \"128B\"")
    dims = re.search(r"__cluster_dims__\s*\((?P<args>[^)]*)\)", kernel.head)
    if dims:
        d.add("cluster", _toml([int(v) if v.strip().isdigit() else v.strip() for v in split_top_level(dims["args"])]),
              "from __cluster_dims__; the grid must be a whole number of clusters")
    if re.search(r"\b(wgmma|setmaxnreg)\.", code):
        d.add("arch", _toml("sm_90a"), "wgmma / setmaxnreg need the architecture-specific target")


def cuda_source_default_tile() -> str:
    from gemmcheck.contract.catalog import DEFAULT_TILE
    return DEFAULT_TILE


def _launch_texts(calls: list[Launch]) -> list[str]:
    """What each launch names, ``sgemm<32>``; a launch that leaves the template arguments out
    takes the template's defaults, and says so."""
    return [c.written.split("<<<")[0].rstrip() + ("" if c.template_args else " (the template's defaults)")
            for c in calls]


def _host_names(call: Launch, tparams, host: str) -> dict[str, str]:
    """Host identifiers -> catalog names: the launch's template arguments by position, and the
    host's spellings of M, N and K."""
    names = {}
    for (kind, name), arg in zip(tparams, call.template_args):
        if kind == "value" and re.fullmatch(r"[A-Za-z_]\w*", arg.strip()):
            names[arg.strip()] = name
    for word in set(re.findall(r"\b[A-Za-z_]\w*\b", " ".join((call.grid or []) + (call.block or [])))):
        role = _INT_NAMES.get(normalized(word)) or _INT_NAMES.get(word.lower())
        if role in launch.GEOMETRY_NAMES and word not in names:
            names[word] = role
    return names


def _passed_names(call: Launch, roles: list) -> dict[str, str]:
    """Host identifiers the launch passes as a size (``kernel<<<..>>>(A, B, C, rows, cols, inner)``
    with M, N, K read from the kernel's own names) -> that size's role."""
    return {arg: role for arg, role in zip(call.args or (), roles)
            if role in launch.GEOMETRY_NAMES and re.fullmatch(r"[A-Za-z_]\w*", arg)}


def _launch_reading(call: Launch, params: list[Param]) -> list[str]:
    """Comment lines for a launch whose geometry the draft could not put in the catalog's terms:
    the launch, its grid and block as the file computes them, and what it passes each size."""
    lines = [f"the file launches it as: {call.written}"]
    shown = lambda dims: "(" + ", ".join(host_expression(d, {}, {}) for d in dims) + ")"
    if call.grid and call.block and [call.grid, call.block] != [[call.written]] * 2:
        lines.append(f"with grid {shown(call.grid)} and block {shown(call.block)}")
    sizes = [f"{p.name} = {arg}" for p, arg in zip(params, call.args or ()) if not p.pointer and arg != p.name]
    if sizes:
        lines.append(f"passing {', '.join(sizes)}")
    return lines


def _literals(call: Launch, tparams) -> dict[str, str]:
    """Numbers the launch passes as template arguments -> the parameter's name, where the
    number is one parameter's only (a literal 32 in the geometry then reads as BLOCKSIZE)."""
    seen: dict[str, list[str]] = {}
    for (kind, name), arg in zip(tparams, call.template_args):
        if kind == "value" and re.fullmatch(r"\d+", arg.strip()):
            seen.setdefault(arg.strip(), []).append(name)
    return {number: names[0] for number, names in seen.items() if len(names) == 1}


def _unique_values(named: dict[str, int]) -> dict[str, str]:
    """value -> name for the values only one of `named` has (a #define'd TILE 2: "2" -> TILE)."""
    values = list(named.values())
    return {str(v): k for k, v in named.items() if values.count(v) == 1}


def _expressions(dims, names, constants, known, literals) -> list | None:
    if not dims:
        return None
    out = []
    for raw in dims:
        expr = host_expression(raw, names, constants, literals)
        try:
            if launch.Expression(expr).unknown(known):
                return None
        except launch.ExpressionError:
            return None
        out.append(int(expr) if expr.isdigit() else expr)
    return out
