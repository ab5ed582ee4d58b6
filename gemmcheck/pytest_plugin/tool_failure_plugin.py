"""A test that met a failure of the suite's own tools (gemmcheck.containment.tools.ToolFailure)
is an *error* of the suite, never the kernel's failure.

pytest calls a test an error when its setup or teardown failed; a ToolFailure raised there
(a fixture: the backend's probe, a kill-matrix row's compute-sanitizer runs) is one already.
Raised in the test's call (a build lock or a GPU turn not had in time, a child that could
not run), its report is marked here and pytest's status for it is `error` (`E`, `ERROR`, and
"N errors" in the summary), on the terminal of the process that ran it and, the mark
travelling with the serialized report, of pytest-xdist's controller and of a session whose
re-run child ran it. allure-pytest calls any exception but an assertion "broken". No
verdict is recorded for it: the check it interrupted did not judge the kernel.
"""

from __future__ import annotations

import pytest

from gemmcheck.containment.tools import REPORT_ATTRIBUTE as TOOL_FAILURE, ToolFailure


def tool_failure_in(exc: BaseException | None) -> ToolFailure | None:
    """The ToolFailure `exc` is, was raised from, or holds (an exception group: hypothesis
    reports distinct failures of one search as one), or None."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, ToolFailure):
            return exc
        if isinstance(exc, BaseExceptionGroup):
            return next(filter(None, map(tool_failure_in, exc.exceptions)), None)
        exc = exc.__cause__ or exc.__context__
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is None or not report.failed:
        return
    failure = tool_failure_in(call.excinfo.value)
    if failure is not None:
        setattr(report, TOOL_FAILURE, str(failure).splitlines()[0])


@pytest.hookimpl(tryfirst=True)   # before pytest's own, which calls a failed call "failed"
def pytest_report_teststatus(report, config):
    if report.failed and getattr(report, TOOL_FAILURE, None):
        return "error", "E", ("ERROR", {"red": True})
    return None
