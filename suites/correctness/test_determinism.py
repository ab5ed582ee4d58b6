"""Repeated launches on the same inputs give the same bits.

A reference kernel sums in a fixed order, so every launch must store
identical bits (random inputs, where a different order would show in the last
bits). The hazards suite stresses races at large sizes; this is the
claim at the sizes the correctness suite runs, judged by the hazard detectors'
repeat-launch check (gemmcheck.judge.hazards.check_nondeterminism). Launches that differ on
hardware say something raced, not where: the failure message adds where the CPU simulator
places the race (gemmcheck.judge.hazards.locate_race), or why it could not.

A kernel that reduces with floating-point atomics (split-K) declares
``deterministic = false``: its order of additions changes from launch to launch, so
different last bits on random inputs are information, not a failure (each launch is still
held to the error bound by the other checks, and exact integer inputs, whose partial sums
are exact in any order, must still give the exact bits).
"""

from gemmcheck import report
from gemmcheck.judge.oracle import current_test
from gemmcheck.verdict import Verdict

from gemmcheck.judge import hazards
from gemmcheck.problems.harness import GuardedGemm
from gemmcheck.problems.problem import Problem
from gemmcheck.pytest_plugin.scope_plugin import claimed_shape_or_skip

SEED = 4


def test_repeated_launches_give_identical_bits(backend, reference, profile, conclude, verdicts):
    t = reference.tile
    problem = Problem(*claimed_shape_or_skip(reference, 4 * t + 1, 4 * t + 3, 4 * t + 2),
                      reference.types, "normal", SEED)
    A, B = problem.operands()
    gemm = GuardedGemm(backend, reference, A, B)
    obs = hazards.Observation(reference, problem, "determinism",
                              [gemm.run() for _ in range(profile.determinism_repeats)])
    finding = next(iter(hazards.check_nondeterminism(obs)), None)
    if finding is not None and not hazards.simulates_threads(backend):
        # a race of unknown place on hardware: the message says where the CPU simulator places it
        finding = hazards.with_place(finding, hazards.locate_race(reference))
    if not reference.spec.deterministic:
        note = ("declared deterministic = false (floating-point atomics): "
                + (finding.summary if finding else "its launches gave identical bits anyway"))
        verdicts.record(Verdict.for_instance(reference, problem.label, [], current_test(), notes=[note]))
        report.attach_text("declared convention (information)", note)
        return
    conclude(reference, problem, finding)
