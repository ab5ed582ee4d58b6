"""Failures of the suite's own tools, never a kernel's verdict.

A child that could not run its job (not ready in time, killed by a signal before it said
READY, compute-sanitizer that died), a wait of the suite's own that outlived its deadline (a
build lock, a GPU turn), a lock that could not be taken, a fresh pytest process of ours that
died before it ran its tests: none of these says anything about the kernel under test. Each is
raised as a ToolFailure naming the tool, what happened and what to do; `retry_once` gives the
tool one more try where that is sound; and one plugin (gemmcheck.pytest_plugin.
tool_failure_plugin) reports a test that met one as a pytest *error* (allure: broken), never
as the kernel's `fail`, never as passed, and records no verdict for it.

A kernel that hangs or crashes is not a ToolFailure: a launch that outlives
--gemm-hang-timeout is the kernel's `hang`, a fault its `crash` (gemmcheck.containment.lost).
"""

from __future__ import annotations

import threading

# The attribute of a pytest report that met a ToolFailure: its first line
# (gemmcheck.pytest_plugin.tool_failure_plugin sets it and calls such a report an error).
REPORT_ATTRIBUTE = "gemm_tool_failure"


class ToolFailure(RuntimeError):
    """One of the suite's own tools failed: no verdict on any kernel.

    `tool` names it, `what` says what happened, `todo` what the user can do. str() is
    "<tool>: <what>" then "what to do: <todo>" on a line of its own."""

    tool = "a tool of gemmcheck"
    todo = ("nothing is wrong with the kernel; run the test again, and if it fails the same "
            "way, report it with this message")

    def __init__(self, what: str, *, tool: str | None = None, todo: str | None = None) -> None:
        if tool is not None:
            self.tool = tool
        if todo is not None:
            self.todo = todo
        self.what = what
        super().__init__(what)

    def __str__(self) -> str:
        first, _, rest = self.what.partition("\n")
        return f"{self.tool}: {first}\nwhat to do: {self.todo}" + (f"\n{rest}" if rest else "")


def retry_once(work, *, stop: threading.Event | None = None):
    """work(), tried once more when it raises a ToolFailure (a child killed by the host, a
    lock wait that met a slow holder: worth one more try, and only one: a second failure
    says the tool or the host is broken). The second failure is raised, saying the first;
    none once `stop` is set (the session ends and killed the tool itself)."""
    try:
        return work()
    except ToolFailure as first:
        if stop is not None and stop.is_set():
            raise
        try:
            return work()
        except ToolFailure as second:
            line, newline, rest = second.what.partition("\n")   # said on its first line
            second.what = f"{line} (tried twice; the first time: {first.what.partition(chr(10))[0]}){newline}{rest}"
            raise second from None
