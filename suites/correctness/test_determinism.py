"""Repeated launches on the same inputs give the same bits.

A reference kernel sums in a fixed order, so every launch must store
identical bits (random inputs, where a different order would show in the last
bits). The hazards suite stresses races at large sizes; this is the
claim at the sizes the correctness suite runs, judged by the hazard detectors'
repeat-launch check (gemmcheck.judge.hazards.check_nondeterminism).
"""

from gemmcheck.judge import hazards
from gemmcheck.problems.harness import GuardedGemm
from gemmcheck.problems.problem import Problem, claimed_shape

SEED = 4


def test_repeated_launches_give_identical_bits(backend, reference, profile, conclude):
    t = reference.tile
    problem = Problem(*claimed_shape(reference, 4 * t + 1, 4 * t + 3, 4 * t + 2),
                      reference.dtype, "normal", SEED)
    A, B = problem.operands()
    gemm = GuardedGemm(backend, reference, A, B)
    obs = hazards.Observation(reference, problem, "determinism",
                              [gemm.run() for _ in range(profile.determinism_repeats)])
    conclude(reference, problem, next(iter(hazards.check_nondeterminism(obs)), None))
