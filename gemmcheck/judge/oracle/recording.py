"""assert_judgement: record a Judgement in the run's verdicts, attach its evidence to the
report, and fail the test with its message."""

from __future__ import annotations

from gemmcheck import report
from gemmcheck.judge.oracle.judgement import Judgement, current_test
from gemmcheck.verdict import Finding, Verdict


def assert_judgement(judgement: Judgement, verdicts=None, explained: Finding | None = None) -> None:
    """Record the judgement (if a VerdictLog is given), attach evidence, fail with its message.
    `explained`: the root cause another check established that accounts for this judgement's
    findings (gemmcheck.judge.beta_zero.explanation): recorded instead of them, and the first
    line of the failure, the judgement's own story after it."""
    __tracebackhide__ = True
    if verdicts is not None:
        verdicts.record(Verdict.for_instance(judgement.instance, judgement.problem,
                                             [explained] if explained else judgement.findings,
                                             current_test()))
    if judgement.ok:
        return
    if judgement.run is not None:
        report.attach_judgement(judgement, judgement.run)
    report.attach_text("worst elements (oracle)", judgement.worst_table())
    import pytest
    message = judgement.message()
    if explained is not None:
        message = f"{explained.defect.value}: {explained.summary}\n\n{message}"
    pytest.fail(message, pytrace=False)
