"""Barriers: a __syncthreads() that only some threads of a block reach. On hardware it shows
only as wrong values (on ragged M), never as itself; synccheck names it."""

import pytest

from gemmcheck.kill_matrix import declares
from gemmcheck.verdict import Defect

pytestmark = pytest.mark.gpu
divergent = pytest.mark.instances.with_args(declares("divergent_barrier"))


@divergent
def test_a_divergent_barrier_is_caught_on_hardware_as_wrong_values(matrix_row):
    assert matrix_row.plain.found(defect=Defect.WRONG_VALUES), matrix_row.plain.diagnosis.explanation
    # Honest: the plain detectors do not claim what they cannot see.
    assert matrix_row.plain.diagnosis.defect != Defect.DIVERGENT_BARRIER


@divergent
@pytest.mark.sanitizer
def test_synccheck_names_the_divergent_barrier(matrix_row, sanitizer_exe):
    assert matrix_row.sanitizer.found(detector="synccheck", defect=Defect.DIVERGENT_BARRIER), (
        matrix_row.sanitizer.to_json())
    assert matrix_row.sanitizer.diagnosis.defect == Defect.DIVERGENT_BARRIER


@pytest.mark.instances(lambda i: i.spec.is_reference)
@pytest.mark.sanitizer
def test_synccheck_is_silent_on_references(matrix_row, sanitizer_exe):
    assert not matrix_row.sanitizer.found(detector="synccheck"), matrix_row.sanitizer.diagnosis.explanation
