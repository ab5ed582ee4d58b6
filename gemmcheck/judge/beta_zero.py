"""BLAS's first rule: at beta = 0 C is not read. The detector that establishes a kernel breaks it.

With beta = 0, BLAS (and cuBLAS: "C does not have to be a valid input") says C's old contents
may be anything and must not be read. The most common slip is the tutorial epilogue
``C[i] = alpha * acc + beta * C[i]``: at beta = 0 it computes 0 * NaN = NaN from gemmcheck's
poison, and every check at beta = 0 fails with a NaN story (on cpu-sim 0 * NaN even keeps the
poison's payload, so those elements look never written).

The probe: the same exact problem launched twice at beta = 0, C holding the poison NaN, then
finite garbage (harness.finite_garbage). A kernel that never reads C writes the same bits in
both. An element whose bits differ, and that the finite launch did write (it no longer holds
the garbage), came out of a computation that read C: ``read_elements``. The finite launch is
judged too: where it is right, C's NaN was the only thing wrong there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gemmcheck.problems.harness import GuardedGemm, Run
from gemmcheck.problems.problem import Problem, claimed_shape
from gemmcheck.verdict import Defect, Finding
from gemmcheck.verdict.detectors import Detector

FIX = "skip the C load when beta == 0 (BLAS: C need not be initialized and must not be read)"
SEED = 11


def takes_beta(instance) -> bool:
    """Whether the kernel is passed beta (only then does the rule apply)."""
    return "beta" in instance.spec.roles


def probe_problem(instance) -> Problem | None:
    """A ragged exact problem at beta = 0 (alpha 1) the instantiation claims, or None."""
    t = instance.tile
    shape = claimed_shape(instance, 2 * t + 1, t + 3, 2 * t + 2)
    return None if shape is None else Problem(*shape, instance.types, "exact", SEED)


def read_elements(nan_runs, finite_run: Run) -> np.ndarray:
    """(M, N) bool: elements whose output depended on C's old contents at beta = 0.

    `nan_runs`: launches with C holding the poison NaN; `finite_run`: one with C holding finite
    garbage (Run.c_fill == "finite"). An element counts when every NaN launch left it NaN (the
    poison read into it, or kept) while the finite launch wrote a non-NaN value there: a
    kernel that never reads C cannot tell the two fills apart, and a launch-to-launch race does
    not produce NaN from finite inputs."""
    if finite_run.c_fill != "finite" or any(r.c_fill != "poison" for r in nan_runs):
        raise ValueError("read_elements: pass launches with C poisoned (NaN) and one with C finite")
    finite_values = finite_run.C.astype(np.float64)
    written_finite = ~finite_run.unwritten & ~np.isnan(finite_values)
    nan_everywhere = np.logical_and.reduce([np.isnan(r.C.astype(np.float64)) for r in nan_runs])
    return nan_everywhere & written_finite


def finding(instance, problem_label: str, read: np.ndarray, finite_run: Run,
            right_in_finite: np.ndarray | None = None) -> Finding | None:
    """The READS_C_AT_BETA_ZERO finding for `read` (read_elements), or None when it is empty.
    `right_in_finite`: (M, N) bool, where the finite launch holds the right result (the
    oracle's judgement), to say that C was the only thing wrong there."""
    if not read.any():
        return None
    n = int(read.sum())
    i, j = (int(x) for x in np.argwhere(read)[0])
    t = instance.tile
    right = "" if right_in_finite is None else (
        f"; with C finite, {int((read & right_in_finite).sum())} of them hold the right product")
    summary = (f"beta = 0, but the output depends on C's old contents: {n} of {read.size} elements came "
               f"out NaN with C holding NaN and written with C holding finite values{right}; first "
               f"C[{i}, {j}] (tile {i // t}, {j // t}) = {float(finite_run.C[i, j])!r} with C finite. "
               f"Fix: {FIX}")
    return Finding(Defect.READS_C_AT_BETA_ZERO, Detector.BETA_ZERO_READ, summary, n, (i, j),
                   {"problem": problem_label, "fraction": n / read.size, "fix": FIX})


@dataclass
class Probe:
    """What the two launches of `probe` established for one instantiation."""

    problem: Problem | None
    finding: Finding | None = None
    nan_run: Run | None = None
    finite_run: Run | None = None

    @property
    def reads_c(self) -> bool:
        return self.finding is not None


def probe(backend, instance) -> Probe:
    """Launch the probe problem at beta = 0 with C poisoned, then with C finite; the finding
    when the output depended on which. Raises what the launches raise (a build failure, a
    crash): the caller's check records those as it records any launch's."""
    from gemmcheck.judge import oracle

    problem = probe_problem(instance)
    if problem is None or not takes_beta(instance):
        return Probe(problem)
    A, B = problem.operands()
    nan_run = GuardedGemm(backend, instance, A, B, c_fill="poison").run()
    finite_run = GuardedGemm(backend, instance, A, B, c_fill="finite").run()
    read = read_elements([nan_run], finite_run)
    right = None
    if read.any():
        judgement = oracle.judge(finite_run, A, B, exact=True, problem=problem)
        right = ~judgement.failing
    return Probe(problem, finding(instance, problem.label, read, finite_run, right), nan_run, finite_run)


# -- other checks' failures this defect explains ------------------------------------------

ESTABLISHED_BY = "test_beta_zero_never_reads_c (suites/correctness/test_blas_rules.py)"
# The classes a read of C's NaN at beta = 0 shows as (the registry's own list).
SYMPTOMS = frozenset({Defect.UNWRITTEN_OUTPUT, Defect.WRONG_VALUES})


def explanation(instance, symptoms, verified: str) -> Finding:
    """The finding a failing check records instead of its own NaN story, when the read of C
    at beta = 0 explains it. `symptoms`: the check's own findings; `verified`: how this check
    showed that the read explains them (e.g. "with C finite instead of NaN it passes")."""
    symptoms = list(symptoms)
    told = ", ".join(dict.fromkeys(f"{f.defect.value} [{f.detector}]" for f in symptoms))
    return Finding(Defect.READS_C_AT_BETA_ZERO, Detector.BETA_ZERO_READ,
                   f"this failure is the read of C at beta = 0 that {ESTABLISHED_BY} established for "
                   f"{instance.id}: {verified}; its own findings ({told}) follow", sum(f.count for f in symptoms),
                   next((f.where for f in symptoms if f.where is not None), None),
                   {"explained_by": ESTABLISHED_BY, "symptoms": [f.defect.value for f in symptoms]})


def explains(probe_result: Probe, instance, problem, findings) -> bool:
    """Whether a check's findings on `problem` are of the kind a read of C at beta = 0 leaves,
    on an instantiation whose probe established the read (by class: a caller that can launch
    again verifies it with C finite, as the correctness suite's `check` does)."""
    return (probe_result.reads_c and not instance.spec.reads_c_at_beta_zero
            and getattr(problem, "beta", 0) == 0 and bool(findings)
            and all(f.defect in SYMPTOMS for f in findings))
