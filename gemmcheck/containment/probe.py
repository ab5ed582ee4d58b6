"""The isolated probe: every instantiation a session will launch in its own process is first
launched in one isolated child (gemmcheck.judge.isolation) on small problems it claims; the ones
that crashed or hung there are Lost before any launch here. Started on a thread of its own
(start), stopped when the session ends before it is needed (stop_probe).

The sized probe does the same for the large square problems a session launches here (the
performance suite's N x N x N): one plain launch per instantiation and size, smallest first, in
a second child beside the first (start_sized); a row (instantiation, N) that crashed or hung
there, and every larger N of it, is Lost before the first timing here (sized_findings)."""

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


def sized_probe_steps(launches) -> list:
    """One plain launch per (instantiation, N) of `launches` ({Instance: sizes}, or {Instance:
    {size: products}} for launches of several products: a strided batch or groups, as the
    performance suite times them, perf.inputs.timed_products), at N x N x N where it claims it:
    every instantiation's sizes smallest first (a crash or hang leaves its larger ones not
    run), grouped by dtype and size (their operands are made once)."""
    from gemmcheck.judge import isolation
    from gemmcheck.perf.inputs import kernel_M, timed_products
    from gemmcheck.problems.problem import Problem

    def problem(inst, n: int, products: int):
        held = timed_products(inst, n, products) if products > 1 else {}
        return Problem(kernel_M(n, **held), n, n, inst.types, "uniform", PROBE_SEED, **held)

    todo = sorted(((n, inst.dtype, inst.id, inst, sizes.get(n, 1) if isinstance(sizes, dict) else 1)
                   for inst, sizes in launches.items() for n in set(sizes) if inst.supports(n, n, n)),
                  key=lambda t: t[:3])
    return [isolation.Step.of(i, inst, problem(inst, n, products), purpose="sized probe", repeats=1,
                              control=False, plain=True)
            for i, (n, _, _, inst, products) in enumerate(todo)]


def probe_sizes(launches, backend_name: str, timeout: float,
                stop: threading.Event | None = None) -> dict[tuple[str, int], Lost]:
    """Launch each (instantiation, N) of `launches` ({Instance: sizes}) once in an isolated
    child (a fresh one only after a crash or hang); {(Instance.id, N): Lost} for the first N
    that crashed or hung and every larger N of that instantiation (not launched: the first
    says why). Raises isolation.IsolationError (a tools.ToolFailure) when the child itself
    cannot run, twice."""
    from gemmcheck.judge import isolation
    from gemmcheck.problems.harness import problem_label

    by_key = {isolation.instance_key(i): i for i in launches}
    steps = sized_probe_steps(launches)
    if not steps:
        return {}
    outcomes = _run_isolated(steps, backend_name, timeout, stop)
    first: dict[str, tuple[int, str, str]] = {}   # Instance.id -> (N, status, what happened)
    for out in sorted(outcomes.values(), key=lambda o: (o.step.M, o.step.id)):
        inst_id = by_key[out.step.instance_key].id
        if _lost_status(out) and inst_id not in first:
            first[inst_id] = (out.step.M, _lost_status(out), out.message.removeprefix(f"{inst_id}: "))
    lost: dict[tuple[str, int], Lost] = {}
    for inst, sizes in launches.items():
        if inst.id not in first:
            continue
        at, status, what = first[inst.id]
        problem = problem_label(at, at, at)
        for n in sorted(set(sizes)):
            if n == at:
                lost[(inst.id, n)] = Lost(status, f"in the isolated probe on {problem}: {what}", problem=problem)
            elif n > at:
                lost[(inst.id, n)] = Lost(status, f"not launched at N={n}: at N={at}, in the isolated probe on "
                                                  f"{problem}: {what}", problem=problem)
    return lost


def _run_isolated(steps, backend_name: str, timeout: float, stop) -> dict:
    """The steps' outcomes from an isolated child (a fresh one only after a crash or hang). The
    child's backend stops a hung launch itself (HUNG); the parent's clock is the backstop. A
    child that could not run (not ready in time, killed before it was) is tried once more; a
    second failure is raised (tools.ToolFailure): every test that launches here errors."""
    from gemmcheck.judge import isolation

    outcomes, _ = tools.retry_once(lambda: isolation.run_steps(
        steps, backend=backend_name, step_timeout=timeout + 5.0, hang_timeout_s=timeout, stop=stop), stop=stop)
    return outcomes


def _lost_status(outcome) -> str | None:
    """"crash" or "hang" for an outcome that lost its instantiation, else None."""
    return {"crash": "crash", "failed": "crash", "hang": "hang"}.get(outcome.status)


def probe_instances(instances, backend_name: str, timeout: float,
                    stop: threading.Event | None = None) -> dict[str, Lost]:
    """Launch each instantiation on its probe problems in one isolated child (a fresh one
    only after a crash or hang); the ones that crashed or hung, by Instance.id.
    Raises isolation.IsolationError (a tools.ToolFailure) when the child itself cannot run,
    twice."""
    from gemmcheck.judge import isolation
    from gemmcheck.problems.harness import problem_label

    by_key = {isolation.instance_key(i): i for i in instances}
    steps = probe_steps(by_key.values())
    if not steps:
        return {}
    # An instantiation that does not build is UNBUILT there: its build test reports it.
    outcomes = _run_isolated(steps, backend_name, timeout, stop)
    lost: dict[str, Lost] = {}
    for out in sorted(outcomes.values(), key=lambda o: o.step.id):
        if _lost_status(out):
            step, inst_id = out.step, by_key[out.step.instance_key].id
            problem = problem_label(step.M, step.N, step.K)
            lost.setdefault(inst_id, Lost(
                _lost_status(out),
                f"in the isolated probe on {problem}: " + out.message.removeprefix(f"{inst_id}: "),
                problem=problem))
    return lost


def start(config: pytest.Config, state: Containment, seen: dict[str, Instance], backend_name: str,
          timeout: float) -> None:
    """Start probing the instantiations in `seen`, on a thread of its own; its findings arrive
    in state.probe (a Future)."""
    state.probe = _ahead(config, state, ("probe", sorted(seen), backend_name, timeout),
                         lambda: probe_instances(seen.values(), backend_name, timeout, stop=state.probe_stop))


def start_sized(config: pytest.Config, state: Containment, launches: dict, backend_name: str,
                timeout: float) -> None:
    """Start the sized probe of `launches` ({Instance: sizes}), in a child beside the first
    probe's; its findings arrive in state.sized_probe (a Future, sized_findings)."""
    key = ("sized probe", sorted((i.id, sorted(set(n))) for i, n in launches.items()), backend_name, timeout)
    state.sized_probe = _ahead(config, state, key,
                               lambda: probe_sizes(launches, backend_name, timeout, stop=state.probe_stop))


def _ahead(config: pytest.Config, state: Containment, key, work) -> Future:
    """work() on a thread of its own, once per run (pytest-xdist workers collect the same tests:
    one of them probes for all; 8 probe children at the start of ci's -n 8, when the host starts
    children slowest); its result or exception in the Future returned."""
    future = Future()
    shared = shared_work.once(config)
    name = f"{key[0]} " + hashlib.sha256(repr(key).encode()).hexdigest()

    def run() -> None:
        try:
            future.set_result(work() if shared is None else shared.do(name, work, stop=state.probe_stop))
        except BaseException as exc:   # handed to whoever waits for it
            future.set_exception(exc)
    threading.Thread(target=run, name=f"gemmcheck-{key[0].replace(' ', '-')}", daemon=True).start()
    return future


def sized_findings(state: Containment) -> dict[tuple[str, int], Lost]:
    """{(Instance.id, N): Lost} of the sized probe, once it is done (waited for: call it before
    the first timing here); {} without one. A probe whose child could not run twice raises
    (isolation.IsolationError, a ToolFailure): the test that asked errors."""
    if state.sized_probe is None:
        return {}
    return state.sized_probe.result()


def stop_probe(state: Containment) -> None:
    """A session that ends before any launch here (its launching tests deselected by -x,
    skipped, interrupted) does not wait for the probe: its child is killed (and the sized
    probe's), no other starts. Once launches here began (the small probe was waited for), the
    process may run other children (the kill matrix's, which other workers may wait for): a
    sized probe still running is waited for, never killed with them."""
    from gemmcheck.judge import isolation

    if state.probe is not None and not state.probe.done():
        state.probe_stop.set()
        isolation.stop_running_children()
        state.probe.exception()   # until its thread has let go of the child
    if state.sized_probe is not None:
        state.sized_probe.exception()
