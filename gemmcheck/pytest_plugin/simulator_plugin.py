"""The CPU simulator beside the GPU (tests marked ``with_simulator``), built ahead.

A GPU session that compares the GPU with the simulator builds the simulator's modules of
the instantiations those tests name (g++, one build per unit) on a thread from the end of
collection, so they build while the compile suite runs: built in the comparison's first
test, every pytest-xdist worker of ci on an H200 waited 6.2 s there at once (one built, the
others waited on the build lock). The `cpu_simulator` fixture takes the result; a simulator
that cannot be made here skips those tests with its reason, as before.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future

import pytest

from gemmcheck import backends
from gemmcheck.backends import device
from gemmcheck.pytest_plugin.session import gemm_config, instances_of

AHEAD = pytest.StashKey[Future]()


def compared_instances(items) -> list:
    """The instantiations the session's GPU-against-simulator tests that will run name."""
    named = {}
    for item in items:
        if item.get_closest_marker("with_simulator") and not item.get_closest_marker("skip"):
            named.update((i.id, i) for i in instances_of(item))
    return list(named.values())


def _made(instances) -> backends.Backend:
    simulator = backends.create("cpu-sim")
    simulator.prepare(instances)
    return simulator


def start(config: pytest.Config, instances) -> Future:
    """Make the simulator and build `instances` on a thread of its own (g++ runs in
    subprocesses, so the session's tests go on meanwhile); a daemon, as the probe's
    (containment.probe), so a session that ends first does not wait for its builds."""
    config.stash[AHEAD] = future = Future()

    def run() -> None:
        try:
            future.set_result(_made(instances))
        except BaseException as exc:   # handed to the fixture that waits for it
            future.set_exception(exc)
    threading.Thread(target=run, name="gemmcheck-cpu-sim-ahead", daemon=True).start()
    return future


def pytest_collection_finish(session: pytest.Session) -> None:
    config = session.config
    if config.option.collectonly or gemm_config(config).simulated or not device.cuda_device()[0]:
        return
    instances = compared_instances(session.items)
    if instances:
        start(config, instances)


@pytest.fixture(scope="session")
def cpu_simulator(request: pytest.FixtureRequest) -> backends.Backend:
    """The CPU simulator with the compared instantiations built (ahead where collection
    started it; here otherwise); skips when it cannot be made here."""
    future = request.config.stash.get(AHEAD, None)
    if future is None:
        future = start(request.config, compared_instances(request.session.items))
    try:
        return future.result()
    except backends.BackendUnavailable as exc:
        pytest.skip(f"needs the CPU simulator too: {exc}")
