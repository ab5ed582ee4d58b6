"""The element types a draft reads: the operands' dtypes from their pointers (a combination such
as ``f16f16f32`` where they differ; vectors such as ``float4 *`` holding their elements), the
dtypes of a template launched from an explicitly instantiated host template, the fields a
mixed kernel needs (scales, epilogue, a separate D, an 8-bit output) and an accumulator that
sums in half."""

from __future__ import annotations

import re

from gemmcheck.contract import cuda_source, launch, operand_types, parameters
from gemmcheck.contract import dtypes as dt
from gemmcheck.draft.fields import toml_value
from gemmcheck.draft.names import C_TYPES, Param, parse_params
from gemmcheck.host_launches import Launch, call_arguments, explicit_instantiations

# What an operand's pointer may point to, as C spells it -> element type names.
# fp8 operands kept as raw bytes (__nv_fp8_storage_t) read as e4m3, with a TODO (FP8_STORAGE)
FP8_STORAGE = "__nv_fp8_storage_t"
ELEMENT_TYPES = {**C_TYPES, "__nv_fp8_e4m3": "float8_e4m3fn", "__nv_fp8_e5m2": "float8_e5m2",
                 FP8_STORAGE: "float8_e4m3fn",
                 "int8_t": "int8", "signed char": "int8", "char": "int8", "uint8_t": "uint8",
                 "unsigned char": "uint8", "int": "int32", "int32_t": "int32"}
# Vector types a kernel may take its operands as (``const float4 *A``): (element type, width).
VECTOR_TYPES = {"float2": ("float", 2), "float4": ("float", 4), "double2": ("double", 2), "half2": ("half", 2),
                "__half2": ("__half", 2), "__nv_bfloat162": ("__nv_bfloat16", 2), "nv_bfloat162": ("nv_bfloat16", 2),
                "char4": ("signed char", 4), "uchar4": ("unsigned char", 4)}
# The size along an operand's rows (row-major): what a vector of its elements must divide.
ROW_LENGTH = {"A": "K", "B": "N", "C": "N", "D": "N"}


def whole_vectors(params: list[Param], roles: list) -> tuple[str, str] | None:
    """(what the operands are, the shape claim) for a kernel taking operands as vectors
    (``const float4 *A``): each row must be a whole number of vectors (row-major A's rows are K
    long, B's, C's and D's N)."""
    vectors = {role: p.pointee for p, role in zip(params, roles)
               if role in ROW_LENGTH and p.pointee in VECTOR_TYPES and not p.pointer_to_pointers}
    if not vectors:
        return None
    claim = " and ".join(f"{size} % {width} == 0" for size, width in sorted(
        {(ROW_LENGTH[r], VECTOR_TYPES[t][1]) for r, t in vectors.items()}))
    return ", ".join(f"{r} is {t} *" for r, t in vectors.items()), claim


def instantiated_types(calls: list[Launch], host: str, tparams) -> tuple[list[str], str] | None:
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


def dtypes_of(params: list[Param], roles: list, type_params: set[str]) -> tuple[list[str], list[str], dict]:
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


# one scale per row of A (a token's), per column of B (a channel's): what a scale indexed by a variable usually is
_INDEXED_SCALE = {"A": "row", "B": "col"}


def scale_reads(kernel: str, params: list[Param], roles: list, code: str) -> dict[str, list[str]]:
    """{operand: the indices the kernel (or a function it calls) reads its scale pointer with}
    (``scale_a[m]``; ``[0]`` or ``*scale_a`` is one value)."""
    found_functions = functions(code)
    body = _kernel_body(kernel, found_functions)
    reads = {}
    for p, role in zip(params, roles):
        if role in launch.SCALE_ROLES and p.pointer:
            found = _indices(p.name, body)
            for name, head, callee in found_functions:   # passed on to a __device__ function: its name there
                for call in re.finditer(rf"\b{re.escape(name)}\s*(?:<[^;{{}}()]*>)?\s*(?=\()", body):
                    args = call_arguments(body, call.end())
                    declared = re.search(rf"\b{re.escape(name)}\s*(?=\()", head) if name != kernel else None
                    taken = parse_params(", ".join(call_arguments(head, declared.end())[0])) if declared else []
                    found += [i for arg, q in zip(args[0] if args else [], taken) if arg.strip() == p.name
                              for i in _indices(q.name, callee)]
            reads[role[-1]] = [i for i in found if not re.fullmatch(r"0[uUlL]*", i)]
    return reads


def _indices(name: str, body: str) -> list[str]:
    return [" ".join(m["index"].split()) for m in re.finditer(rf"\b{re.escape(name)}\s*\[(?P<index>[^\]]*)\]", body)]


def mixed_fields(roles: list, params: list[Param], dtypes: list[str],
                 reads: dict[str, list[str]] | None = None) -> list[tuple[str, object, list[str]]]:
    """The fields a kernel with scale factors, a separate D or an 8-bit output needs:
    (key, TOML value or None for a commented hint, TODO lines). `reads`: scale_reads."""
    out = []
    scales = {}
    indexed = {o: i for o, i in (reads or {}).items() if i}
    for p, role in zip(params, roles):
        if role in launch.SCALE_ROLES:
            scales[role[-1]] = _INDEXED_SCALE[role[-1]] if role[-1] in indexed else "tensor"
    if scales:
        by_value = [r for p, r in zip(params, roles) if r in launch.SCALE_ROLES and not p.pointer]
        seen = [f"it reads {o}'s as {', '.join(f'[{x}]' for x in dict.fromkeys(i))} (not one value: {_INDEXED_SCALE[o]} if that is "
                f"{'the row of A' if o == 'A' else 'the column of B'}, else a block)" for o, i in indexed.items()]
        out.append(("scales", toml_value(scales), [
            "TODO: scales: how each operand's scale factors apply: \"tensor\" (one value"
            + (f"; {', '.join(by_value)} taken by value: that is certain), " if by_value else "), ")
            + "\"row\" (one per row), \"col\" (one per column), or { block = [1, 128] } (rows x columns of the "
            "operand each covers; major = \"col\" when the scale matrix is stored transposed)"
            + (f"; {'; '.join(seen)}" if seen else "")]))
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


def functions(code: str) -> list[tuple[str, str, str]]:
    """(name, head, body) of each top-level function of `code`, the body as written."""
    out = []
    for head, _, open_at, end in cuda_source.top_level_blocks(cuda_source.code_only(code)):
        names = [n for n in re.findall(r"\b(\w+)\s*\(", re.sub(r"template\s*<[^{]*?>", "", head))
                 if not n.startswith("__")]
        if names:
            out.append((names[0], head, code[open_at:end]))
    return out


def kernel_code(kernel: str, code: str) -> tuple[str, str]:
    """The bodies of the __global__ `kernel`, and of the file's functions those call (a kernel
    that hands its work to a __device__ function)."""
    found = functions(code)
    own = _kernel_body(kernel, found)
    called = " ".join(body for name, _, body in found if name != kernel and re.search(rf"\b{re.escape(name)}\s*[<(]", own))
    return own, called


def _kernel_body(kernel: str, found: list[tuple[str, str, str]]) -> str:
    """The body of the __global__ `kernel` among `found` (functions()), its overloads joined."""
    return " ".join(body for name, head, body in found if name == kernel and "__global__" in head)


def kernel_bodies(code: str) -> dict[str, list[tuple[bool, str]]]:
    """Each top-level function of `code` by name: (whether it is a __global__ one, its body)."""
    bodies = {}
    for name, head, body in functions(code):
        bodies.setdefault(name, []).append(("__global__" in head, body))
    return bodies


_HALF_FRAGMENT = re.compile(r"\bfragment\s*<\s*(?:\w+::)*accumulator\s*,[^;>]*?\b(?:__half|half)\s*>")
def _accumulator_in(body: str, spelled: str) -> str | None:
    """The name of a variable `body` declares as `spelled` (``half``, ``__half``, ``T``) and adds
    into: ``sum += ...``, ``sum = __hfma(a, b, sum)``, ``sum = sum + ...``."""
    for m in re.finditer(rf"\b(?:{spelled})\s+(?P<name>[A-Za-z_]\w*)\s*(?:=|;|\{{|\()", body):
        name = re.escape(m["name"])
        if re.search(rf"\b{name}\s*\+=|\b{name}\s*=\s*(?:__h(?:fma|add)\w*\s*\(|{name}\s*\+)", body[m.end():]):
            return m["name"]
    return None


def half_sums(kernel: str, code: str, type_param: str | None = None) -> str | None:
    """How the __global__ `kernel` (or a function of the file it calls) sums in half, if it
    does: a WMMA accumulator fragment of __half, or a variable declared half that it adds into;
    or, given its `type_param`, one declared in that type (``T sum``: half where T is)."""
    bodies = kernel_bodies(code)
    own = [body for is_kernel, body in bodies.get(kernel, []) if is_kernel]
    called = [body for name, found in bodies.items() if name != kernel
              and any(re.search(rf"\b{re.escape(name)}\s*[<(]", b) for b in own) for _, body in found]
    spelled = re.escape(type_param) if type_param else "__half|half"
    for body in own + called:
        if type_param is None and _HALF_FRAGMENT.search(body):
            return "a wmma accumulator fragment of __half"
        if (name := _accumulator_in(body, spelled)):
            return f"its accumulator {name} is declared {type_param or 'half'}"
    return None
