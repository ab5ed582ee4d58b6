"""Bounds: an out-of-bounds read makes the output depend on what lies outside the operands
(NaN with NaN guards, finite with zero guards), an out-of-bounds write changes a guard,
a floor-division grid leaves poison in C; memcheck on exact-size allocations (on the GPU)
and AddressSanitizer (on the CPU simulator) see the accesses themselves. References touch
nothing outside their buffers."""

import pytest

from gemmcheck.contract.launch import SCRATCH_ROLES
from gemmcheck.verdict.detectors import Detector
from gemmcheck.judge.kill_matrix import declares
from gemmcheck.verdict import Defect

reference = pytest.mark.instances(lambda i: i.spec.is_reference)


@pytest.mark.instances.with_args(declares("out_of_bounds_read"))
def test_a_declared_out_of_bounds_read_makes_the_output_depend_on_the_guards(matrix_row):
    assert matrix_row.plain.found(detector=Detector.GUARD_SWAP, defect=Defect.OUT_OF_BOUNDS_READ), (
        matrix_row.plain.diagnosis.explanation)


@pytest.mark.instances.with_args(declares("out_of_bounds_read"))
@pytest.mark.gpu
@pytest.mark.sanitizer
def test_memcheck_sees_the_declared_out_of_bounds_read(matrix_row, sanitizer_exe):
    assert matrix_row.sanitizer.found(detector=Detector.MEMCHECK, defect=Defect.OUT_OF_BOUNDS_READ), (
        matrix_row.sanitizer.to_json())


@pytest.mark.instances.with_args(declares("out_of_bounds_write"))
def test_a_declared_out_of_bounds_write_changes_the_guard_bands(matrix_row):
    assert matrix_row.plain.found(detector=Detector.GUARD_BANDS, defect=Defect.OUT_OF_BOUNDS_WRITE), (
        matrix_row.plain.diagnosis.explanation)


@pytest.mark.instances.with_args(declares("out_of_bounds_write"))
@pytest.mark.gpu
@pytest.mark.sanitizer
def test_memcheck_sees_the_declared_out_of_bounds_write(matrix_row, sanitizer_exe):
    found = matrix_row.sanitizer.found(detector=Detector.MEMCHECK, defect=Defect.OUT_OF_BOUNDS_WRITE)
    skip_where_unseen(matrix_row, matrix_row.sanitizer, Detector.MEMCHECK, found)
    assert found, matrix_row.sanitizer.to_json()


def skip_where_unseen(row, column, tool: Detector, found) -> None:
    """Skip, saying why, where a tool on exact-size allocations cannot show a write the guard
    bands did show: a batch's (or masked groups') products lie back to back there, so a
    product written into its neighbour's place (or a masked row) stays inside the allocation; and
    the tool stops at its first report, a read past an operand before the write."""
    if found or not row.plain.found(detector=Detector.GUARD_BANDS, defect=Defect.OUT_OF_BOUNDS_WRITE):
        return
    if row.instance.batched or row.instance.grouped == "masked":
        pytest.skip(f"a batch's (or masked groups') exact-size buffers hold its products back to back: "
                    f"a write into a neighbour's place (or a masked row) stays inside the allocation, where "
                    f"{tool} sees nothing (the guard bands between products showed it)")
    read_first = column.found(detector=tool, defect=Defect.OUT_OF_BOUNDS_READ)
    if read_first:
        pytest.skip(f"{tool} stops at its first report, a read past an operand before the write "
                    f"({read_first[0].summary}); the guard bands showed the write")


@pytest.mark.instances.with_args(declares("unwritten_output"))
def test_a_declared_unwritten_output_leaves_the_poison_in_c(matrix_row):
    assert matrix_row.plain.found(detector=Detector.POISON, defect=Defect.UNWRITTEN_OUTPUT), (
        matrix_row.plain.diagnosis.explanation)


@reference
def test_references_read_and_write_only_their_own_buffers(finished_row):
    for defect in (Defect.OUT_OF_BOUNDS_READ, Defect.OUT_OF_BOUNDS_WRITE, Defect.INPUT_MUTATION,
                   Defect.UNWRITTEN_OUTPUT):
        assert not finished_row.plain.found(defect=defect), finished_row.plain.diagnosis.explanation


@reference
@pytest.mark.gpu
@pytest.mark.sanitizer
def test_memcheck_and_initcheck_are_silent_on_references(finished_row, sanitizer_exe):
    for tool in (Detector.MEMCHECK, Detector.INITCHECK):
        assert not finished_row.sanitizer.found(detector=tool), finished_row.sanitizer.diagnosis.explanation


@pytest.mark.instances.with_args(declares("out_of_bounds_read"))
@pytest.mark.simulator
def test_addresssanitizer_sees_the_declared_out_of_bounds_read_of_an_operand(matrix_row):
    found = matrix_row.plain.found(detector=Detector.ASAN, defect=Defect.OUT_OF_BOUNDS_READ)
    assert found, matrix_row.plain.diagnosis.explanation
    assert found[0].details["buffer"] in ("A", "B"), found[0].summary


@pytest.mark.instances.with_args(declares("out_of_bounds_write"))
@pytest.mark.simulator
def test_addresssanitizer_sees_the_declared_out_of_bounds_write_past_a_buffer_the_kernel_writes(matrix_row):
    found = matrix_row.plain.found(detector=Detector.ASAN, defect=Defect.OUT_OF_BOUNDS_WRITE)
    skip_where_unseen(matrix_row, matrix_row.plain, Detector.ASAN, found)
    assert found, matrix_row.plain.diagnosis.explanation
    # its output (C, or D), or scratch memory it stores partial sums in
    assert found[0].details["buffer"] in ("C", "D", *SCRATCH_ROLES), found[0].summary


@reference
@pytest.mark.simulator
def test_addresssanitizer_is_silent_on_references(finished_row):
    assert not finished_row.plain.found(detector=Detector.ASAN), finished_row.plain.diagnosis.explanation
    assert not finished_row.plain.found(detector=Detector.SHARED_INIT), finished_row.plain.diagnosis.explanation
