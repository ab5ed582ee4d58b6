"""Repeated launches on the same inputs give the same bits.

A reference kernel sums in a fixed order, so every launch must store
identical bits (random inputs, where a different order would show in the last
bits). The hazards suite stresses races at large sizes; this is the
claim at the sizes the correctness suite runs.
"""

import numpy as np

from gemmcheck.harness import GuardedGemm
from gemmcheck.problems import Problem, claimed_shape
from gemmcheck.verdict import Defect, Finding

SEED = 4


def test_repeated_launches_give_identical_bits(backend, reference, profile, conclude):
    t = reference.tile
    problem = Problem(*claimed_shape(reference, 4 * t + 1, 4 * t + 3, 4 * t + 2),
                      reference.dtype, "normal", SEED)
    A, B = problem.operands()
    gemm = GuardedGemm(backend, reference, A, B)
    first = gemm.run().C_bits
    differing = [int(np.count_nonzero(gemm.run().C_bits != first))
                 for _ in range(profile.determinism_repeats - 1)]
    finding = None
    if any(differing):
        finding = Finding(Defect.NONDETERMINISM, "repeat-launch",
                          f"launches 2..{profile.determinism_repeats} differ from the first in "
                          f"{differing} elements", max(differing), details={"differing": differing})
    conclude(reference, problem, finding)
