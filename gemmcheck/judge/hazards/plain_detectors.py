"""The plain detectors: each looks at an Observation's launches (values, poison, guards, inputs,
repeated launches, C read at beta = 0) and returns Findings."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from gemmcheck.judge import beta_zero, oracle
from gemmcheck.judge.oracle import outside
from gemmcheck.problems.harness import Run, never_written
from gemmcheck.verdict.detectors import Detector
from gemmcheck.verdict import Defect, Finding
from gemmcheck.judge.hazards.observing import Observation


def _first(mask: np.ndarray):
    idx = np.argwhere(mask)
    return (int(idx[0][0]), int(idx[0][1])) if len(idx) else None


def check_values(obs: Observation) -> list[Finding]:
    """WRONG_VALUES: the oracle's exact judgement of each launch, the worst one reported.

    Unwritten elements are the poison detector's, so only the value and NaN
    findings are kept. A launch with the same bits as an earlier one is not
    judged again.
    """
    if not obs.runs:
        return []
    A, B = obs.operands
    judged: list[np.ndarray] = []
    worst: list[Finding] = []
    wrong_launches = 0
    reference = oracle.reference_of(obs.runs[0], A, B)   # the runs share the problem: one exact product
    for run in obs.runs:
        if any(_same_bits(run.C_bits, seen) for seen in judged):
            continue
        judged.append(run.C_bits)
        found = [f for f in oracle.judge(run, A, B, exact=True, problem=obs.problem,
                                         reference=reference).findings
                 if f.defect == Defect.WRONG_VALUES]
        if found:
            wrong_launches += 1
        if sum(f.count for f in found) > sum(f.count for f in worst):
            worst = found
    if len(judged) > 1 and worst:
        worst = [replace(f, details={**f.details, "distinct_outputs": len(judged),
                                     "wrong_outputs": wrong_launches}) for f in worst]
    return worst


def check_unwritten(obs: Observation) -> list[Finding]:
    """UNWRITTEN_OUTPUT: elements a launch never wrote (Run.unwritten: harness.never_written;
    an element that only carried the poison's payload through arithmetic is not one)."""
    worst = max(obs.runs + obs.control, key=lambda r: int(r.unwritten.sum()), default=None)
    if worst is None or not worst.unwritten.any():
        return []
    n = int(worst.unwritten.sum())
    where = _first(worst.unwritten)
    rows = np.flatnonzero(worst.unwritten.any(axis=1))
    cols = np.flatnonzero(worst.unwritten.any(axis=0))
    return [Finding(Defect.UNWRITTEN_OUTPUT, Detector.POISON,
                    f"{n} of {worst.unwritten.size} elements of {worst.output} {never_written(worst.output)}; "
                    f"rows {rows[0]}..{rows[-1]}, columns {cols[0]}..{cols[-1]}",
                    n, where, {"rows": [int(rows[0]), int(rows[-1])], "cols": [int(cols[0]), int(cols[-1])]})]


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two outputs hold the same bits; runs that left the same bits share one array
    (GuardedGemm.run), which is not compared with itself."""
    return a is b or bool(np.array_equal(a, b))


def _nan(run: Run) -> np.ndarray:
    return np.isnan(run.C.astype(np.float64)) & ~run.unwritten


def check_out_of_bounds_read(obs: Observation) -> list[Finding]:
    """OUT_OF_BOUNDS_READ: the output depends on what lies outside the operands.

    Inputs are finite integers, so a NaN in C comes from memory the kernel was
    not given: the guard bands, or memory no operand holds (stale shared memory
    a race reads, uninitialised registers). Guard-swap tells the guards apart
    only where the NaN follows them: the same elements NaN in every launch with
    NaN guards, and no NaN at all in the zero-guard launch between them
    (launch_order). NaN that moves between NaN-guard launches, or NaN in the
    control, comes from somewhere the guards do not decide, and then a NaN
    proves nothing about them. On the H200, in nightly shard 1/10,
    broken_no_barriers bfloat16 TILE8 left NaN in ~2% of C each launch; 592
    elements were NaN in both NaN-guard launches and finite in the control, and
    a rule that asked only that called the race an out-of-bounds read
    (docs/hazards.md, "Why guard swap ..."). A kernel that both races and reads its guards
    is then not named for the read here (memcheck names it).
    """
    if len(obs.runs) < 2 or not obs.control:
        return []
    # once per distinct output: runs that left the same bits share one array (GuardedGemm.run)
    distinct = list({id(r.C_bits): r for r in obs.runs}.values())
    nan_guards = [_nan(r) for r in distinct]
    if not nan_guards[0].any() or any((n != nan_guards[0]).any() for n in nan_guards[1:]):
        return []
    if any(_nan(r).any() for r in obs.control):
        return []
    reads = nan_guards[0]
    n, where = int(reads.sum()), _first(reads)
    return [Finding(Defect.OUT_OF_BOUNDS_READ, Detector.GUARD_SWAP,
                    f"{n} of {reads.size} elements of C are NaN in every launch while the guard bands "
                    f"around A and B hold NaN, and C has no NaN while they hold zeros: the kernel "
                    f"reads outside its operands; "
                    f"first at C{list(where)}", n, where, {"launches": len(obs.runs) + len(obs.control)})]


def _worst_counts(obs: Observation, attribute: str) -> dict[str, int]:
    """Per buffer, the largest nonzero count any launch reported in Run.<attribute>."""
    worst: dict[str, int] = {}
    for run in obs.runs + obs.control:
        for name, n in getattr(run, attribute).items():
            worst[name] = max(worst.get(name, 0), n)
    return {k: v for k, v in sorted(worst.items()) if v}


def check_out_of_bounds_write(obs: Observation) -> list[Finding]:
    """OUT_OF_BOUNDS_WRITE: a guard band around A, B or C changed (in any launch: the worst count)."""
    return outside.out_of_bounds_write(_worst_counts(obs, "guard_damage"))


def check_input_mutation(obs: Observation) -> list[Finding]:
    """INPUT_MUTATION: elements of A or B changed by a launch (the worst count)."""
    return outside.input_mutation(_worst_counts(obs, "inputs_changed"))


def check_nondeterminism(obs: Observation) -> list[Finding]:
    """NONDETERMINISM: launches on identical inputs (same guards, same poison) left different bits."""
    if len(obs.runs) < 2:
        return []
    first = obs.runs[0].C_bits
    others = [r.C_bits for r in obs.runs[1:] if not _same_bits(r.C_bits, first)]
    if not others:
        return []
    differs = np.logical_or.reduce([bits != first for bits in others])
    n, where = int(differs.sum()), _first(differs)
    return [Finding(Defect.NONDETERMINISM, Detector.REPEAT_LAUNCH,
                    f"{n} of {differs.size} elements of C differ between {len(obs.runs)} launches on "
                    f"identical inputs; first at C{list(where)}", n, where,
                    {"launches": len(obs.runs)})]


def check_reads_c_at_beta_zero(obs: Observation) -> list[Finding]:
    """READS_C_AT_BETA_ZERO: at beta = 0 the output depends on whether C held NaN or finite
    values (gemmcheck.judge.beta_zero); the finite launch's right elements are counted."""
    if not obs.finite_c or not obs.runs:
        return []
    finite = obs.finite_c[0]
    read = beta_zero.read_elements(obs.runs, finite)
    if not read.any():
        return []
    A, B = obs.operands
    right = ~oracle.judge(finite, A, B, exact=True, problem=obs.problem).failing
    return [beta_zero.finding(obs.instance, obs.problem.label, read, finite, right)]


PLAIN_DETECTORS = (check_reads_c_at_beta_zero, check_values, check_unwritten, check_out_of_bounds_read,
                   check_out_of_bounds_write, check_input_mutation, check_nondeterminism)
