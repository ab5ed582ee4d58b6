"""The kill matrix: every reference is clean, every broken kernel is caught with the defect
it declares (gemmcheck.judge.kill_matrix says what each column can establish, on the GPU and on
the CPU simulator). The matrix is printed at the end of the run and written to
reports/kill_matrix.json."""

import pytest

from gemmcheck import report
from gemmcheck.verdict import Verdict


def test_kill_matrix(matrix_row, verdicts, request):
    status, why = matrix_row.outcome()
    if status == "not-checked":   # nothing launched: no verdict either way
        pytest.skip(f"{matrix_row.instance.id}: {why}")
    column = matrix_row.sanitizer if matrix_row.sanitizer.ran else matrix_row.plain
    verdicts.record(Verdict.for_instance(
        matrix_row.instance, "kill matrix: " + "; ".join(matrix_row.problems), column.findings,
        request.node.nodeid))
    report.attach_json("kill matrix row", matrix_row.to_json())
    if status == "needs-tool":
        pytest.skip(why)
    if status != "pass":
        pytest.fail(f"{matrix_row.instance.id} ({matrix_row.instance.name_expression}): {why}",
                    pytrace=False)
