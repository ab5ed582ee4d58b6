"""The measured point of the roofline: DRAM bytes a kernel really moves, from Nsight Compute.

Opt-in (``--gemm-ncu``; needs ``ncu`` on PATH): one launch of the instantiation
in an isolated child (gemmcheck.judge.isolation, exact-size allocations) under
``ncu --metrics dram__bytes_read.sum,dram__bytes_write.sum`` (ncu flushes the
caches before it profiles, so the bytes are a cold launch's). The measured
intensity is FLOPs / those bytes: where the seed's DRAM-only model and the
caches disagree, the measured point says by how much. Any failure is a note in
the table, never a test failure: the point is optional evidence.
"""

from __future__ import annotations

import csv
import re

from gemmcheck.backends import device

METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum")
TIMEOUT_S = 300.0


def first_launch_of(entry: str) -> list[str]:
    """ncu's options that profile the first launch of kernel ``entry`` only, in the child too."""
    # the function name, with or without its template arguments (matmul_tiled<float, 32>)
    return ["--kernel-name-base", "function", "--kernel-name", f"regex:^{re.escape(entry)}(<.*)?$",
            "--launch-count", "1", "--target-processes", "all"]


def command(exe: str, entry: str) -> list[str]:
    """ncu's options: the DRAM byte counters of the first launch of ``entry``, as CSV in bytes."""
    return [exe, "--metrics", ",".join(METRICS), "--csv", "--print-units", "base", *first_launch_of(entry)]


def launch_once(instance, size: int, prefix, *, backend: str = "cupy", timeout: float = TIMEOUT_S):
    """One launch of `instance` at N x N x N in an isolated child (exact-size allocations) whose
    command starts with `prefix` (ncu and its options): (StepOutcome, [ChildResult])."""
    from gemmcheck.judge import isolation
    from gemmcheck.problems.problem import Problem

    step = isolation.Step.of(0, instance, Problem(size, size, size, instance.types, "exact", 1),
                             purpose="ncu", repeats=1, control=False)
    outcomes, children = isolation.run_steps([step], backend=backend, exact_allocations=True, prefix=prefix,
                                             step_timeout=timeout)
    return outcomes[0], children


def parse(lines) -> float | None:
    """Total DRAM bytes (read + write) of the first profiled kernel in ncu's CSV output, or None."""
    rows = [line for line in lines if line.startswith('"')]
    if not rows:
        return None
    found: dict[str, float] = {}
    for row in csv.DictReader(rows):
        name, value = row.get("Metric Name"), row.get("Metric Value", "")
        if name in METRICS and name not in found:
            try:
                found[name] = float(value.replace(",", ""))
            except ValueError:
                return None
    return sum(found.values()) if set(found) == set(METRICS) else None


def dram_bytes(instance, size: int, *, exe: str | None = None) -> tuple[float | None, str]:
    """(bytes, "") for one launch at N x N x N, or (None, why not)."""
    exe = exe or device.tool("ncu")
    if exe is None:
        return None, "ncu not found on PATH"
    try:
        outcome, children = launch_once(instance, size, command(exe, instance.spec.entry))
    except Exception as exc:   # a tool or child failure is a note, not a verdict
        return None, f"ncu run failed ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
    if outcome.status != "ok":
        return None, f"ncu run: the launch {outcome.status} ({outcome.message})"
    total = parse([line for child in children for line in child.lines])
    return (total, "") if total else (None, f"ncu printed no {' / '.join(METRICS)} for {instance.spec.entry}")
