"""What a kernel declares it takes: each parameter's C type, per instantiation.

A launch must pass every argument in the bytes the kernel declares: the driver copies each
parameter's own size from what it is given, so a ``__half alpha`` handed a float reads 2 of
its 4 bytes, and a ``size_t M`` handed an int reads 4 bytes past it. The types are read
from the kernel's declaration as the compiler sees it: after preprocessing (macros
expanded, ``#if 0`` left out: gemmcheck.contract.cuda_source), with the instantiation's
template arguments put in for its type parameters (``T alpha`` is ``__half alpha`` in the
float16 instantiation) and the file's ``typedef`` / ``using`` names and the usual library
ones (``size_t``, ``int64_t``, ``uint``, ``half``, ``CUtensorMap``) resolved, as LP64
Linux compilers lay them out (device and host alike).

The compilers check the reading: the CPU simulator's launchers assert each packed size
against g++'s own view of the parameter (gemmcheck.backends.cpu_sim.build), and
``compiled_types`` reads the C++ symbol NVRTC emits for the instantiation (its mangled name
spells every parameter's type, typedefs resolved), which the compile suite compares with what
gemmcheck.contract.launch packs, for every instantiation.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import re
import shutil
import subprocess
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np

from gemmcheck.contract import cuda_source, structs
from gemmcheck.host_launches import split_top_level

POINTER, INTEGER, FLOATING, TENSOR_MAP = "pointer", "integer", "floating", "tensor_map"
STRUCT = "struct"      # a struct by value whose members the suite packs (gemmcheck.contract.structs)
OTHER = "other"        # a type the suite cannot pack (a reference, a struct it cannot lay out)
UNKNOWN = "unknown"    # a type the declaration does not spell plainly (decltype, Traits<T>::type)

_INTEGER_WORDS = {"signed", "unsigned", "short", "long", "int", "char"}
# (bytes, signed) of each integer type as LP64 compilers (nvcc's device and host on Linux) lay it out
_INTEGERS = {"char": (1, True), "signed char": (1, True), "unsigned char": (1, False),
             "short": (2, True), "unsigned short": (2, False), "int": (4, True), "unsigned int": (4, False),
             "long": (8, True), "unsigned long": (8, False), "long long": (8, True),
             "unsigned long long": (8, False), "bool": (1, False)}
FLOATING_TYPES = {"float": np.dtype(np.float32), "double": np.dtype(np.float64),
                  "__half": np.dtype(np.float16), "__nv_bfloat16": np.dtype(ml_dtypes.bfloat16)}
TENSOR_MAP_BYTES = 128   # sizeof(CUtensorMap), passed by value
# The names the C library, glibc and CUDA's headers give these types.
LIBRARY_TYPEDEFS = {
    "size_t": "unsigned long", "ssize_t": "long", "ptrdiff_t": "long", "intptr_t": "long",
    "uintptr_t": "unsigned long", "intmax_t": "long", "uintmax_t": "unsigned long",
    "int8_t": "signed char", "uint8_t": "unsigned char", "int16_t": "short", "uint16_t": "unsigned short",
    "int32_t": "int", "uint32_t": "unsigned int", "int64_t": "long", "uint64_t": "unsigned long",
    "uint": "unsigned int", "ushort": "unsigned short", "ulong": "unsigned long", "u_char": "unsigned char",
    "u_short": "unsigned short", "u_int": "unsigned int", "u_long": "unsigned long",
    "u_int8_t": "unsigned char", "u_int16_t": "unsigned short", "u_int32_t": "unsigned int",
    "u_int64_t": "unsigned long", "half": "__half", "nv_bfloat16": "__nv_bfloat16",
    "CUtensorMap": "CUtensorMap_st",
}
# Words of a declaration that do not change how the argument is passed.
_IGNORED = re.compile(r"\b(const|volatile|__restrict__|__restrict|restrict|register|__grid_constant__|"
                      r"struct|class|union|enum|typename)\b")
_ATTRIBUTES = re.compile(r"\b(?:__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)|(?:alignas|__align__)\s*"
                         r"\((?:[^()]|\([^()]*\))*\))|\[\[.*?\]\]")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_TYPEDEF = re.compile(r"\btypedef\s+(?P<type>[^;{}()]+?)\s+(?P<name>[A-Za-z_]\w*)\s*;")
_USING = re.compile(r"\busing\s+(?P<name>[A-Za-z_]\w*)\s*=\s*(?P<type>[^;{}]+?)\s*;")


@dataclass(frozen=True)
class CType:
    """How one parameter is passed: its kind, its size in bytes and, for integers, signedness.
    `spelling` is the type with typedefs resolved (``unsigned long`` for ``size_t``)."""

    spelling: str
    kind: str
    size: int | None = None
    signed: bool = True
    why: str = field(default="", compare=False)   # OTHER: why the suite cannot pack it, where known

    @property
    def numpy(self) -> np.dtype | None:
        """The numpy type whose bytes are this type's (integers and floating types only)."""
        if self.kind == INTEGER:
            return np.dtype(f"{'i' if self.signed else 'u'}{self.size}")
        if self.kind == FLOATING:
            return FLOATING_TYPES[self.spelling]
        return None

    @property
    def range(self) -> tuple[int, int]:
        """The least and the greatest value an integer type holds."""
        if self.spelling == "bool":
            return 0, 1
        bits = 8 * self.size
        return (-2 ** (bits - 1), 2 ** (bits - 1) - 1) if self.signed else (0, 2 ** bits - 1)

    def __str__(self) -> str:
        return self.spelling

    def same_layout(self, other: "CType") -> bool:
        """Whether both are passed as the same bytes (``long`` and ``long long`` are)."""
        if self.kind != other.kind:
            return False
        if self.kind == INTEGER:
            return (self.size, self.signed) == (other.size, other.signed)
        return self.kind == POINTER or self.spelling == other.spelling


INT32 = CType("int", INTEGER, 4, True)


def floating(spelling: str) -> CType:
    return CType(spelling, FLOATING, FLOATING_TYPES[spelling].itemsize)


@dataclass(frozen=True)
class Parameter:
    """One parameter of a kernel as declared: its position (from 0), name, declaration as
    written (macros expanded) and its type in the instantiation."""

    position: int
    name: str
    declared: str
    type: CType
    # a member of a struct the kernel takes by value (gemmcheck.contract.structs): the struct
    # parameter, and where the member lies in it
    member_of: "Parameter | None" = None
    offset: int = 0

    def describe(self, kernel: str = "") -> str:
        """``parameter 4 'size_t M' of gemm<float> (unsigned long)``: how a message names it; the
        type is shown where the declaration spells it otherwise. A struct's member: ``member
        'int M' of parameter 1 'const GemmParams p' of gemm``."""
        written = self.declared[:self.declared.rfind(self.name)] if self.name else self.declared
        plain = lambda text: re.sub(r"\s+", "", _IGNORED.sub(" ", text))
        shown = f" ({self.type})" if plain(written) != plain(self.type.spelling) else ""
        where = f" of {kernel}" if kernel else ""
        if self.member_of is not None:
            return f"member '{self.declared}'{shown} of parameter {self.position + 1} '{self.member_of.declared}'{where}"
        return f"parameter {self.position + 1} '{self.declared}'{where}{shown}"


# -- reading declarations -----------------------------------------------------------------

@dataclass(frozen=True)
class Declared:
    """One parameter as written: the whole text, its name ("" when unnamed) and its type's text."""

    text: str
    name: str
    type: str

    @property
    def pointer(self) -> bool:
        return "*" in self.type or self.array

    @property
    def array(self) -> bool:
        """Whether the declarator is an array's (``float A[]``): one more level of pointer."""
        return "[" in (self.text[self.text.rfind(self.name):] if self.name else self.text)


def declared_parameters(params: str) -> list[Declared]:
    """The parameters of a parameter list (``const float *A, int M``), defaults dropped."""
    out = []
    for raw in split_top_level(params):
        text = _ATTRIBUTES.sub(" ", split_top_level(raw, "=")[0] if "=" in raw else raw).strip()
        if not text or text == "void":
            continue
        m = re.search(r"([A-Za-z_]\w*)\s*(\[[^\]]*\]\s*)*$", text)
        words = _IDENTIFIER.findall(_IGNORED.sub(" ", text))
        named = m is not None and len(words) > 1 and m[1] not in _INTEGER_WORDS | {"float", "double", "bool", "void"}
        name, type_text = (m[1], text[:m.start()] + text[m.end(1):]) if named else ("", text)
        out.append(Declared(" ".join(raw.split()), name, " ".join(type_text.split())))
    return out


def template_list(head: str) -> str:
    """The template parameter list of a declaration's head, as written: ``typename T, int TILE``."""
    m = re.search(r"\btemplate\s*<(?P<inner>.*)>", head)
    return " ".join(_balanced_angle(m["inner"]).split()) if m else ""


def template_parameters(head: str) -> list[tuple[str, str, str | None]]:
    """(kind, name, default) of each template parameter of a declaration's head: kind "type"
    (``typename T``, ``class T``), "value" (``int TILE``) or "pack" (``typename... Ts``)."""
    out = []
    for part in split_top_level(template_list(head)):
        declaration, _, default = part.partition("=")
        name = _IDENTIFIER.findall(declaration)
        if not name:
            continue
        kind = "pack" if "..." in declaration else "type" if re.match(r"\s*(typename|class)\b", part) else "value"
        out.append((kind, name[-1], default.strip() or None))
    return out


def _balanced_angle(text: str) -> str:
    depth = 1
    for i, ch in enumerate(text):
        depth += ch == "<"
        depth -= ch == ">"
        if depth == 0:
            return text[:i]
    return text


def typedefs(code: str) -> dict[str, str]:
    """The ``typedef`` and ``using`` names `code` declares (comments blanked), by name."""
    found = {m["name"]: m["type"] for m in _TYPEDEF.finditer(code)}
    found.update({m["name"]: m["type"] for m in _USING.finditer(code) if "(" not in m["type"]})
    return found


def read_type(text: str, names: dict[str, str] | None = None, *, pointer: bool = False) -> CType:
    """The CType of a type as written (``const T *``, ``size_t``, ``unsigned``), with `names`
    mapping typedef and template parameter names to the types they stand for; `pointer`: the
    declarator makes it one more level of pointer (an array parameter: ``float A[]`` is a
    ``float *``, ``const float *const A[]`` a ``float **``)."""
    names = names or {}
    if pointer:
        text = re.sub(r"\[[^\]]*\]", " ", text)   # the array declarator's brackets: `pointer` says it
    text = " ".join(_ATTRIBUTES.sub(" ", _IGNORED.sub(" ", text)).split())
    for _ in range(16):   # typedefs of typedefs
        text, before = re.sub(r"(?:\b[A-Za-z_]\w*\s*)?::\s*(?=[A-Za-z_])", "", text), text   # std::size_t
        text = _IDENTIFIER.sub(lambda w: names.get(w[0], LIBRARY_TYPEDEFS.get(w[0], w[0])), text)
        text = " ".join(_IGNORED.sub(" ", text).split())
        if text == before:
            break
    if "&" in text:
        return CType(text, OTHER)
    if pointer or "*" in text:   # an array declarator is one more level of pointer (float *A[] is float **)
        return CType(re.sub(r"\s*\*", " *", text) + (" *" if pointer else ""), POINTER, 8, False)
    if re.search(r"[<>()\[\]]", text) or not text:
        return CType(text, UNKNOWN)
    words = text.split()
    if set(words) <= _INTEGER_WORDS:
        return _integer(words)
    if len(words) == 1 and words[0] in _INTEGERS:          # bool
        size, signed = _INTEGERS[words[0]]
        return CType(words[0], INTEGER, size, signed)
    if len(words) == 1 and words[0] in FLOATING_TYPES:
        return floating(words[0])
    if words == ["CUtensorMap_st"]:
        return CType("CUtensorMap", TENSOR_MAP, TENSOR_MAP_BYTES)
    if len(words) == 1:
        return CType(text, OTHER)
    return CType(text, UNKNOWN)


def _integer(words: list[str]) -> CType:
    """The integer type a combination of signed, unsigned, short, long, int, char names."""
    unsigned = "unsigned" in words
    if "char" in words:
        base = "char" if not {"signed", "unsigned"} & set(words) else "signed char"
    else:
        base = {0: "int", 1: "long", 2: "long long"}[min(words.count("long"), 2)]
        base = "short" if "short" in words else base
    spelling = f"unsigned {base.removeprefix('signed ')}" if unsigned else base
    size, signed = _INTEGERS[spelling]
    return CType(spelling, INTEGER, size, signed)


# -- a kernel's declaration and an instantiation's parameters --------------------------------

@dataclass(frozen=True)
class Declaration:
    """A kernel's declaration as the compiler sees it, and the type names of its file."""

    kernel: cuda_source.Kernel
    names: dict
    structs: dict = field(default_factory=dict)   # name -> structs.Definition, of the file

    @property
    def where(self) -> str:
        return f"{self.kernel.file.rsplit('/', 1)[-1]}:{self.kernel.line}"


def declaration(source, entry: str, include_dirs=(), defines=()) -> Declaration | None:
    """The declaration of the __global__ function `entry` of `source`, or None when the source
    cannot be read or does not declare it."""
    try:
        text = cuda_source.read_source(source)
    except (OSError, cuda_source.SourceNotText):
        return None
    return _declaration(text, str(source), entry, tuple(include_dirs), tuple(defines))


@functools.lru_cache(maxsize=256)
def _declaration(text: str, file_name: str, entry: str, include_dirs, defines) -> Declaration | None:
    kernel = next((k for k in cuda_source.find_kernels(text, file_name, include_dirs, defines) if k.name == entry),
                  None)
    if kernel is None:
        return None
    code = cuda_source.code_only(cuda_source.preprocessed(text, file_name, include_dirs, defines))
    return Declaration(kernel, typedefs(code), structs.definitions(code))


def instantiated(decl: Declaration, template_args: str) -> tuple[Parameter, ...]:
    """The parameters of `decl` with `template_args` (``__half, 32``, as the instantiation's
    name gives them) put in for its type parameters."""
    names = dict(decl.names)
    given = split_top_level(template_args) if template_args.strip() else []
    for index, (kind, name, default) in enumerate(template_parameters(decl.kernel.head)):
        argument = given[index] if index < len(given) else default
        if kind == "type":
            names[name] = argument if argument is not None else f"{name}<unknown>"
        else:
            names.pop(name, None)
    out: list[Parameter] = []
    for i, p in enumerate(declared_parameters(decl.kernel.params)):
        parameter = Parameter(i, p.name, p.text, read_type(p.type, names, pointer=p.array))
        definition, member_names = struct_of(parameter.type, decl.structs, names)
        out.extend(_struct_members(parameter, definition, member_names) if definition else [parameter])
    return tuple(out)


def struct_of(ctype: CType, definitions: dict, names: dict) -> tuple:
    """(the struct `ctype` names by value, the type names its members are read with), or (None,
    names): ``GemmParams``, or ``Params<__half>`` (a template struct: its type parameters the
    arguments given, as an instantiation's are)."""
    if ctype.kind == OTHER and ctype.spelling in definitions and not definitions[ctype.spelling].template:
        return definitions[ctype.spelling], names
    m = re.match(r"([A-Za-z_]\w*)\s*<", ctype.spelling) if ctype.kind == UNKNOWN else None
    inner = _balanced_angle(ctype.spelling[m.end():]) if m else ""
    whole = m is not None and ctype.spelling[m.end() + len(inner):].strip() == ">"   # not a trait's ::type
    definition = definitions.get(m[1]) if whole else None
    if definition is None or not definition.template or not definition.members:
        return None, names
    given, member_names = split_top_level(inner), dict(names)
    for index, (kind, name, default) in enumerate(template_parameters(definition.template)):
        argument = given[index] if index < len(given) else default
        if kind == "type" and argument is not None:
            member_names[name] = argument
        else:
            member_names.pop(name, None)
    return definition, member_names


def _struct_members(parameter: Parameter, definition: structs.Definition, names) -> list[Parameter]:
    """A struct parameter as its members, each a Parameter at its offset (`member_of` the struct
    parameter, whose type is the struct's: STRUCT, its size); the struct parameter alone, of
    kind OTHER with the reason, where a member is not a pointer, an integer or a floating type."""
    spelling = parameter.type.spelling   # GemmParams, Params<__half>

    def unpackable(why: str) -> list[Parameter]:
        return [Parameter(parameter.position, parameter.name, parameter.declared,
                          CType(spelling, OTHER, why=definition.has(why)))]

    if definition.unpackable:
        return unpackable(definition.unpackable)
    if not definition.members:
        return unpackable("no data members")
    laid, offset, largest = [], 0, 1
    for member in definition.members:
        ctype = read_type(member.type, names)
        if ctype.kind not in (POINTER, INTEGER, FLOATING):
            return unpackable(f"member '{member.declared}' ({ctype}), which the suite cannot pack")
        offset = offset if definition.packed else structs.aligned(offset, ctype.size)
        laid.append((member, ctype, offset))
        offset, largest = offset + ctype.size, max(largest, 1 if definition.packed else min(ctype.size, 8))
    holder = Parameter(parameter.position, parameter.name, parameter.declared,
                       CType(spelling, STRUCT, structs.aligned(offset, largest)))
    return [Parameter(parameter.position, member.name, member.declared, ctype, holder, at)
            for member, ctype, at in laid]


def listed(declared: tuple[Parameter, ...]) -> str:
    """The parameters as a message lists them, a struct's members in braces after it
    (``const GemmParams p {const float *A; int M}, int flags``)."""
    out: list[str] = []
    holders: list = []
    for p in declared:
        if p.member_of is not None and holders and holders[-1] is p.member_of:
            out[-1] = out[-1][:-1] + f"; {p.declared}}}"
            continue
        holders.append(p.member_of)
        out.append(f"{p.member_of.declared} {{{p.declared}}}" if p.member_of is not None else p.declared)
    return ", ".join(out)


def of(instance) -> tuple[Parameter, ...] | None:
    """The parameters of `instance` in its kernel's declaration, or None when the source does
    not declare it readably (a catalog entry built in code for a source that is not there).
    Instance.parameters keeps it for the instantiation's life."""
    spec = instance.spec
    decl = declaration(spec.source, spec.entry, cuda_source.include_dirs_of(spec.source), tuple(spec.defines))
    if decl is None:
        return None
    name = instance.name_expression
    return instantiated(decl, name[len(spec.entry) + 1:-1] if name != spec.entry else "")


def declaration_site(instance) -> str:
    """``file.cu:12``: where the kernel of `instance` is declared."""
    decl = declaration(instance.spec.source, instance.spec.entry, cuda_source.include_dirs_of(instance.spec.source),
                       tuple(instance.spec.defines))
    return decl.where if decl else instance.spec.source.name


# -- the compiler's view ------------------------------------------------------------------

def demangled(symbol: str) -> str | None:
    """The C++ declaration an Itanium-mangled symbol names (``gemm<__half, 32>(__half const*,
    ..., unsigned long, ...)``), or None: an ``extern "C"`` name, or no demangler here."""
    if not symbol.startswith("_Z"):
        return None
    found = _cxa_demangle(symbol)
    if found is None and shutil.which("c++filt"):
        out = subprocess.run(["c++filt", symbol], capture_output=True, text=True)
        found = out.stdout.strip() if out.returncode == 0 and out.stdout.strip() != symbol else None
    return found


def _cxa_demangle(symbol: str) -> str | None:
    """libstdc++'s own demangler (every Linux with a C++ runtime has it), through ctypes."""
    name = ctypes.util.find_library("stdc++")
    if name is None:
        return None
    library = ctypes.CDLL(name)
    demangle = library.__cxa_demangle
    demangle.restype = ctypes.c_void_p
    status = ctypes.c_int()
    result = demangle(symbol.encode(), None, None, ctypes.byref(status))
    if not result or status.value != 0:
        return None
    try:
        return ctypes.string_at(result).decode()
    finally:
        ctypes.CDLL(None).free(ctypes.c_void_p(result))


def compiled_types(symbol: str) -> tuple[str, list[CType]] | None:
    """(the declaration, its parameter types) the compiler's mangled `symbol` names; None when it
    names no types (``extern "C"``) or cannot be demangled here."""
    text = demangled(symbol)
    if text is None:
        return None
    inner = text[parameter_list_at(text) + 1:-1]
    return text, [read_type(p) for p in split_top_level(inner) if p != "void"]


def parameter_list_at(declaration: str) -> int:
    """Where a declaration's parameter list opens: its last top-level ``(`` (the length of
    `declaration` when it has none)."""
    depth = 0
    for i in range(len(declaration) - 1, -1, -1):
        depth += declaration[i] == ")"
        depth -= declaration[i] == "("
        if declaration[i] == "(" and depth == 0:
            return i
    return len(declaration)
