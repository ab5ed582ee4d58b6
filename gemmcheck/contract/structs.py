"""A struct a kernel takes by value (``__global__ void gemm(const GemmParams p)``): its members
and where each lies in it, as LP64 compilers lay it out (nvcc's device and host alike, g++).

Many published kernels take their pointers, sizes and scalars in one struct: a launcher fills
it, the kernel reads ``p.A``, ``p.M``, ``p.alpha``. The suite passes such a kernel's roles in
the struct's members, one role per member in declaration order, packed at each member's
offset: every member at an offset aligned to its size (pointers 8 bytes), the struct's size a
multiple of its largest member's; in a struct declared ``__attribute__((packed))``, each member
right after the one before. Members the suite can pack: pointers, integers and the
floating-point types of gemmcheck.contract.parameters. A struct with anything else (an array,
a nested struct, a bit-field, a base class, alignas, ``#pragma pack``, a template with
specializations) is read with the reason, which the catalog loader shows. A template struct
(``template <typename T> struct Params``) is laid out with the arguments the kernel's
parameter gives it (``Params<T>`` in the float16 instantiation: ``Params<__half>``). The simulator's build checks every offset and the size against g++'s
(gemmcheck.backends.cpu_sim.build).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gemmcheck.host_launches import split_top_level

# `struct Name {` / `class Name {` (a template's head before it is read as such), and the
# typedef'd anonymous form `typedef struct { ... } Name;`.
_ATTRIBUTE = r"(?:__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)|__align__\s*\(\s*\d+\s*\)|alignas\s*\(\s*\d+\s*\))\s*"
_HEAD = re.compile(rf"(?P<template>template\s*<[^{{}};]*>\s*)?\b(?:struct|class)\s+(?P<attributes>(?:{_ATTRIBUTE})*)"
                   r"(?P<name>[A-Za-z_]\w*)\s*(?:final\s*)?(?P<base>:[^{;]*)?\{")
_TYPEDEF_HEAD = re.compile(rf"\btypedef\s+struct\s*(?P<attributes>(?:{_ATTRIBUTE})*)(?:[A-Za-z_]\w*\s*)?\{{")
_PACKED = re.compile(r"__attribute__\s*\(\(\s*(?:__)?packed(?:__)?\s*\)\)")
_TRAILING_ATTRIBUTES = re.compile(rf"\s*(?:{_ATTRIBUTE})*")
_ACCESS = re.compile(r"\b(?:public|private|protected)\s*:")
_SKIPPED = re.compile(r"^\s*(?:static|using|typedef|friend|template|enum|struct|class|union)\b")


@dataclass(frozen=True)
class Member:
    """One data member as written: its declaration (one declarator), name and type's text."""

    declared: str
    name: str
    type: str
    array: bool = False
    bits: bool = False


@dataclass(frozen=True)
class Definition:
    """A struct's definition: its members in order, or why the suite cannot pack it."""

    name: str
    members: tuple[Member, ...]
    unpackable: str = ""
    packed: bool = False   # __attribute__((packed)): every member right after the one before
    template: str = ""     # a template's head (``template <typename T>``): its members' types name T

    def has(self, why: str) -> str:
        """How a message says what stops the suite packing it: ``struct Dims has an array member``."""
        return f"struct {self.name} has {why}"


def definitions(code: str) -> dict[str, Definition]:
    """The structs (and classes) `code` defines, by name (comments blanked, preprocessed)."""
    found: dict[str, Definition] = {}
    pragma = "declared under #pragma pack" if re.search(r"#\s*pragma\s+pack\b", code) else ""
    for m in _HEAD.finditer(code):
        end = _end(code, m.end() - 1)
        if end is None:
            continue
        attributes = m["attributes"] + _TRAILING_ATTRIBUTES.match(code, end + 1)[0]
        specialized = m["template"] and re.search(rf"\b(?:struct|class)\s+{m['name']}\s*<", code)
        why = "derived from another" if m["base"] else "specializations" if specialized else ""
        found.setdefault(m["name"], _definition(m["name"], code[m.end():end], why or _layout_why(attributes, pragma),
                                                bool(_PACKED.search(attributes)), (m["template"] or "").strip()))
    for m in _TYPEDEF_HEAD.finditer(code):
        end = _end(code, m.end() - 1)
        if end is None:
            continue
        after = _TRAILING_ATTRIBUTES.match(code, end + 1)
        name = re.match(r"([A-Za-z_]\w*)\s*;", code[after.end():])
        if name:
            attributes = m["attributes"] + after[0]
            found.setdefault(name[1], _definition(name[1], code[m.end():end], _layout_why(attributes, pragma),
                                                  bool(_PACKED.search(attributes))))
    return found


def _layout_why(attributes: str, pragma: str) -> str:
    """Why a struct's attributes (or the file's ``#pragma pack``) make a layout the suite does not
    compute: an alignment other than its members'; "" for none, or ``packed`` alone."""
    return pragma or ("declared with an alignment" if re.search(r"__align__|alignas|aligned", attributes) else "")


def _definition(name: str, body: str, why: str, packed: bool, template: str = "") -> Definition:
    members = []
    for declaration in _declarations(body):
        if _SKIPPED.match(declaration) or "(" in declaration:
            if re.match(r"^\s*(?:struct|class|union)\b", declaration):
                why = why or "a struct member"
            continue   # member functions, static members, nested types
        members.extend(_members(declaration))
    if not why and any(m.array for m in members):
        why = "an array member"
    if not why and any(m.bits for m in members):
        why = "a bit-field"
    if not why and re.search(r"__align__|alignas", body):
        why = "a member declared with an alignment"
    return Definition(name, tuple(members), why, packed, template)


def _declarations(body: str) -> list[str]:
    """The member declarations of a struct body: text up to each top-level ``;``, member
    functions (a ``{...}`` after a parameter list) and access specifiers dropped."""
    body, out, depth, start = _ACCESS.sub(" ", body), [], 0, 0
    for i, ch in enumerate(body):
        depth += ch in "{(["
        depth -= ch in "})]"
        if depth == 0 and ch == "}" and "(" in body[start:i]:   # a member function's body ends it
            start = i + 1
        elif depth == 0 and ch == ";":
            out.append(body[start:i])
            start = i + 1
    return [" ".join(d.split()) for d in out if d.strip()]


def _members(declaration: str) -> list[Member]:
    """``const float *A, *B = nullptr`` -> two members sharing the type words before the first
    declarator; default member initializers dropped."""
    parts = [re.split(r"\s*=|\{", p, maxsplit=1)[0].strip() for p in split_top_level(declaration)]
    first = re.match(r"^(?P<type>.*?)(?P<declarator>[*&\s]*[A-Za-z_]\w*\s*(?:\[[^\]]*\]\s*)*(?::\s*\d+)?)$",
                     parts[0]) if parts else None
    if first is None or not first["type"].strip():
        return []
    base = first["type"].strip()
    out = []
    for index, part in enumerate(parts):
        declarator = first["declarator"] if index == 0 else part
        name = re.search(r"([A-Za-z_]\w*)\s*(?:\[[^\]]*\]\s*)*(?::\s*\d+)?$", declarator)
        if name is None:
            continue
        stars = declarator[:name.start()].strip()
        out.append(Member(re.sub(r"([*&])\s+", r"\1", f"{base} {declarator.strip()}"), name[1], f"{base} {stars}".strip(),
                          array="[" in declarator, bits=bool(re.search(r":\s*\d+\s*$", declarator))))
    return out


def _end(code: str, brace: int) -> int | None:
    """The index of the ``}`` that closes the ``{`` at `brace`."""
    depth = 0
    for i in range(brace, len(code)):
        depth += code[i] == "{"
        depth -= code[i] == "}"
        if depth == 0:
            return i
    return None


def aligned(offset: int, size: int) -> int:
    """`offset` rounded up to a member of `size` bytes' alignment (its size, at most 8)."""
    align = min(size, 8)
    return -(-offset // align) * align
