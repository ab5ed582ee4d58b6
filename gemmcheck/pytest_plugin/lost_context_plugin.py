"""A pytest-xdist worker whose CUDA context is lost ends, and xdist's own worker replacement
runs what it had not run.

A kernel that faults (a sticky CUDA error) or hangs in a worker leaves that process unable to
launch anything again. The test that met it has failed with the instantiation's `crash` /
`hang` verdict (build_plugin); the worker then ends at its next test, before running it:
it writes its parts of the run's files as at a normal end (verdicts, kill-matrix rows,
timings), says so in the run's shared folder (shared_work.leaving), and leaves with
os._exit (gemmcheck.schedule.worker_exit.leave, which build_plugin calls). pytest-xdist
sees a crashed worker, starts a fresh one (`--max-worker-restart`,
by default 4 per worker) and hands its unfinished tests back to the queue (its scheduler's
remove_node: LoadScopeScheduling re-queues the whole unfinished unit, the test it names
"crashed" included). The controller (pytest_handlecrashitem below) turns xdist's "worker
crashed while running <test>" report for that test into a re-queue: it never ran, and it
runs in another worker, so it counts once, there.

Why this and not a launcher child per worker sharing the buffers through CUDA IPC: it is
xdist's mechanism, it costs nothing per launch (a fresh worker's start, ~2-5 s, once per
fault), and every launch keeps running in the process that judges it (no second copy of the
launch path to keep true). Serially the same loss is handled by rerun.py (the rest of the
session in one fresh child pytest, its reports replayed here).
"""

from __future__ import annotations

import pytest

from gemmcheck.schedule import shared_work

REQUEUED = "gemm_requeued"   # an attribute of xdist's crash report that was a re-queue


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """Every worker gets the run's shared folder (on every backend): where instantiations lost
    anywhere in the run, and workers that ended on purpose, are recorded."""
    node.workerinput.update(shared_work.worker_input(node.config))


@pytest.hookimpl(optionalhook=True)
def pytest_handlecrashitem(crashitem: str, report, sched) -> None:
    """xdist's report for the test a crashed worker had next: when the worker left on purpose
    (leave), that test never started; it is queued again (LoadScopeScheduling, and so the
    units scheduler, has done so already) and this report counts nowhere."""
    from xdist.scheduler import LoadScopeScheduling

    node = getattr(report, "node", None)
    workerid = getattr(getattr(node, "gateway", None), "id", None)
    lost_in = shared_work.left(node.config, workerid) if workerid else None
    if lost_in is None:
        return   # a real crash: xdist's failure stands
    if not isinstance(sched, LoadScopeScheduling):
        sched.mark_test_pending(crashitem)
    report.outcome = "rerun"
    report.longrepr = (f"not run in {workerid}: that worker ended after the CUDA context was lost in "
                       f"{lost_in}; queued again for a fresh worker")
    setattr(report, REQUEUED, True)


def pytest_report_teststatus(report, config):
    if getattr(report, REQUEUED, False):
        return "", "", ""
    return None
