"""The kernel's own source, as a reviewer would read it, and ptxas's resource report."""

from __future__ import annotations

import re
from pathlib import Path

from gemmcheck.contract import cuda_source

def kernel_source_excerpt(source: Path, entry: str) -> tuple[str, str]:
    """The source of ``entry`` with line numbers, and 'file:first-last'.

    Follows what a reviewer would: the ``__global__`` function (or the macro line that
    stamps it out, with the macro), then the ``__device__`` bodies it calls, one level
    deep. Lines naming a macro argument (the flaw a broken variant selects) are marked >>.
    """
    try:
        lines = cuda_source.readable(cuda_source.read_source(source)).splitlines()
    except (OSError, cuda_source.SourceNotText) as exc:
        return f"{entry}: cannot read {Path(source).name}: {exc}", Path(source).name
    spans: list[tuple[int, int]] = []
    marks: set[str] = set()
    own = _function_span(lines, entry)
    if own is None:
        call = re.compile(rf"^\s*([A-Z_][A-Z0-9_]*)\(\s*{re.escape(entry)}\s*(?:,\s*(.*))?\)")
        for k, line in enumerate(lines):
            m = call.match(line)
            if m:
                spans.append((k, k))
                marks |= {a.strip() for a in (m.group(2) or "").split(",") if a.strip()}
                macro = _macro_span(lines, m.group(1))
                if macro:
                    spans.insert(0, macro)
                break
    else:
        spans.append(own)
    called = set()
    for first, last in list(spans):
        called |= set(re.findall(r"\b([A-Za-z_]\w*)\s*<[^;<>(){}]*>\s*\(", "\n".join(lines[first:last + 1])))
    for name in sorted(called - {entry}):
        span = _function_span(lines, name, qualifier="__device__")
        if span and span not in spans:
            spans.insert(0, span)
    if not spans:
        return f"{entry}: not found in {Path(source).name}", Path(source).name
    spans.sort()
    out, previous = [], None
    for first, last in spans:
        if previous is not None and first > previous + 1:
            out.append("  ...")
        for k in range(first, last + 1):
            flag = ">>" if marks and any(re.search(rf"\b{re.escape(m)}\b", lines[k]) for m in marks) else "  "
            out.append(f"{flag}{k + 1:5d}  {lines[k]}")
        previous = last
    return "\n".join(out), f"{Path(source).name}:{spans[0][0] + 1}-{spans[-1][1] + 1}"


def _function_span(lines: list[str], name: str, qualifier: str = "__global__"):
    """(first, last) line of the definition of function ``name`` with its template line."""
    pattern = re.compile(rf"\b{re.escape(name)}\s*\(")
    for k, line in enumerate(lines):
        if not pattern.search(line) or line.rstrip().endswith(";") or "#define" in line:
            continue
        head = " ".join(lines[max(0, k - 1):k + 1])
        if qualifier not in head:
            continue
        first = k
        while first > 0 and lines[first - 1].lstrip().startswith(("template", "__global__", "__device__")):
            first -= 1
        depth, opened = 0, False
        for last in range(k, len(lines)):
            depth += lines[last].count("{") - lines[last].count("}")
            opened = opened or "{" in lines[last]
            if opened and depth <= 0:
                return first, last
    return None


def _macro_span(lines: list[str], macro: str):
    for k, line in enumerate(lines):
        if re.match(rf"\s*#\s*define\s+{re.escape(macro)}\b", line):
            last = k
            while lines[last].rstrip().endswith("\\") and last + 1 < len(lines):
                last += 1
            return k, last
    return None


def resource_report(instance) -> str:
    """ptxas's report for one instantiation (gemmcheck.compile.resources), or why there is none."""
    from gemmcheck.compile import resources

    try:
        found = resources.compile_report(instance.spec.source, (instance.name_expression,))
    except Exception as exc:  # no NVRTC here, or the kernel does not compile
        return f"no resource report for {instance.name_expression}: {type(exc).__name__}: {exc}"
    r = found[instance.name_expression]
    return (f"{r.name_expression} on {r.arch}: {r.registers} registers, {r.shared_bytes} B static "
            f"shared memory, {r.stack_frame} B stack frame, {r.spill_stores} B spill stores, "
            f"{r.spill_loads} B spill loads, {r.barriers} barriers"
            + (f"\nlocal memory: {resources.local_memory(r)}" if resources.local_memory(r) else ""))


