"""The kill matrix: every reference is clean, every broken kernel is caught with the defect
it declares (gemmcheck.judge.kill_matrix says what each column can establish, on the GPU and on
the CPU simulator). The matrix is printed at the end of the run and written to
reports/kill_matrix.json."""

import pytest

from gemmcheck import report


def test_kill_matrix(matrix_row, verdicts, request):
    status, why = matrix_row.outcome()
    verdict = matrix_row.verdict(request.node.nodeid)
    if verdict is not None:
        verdicts.record(verdict)
    if status != "not-checked":
        report.attach_json("kill matrix row", matrix_row.to_json())
    if status in ("not-checked", "needs-tool"):   # nothing launched, or nothing here can show it
        pytest.skip(f"{matrix_row.instance.id}: {why}" if status == "not-checked" else why)
    if status != "pass":
        pytest.fail(f"{matrix_row.instance.id} ({matrix_row.instance.name_expression}): {why}",
                    pytrace=False)
