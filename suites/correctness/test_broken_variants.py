"""Broken kernels fail the correctness check: each is a strict xfail whose reason names the
defect its catalog entry declares. A broken kernel that passes every exposing problem
(tile-derived ragged, aligned, large ragged and race-stress shapes) turns the run red.
On a backend that explores thread schedules (the CPU simulator) the small problems run under
each of a few schedules instead of the large ones (a race shows at any size there; 1024^3
takes minutes).
Kernels declared crash, hang or too_slow are the hazards and performance suites' business."""

from gemmcheck.judge.hazards import SIMULATOR_SCHEDULES, exposing_problems, simulates_threads


def test_broken_kernel_fails_the_correctness_check(exposed_broken, check, profile, backend):
    if not simulates_threads(backend):
        for _, problem in exposing_problems(exposed_broken, profile.race_sizes):
            check(exposed_broken, problem)
        return
    for schedule in SIMULATOR_SCHEDULES:
        with backend.using_schedules((schedule,)):
            for _, problem in exposing_problems(exposed_broken, race_sizes=()):
                check(exposed_broken, problem)
