"""A pytest-xdist worker that can no longer launch ends on purpose, its parts of the run's files
written first (the hooks around it: gemmcheck.pytest_plugin.lost_context_plugin)."""

from __future__ import annotations

import os
import sys

import pytest

from gemmcheck.schedule import shared_work

LEFT_EXIT_STATUS = 3   # what a worker that left on purpose exits with (pytest's "internal error")


def leave(item: pytest.Item, lost_in: str) -> None:
    """End this worker before `item` runs: its parts of the run's files written, the run told."""
    config, session = item.config, item.session
    shared_work.leaving(config, lost_in)
    session.shouldstop = f"the CUDA context of this worker was lost in {lost_in}"
    interactor = [p for p in config.pluginmanager.get_plugins() if type(p).__name__ == "WorkerInteractor"]
    # Every plugin's end of session but xdist's own (it would tell the controller this worker
    # finished its queue): the verdicts, kill-matrix rows and timings parts are written.
    finish = config.pluginmanager.subset_hook_caller("pytest_sessionfinish", remove_plugins=interactor)
    try:
        finish(session=session, exitstatus=pytest.ExitCode.TESTS_FAILED)
    finally:
        capture = config.pluginmanager.get_plugin("capturemanager")
        if capture is not None:
            capture.stop_global_capturing()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(LEFT_EXIT_STATUS)
