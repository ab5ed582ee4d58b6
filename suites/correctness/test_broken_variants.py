"""Broken kernels fail the correctness check: each is a strict xfail whose reason names the
defect its catalog entry declares. A broken kernel that passes every exposing problem
(tile-derived ragged, aligned, large ragged and race-stress shapes) turns the run red.
Kernels declared crash, hang or too_slow are the hazards and performance suites' business."""

import pytest

from gemmcheck.hazards import exposing_problems

pytestmark = pytest.mark.gpu


def test_broken_kernel_fails_the_correctness_check(exposed_broken, check, profile):
    for _, problem in exposing_problems(exposed_broken, profile.race_sizes):
        check(exposed_broken, problem)
