"""Workers that share a GPU take turns for device timing (gemmcheck.schedule.gpu_turns):
a worker opens its GPU's lock, holds it shared for each test (a performance test's call
excepted: its device work takes turns; and the whole of a performance test once the
worker's timer is made), and the controller removes the run's lock folder at
the end. What a test waited for its turns goes with its report (runstats.WAITED_PROPERTY):
its recorded duration leaves it out."""

from __future__ import annotations

import pytest

from gemmcheck import watchdog
from gemmcheck.containment.tools import ToolFailure
from gemmcheck.schedule.gpu_turns import FOLDER, TURNS, WORKER_GPU_LOCK, GpuTurns, remove_folder, turns
from gemmcheck.schedule.runstats import WAITED_PROPERTY


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    path = getattr(config, "workerinput", {}).get(WORKER_GPU_LOCK)
    if path:
        config.stash[TURNS] = GpuTurns(path)


def pytest_unconfigure(config: pytest.Config) -> None:
    if TURNS in config.stash:
        config.stash[TURNS].close()
    if FOLDER in config.stash:
        remove_folder(config.stash[FOLDER])


NO_TURN = pytest.StashKey[ToolFailure]()   # an item's turn not had: its setup errors with it


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem):
    worker_turns = turns(item.config)
    if worker_turns is not None and not only_in_turns(item, worker_turns):
        try:
            with watchdog.reporting(f"the GPU's shared hold to run {item.nodeid}"):
                worker_turns.enter_test()
        except ToolFailure as exc:   # raised here it would end the session: the test errors
            item.stash[NO_TURN] = exc
    try:
        yield
    finally:
        if worker_turns is not None:
            worker_turns.leave_test()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    if NO_TURN in item.stash:
        raise item.stash[NO_TURN]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """A performance test's call holds the GPU only in its turns (call_off_the_gpu)."""
    worker_turns = turns(item.config)
    off = worker_turns is not None and call_off_the_gpu(item)
    if off:
        worker_turns.leave_test()
    try:
        yield
    finally:
        if off and not worker_turns.timer_made:   # (behind another worker's turn, maybe: a wait like the turns')
            worker_turns.wait_for(worker_turns.enter_test, f"the GPU's shared hold to finish {item.nodeid}")


def call_off_the_gpu(item: pytest.Item) -> bool:
    """Whether a test's call does all its device work through the performance session's
    timer (perf_session: gemmcheck.perf.gpu.GpuTimer, each method a turn), so it need not hold
    the GPU shared in between."""
    return item.get_closest_marker("perf") is not None and "perf_session" in getattr(item, "fixturenames", ())


def only_in_turns(item: pytest.Item, worker_turns: GpuTurns) -> bool:
    """Whether the whole test (setup, call, teardown) touches the GPU only in its turns: a
    performance test whose worker has made its timer (its session fixtures exist; the
    function-scoped ones touch no device)."""
    return worker_turns.timer_made and call_off_the_gpu(item)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    outcome = yield
    worker_turns = turns(item.config)
    if call.when == "teardown" and worker_turns is not None:
        waited = worker_turns.take_waited()
        if waited:
            outcome.get_result().user_properties.append((WAITED_PROPERTY, waited))
