"""The isolated probe: every instantiation a session will launch in its own process is first
launched in one isolated child (gemmcheck.judge.isolation) on small problems it claims; the ones
that crashed or hung there are Lost before any launch here. Started on a thread of its own
(start), stopped when the session ends before it is needed (stop_probe)."""

from __future__ import annotations

import hashlib
import threading
from concurrent.futures import Future

import pytest

from gemmcheck.containment import tools
from gemmcheck.containment.lost import Containment, Lost
from gemmcheck.contract.catalog import Instance
from gemmcheck.schedule import shared_work

PROBE_SEED = 11


def probe_steps(instances) -> list:
    """One small ragged and one tile-aligned problem per instantiation, where it claims them."""
    from gemmcheck.judge import isolation
    from gemmcheck.problems.problem import Problem

    steps = []
    for inst in instances:
        t = inst.tile
        for M, N, K in ((t + 3, t + 1, t + 5), (2 * t, 2 * t, 2 * t)):
            if inst.supports(M, N, K):
                steps.append(isolation.Step.of(len(steps), inst, Problem(M, N, K, inst.types, "exact", PROBE_SEED),
                                               purpose="probe", repeats=1, control=False))
    return steps


def probe_instances(instances, backend_name: str, timeout: float,
                    stop: threading.Event | None = None) -> dict[str, Lost]:
    """Launch each instantiation on its probe problems in one isolated child (a fresh one
    only after a crash or hang); the ones that crashed or hung, by Instance.id.
    Raises isolation.IsolationError (a tools.ToolFailure) when the child itself cannot run,
    twice."""
    from gemmcheck.judge import isolation

    by_key = {isolation.instance_key(i): i for i in instances}
    steps = probe_steps(by_key.values())
    if not steps:
        return {}
    # An instantiation that does not build is UNBUILT there: its build test reports it.
    # The child's backend stops a hung launch itself (HUNG); the parent's clock is the backstop.
    # A child that could not run (not ready in time, killed before it was) is tried once more;
    # a second failure is raised (tools.ToolFailure): every test that launches here errors.
    outcomes, _ = tools.retry_once(lambda: isolation.run_steps(
        steps, backend=backend_name, step_timeout=timeout + 5.0, hang_timeout_s=timeout, stop=stop), stop=stop)
    lost: dict[str, Lost] = {}
    for out in sorted(outcomes.values(), key=lambda o: o.step.id):
        if out.status in ("crash", "failed", "hang"):
            step, inst_id = out.step, by_key[out.step.instance_key].id
            lost.setdefault(inst_id, Lost(
                "hang" if out.status == "hang" else "crash",
                f"in the isolated probe on M{step.M}xN{step.N}xK{step.K}: "
                + out.message.removeprefix(f"{inst_id}: ")))
    return lost


def start(config: pytest.Config, state: Containment, seen: dict[str, Instance], backend_name: str,
          timeout: float) -> None:
    """Start probing the instantiations in `seen`, on a thread of its own; its findings arrive
    in state.probe (a Future)."""
    state.probe = Future()
    shared = shared_work.once(config)
    # pytest-xdist workers collect the same tests: one of them probes for all (8 probe
    # children at the start of ci's -n 8, when the host starts children slowest).
    key = "probe " + hashlib.sha256(repr((sorted(seen), backend_name, timeout)).encode()).hexdigest()

    def probe():
        return probe_instances(seen.values(), backend_name, timeout, stop=state.probe_stop)

    def run() -> None:
        try:
            state.probe.set_result(probe() if shared is None else shared.do(key, probe, stop=state.probe_stop))
        except BaseException as exc:   # handed to whoever waits for it
            state.probe.set_exception(exc)
    threading.Thread(target=run, name="gemmcheck-probe", daemon=True).start()


def stop_probe(state: Containment) -> None:
    """A session that ends before any launch here (its launching tests deselected by -x,
    skipped, interrupted) does not wait for the probe: its child is killed, no other starts."""
    from gemmcheck.judge import isolation

    if state.probe is None or state.probe.done():
        return
    state.probe_stop.set()
    isolation.stop_running_children()
    state.probe.exception()   # until its thread has let go of the child
