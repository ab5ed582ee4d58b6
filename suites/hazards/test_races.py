"""Shared-memory races: on hardware a missing barrier shows as output that differs between
launches on identical exact inputs (at 1024^3, where a WAR race shows on an H200);
racecheck sees it directly. References give identical bits launch after launch."""

import pytest

from gemmcheck.kill_matrix import declares
from gemmcheck.verdict import Defect

pytestmark = pytest.mark.gpu
race = pytest.mark.instances.with_args(declares("shared_memory_race"))
reference = pytest.mark.instances(lambda i: i.spec.is_reference)


@race
def test_a_declared_race_makes_launches_on_identical_inputs_differ(matrix_row):
    assert matrix_row.plain.found(defect=Defect.NONDETERMINISM), (
        f"{matrix_row.instance.id}: no launch-to-launch difference on {matrix_row.problems}")


@race
def test_plain_detectors_infer_the_race_and_say_it_is_inferred(matrix_row):
    diagnosis = matrix_row.plain.diagnosis
    assert (diagnosis.defect, diagnosis.basis) == (Defect.SHARED_MEMORY_RACE, "inferred"), diagnosis.explanation


@race
@pytest.mark.sanitizer
def test_racecheck_reports_the_declared_race(matrix_row, sanitizer_exe):
    assert matrix_row.sanitizer.found(detector="racecheck", defect=Defect.SHARED_MEMORY_RACE), (
        f"{matrix_row.instance.id}: racecheck silent; sanitizer column: {matrix_row.sanitizer.to_json()}")


@reference
def test_references_give_identical_bits_over_repeated_launches_at_race_sizes(matrix_row):
    assert any(p.startswith("race stress") for p in matrix_row.problems), matrix_row.problems
    assert not matrix_row.plain.found(defect=Defect.NONDETERMINISM), matrix_row.plain.diagnosis.explanation


@reference
@pytest.mark.sanitizer
def test_racecheck_is_silent_on_references(matrix_row, sanitizer_exe):
    assert not matrix_row.sanitizer.found(detector="racecheck"), matrix_row.sanitizer.diagnosis.explanation
