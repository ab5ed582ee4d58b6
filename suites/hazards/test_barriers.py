"""Barriers: a __syncthreads() that only some threads of a block reach. On hardware it shows
only as wrong values (on ragged M), never as itself; synccheck names it. The CPU simulator
tracks every barrier and names it exactly, also in the plain column when the race locator
asks it where a race hardware showed happened."""

import pytest

from gemmcheck.verdict.detectors import Detector
from gemmcheck.judge.kill_matrix import declares
from gemmcheck.verdict import Defect

divergent = pytest.mark.instances.with_args(declares("divergent_barrier"))
reference = pytest.mark.instances(lambda i: i.spec.is_reference)


@divergent
@pytest.mark.gpu
def test_a_divergent_barrier_is_caught_on_hardware_as_wrong_values(matrix_row):
    assert matrix_row.plain.found(defect=Defect.WRONG_VALUES), matrix_row.plain.diagnosis.explanation
    # Honest: hardware never claims what it cannot see. The barrier is named in this column
    # only where the simulator, asked by the race locator, saw the threads that diverged.
    claimed = [f.summary for f in matrix_row.plain.hardware_findings if f.defect == Defect.DIVERGENT_BARRIER]
    assert not claimed, claimed
    diagnosis = matrix_row.plain.diagnosis
    if diagnosis.defect == Defect.DIVERGENT_BARRIER:
        assert matrix_row.plain.placed and "thread(s) at" in diagnosis.place, diagnosis.explanation


@divergent
@pytest.mark.gpu
@pytest.mark.sanitizer
def test_synccheck_names_the_divergent_barrier(matrix_row, sanitizer_exe):
    assert matrix_row.sanitizer.found(detector=Detector.SYNCCHECK, defect=Defect.DIVERGENT_BARRIER), (
        matrix_row.sanitizer.to_json())
    assert matrix_row.sanitizer.diagnosis.defect == Defect.DIVERGENT_BARRIER


@reference
@pytest.mark.gpu
@pytest.mark.sanitizer
def test_synccheck_is_silent_on_references(finished_row, sanitizer_exe):
    assert not finished_row.sanitizer.found(detector=Detector.SYNCCHECK), finished_row.sanitizer.diagnosis.explanation


@divergent
@pytest.mark.simulator
def test_the_simulator_names_the_divergent_barrier(matrix_row):
    found = matrix_row.plain.found(detector=Detector.BARRIER_TRACKING, defect=Defect.DIVERGENT_BARRIER)
    assert found, matrix_row.plain.diagnosis.explanation
    assert "divergent barrier: block" in found[0].summary, found[0].summary
    assert matrix_row.plain.diagnosis.defect == Defect.DIVERGENT_BARRIER
    assert matrix_row.plain.diagnosis.basis == "observed"


@reference
@pytest.mark.simulator
def test_the_simulator_sees_every_barrier_reached_by_every_thread_in_references(finished_row):
    assert not finished_row.plain.found(detector=Detector.BARRIER_TRACKING), finished_row.plain.diagnosis.explanation
