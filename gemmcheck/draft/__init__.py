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

import os
import re
from dataclasses import dataclass
from pathlib import Path

from gemmcheck.contract import cuda_source, launch, parameters, structs, tensor_map
from gemmcheck.draft.fields import Draft, toml_value
from gemmcheck.draft.names import (ARRAY_NAMES, C_TYPES, INT_NAMES, TILE_NAMES, TRANSPOSED_NAMES, WEIGHT_NAMES, Param,
                                   is_scratch, is_tensor_map, names_of_kernel, normalized, parse_params, role_of,
                                   scratch_role, struct_members, template_params)
from gemmcheck.draft.types import (ROW_LENGTH, dtypes_of, half_sums, instantiated_types, kernel_bodies, kernel_code,
                                   mixed_fields, scale_reads, whole_vectors)
from gemmcheck.host_launches import (CONSTANT_ASSIGNMENT, Launch, call_arguments, explicit_instantiations, host_expression,
                                     launches, split_top_level)

# The problem's sizes, and the #define names textbooks give one square size compiled into a kernel
# that takes none (``#define N 64``, ``#define MATRIX_SIZE 1024``).
SIZES = ("M", "N", "K")
_SQUARE_SIZE_NAMES = ("N", "SIZE", "MATRIX_SIZE", "MAT_SIZE", "MATRIX_DIM", "MAT_DIM", "DIM", "MATRIX_WIDTH")

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
    unopened = tuple(h for h in cuda_source.unopened_headers(text, str(source), searched) if not _toolkit_header(h))
    where = Path((relative_to or source.parent)).resolve()
    rel = _relative(source, where)
    header = [f"# Drafted by `python -m gemmcheck draft {source.name}`: fill in each TODO and check every value.",
              f"# source paths are relative to the catalog file: this draft is for a catalog in {_shown(where)}.",
              "# What each field means: docs/published-sources.md."]
    header += [f"# TODO: {unopened_note(source.name, h)}" for h in unopened]
    if not kernels:
        return Drafted("\n".join(header + [f"# TODO: {source.name} declares no __global__ function (after preprocessing)"]) + "\n",
                       0, unopened)
    problem_sizes = _host_problem_sizes(text)
    host = cuda_source.code_only(cuda_source.preprocessed(_without_defines(text, problem_sizes), str(source), searched))
    constants = {m["name"]: int(m["value"] or m["braced"]) for m in CONSTANT_ASSIGNMENT.finditer(host)}
    file_defines = {k: v for k, v in cuda_source.defines(text).items()
                    if re.search(rf"\b{k}\b", _without_define_lines(text)) and k not in problem_sizes}
    drafts = [draft_kernel(k, rel, host, constants, file_defines, source_text=text) for k in kernels]
    if include_dirs:
        for d in drafts:   # after `entry`, as the catalog contract lists them
            at = next(i for i, f in enumerate(d.fields) if f[0] == "entry") + 1
            d.fields.insert(at, ("include_dirs", toml_value([os.path.relpath(i, where) for i in include_dirs]),
                                 ["headers are searched beside the source, then here (-I)"]))
    return Drafted("\n".join(header) + "\n\n" + "\n\n".join(d.toml() for d in drafts) + "\n",
                   len(drafts), unopened)


# The CUDA toolkit's headers and its libraries' (cuBLAS, cuRAND, NVTX ...), however a file spells
# the #include ("cublas_v2.h" with quotes): nvcc finds them itself, so they are no TODO of the user's.
_TOOLKIT_HEADER = re.compile(r"(?:cuda|cublas|cusparse|cufft|curand|cusolver|cudnn|nccl|nvtx|nvToolsExt|nvrtc|nvml|"
                             r"cupti|npp|nvjpeg)\w*\.h|mma\.h|sm_\d+_intrinsics\.h|(?:device|vector|math)_\w+\.h|"
                             r"(?:crt|thrust|cub|cuda|cooperative_groups)/.*")


def _toolkit_header(header: str) -> bool:
    """Whether `header` is the CUDA toolkit's (or one of its libraries'), found or not here."""
    from gemmcheck.compile import toolkit

    return bool(_TOOLKIT_HEADER.fullmatch(header)) or any(
        (Path(d) / header).is_file() for d in toolkit.include_dirs()) or toolkit.header_elsewhere(header) is not None


# An operand's column-major stride: the size its columns are long (A is M x K, B K x N, C M x N).
_COLUMN_LENGTH = {"A": "M", "B": "K", "C": "M", "D": "M"}


def _column_major_by_index(kernel: str, params: list[Param], roles: list, code: str) -> dict[str, tuple[str, str]]:
    """{operand: (an index the kernel reads it with, the size in it)} for each operand that
    every index of the kernel's body multiplies by its column length, not its row length
    (``B[i + col * K]``: B's elements K apart along a row, so column-major)."""
    sizes = {role: p.name for p, role in zip(params, roles) if role in ("M", "N", "K")}
    bodies = [body for is_kernel, body in kernel_bodies(code).get(kernel, []) if is_kernel]
    found = {}
    for p, role in zip(params, roles):
        column = sizes.get(_COLUMN_LENGTH.get(role, ""))
        row = sizes.get(ROW_LENGTH.get(role, ""))
        if not p.pointer or column is None or row is None or column == row:
            continue
        indices = [m.group(0) for body in bodies for m in re.finditer(rf"\b{re.escape(p.name)}\s*\[[^\]]*\]", body)]
        by = lambda name, index: re.search(rf"\*\s*\(?\s*{re.escape(name)}\b|\b{re.escape(name)}\s*\)?\s*\*", index)
        if indices and all(by(column, i) and not by(row, i) for i in indices):
            found[role] = (" ".join(indices[0].split()), column)
    return found


_FRAGMENT_LAYOUT = re.compile(r"\bfragment\s*<\s*(?:\w+::)*matrix_(?P<operand>[ab])\s*,[^;]*?"
                              r"\b(?:\w+::)*(?P<layout>row|col)_major\s*>")
_MATRIX_SYNC = re.compile(r"\b(?:load|store)_matrix_sync\s*\((?P<args>[^;]*?)\b(?:\w+::)*mem_(?P<layout>row|col)_major\s*\)")


def _column_major_by_fragments(kernel: str, params: list[Param], roles: list, code: str) -> list[str]:
    """The operands a WMMA kernel holds column-major, as its fragments say: A or B loaded into
    ``wmma::col_major`` fragments, C or D loaded or stored with ``wmma::mem_col_major`` (NVIDIA's
    WMMA example keeps every operand so)."""
    bodies, called = kernel_code(kernel, code)
    layouts: dict[str, set[str]] = {}
    for m in _FRAGMENT_LAYOUT.finditer(bodies + " " + called):   # the kernel's, or a __device__ function's it calls
        layouts.setdefault(m["operand"].upper(), set()).add(m["layout"])
    for m in _MATRIX_SYNC.finditer(bodies):
        for p, role in zip(params, roles):
            if role in ("C", "D") and re.search(rf"\b{re.escape(p.name)}\b", m["args"]):
                layouts.setdefault(role, set()).add(m["layout"])
    return [operand for operand in launch.OPERAND_ROLES if layouts.get(operand) == {"col"}]


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


def _host_problem_sizes(text: str) -> set[str]:
    """#defines a launch passes as a kernel argument and no device code reads (NVIDIA's WMMA
    example's ``#define MATRIX_M 16384``): the host's problem, not a kernel parameter. Left
    unexpanded, the launch passes them as M, N, K and the grid over them reads so."""
    code = cuda_source.code_only(text)
    device = " ".join(code[at:end] for head, _, at, end in cuda_source.top_level_blocks(code)
                      if re.search(r"\b__(?:global|device)__\b", head))
    passed = {a.strip() for m in re.finditer(r">>>", code) if (call := call_arguments(code, m.end())) for a in call[0]}
    return {name for name in cuda_source.defines(text) if name in passed and not re.search(rf"\b{name}\b", device)}


def _without_defines(text: str, names: set[str]) -> str:
    return re.sub(rf"^[ \t]*#[ \t]*define[ \t]+(?:{'|'.join(map(re.escape, names))})\b[^\n]*", "", text,
                  flags=re.M) if names else text


def _without_define_lines(text: str) -> str:
    return re.sub(r"^[ \t]*#[ \t]*define[^\n]*", "", cuda_source.code_only(text), flags=re.M)


def _draft_scratch(d: Draft, roles: list, params) -> None:
    """A TODO for the sizes of the scratch memory the kernel takes (its catalog's `scratch`)."""
    taken = [(p, r) for p, r in zip(params, roles) if r in launch.SCRATCH_ROLES]
    if not taken:
        return
    sizes = ", ".join(f'{r} = "..."' for _, r in taken)
    d.add("scratch", None, f"TODO: scratch = {{ {sizes} }}: the bytes the kernel's callers allocate for "
          f"{', '.join(repr(p.text) for p, _ in taken)}, over M, N, K and the parameters (e.g. \"4 * SPLITS * M * N\" "
          "for float partial sums of SPLITS slices); the suite zeroes them before every launch, as callers "
          "usually do (scratch_zeroed = false where they need not)")


def draft_kernel(kernel: cuda_source.Kernel, rel_source: str, host: str, constants: dict[str, int],
                 file_defines: dict[str, int], source_text: str = "") -> Draft:
    d = Draft()
    declared = parse_params(kernel.params)
    file_structs = structs.definitions(cuda_source.code_only(host))
    params, struct_notes = struct_members(declared, file_structs, parameters.typedefs(host))
    tparams = template_params(kernel.head)
    type_params = {name for kind, name in tparams if kind == "type"}
    value_params = [name for kind, name in tparams if kind == "value"]
    element_types = {p.element_type for p in params if p.pointer}
    scalar_types = set(C_TYPES) | type_params

    d.add("name", toml_value(kernel.name))
    d.add("description", toml_value(""), "TODO: description: one line on what the kernel does (optional)")
    d.add("source", toml_value(rel_source))
    d.add("entry", toml_value(kernel.name))

    kernel_launches = launches(host, kernel.name)
    roles, unknown, todo_args = [], [], list(struct_notes)
    # the type each parameter is passed as (a type parameter read as a floating type: an element type)
    names = {**parameters.typedefs(host), **{t: "float" for t in type_params}}
    takes_c = any(p.pointer and (normalized(p.name) == "c" or ARRAY_NAMES.get(normalized(p.name)) == "C")
                  for p in params)
    own_names = names_of_kernel(params)
    for p in params:
        passed = parameters.read_type(p.type, names, pointer=p.array)
        role = role_of(p, scalar_types, takes_c, own_names) if passed.kind != parameters.OTHER else None
        if passed.kind == parameters.UNKNOWN and role is not None:
            # a type through a template alias or trait (scalar_t<T>, typename Traits<T>::compute): the
            # suite packs the role's own type and checks it against the compiled kernel's parameters
            todo_args.append(f"{p.text!r}: a type read from the compiled kernel, not here (packed as {role}'s own "
                             "type: for alpha and beta the accumulator's, unless the entry says `scalar`)")
        elif passed.kind == parameters.UNKNOWN:
            role = None
        if role is None and passed.kind == parameters.POINTER and scratch_role(p) not in roles:
            role = scratch_role(p)
        if passed.kind == parameters.OTHER or (passed.kind == parameters.UNKNOWN and role is None):
            definition = file_structs.get(passed.spelling)
            why = f" ({definition.has(definition.unpackable)})" if definition and definition.unpackable else ""
            todo_args.append(f"TODO: args: {p.text!r} is a {passed} by value, which the suite cannot pack{why} (it "
                             "passes pointers, integers, floating-point alpha and beta, CUtensorMaps, and structs of "
                             "these): this kernel takes what no role is")
        if role is None or (role in roles and role not in launch.INT_ROLES):   # a size may be passed twice
            unknown.append(p.text)
            role = f"TODO {p.name}"
        roles.append(role)
    missing = launch.missing_operands(roles)
    if unknown:
        todo_args.append(f"TODO: args: the role of {', '.join(repr(u) for u in unknown)}: one of "
                         f"{', '.join(launch.ROLES)}, or an integer literal passed as is")
        scratch = [p.text for p, role in zip(params, roles) if str(role).startswith("TODO") and is_scratch(p)]
        if scratch:
            todo_args.append(f"{', '.join(repr(s) for s in scratch)}: scratch memory beyond the one workspace and "
                             "one semaphores buffer the suite provides (launch.SCRATCH_ROLES), so this kernel "
                             "cannot be checked as it is")
        call = next(iter(kernel_launches), None)
        passed = [f"{p.name} = {constants[arg]}" for p, role, arg in zip(params, roles, (call.args or ()) if call else ())
                  if str(role).startswith("TODO") and arg in constants] if params == declared else []
        if passed:
            todo_args.append(f"the file's launch passes {', '.join(passed)}: a literal passes the same")
    if missing:
        todo_args.append(f"TODO: args: no parameter reads as {', '.join(missing)}; name the pointers' roles")
    d.add("args", toml_value(roles), *todo_args)
    _draft_scratch(d, roles, params)
    _draft_hopper(d, kernel, roles, params, source_text)

    dtypes, dtype_comments, placeholders = dtypes_of(params, roles, type_params)
    if type_params and (found := instantiated_types(kernel_launches, host, tparams)):
        dtypes, dtype_comments = found[0], [found[1]]
    type_fields = mixed_fields(roles, params, dtypes,
                               scale_reads(kernel.name, params, roles, source_text) if source_text else None)

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
        d.add("template_args", toml_value(template_args))
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
            d.add("configs", "[\n" + "".join(f"    {toml_value(c)},\n" for c in named) + "]", *note)
            param_values = {k: v for k, v in param_values.items() if k not in value_params}
            if param_values:
                d.add("params", toml_value(param_values))
        else:
            d.add("params", toml_value(param_values), *note)
    elif param_values:
        d.add("params", toml_value(param_values), "from the file's #defines")
    all_params = [*value_params, *defines_used]
    tile = next((n for n in TILE_NAMES if n in all_params), None)
    if tile and tile != cuda_source_default_tile():
        d.add("tile", toml_value(tile), "the parameter that is the tile edge (shape generators use it)")

    # launch geometry: the file's own launch, else a guess
    known = {*all_params, *launch.GEOMETRY_NAMES}
    grid = block = None
    if kernel_launches:
        call = kernel_launches[0]
        names = {**_host_names(call, tparams, host), **(_passed_names(call, roles) if params == declared else {})}
        literals = {**_unique_values(defines_used), **_literals(call, tparams)}
        grid = _expressions(call.grid, names, constants, known, literals)
        block = _expressions(call.block, names, constants, known, literals)
    bounds = re.search(r"__launch_bounds__\s*\((?P<args>.*)\)", kernel.head)
    hint = [f"__launch_bounds__({bounds['args']}): at most {split_top_level(bounds['args'])[0]} threads per block"] \
        if bounds else []
    if grid and block:
        d.add("grid", toml_value(grid), f"from the file's launch: {kernel_launches[0].written}")
        d.add("block", toml_value(block), *hint)
    else:
        seen = [line for c in kernel_launches[:1] for line in _launch_reading(c, declared)]
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
        d.add("grid", toml_value(guess_grid), "TODO: grid: blocks in x, y (, z) over M, N, K and the parameters "
              "(a guess)", *seen)
        d.add("block", toml_value(guess_block), "TODO: block: threads in x, y (, z) (a guess)", *hint)
    _draft_dynamic_shared(d, kernel, kernel_launches, names if kernel_launches else {}, constants, known,
                          literals if kernel_launches else {}, source_text, host)
    d.add("dtypes", toml_value(dtypes), *dtype_comments)
    if dtypes == ["float16"] and source_text and (how := half_sums(kernel.name, source_text)):
        d.add("accumulator", toml_value("float16"), f"the kernel sums in half ({how}): judged by half sums' error "
              "bound, not float32's")
    halves = [t for t in dtypes if t in ("float16", "bfloat16")]
    if len(dtypes) > 1 and halves and len(type_params) == 1 and source_text and \
            (how := half_sums(kernel.name, source_text, next(iter(type_params)))):
        d.add("accumulator", "{ " + ", ".join(f'{t} = "{t}"' for t in halves) + " }",
              f"the kernel sums in its element type ({how}): at {' and '.join(halves)} it sums in that type, "
              "judged by that type's sums' error bound")
    for key, value, comments in type_fields:
        d.add(key, value, *comments)
    transposed = [(p.name, r) for p, r in zip(params, roles) if r in ("A", "B") and p.pointer
                  and (normalized(p.name) in TRANSPOSED_NAMES or p.name.lower() in TRANSPOSED_NAMES)]
    if transposed and not any(r.startswith("ld") for r in roles if isinstance(r, str)):
        d.add("layout", None, f"TODO: layout: {', '.join(f'{r} is {n!r}' for n, r in transposed)}: if it holds the "
              "operand transposed (B^T is N x K row-major), that is the operand column-major:",
              "layout = { " + ", ".join(f'{r} = "col"' for _, r in transposed) + " }")
    indexed = _column_major_by_index(kernel.name, params, roles, source_text) if source_text and not (
        transposed or any(r in roles for r in ("lda", "ldb", "ldc"))) else {}
    if indexed:
        d.add("layout", None, "TODO: layout: the kernel reads " + ", ".join(
            f"{operand} as {seen} (its columns {size} elements apart: column-major)" for operand, (seen, size) in indexed.items())
              + "; if so:", "layout = { " + ", ".join(f'{o} = "col"' for o in indexed) + " }")
    fragments = _column_major_by_fragments(kernel.name, params, roles, source_text) if source_text and not (
        transposed or indexed) else []
    if fragments:
        d.add("layout", None, "TODO: layout: the kernel loads " + ", ".join(fragments) + " as column-major WMMA "
              "fragments (wmma::col_major, wmma::mem_col_major); if the operands are held so:",
              "layout = { " + ", ".join(f'{o} = "col"' for o in fragments) + " }")
    weight = next((p.name for p, r in zip(params, roles) if r == "B" and normalized(p.name) in WEIGHT_NAMES), None)
    if weight and "ldb" not in roles and "B" not in indexed:
        d.add("layout", None, f"TODO: layout: B is {weight!r}; a linear layer keeps its weight as N x K (out "
              "features x in features, as torch.nn.Linear does), which is B column-major:",
              'layout = { B = "col" }')
    if any(r in roles for r in ("lda", "ldb", "ldc")) and not fragments:
        d.add("layout", None, "TODO: layout: the operands are read row-major unless you say otherwise; for "
              "cuBLAS-style column-major operands add", 'layout = { A = "col", B = "col", C = "col" }')
    if sizes:
        d.add("sizes", toml_value(sizes), sizes_note[0])
    elif not takes_sizes:
        d.add("shapes", toml_value("square-tile-multiple"), "TODO: shapes: the kernel takes no size argument: if its "
              "sizes are compiled in, give them instead of shapes:", "sizes = { M = 64, N = 64, K = 64 }",
              "if it reads them from its launch (gridDim * blockDim), square tile multiples are its claim")
    elif "N" in roles and not {"M", "K"} & set(roles):
        d.add("shapes", toml_value("square-tile-multiple"), "one size argument: square problems, N a multiple of "
              "the tile (the only claim such a kernel can make)")
    elif (vectors := whole_vectors(params, roles)):
        d.add("shapes", toml_value(vectors[1]), f"TODO: shapes: {vectors[0]}, read a vector at a time: each row a whole "
              "number of vectors, so every row starts aligned; add what else it needs, e.g. \"and M % BM == 0\"")
    else:
        d.add("shapes", toml_value("any"), "TODO: shapes: \"any\" claims every M, N, K >= 0 (K = 0 gives beta C); a "
              "kernel without bounds guards claims less, e.g. \"M % BM == 0 and N % BN == 0 and K % BK == 0 "
              "and K > 0\"")
    output = next((p.name for p, r in zip(params, roles) if r == "C"), None)
    if output and "beta" not in roles and "D" not in roles and source_text and any(
            re.search(rf"\batomicAdd\s*\(\s*(?:&\s*{re.escape(output)}\s*\[|{re.escape(output)}\s*\+)", body)
            for is_kernel, body in kernel_bodies(source_text).get(kernel.name, []) if is_kernel):
        d.add("adds_into_c", None, f"TODO: the kernel atomicAdds into {output}: if its callers zero it first (a "
              "split-K), say so, and that float atomics add in any order:", "adds_into_c = true",
              "deterministic = false")
    if "beta" in roles:
        d.add("reads_c_at_beta_zero", None, "TODO: at beta = 0 BLAS never reads C; if the kernel does "
              "(C = alpha * acc + beta * C[i]) and its callers always initialize C, say so:",
              "reads_c_at_beta_zero = true")
    d.add("expect", toml_value("correct"))
    return d


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
    if expression in (["0"], [0]):
        return                  # a launch that gives none, written out (<<<grid, block, 0, stream>>>)
    if expression:
        d.add("shared_bytes", toml_value(expression[0]), f"dynamic shared memory, from the file's launch: {given}")
        return
    if given or _uses_dynamic_shared(kernel.name, code):
        d.add("shared_bytes", None, "TODO: shared_bytes: the kernel uses dynamic (extern __shared__) memory: say how "
              "many bytes a launch gives it, over M, N, K and the parameters"
              + (f" (the file launches it with {given})" if given else "") + ", e.g.",
              'shared_bytes = "STAGES * (BM + BN) * BK * 2"')


_SIZES = {"float": 4, "int": 4, "unsigned": 4, "double": 8, "half": 2, "__half": 2, "__nv_bfloat16": 2,
          "float2": 8, "float4": 16}
_EXTERN_SHARED = re.compile(r"\bextern\s+__shared__")


def _uses_dynamic_shared(kernel: str, code: str) -> bool:
    """Whether the __global__ `kernel` declares extern __shared__ memory, or calls a function of
    the file that does (a kernel that hands its work to a __device__ function)."""
    return bool(_EXTERN_SHARED.search(" ".join(kernel_code(kernel, code))))


def _draft_hopper(d: Draft, kernel: cuda_source.Kernel, roles: list, params: list[Param], code: str) -> None:
    """tensor_maps for CUtensorMap parameters, cluster from __cluster_dims__, arch when the file
    (`code`, as written: inline PTX is in strings) uses wgmma or setmaxnreg."""
    maps = [tensor_map.operand_of(r) for r in roles if r in launch.TENSOR_MAP_ROLES]
    if len(maps) < sum(map(is_tensor_map, params)):
        d.add("tensor_maps", None, "TODO: tensor_maps: a CUtensorMap parameter's operand is not in its name; "
              "name its role tensor_map_A, _B, _C or _D in args and describe it here")
    if maps:
        d.add("tensor_maps", toml_value({m: {"box": [64, 64], "swizzle": "none"} for m in maps}),
              "TODO: tensor_maps: box = [inner, outer] elements of the box the kernel loads (its shared tile, "
              "e.g. [\"BK\", \"BM\"]; inner along the operand's contiguous dimension); swizzle as the kernel "
              "reads its tiles: \"none\", \"32B\", \"64B\" or \"128B\"")
    dims = re.search(r"__cluster_dims__\s*\((?P<args>[^)]*)\)", kernel.head)
    if dims:
        d.add("cluster", toml_value([int(v) if v.strip().isdigit() else v.strip() for v in split_top_level(dims["args"])]),
              "from __cluster_dims__; the grid must be a whole number of clusters")
    if re.search(r"\b(wgmma|setmaxnreg)\.", code):
        d.add("arch", toml_value("sm_90a"), "wgmma / setmaxnreg need the architecture-specific target")


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
        role = INT_NAMES.get(normalized(word)) or INT_NAMES.get(word.lower())
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
