"""Broken kernels fail the correctness check: each is a strict xfail whose reason names the
defect its catalog entry declares. A broken kernel that passes every exposing problem
(tile-derived ragged, aligned, large ragged and race-stress shapes) turns the run red.
On a backend that explores thread schedules (the CPU simulator) the small problems run under
each of a few schedules instead of the large ones (a race shows at any size there; 1024^3
takes minutes).
Kernels declared crash, hang or too_slow are the hazards and performance suites' business."""

import pytest

from gemmcheck.judge.hazards import (SIMULATOR_SCHEDULES, UNSEEN_ON_HARDWARE, exposing_problems, no_race_stress,
                                     simulates_threads)
from gemmcheck.verdict import Defect


# What hardware shows only at a race-stress size: a race that stays exact on small problems.
SHOWN_BY_RACE_STRESS = (Defect.SHARED_MEMORY_RACE, Defect.GLOBAL_MEMORY_RACE, Defect.NONDETERMINISM)


def test_broken_kernel_fails_the_correctness_check(exposed_broken, check, profile, backend):
    if not simulates_threads(backend):
        declared = Defect(exposed_broken.spec.expect)
        why = no_race_stress(exposed_broken)
        if why and (declared in SHOWN_BY_RACE_STRESS or declared in UNSEEN_ON_HARDWARE):
            pytest.skip(f"{why}: its {declared.value} may give the right values at every launch there; the kill "
                        "matrix establishes it (compute-sanitizer's racecheck, the CPU simulator)")
        for _, problem in exposing_problems(exposed_broken, profile.race_sizes):
            check(exposed_broken, problem)
        return
    for schedule in SIMULATOR_SCHEDULES:
        with backend.using_schedules((schedule,)):
            for _, problem in exposing_problems(exposed_broken, race_sizes=()):
                check(exposed_broken, problem)
