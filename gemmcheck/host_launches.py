"""What a CUDA file's host code says about its kernels' launches: each ``kernel<...><<<grid,
block, shared>>>`` call with its dim3 arguments resolved, and host C expressions rewritten in
the catalog's expression language (``(a + b - 1) / b`` as ``ceil(a / b)``, ``/`` as ``//``).
``python -m gemmcheck draft`` reads launch geometry with it (gemmcheck.draft)."""

from __future__ import annotations

import re
from dataclasses import dataclass


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """`text` split at `sep` outside (), [], {} and <>."""
    parts, depth, current = [], 0, ""
    for ch in text:
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    if current.strip():
        parts.append(current)
    return [p.strip() for p in parts]



_LAUNCH = re.compile(r"\b(?P<name>[A-Za-z_]\w*)\s*(?:<(?P<targs>[^<>;]*(?:<[^<>;]*>[^<>;]*)*)>)?\s*"
                     r"<<<(?P<config>.*?)>>>", re.S)
# NAME = 32; or NAME{32U}; (C++11 brace initialization: constexpr unsigned int BM{32U};)
CONSTANT_ASSIGNMENT = re.compile(r"\b(?P<name>[A-Za-z_]\w*)\s*(?:=\s*(?P<value>\d+)[uUlL]*|\{\s*(?P<braced>\d+)[uUlL]*\s*\})"
                                 r"\s*[,;]")


@dataclass
class Launch:
    template_args: list[str]
    grid: list[str] | None
    block: list[str] | None
    written: str            # the launch's lines as the file has them (macros expanded)
    shared: str | None = None   # the third argument: bytes of dynamic shared memory
    args: list[str] | None = None   # what the launch passes the kernel, in order (None: not read)
    at: int = -1            # where it starts in the code read


def launches(code: str, kernel: str) -> list[Launch]:
    """The launches of `kernel` in (preprocessed, comment-free) host code, in order."""
    found = []
    for m in _LAUNCH.finditer(code):
        if m["name"] != kernel:
            continue
        config = split_top_level(m["config"])
        before = code[:m.start()]
        dims = [(_dims(config[i], before) if len(config) > i else None) for i in (0, 1)]
        if dims[0] and dims[1] and re.fullmatch(r"[A-Za-z_]\w*", config[1]):
            dims[0] = [_block_members(d, config[1], dims[1]) for d in dims[0]]
        found.append(Launch(split_top_level(m["targs"] or ""), dims[0], dims[1],
                            " ".join(code[m.start():m.end()].split()), config[2].strip() if len(config) > 2 else None,
                            (call_arguments(code, m.end()) or (None,))[0], m.start()))
    return found


_TARGS = r"<(?P<targs>[^<>;]*(?:<[^<>;]*>[^<>;]*)*)>"


def explicit_instantiations(code: str, kernel: str) -> list[list[str]]:
    """The template arguments of each explicit instantiation of `kernel` in (preprocessed,
    comment-free) code, ``template __global__ void gemm<128, 8>(...);``, in order: the values
    a library that launches its kernels elsewhere builds them with."""
    pattern = re.compile(rf"\btemplate\s+(?:(?:__global__|static|__launch_bounds__\s*\([^)]*\))\s+)*void\s+(?:__global__\s+)?"
                         rf"{re.escape(kernel)}\s*{_TARGS}\s*\(")
    return [split_top_level(m["targs"]) for m in pattern.finditer(code)]


def _block_members(text: str, block: str, dims: list[str]) -> str:
    """A grid dimension written with the block's members (``(N + block.x - 1) / block.x``) with
    the block's own values put in."""
    def value(m: re.Match) -> str:
        at = "xyz".index(m["axis"])
        v = dims[at].strip() if at < len(dims) else "1"
        return v if re.fullmatch(r"\w+", v) else f"({v})"
    return re.sub(rf"\b{re.escape(block)}\s*\.\s*(?P<axis>[xyz])\b", value, text)


def call_arguments(code: str, at: int) -> tuple[list[str], int] | None:
    """(the arguments, the index past the closing parenthesis) of the call whose ``(`` follows `at`."""
    opening = re.match(r"\s*\(", code[at:])
    if not opening:
        return None
    start = at + opening.end()
    depth = 1
    for i in range(start, min(len(code), start + 10_000)):
        depth += {"(": 1, ")": -1}.get(code[i], 0)
        if depth == 0:
            return split_top_level(code[start:i]), i + 1
    return None


# the helpers published code rounds up with: ceil_div (llm.c), iDivUp (the CUDA samples), cdiv, div_up, ...
_CEIL_DIV_CALL = re.compile(r"\b(?:ceil_div|ceildiv|ceilDiv|CEIL_DIV|cdiv|div_up|divUp|DivUp|DIV_UP|DIVUP|iDivUp|"
                            r"div_ceil)\s*(?:<[^<>()]*>)?\s*(?=\()")


def _function_ceil_divisions(text: str) -> str:
    """``ceil_div(a, b)`` and its kin (each ``(a + b - 1) / b``) written ``ceil(a / b)``."""
    for _ in range(8):
        m = _CEIL_DIV_CALL.search(text)
        call = call_arguments(text, m.end()) if m else None
        if call is None or len(call[0]) != 2:
            return text
        a, b = (x if re.fullmatch(r"\w+", x) else f"({x})" for x in call[0])
        text = f"{text[:m.start()]}ceil({a} / {b}){text[call[1]:]}"
    return text


def _dims(arg: str, before: str) -> list[str] | None:
    arg = arg.strip()
    inline = re.fullmatch(r"dim3\s*[({](?P<args>.*)[)}]", arg, re.S)
    if inline:
        return split_top_level(inline["args"])
    if re.fullmatch(r"[A-Za-z_]\w*", arg):
        found = None   # the last declaration of it: alone (dim3 grid(...);) or beside others (dim3 b(..), grid(..);)
        for statement in re.finditer(r"\bdim3\s+(?P<declarators>[^;]*);", before):
            for declarator in split_top_level(statement["declarators"]):
                m = re.fullmatch(rf"\s*(?:const\s+)?{arg}\s*(?:=\s*dim3\s*)?[({{](?P<args>.*)[)}}]\s*", declarator, re.S)
                if m:
                    found = m["args"]
        if found is not None:
            return split_top_level(found)
        return _member_assignments(arg, before) or [_scalar_value(arg, before)]
    return [arg] if arg else None


def _member_assignments(name: str, before: str) -> list[str] | None:
    """A dim3 declared bare and set member by member (``dim3 gridDim; gridDim.x = ...;
    gridDim.y = ...;``, as NVIDIA's WMMA example writes it): each axis's last value, an axis
    left out 1; None when no member is set."""
    axes = {m["axis"]: m["value"].strip() for m in re.finditer(
        rf"\b{re.escape(name)}\s*\.\s*(?P<axis>[xyz])\s*=(?!=)\s*(?P<value>[^;]+);", before)}
    if not axes:
        return None
    return [axes.get(axis, "1") for axis in "xyz"[:max("xyz".index(a) for a in axes) + 1]]


# an integer declared with its value: const int blocks = (m * n + threads - 1) / threads;
_SCALAR_TYPES = r"(?:const\s+|constexpr\s+|static\s+)*(?:unsigned\s+int|unsigned|int|long|size_t|uint|uint32_t|int64_t|auto)"


def _scalar_value(name: str, before: str) -> str:
    """A 1-D launch's grid or block held in an integer variable (``matmul<<<blocks, threads>>>``):
    the expression of its last declaration before the launch, parenthesized; the name itself
    where none is found or it holds a number (the draft's constants put that in)."""
    found = list(re.finditer(rf"\b{_SCALAR_TYPES}\s+{re.escape(name)}\s*(?:=\s*(?P<value>[^;{{}}]+)|"
                             rf"\{{(?P<braced>[^;{{}}]+)\}})\s*[;,]", before))
    value = split_top_level(found[-1]["value"] or found[-1]["braced"])[0].strip() if found else ""
    return name if not value or re.fullmatch(r"\d+[uUlL]*", value) else f"({value})"


_OPERAND = r"(?:\w+|\(\w+\))"
_CEIL_DIV = re.compile(rf"\(\s*(?P<a>{_OPERAND})\s*\+\s*(?P<b>{_OPERAND})\s*-\s*1\s*\)\s*//\s*(?P<b2>{_OPERAND})")
# (a - 1) / b + 1: the textbook's rounding up (one block more at a = 0 in C, where nothing is left to do)
_CEIL_DIV_MINUS_ONE = re.compile(rf"\(\s*(?P<a>{_OPERAND})\s*-\s*1\s*\)\s*//\s*(?P<b>{_OPERAND})\s*\+\s*1\b")
# (a + 15) / 16: the same rounding up with the divisor's literal less one written out
# (m * n + threads - 1) / threads: the same over a sum or product of sizes (a 1-D grid over M N)
_CEIL_DIV_SUM = re.compile(r"\((?P<a>[\w\s*+-]+?)\+\s*(?P<b>\w+)\s*-\s*1\s*\)\s*//\s*(?P=b)\b")
_CEIL_DIV_LITERAL = re.compile(rf"\(\s*(?P<a>{_OPERAND}(?:\s*\*\s*{_OPERAND})*)\s*\+\s*(?P<less>\d+)\s*\)\s*//\s*(?P<b>\d+)\b")


def host_expression(text: str, names: dict[str, str], constants: dict[str, int],
                    literals: dict[str, str] | None = None) -> str:
    """A host C expression as a catalog expression: integer division as //, casts dropped,
    host names of M, N, K and the parameters renamed, other known constants substituted,
    ``(a + b - 1) / b``, ``(a + 15) / 16``, ``(a - 1) / b + 1`` and ``ceil_div(a, b)`` written
    ceil(a / b). `literals` maps a number the launch passes as a template argument to that
    parameter's name."""
    text = re.sub(r"\(\s*(?:unsigned\s+)?(?:int|uint|unsigned|size_t|long)\s*\)", "", text)
    # static_cast<unsigned int>(n): the operand, parenthesized
    text = re.sub(r"\b(?:static|reinterpret)_cast\s*<[^<>()]*>\s*\(", "(", text)
    text = re.sub(r"(\d+)[uUlL]+\b", r"\1", text)
    text = re.sub(r"(?<!/)/(?!/)", "//", text)
    text = _function_ceil_divisions(text)

    def rename(m: re.Match) -> str:
        word = m.group(0)
        if word in names:
            return names[word]
        if word in constants:
            return str(constants[word])
        if literals and word in literals:
            return literals[word]
        return word
    bare = lambda operand: operand.strip("()") if re.fullmatch(_OPERAND, operand) else f"({operand})"
    # (N + 15) / 16 before 16 is renamed for the parameter whose value it is: ceil(N / TILE)
    text = _CEIL_DIV_LITERAL.sub(lambda m: f"ceil({bare(m['a'])} / {m['b']})"
                                 if int(m["less"]) + 1 == int(m["b"]) else m.group(0), text)
    text = _folded(" ".join(re.sub(r"\b\w+\b", rename, text).split()))
    for _ in range(4):
        new = _CEIL_DIV.sub(lambda m: f"ceil({bare(m['a'])} / {bare(m['b'])})" if bare(m["b"]) == bare(m["b2"])
                            else m.group(0), text)
        new = _CEIL_DIV_LITERAL.sub(lambda m: f"ceil({bare(m['a'])} / {m['b']})"
                                    if int(m["less"]) + 1 == int(m["b"]) else m.group(0), new)
        new = _CEIL_DIV_MINUS_ONE.sub(lambda m: f"ceil({bare(m['a'])} / {bare(m['b'])})", new)
        new = _CEIL_DIV_SUM.sub(lambda m: f"ceil(({m['a'].strip()}) / {m['b']})", new)
        new = re.sub(r"\(\s*(ceil\([^()]*\))\s*\)", r"\1", new)
        if new == text:
            break
        text = new
    return _unwrapped(text)


_LITERAL_GROUP = re.compile(r"\((?P<e>[\d\s*+/-]+)\)")
# a product (or quotient) of literals that binds before its neighbours: after + - ( or the start, before + - ) or the end
_LITERAL_PRODUCT = re.compile(r"(?P<pre>^|[(+-]\s*)(?P<e>\d+(?:\s*(?:\*|//)\s*\d+)+)(?=\s*(?:[-+)]|$))")


def _folded(text: str) -> str:
    """Literal arithmetic computed: ``(M + (16 * 128 // 32 - 1)) // (16 * 128 // 32)`` (the WMMA
    example's grid over its block's 128 threads) -> ``(M + 63) // 64``, which reads as a
    rounding up."""
    def value(m: re.Match) -> str:
        try:
            v = eval(m["e"], {"__builtins__": {}})   # digits and + - * // only (the patterns)
        except (SyntaxError, ZeroDivisionError):
            return m[0]
        return (m.groupdict().get("pre") or "") + str(v) if isinstance(v, int) and v >= 0 else m[0]
    for _ in range(4):
        new = _LITERAL_PRODUCT.sub(value, _LITERAL_GROUP.sub(value, text))
        if new == text:
            break
        text = new
    return text


def _unwrapped(text: str) -> str:
    """`text` without parentheses around the whole of it (a variable's value put in whole)."""
    while text.startswith("(") and call_arguments(text, 0) and call_arguments(text, 0)[1] == len(text):
        text = text[1:-1].strip()
    return text
