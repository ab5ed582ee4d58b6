"""One [[kernel]] table validated into a KernelSpec: its fields, the kernel's parameters by
role, operand layouts, include directories and fixed defines; every error one line naming the
file, the kernel and the fix."""

from __future__ import annotations

import re
import string
from pathlib import Path

from gemmcheck.contract import cuda_source, epilogue, launch, operand_types, parameters
from gemmcheck.contract import dtypes as dt
from gemmcheck.contract.catalog import hopper
from gemmcheck.contract.catalog.instantiations import _check_instantiations, _geometry, _in_configs, _parameters
from gemmcheck.contract.catalog.model import KernelSpec, square_only
from gemmcheck.contract.catalog.vocabulary import (
    _FIELDS, _IDENTIFIER, _REQUIRED, COMPILERS, CONVENTIONS, DEFAULT_TILE, EXPECTATIONS, LAYOUTS, SHAPES, SIGNATURE_ROLES,
    SIGNATURES, TILE_SHAPES, TYPE_FIELDS, CatalogError)
from gemmcheck.contract.catalog.vocabulary import NAMED, OWN_REFERENCE_RESOURCES, RESOURCE_CLAIMS


def _spec(path: Path, index: int, entry: dict) -> KernelSpec:
    label = f"kernel '{entry['name']}'" if isinstance(entry.get("name"), str) else f"kernel #{index + 1}"

    def fail(message: str):
        raise CatalogError(f"{path}: {label}: {message}")

    unknown = set(entry) - _FIELDS
    if unknown:
        fail(f"unknown field(s) {sorted(unknown)}; known: {sorted(_FIELDS)}")
    for key in _REQUIRED:
        if key not in entry:
            fail(f"missing required field '{key}'")
    for key in ("name", "source", "entry", "signature", "policy", "expect", "template_args", "shapes",
                "description", "tile"):
        if key in entry and not isinstance(entry[key], str):
            fail(f"'{key}' must be a string, got {entry[key]!r}")

    roles, signature = _roles(entry, fail)
    layouts = _layouts(entry, fail)
    expect = entry["expect"]
    if expect not in EXPECTATIONS:
        fail(f"unknown expect {expect!r}; use 'correct' or a defect: {', '.join(EXPECTATIONS[1:])}")
    dtype_names = entry["dtypes"]
    if not isinstance(dtype_names, list) or not dtype_names:
        fail(f"'dtypes' must be a non-empty list, got {dtype_names!r}")
    for name in dtype_names:
        if not isinstance(name, str) or operand_types.combination(name) is None:
            fail(f"dtypes: unknown dtype {name!r}; known: {', '.join(dt.DTYPES)}, tf32, or a combination of "
                 "A, B and the output (or A, B, C, D) in short names "
                 f"({', '.join(d.short for d in dt.ELEMENT_TYPES.values())}), e.g. 'f16f16f32', 's8s8s32'")
    if len(set(dtype_names)) != len(dtype_names):
        fail(f"dtypes lists a dtype twice: {dtype_names!r}")
    type_fields = _type_fields(entry, roles, fail)

    source = (path.parent / entry["source"]).resolve()
    if not source.is_file():
        fail(f"source '{entry['source']}' not found (looked for {source})")
    try:
        text = cuda_source.read_source(source)
    except (cuda_source.SourceNotText, OSError) as exc:
        fail(f"source '{entry['source']}': {exc}")
    include_dirs = _include_dirs(entry, path, fail)
    fixed_defines = _fixed_defines(entry, fail)
    try:
        cuda_source.declare_include_dirs(source, include_dirs)
    except cuda_source.IncludeDirConflict as exc:
        fail(str(exc))
    found_in = dict(file_name=str(source), include_dirs=cuda_source.include_dirs_of(source), defines=fixed_defines)
    entry_name, namespace = _entry_in_its_namespace(text, entry["entry"], found_in, fail)
    entry = {**entry, "entry": entry_name}

    tile_param = entry.get("tile", DEFAULT_TILE)
    sizes = _sizes(entry, roles, fail)
    tile_required = any(k in entry for k in ("policy", "tile", "tiles", "shared_tiles")) or \
        entry.get("shapes") in TILE_SHAPES or square_only(roles, sizes)
    declared = parameters.declaration(source, entry["entry"], found_in["include_dirs"], fixed_defines)
    # the template as written, before a -D of the same name rewrites it
    as_written = parameters.declaration(source, entry["entry"], found_in["include_dirs"]) or declared
    if as_written is not None:
        _check_defines(fixed_defines, as_written, tile_param, tile_required, fail)
    params, configs = _parameters(entry, tile_param, cuda_source.defines(text), fail, tile_required)
    macros = entry.get("macros", [])
    if not isinstance(macros, list) or any(m not in params and not _in_configs(m, configs) for m in macros):
        fail(f"'macros' must list parameters to pass as -D NAME=value, got {macros!r}; "
             f"parameters: {sorted(params)}")

    templated = cuda_source.is_template(text, entry["entry"], **found_in)
    template_args = entry.get("template_args", "" if templated is False else "{T}, {TILE}")
    if templated is False and template_args.strip():
        fail(f"entry '{entry['entry']}' is not a template in {source.name}, but template_args = "
             f"{template_args!r}; drop template_args (it is then named plainly)")
    if templated is True and not template_args.strip():
        fail(f"entry '{entry['entry']}' is a template in {source.name}; give its arguments in template_args, "
             "e.g. \"{T}, {TILE}\"")
    try:
        fields = {f for _, f, _, _ in string.Formatter().parse(template_args) if f is not None}
    except ValueError as exc:
        fail(f"template_args {template_args!r} is not a valid template: {exc}")
    known_fields = {*TYPE_FIELDS, *params, *(k for _, c in configs for k in c)}
    if fields - known_fields:
        fail(f"template_args {template_args!r} uses {sorted(fields - known_fields)}; only {{T}} and the "
             f"parameters {sorted(known_fields - set(TYPE_FIELDS))} are substituted, and the operands' types "
             f"({', '.join('{' + f + '}' for f in TYPE_FIELDS[1:])}) (set 'tiles', 'params' or 'configs', "
             "or template_args = \"\" for a kernel that is not a template)")
    if declared is not None:
        _check_template_args(template_args, declared, fail)

    geometry, policy = _geometry(entry, tile_param, fail)
    if launch.pointer_arrays(roles) and "batch" not in roles and "batch" not in geometry.names:
        fail(f"args lists {', '.join(r for r in roles if r in launch.ARRAY_ROLES)} but no batch, and the grid does "
             "not name batch: a pointer-array batch is told its number of products (the role batch, cuBLAS's "
             "batchCount), or launched with one block per product along a grid dimension (grid = [..., \"batch\"])")
    square = square_only(roles, sizes)
    default_shapes = "square-tile-multiple" if square else "any"
    shapes = entry.get("shapes", default_shapes)
    if shapes not in SHAPES:
        try:
            launch.Expression(shapes)
        except launch.ExpressionError as exc:
            fail(f"shapes: {exc}; or use one of {sorted(SHAPES)}")
    if square and shapes not in ("square-tile-multiple",):
        fail("a kernel with one size argument takes only square problems; set shapes = 'square-tile-multiple'")

    shared_tiles = entry.get("shared_tiles")
    shared_pad = entry.get("shared_pad", 0)
    for key, value in (("shared_tiles", shared_tiles), ("shared_pad", shared_pad)):
        if value is not None and (type(value) is not int or value < 0):
            fail(f"'{key}' must be a non-negative integer, got {value!r}")
    gpu_only = entry.get("gpu_only", False)
    if type(gpu_only) is not bool:
        fail(f"'gpu_only' must be true or false, got {gpu_only!r}")
    conventions = {}
    for key, (default, _) in CONVENTIONS.items():
        conventions[key] = entry.get(key, default)
        if type(conventions[key]) is not bool:
            fail(f"'{key}' must be true or false, got {conventions[key]!r}")
    sim_configs = entry.get("sim_configs")
    named = [n for n, _ in configs if n]
    if sim_configs is not None and (not isinstance(sim_configs, list) or not sim_configs
                                    or any(c not in named for c in sim_configs)):
        fail(f"'sim_configs' must list names from 'configs' ({', '.join(named) or 'none'}), got {sim_configs!r}")

    if conventions["adds_into_c"] and (conventions["reads_c_at_beta_zero"] or "beta" in roles
                                       or launch.takes_operand(roles, "D")):
        fail("adds_into_c = true says the kernel adds its result into C, which its callers zero; it cannot also "
             "take beta, write a separate D or declare reads_c_at_beta_zero")
    if conventions["d_aliases_c"] and not (launch.takes_operand(roles, "C") and launch.takes_operand(roles, "D")):
        fail("d_aliases_c = true says D may be C's buffer; the kernel must take both C and D (args)")
    try:
        spec = KernelSpec(
            name=entry["name"], source=source, entry=entry["entry"], signature=signature,
            policy=policy, dtypes=tuple(dtype_names), expect=expect,
            template_args=template_args, shapes=shapes, shared_tiles=shared_tiles,
            shared_pad=shared_pad, description=entry.get("description", ""),
            gpu_only=gpu_only, catalog=path, roles=roles, layouts=layouts, params=params,
            configs=tuple(configs), macros=tuple(macros), tile_param=tile_param, geometry=geometry,
            sim_configs=None if sim_configs is None else tuple(sim_configs),
            include_dirs=include_dirs, defines=fixed_defines, **conventions, **type_fields,
            tensor_maps=hopper.tensor_maps(entry, roles, fail), cluster=hopper.cluster(entry, fail),
            arch=hopper.arch(entry, fail), compiler=_compiler(entry, fail), sources=_sources(entry, path, fail),
            resources=_resources(entry, path, fail), sizes=sizes, namespace=namespace,
            **_scratch(entry, roles, fail),
        )
    except operand_types.TypesError as exc:
        fail(f"dtypes: {exc}")
    _check_instantiations(spec, fail)
    _check_arguments(spec, fail)
    _check_batch(spec, fail)
    hopper.check(spec, fail)
    return spec


def _entry_in_its_namespace(text: str, written: str, found_in: dict, fail) -> tuple[str, str]:
    """(the kernel's name, the namespaces it is declared in) for `entry` as written: its name
    (``gemm``), or qualified as code outside calls it (``mylib::kernels::gemm``)."""
    name = written.rsplit("::", 1)[-1].strip()
    why = cuda_source.missing_kernel(text, name, **found_in)
    if why:
        fail(why.replace(f"entry '{name}'", f"entry '{written}'"))
    kernel = next(k for k in cuda_source.find_kernels(text, **found_in) if k.name == name)
    if "::" in written and written.strip().lstrip(":") != kernel.qualified:
        fail(f"entry '{written}': {name} is declared as {kernel.qualified} ({Path(kernel.file).name}:{kernel.line}); "
             f"write entry = '{kernel.qualified}' (or '{name}')")
    return name, kernel.namespace


def _sizes(entry: dict, roles, fail) -> tuple[int, int, int] | None:
    """`sizes = { M = 64, N = 64, K = 64 }`: the problem sizes compiled into a kernel that takes
    none (a textbook's ``#define N 64``, a ``template <int M, int N, int K>`` instantiated at
    them); the kernel then claims that one shape."""
    if "sizes" not in entry:
        return None
    sizes = entry["sizes"]
    if not isinstance(sizes, dict) or set(sizes) != {"M", "N", "K"} or \
            not all(type(v) is int and v > 0 for v in sizes.values()):
        fail(f"'sizes' must give M, N and K as positive integers, e.g. {{ M = 64, N = 64, K = 64 }}, got {sizes!r}")
    taken = [r for r in roles if r in ("M", "N", "K")]
    if taken:
        fail(f"'sizes' is for a kernel that takes no size argument (its sizes are compiled in), but args lists "
             f"{', '.join(taken)}: drop 'sizes' (a shape claim goes in 'shapes')")
    if "shapes" in entry:
        fail("'sizes' fixes the one shape the kernel computes; drop 'shapes'")
    return sizes["M"], sizes["N"], sizes["K"]


def _scratch(entry: dict, roles, fail) -> dict:
    """`scratch = { workspace = "4 * SPLITS * M * N", semaphores = "4 * ceil(M / 16) * ceil(N / 16)" }`:
    the bytes of each scratch buffer the kernel takes (launch.SCRATCH_ROLES), an expression over
    M, N, K, batch, groups and the parameters; `scratch_zeroed` (default true): its callers zero
    it before every launch."""
    taken = [r for r in roles if r in launch.SCRATCH_ROLES]
    scratch = entry.get("scratch", {})
    zeroed = entry.get("scratch_zeroed", True)
    example = ", ".join(f'{r} = "4 * M * N"' for r in taken or ["workspace"])
    if not isinstance(scratch, dict):
        fail(f"'scratch' must be a table of sizes in bytes by role, e.g. {{ {example} }}, got {scratch!r}")
    if type(zeroed) is not bool:
        fail(f"'scratch_zeroed' must be true or false, got {zeroed!r}")
    stray = [r for r in scratch if r not in taken]
    if stray:
        fail(f"scratch gives the size of {', '.join(map(repr, stray))}, which args does not list; the scratch "
             f"roles are {', '.join(launch.SCRATCH_ROLES)}")
    unsized = [r for r in taken if r not in scratch]
    if unsized:
        fail(f"args lists {', '.join(unsized)} but 'scratch' gives no size: write scratch = {{ {example} }} "
             "(bytes, an expression over M, N, K and the parameters)")
    if "scratch_zeroed" in entry and not taken:
        fail("'scratch_zeroed' says how callers leave scratch memory; args lists no scratch role "
             f"({', '.join(launch.SCRATCH_ROLES)})")
    sizes = {}
    for role, size in scratch.items():
        if type(size) is int:
            size = str(size)
        if not isinstance(size, str):
            fail(f"scratch.{role} must be a number of bytes or an expression string, got {size!r}")
        try:
            sizes[role] = launch.Expression(size)
        except launch.ExpressionError as exc:
            fail(f"scratch.{role}: {exc}")
    return {"scratch": sizes, "scratch_zeroed": zeroed}


def _check_batch(spec: KernelSpec, fail) -> None:
    """A batched kernel's types are ones a batch is modelled for (operand_types.batch_not_modelled)."""
    for inst in spec.instances():
        why = inst.batched and operand_types.batch_not_modelled(inst.types)
        if why:
            fail(f"a batch of products with {why} ({inst.dtype}) is not modelled yet: the suite judges batches "
                 "whose epilogue acts element by element (an activation, output_scale); describe one product a "
                 "launch (no batch role) to judge this kernel")


def _check_template_args(template_args: str, declared: parameters.Declaration, fail) -> None:
    """template_args against the kernel's template parameter list: as many arguments as it
    takes, {T} where it takes a type, a parameter or a number where it takes a value."""
    tparams = parameters.template_parameters(declared.kernel.head)
    if not tparams or not template_args.strip() or any(kind == "pack" for kind, _, _ in tparams):
        return
    given = parameters.split_top_level(template_args)
    required = sum(default is None for _, _, default in tparams)
    wrong = []
    if not required <= len(given) <= len(tparams):
        wrong.append(f"it gives {len(given)} argument(s) where the template takes "
                     f"{required if required == len(tparams) else f'{required} to {len(tparams)}'}")
    for number, (argument, (kind, name, _)) in enumerate(zip(given, tparams), 1):
        what = "type" if argument.strip("{}") in TYPE_FIELDS and argument.startswith("{") else \
            "value" if re.fullmatch(r"\{\w+\}|-?\d+[uUlL]*", argument) else None
        if what is not None and what != kind:
            wrong.append(f"argument {number} {argument} is a {what} where {name} is a {kind}")
    if wrong:
        expected = ", ".join("{T}" if kind == "type" else "{" + name + "}" for kind, name, default in tparams
                             if default is None)
        fail(f"template_args {template_args!r} does not match template <{parameters.template_list(declared.kernel.head)}> "
             f"of {declared.kernel.name} ({declared.where}): {'; '.join(wrong)}; write template_args = {expected!r}")


def _check_defines(fixed_defines, declared: parameters.Declaration, tile_param: str, has_tile: bool, fail) -> None:
    """A `defines` macro must not be a template parameter of the kernel (-D would rename it) or
    its tile parameter (the suite must know the tile's value to derive shapes and launches)."""
    template_names = {name for _, name, _ in parameters.template_parameters(declared.kernel.head)}
    for name, _ in fixed_defines:
        if name in template_names:
            fail(f"defines: {name} is a template parameter of {declared.kernel.name} ({declared.where}); give its "
                 f"values in params (or tiles) and {{{name}}} in template_args, not as a macro")
        if name == tile_param and has_tile:
            fail(f"defines: {name} is the tile parameter; give its values as tiles = [...] (with macros = "
                 f"[\"{name}\"] to pass it as -D {name}=value), so the suite derives shapes and launches from it")


def _check_arguments(spec: KernelSpec, fail) -> None:
    """Every role fits the parameter the kernel declares in its place, in every instantiation:
    one per parameter, pointers on pointers, integers on integers wide enough for the sizes
    the suite passes, alpha and beta on floating-point types, tensor maps on CUtensorMaps."""
    for inst in spec.instances():
        declared = inst.parameters
        if not declared:
            continue   # unreadable, or a stand-in that takes nothing (and so can read no operand)
        if len(declared) != len(spec.roles):
            members = any(p.member_of is not None for p in declared)
            fail(f"args lists {len(spec.roles)} parameters, but {spec.entry} ({parameters.declaration_site(inst)}) "
                 f"declares {len(declared)}{' with its struct members' if members else ''}: "
                 f"({parameters.listed(declared)}); give one role per parameter, in order"
                 + (", and one per member of a struct it takes by value" if members else ""))
        for role, parameter in zip(spec.roles, declared):
            why = launch.misfit(role, parameter, inst.name_expression) or launch.pointee_misfit(inst, role, parameter)
            if why:
                fail(f"args: {why}")
            scale = inst.types.scale(role[-1]) if role in launch.SCALE_ROLES else None
            if scale is not None and parameter.type.kind == parameters.FLOATING and scale.granularity != "tensor":
                fail(f"args: {role} is {parameter.describe(inst.name_expression)}, a value, but scales.{scale.operand} "
                     f"is {scale.spelling}: one value per tensor only; take a pointer to the scales")


def _roles(entry, fail) -> tuple[tuple, str]:
    """The kernel's parameters by role, and its signature name ("custom" for an args list)."""
    if ("args" in entry) == ("signature" in entry):
        fail("give the kernel's parameters either as args = [\"A\", \"B\", \"C\", \"M\", \"N\", \"K\"] "
             f"or as signature = one of {sorted(SIGNATURES)}, not both or neither")
    if "signature" in entry:
        if entry["signature"] not in SIGNATURES:
            fail(f"unknown signature {entry['signature']!r}; use one of {sorted(SIGNATURES)} or list 'args'")
        return SIGNATURE_ROLES[entry["signature"]], entry["signature"]
    args = entry["args"]
    if not isinstance(args, list) or not args:
        fail(f"'args' must be a non-empty list of roles, got {args!r}")
    for arg in args:
        if not (arg in launch.ROLES or type(arg) is int):
            fail(f"args: unknown role {arg!r}; use {', '.join(launch.ROLES)} or an integer literal")
    named = [a for a in args if isinstance(a, str)]
    # a size may be passed more than once (numARows, numCRows: M twice); a pointer or a scalar may not
    twice = sorted({a for a in named if named.count(a) > 1 and a not in launch.INT_ROLES})
    if twice:
        fail(f"args: role(s) {twice} listed twice; each pointer and scalar role is one kernel parameter "
             "(only an integer role, such as M, may be passed to several)")
    for operand in launch.pointer_arrays(named):
        both = [r for r in (operand, f"tensor_map_{operand}", f"stride_{operand}") if r in named]
        if both:
            fail(f"args lists {operand}_array and {both[0]}; an operand is passed one way: an array of pointers to "
                 f"its products ({operand}_array), or {operand} itself (a strided batch's with stride_{operand})")
    # a tensor map of an operand stands for its pointer (a TMA-only kernel takes no plain A)
    missing = launch.missing_operands(named)
    if missing:
        fail(f"args: no {', '.join(missing)}; a GEMM kernel takes the pointers A, B and C, or A, B and D "
             "(the output; C then only read), or their tensor maps (tensor_map_A ...), or arrays of pointers to "
             "a batch's products (A_array ...)")
    return tuple(args), "custom"


def _type_fields(entry, roles, fail) -> dict:
    """accumulator, scalar (the type of alpha and beta) and scales: what completes each dtypes
    entry's operand_types record; a scale role for each operand scaled, and none other."""
    out = {}
    by_dtype = entry.get("accumulator")
    if isinstance(by_dtype, dict):   # { float16 = "float16" }: a template summing in T sums in half at half
        for name, value in by_dtype.items():
            if name not in entry["dtypes"] or not isinstance(value, str) or value not in dt.ELEMENT_TYPES:
                fail(f"'accumulator' by dtype must map dtypes of the entry ({', '.join(map(str, entry['dtypes']))}) to "
                     f"element types, e.g. {{ float16 = \"float16\" }}, got {by_dtype!r}")
        out["accumulator"] = dict(by_dtype)
        entry = {k: v for k, v in entry.items() if k != "accumulator"}
    for key in ("accumulator", "scalar"):
        if key in entry:
            if not isinstance(entry[key], str) or entry[key] not in dt.ELEMENT_TYPES:
                fail(f"'{key}' must name an element type ({', '.join(dt.ELEMENT_TYPES)})"
                     + (", or, for accumulator, one per dtype ({ float16 = \"float16\" })" if key == "accumulator" else "")
                     + f", got {entry[key]!r}")
            out[key] = entry[key]
    raw = entry.get("scales", {})
    if not isinstance(raw, dict):
        fail(f"'scales' must be a table such as {{A = \"tensor\", B = \"tensor\"}}, got {raw!r}")
    scales = []
    for operand, value in raw.items():
        if operand not in operand_types.SCALED:
            fail(f"scales: {operand!r}; scale factors apply to A or B")
        scales.append(_scale(operand, value, fail))
    for operand in operand_types.SCALED:
        role = f"scale_{operand}"
        if (operand in raw) != (role in roles):
            fail(f"scales.{operand} and the role {role} go together: " + (
                f"args lists no {role}; list the parameter that takes the scales" if operand in raw else
                f"args lists {role}; say in scales.{operand} how they apply (\"tensor\", \"row\", \"col\" or "
                "{ block = [1, 128] })"))
    out["scales"] = tuple(scales)
    if "epilogue" in entry:
        try:
            out["epilogue"] = epilogue.from_table(entry["epilogue"])
        except epilogue.EpilogueError as exc:
            fail(f"epilogue: {exc}")
    declared = out["epilogue"].roles if "epilogue" in out else ()
    for role in epilogue.ROLES:
        if (role in declared) != (role in roles):
            fail(f"the role {role} and epilogue go together: " + (
                f"epilogue declares it, but args lists no {role}" if role in declared else
                f"args lists {role}; declare it in epilogue = {{ ... }} (bias = \"row\" or \"col\", residual = true, "
                "output_scale = true)"))
    if "sums" in entry:
        out["sums"], out["sums_chain"] = _sums(entry["sums"], fail)
    return out


def _sums(value, fail) -> tuple[str, launch.Expression | None]:
    """sums = "tensor-core-fp8" (summed in the tensor cores over the whole K), or
    { unit = "tensor-core-fp8", chain = "<expression over the parameters>" }: the products one
    partial sum adds before the kernel adds it into its float32 accumulator (0: the whole K)."""
    unit, chain = (value, None) if isinstance(value, str) else \
        (value.get("unit"), value.get("chain")) if isinstance(value, dict) and set(value) <= {"unit", "chain"} \
        else (None, None)
    if unit not in operand_types.SUMS or (chain is not None and not isinstance(chain, (str, int))):
        fail(f"sums = {value!r}; use \"{operand_types.TENSOR_CORE_FP8}\" or {{ unit = \"{operand_types.TENSOR_CORE_FP8}\", "
             "chain = \"BK\" }} (the products of K one tensor-core partial sum adds before the kernel adds it in "
             "float32; an expression over the parameters, 0 for the whole K)")
    try:
        return unit, None if chain is None else launch.Expression(str(chain))
    except launch.ExpressionError as exc:
        fail(f"sums.chain: {exc}")


def _scale(operand: str, value, fail) -> operand_types.Scale:
    """One scales entry: "tensor", "row", "col", or { block = [rows, cols], major = "row" | "col",
    type = "float32" }."""
    if isinstance(value, str):
        if value not in operand_types.GRANULARITIES:
            fail(f"scales.{operand} = {value!r}; use \"tensor\", \"row\", \"col\" or a block table "
                 "{ block = [1, 128] }")
        return operand_types.parse_scale(operand, value)
    if not isinstance(value, dict) or set(value) - {"block", "major", "type"} or "block" not in value:
        fail(f"scales.{operand} = {value!r}; a block table is {{ block = [rows, cols], major = \"row\" or "
             "\"col\" (how the scales are stored; default row), type = \"float32\" (default) }")
    block = value["block"]
    if not isinstance(block, list) or len(block) != 2 or not all(type(b) is int and b >= 1 for b in block):
        fail(f"scales.{operand}.block = {block!r}; give [rows, cols] of {operand} one scale covers, "
             "e.g. [1, 128] (A, per row and 128 of K) or [128, 128]")
    major = value.get("major", "row")
    if major not in operand_types.MAJORS:
        fail(f"scales.{operand}.major = {major!r}; use \"row\" or \"col\"")
    kind = value.get("type", operand_types.DEFAULT_SCALE_TYPE)
    if kind not in dt.ELEMENT_TYPES or dt.get(kind).is_integer:
        fail(f"scales.{operand}.type = {kind!r}; use a floating-point type such as float32")
    return operand_types.Scale(operand, tuple(block), major, dt.get(kind))


def _layouts(entry, fail) -> dict[str, str]:
    layouts = entry.get("layout", {})
    if not isinstance(layouts, dict):
        fail(f"'layout' must be a table such as {{A = \"col\", B = \"col\", C = \"col\"}}, got {layouts!r}")
    for name, value in layouts.items():
        if name not in launch.OPERAND_ROLES or value not in LAYOUTS:
            fail(f"layout: {name} = {value!r}; use A, B, C or D = \"row\" or \"col\"")
    return dict(layouts)


def _include_dirs(entry, path: Path, fail) -> tuple[Path, ...]:
    """``include_dirs``: directories relative to the catalog file, each one that exists."""
    raw = entry.get("include_dirs", [])
    if not isinstance(raw, list) or not all(isinstance(d, str) and d for d in raw):
        fail(f"'include_dirs' must be a list of directories relative to the catalog, such as "
             f"[\"include\", \"../common\"], got {raw!r}")
    dirs = []
    for d in raw:
        full = (path.parent / d).resolve()
        if not full.is_dir():
            fail(f"include_dirs: '{d}' is not a directory (looked for {full})")
        dirs.append(full)
    return tuple(dirs)


def _fixed_defines(entry, fail) -> tuple[tuple[str, object], ...]:
    """``defines``: macros every compile of the kernel gets, as -D NAME=value."""
    raw = entry.get("defines", {})
    if not isinstance(raw, dict):
        fail(f"'defines' must be a table such as {{ USE_FAST_PATH = 1, SCALE = \"2.0f\" }}, got {raw!r}")
    out = []
    for name, value in raw.items():
        if not _IDENTIFIER.fullmatch(name):
            fail(f"defines: {name!r} is not a macro name (letters, digits and _, not first a digit)")
        if type(value) is bool:
            value = int(value)
        if type(value) not in (int, str) or (isinstance(value, str) and "\n" in value):
            fail(f"defines: {name} = {value!r}; give an integer, true/false or a one-line string "
                 "(passed as -D NAME=value)")
        if name in entry.get("params", {}) or name in entry.get("macros", []):
            fail(f"defines: {name} is also a parameter; keep it in one place")
        out.append((name, value))
    return tuple(out)


def _compiler(entry, fail) -> str | None:
    """``compiler``: the device compiler the entry pins, or None (the run's --gemm-compiler)."""
    value = entry.get("compiler")
    if value is not None and value not in COMPILERS:
        fail(f"compiler = {value!r}; use \"nvcc\" or \"nvrtc\", or leave it out (the run's --gemm-compiler decides)")
    if value == "nvrtc" and entry.get("sources"):
        fail("'sources' links device code from other files, which NVRTC cannot do; drop compiler = \"nvrtc\"")
    return value


def _sources(entry, path: Path, fail) -> tuple[Path, ...]:
    """``sources``: the other .cu files whose device code the kernel calls, relative to the catalog."""
    raw = entry.get("sources", [])
    if not isinstance(raw, list) or not all(isinstance(p, str) and p for p in raw):
        fail(f"'sources' must be a list of .cu files relative to the catalog, such as [\"helpers.cu\"], got {raw!r}")
    found = []
    for name in raw:
        full = (path.parent / name).resolve()
        if not full.is_file():
            fail(f"sources: '{name}' not found (looked for {full})")
        if full == (path.parent / entry["source"]).resolve():
            fail(f"sources: '{name}' is the entry's own source; list only the other files")
        found.append(full)
    return tuple(found)


def _resources(entry, path: Path, fail) -> str | None:
    """The entry's claim on ptxas's report: as written, or, for a reference kernel of
    gemmcheck's own catalogs, theirs (OWN_REFERENCE_RESOURCES); None claims nothing."""
    own = path in {p for paths in NAMED.values() for p in paths} and entry.get("expect") == "correct"
    claim = entry.get("resources", OWN_REFERENCE_RESOURCES if own else None)
    if claim is not None and claim not in RESOURCE_CLAIMS:
        fail(f"resources: unknown claim {claim!r}; use one of "
             + "; ".join(f"{k!r} ({v})" for k, v in RESOURCE_CLAIMS.items()) + ", or leave it out")
    return claim
