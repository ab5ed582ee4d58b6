"""Warp masks: a warp-synchronous call (__shfl*_sync, __ballot_sync, __any_sync, __all_sync,
__match_*_sync, __reduce_*_sync, __syncwarp) whose mask leaves out a lane that calls it, or
names a lane that never does. A converged warp on a GPU often gives the right values all the
same, and the compiler drops a shuffle's constant mask from its code: hardware shows nothing,
and synccheck sees only a __syncwarp() whose caller is outside its mask ("Invalid arguments").
The CPU simulator tracks every call's lanes and names the call, its line and the lanes."""

import pytest

from gemmcheck.verdict.detectors import Detector
from gemmcheck.judge.kill_matrix import declares
from gemmcheck.verdict import Defect

warp_mask = pytest.mark.instances.with_args(declares("invalid_warp_mask"))
reference = pytest.mark.instances(lambda i: i.spec.is_reference)


@warp_mask
@pytest.mark.simulator
def test_the_simulator_names_the_call_its_line_and_the_lanes_of_a_declared_warp_mask(matrix_row):
    found = matrix_row.plain.found(detector=Detector.WARP_TRACKING, defect=Defect.INVALID_WARP_MASK)
    assert found, f"{matrix_row.instance.id}: every warp-synchronous call met its mask on {matrix_row.problems}"
    details = found[0].details
    assert details["call"].startswith("__") and details["lanes"] and ".cu:" in details["line"], details
    assert "invalid warp mask: " in found[0].summary, found[0].summary
    diagnosis = matrix_row.plain.diagnosis
    assert (diagnosis.defect, diagnosis.basis) == (Defect.INVALID_WARP_MASK, "observed"), diagnosis.explanation


@reference
@pytest.mark.simulator
def test_every_warp_synchronous_call_of_a_reference_meets_its_mask(finished_row):
    assert not finished_row.plain.found(detector=Detector.WARP_TRACKING), finished_row.plain.diagnosis.explanation


@warp_mask
@pytest.mark.gpu
def test_hardware_alone_never_claims_a_warp_mask(matrix_row):
    claimed = [f.summary for f in matrix_row.plain.hardware_findings if f.defect == Defect.INVALID_WARP_MASK]
    assert not claimed, claimed


@warp_mask
@pytest.mark.gpu
@pytest.mark.sanitizer
def test_what_synccheck_says_of_a_declared_warp_mask_is_invalid_arguments(matrix_row, sanitizer_exe):
    # It may say nothing (a shuffle's mask is not in the code it checks); what it says must be this.
    said = matrix_row.sanitizer.found(detector=Detector.SYNCCHECK)
    assert all(f.defect == Defect.INVALID_WARP_MASK for f in said), [f.summary for f in said]
