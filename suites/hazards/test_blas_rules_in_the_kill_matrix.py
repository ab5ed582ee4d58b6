"""BLAS's rules in the kill matrix: a kernel that reads C at beta = 0 is named for it, on
any backend (C holding NaN, then finite values: the output must not change); a kernel that
returns early at K = 0 leaves C unwritten where BLAS wants beta C written; references
do neither, K = 0 included wherever they claim it."""

import pytest

from gemmcheck.judge import beta_zero
from gemmcheck.judge.hazards import K_ZERO
from gemmcheck.judge.kill_matrix import declares
from gemmcheck.verdict import Defect
from gemmcheck.verdict.detectors import Detector

reads_c = pytest.mark.instances.with_args(declares("reads_c_at_beta_zero"))
reference = pytest.mark.instances(lambda i: i.spec.is_reference)


@reads_c
def test_a_kernel_that_reads_c_at_beta_zero_is_named_for_it(matrix_row):
    found = matrix_row.plain.found(detector=Detector.BETA_ZERO_READ, defect=Defect.READS_C_AT_BETA_ZERO)
    assert found, f"{matrix_row.instance.id}: no read of C seen on {matrix_row.problems}"
    assert beta_zero.FIX in found[0].summary
    diagnosis = matrix_row.plain.diagnosis
    assert diagnosis.defect == Defect.READS_C_AT_BETA_ZERO, diagnosis.explanation


@reference
def test_references_never_read_c_at_beta_zero(finished_row):
    assert not finished_row.plain.found(detector=Detector.BETA_ZERO_READ), finished_row.plain.diagnosis.explanation


@pytest.mark.instances.with_args(lambda i: i.spec.name == "broken_returns_early_at_k0")
def test_a_kernel_that_returns_early_at_K0_leaves_C_unwritten(matrix_row):
    assert any(p.startswith(K_ZERO) for p in matrix_row.problems), matrix_row.problems
    found = matrix_row.plain.found(detector=Detector.POISON, defect=Defect.UNWRITTEN_OUTPUT)
    assert found and matrix_row.plain.diagnosis.defect == Defect.UNWRITTEN_OUTPUT, \
        matrix_row.plain.diagnosis.explanation


@reference
def test_references_write_every_element_at_K0_where_they_claim_it(finished_row):
    instance = finished_row.instance
    t = instance.tile
    if not (instance.supports(2 * t + 1, t + 1, 0) or instance.supports(2 * t, 2 * t, 0)):
        pytest.skip(f"{instance.id} claims no K = 0 shape ({instance.spec.describe_shapes()})")
    assert any(p.startswith(K_ZERO) for p in finished_row.problems), finished_row.problems
    assert finished_row.plain.diagnosis.defect is None, finished_row.plain.diagnosis.explanation
