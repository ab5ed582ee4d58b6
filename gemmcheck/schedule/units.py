"""Units of work: the tests that share a costly per-process fixture (a kill-matrix row, built
once by the first of its tests in a process) run in one process, i.e. one --gemm-shard part
and one pytest-xdist worker. Plugins name a test's unit through pytest_gemm_work_unit.

Under pytest-xdist the units of several tests are also dealt ahead (`planned`): the
controller's scheduler gives each worker its own units (after the tests anyone may run:
`choose`), and the worker, which computes the same plan from the same collection, starts
its rows' compute-sanitizer runs at once, as a serial session starts every row's. Dealt as they came, a worker learnt of a
row only when it built it and then waited for its tools: on an H200 pair the hazards
tests' summed time rose from 29 s to 52 s under -n 2. A worker left without rows of its
own takes another's before its deferred units, so nothing waits for a worker that is
behind; the tools started ahead for that row elsewhere give it their results
(gemmcheck.judge.once).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

import pytest

from gemmcheck.schedule import gpus, shard


def work_unit(config: pytest.Config, nodeid: str) -> str:
    """The unit of work of a test (pytest_gemm_work_unit; the test alone when no plugin
    groups it)."""
    return config.hook.pytest_gemm_work_unit(config=config, nodeid=nodeid) or nodeid


def recorded_durations(config: pytest.Config) -> dict[str, float] | None:
    """The durations --gemm-shard-durations names, or None (every test counts the same)."""
    path = config.getoption("gemm_shard_durations", None)
    if not path:
        return None
    try:
        return shard.load_durations(path)
    except ValueError as exc:
        raise pytest.UsageError(f"--gemm-shard-durations: {exc}") from None


def plan(nodeids: list[str], workers: int, unit_of, durations: dict[str, float] | None = None,
         timing: frozenset[int] = frozenset()) -> dict[str, int]:
    """unit -> worker index (0-based) for every unit of more than one test: the largest
    (by `durations`, else by test count) first to the least-loaded worker. With `timing`
    workers (gpus.timing_workers: those on the run's first GPU) the deferred units go to them
    and the other units to the rest (`timers`). Depends only on the node ids, the units, the
    durations and `timing`, so every process computes the same plan."""
    unit = {n: unit_of(n) for n in nodeids}
    grouped = [n for n in nodeids if unit[n] != n]
    timed = [n for n in grouped if unit[n].startswith(DEFERRED)]
    if not timers(workers, timing, (unit[n] for n in grouped)):
        return _deal(grouped, list(range(workers)), durations, unit.__getitem__)
    rest = [n for n in grouped if not unit[n].startswith(DEFERRED)]
    return {**_deal(timed, sorted(timing), durations, unit.__getitem__),
            **_deal(rest, [w for w in range(workers) if w not in timing], durations, unit.__getitem__)}


def _deal(nodeids: list[str], workers: list[int], durations, unit_of) -> dict[str, int]:
    where = shard.assign(nodeids, max(1, len(workers)), durations, unit_of)
    return {unit_of(n): workers[index - 1] for n, index in where.items()}


def timers(workers: int, timing: frozenset[int], planned_units: Iterable[str]) -> frozenset[int]:
    """The workers that time while the others run the rest: `timing` when the run has several
    GPUs (gpus.timing_workers), some workers besides them and performance units (deferred) to
    plan; else none. On an H200 pair the nightly's device timing waited for the last
    compute-sanitizer children on both cards and then closed the run alone, ~90 s of 260 (2026-12-01):
    the children cost the host, not the GPU, so a second GPU hardly sped them up. With a
    timing GPU, its workers time from the start while the other GPU takes the children."""
    if not timing or len(timing) >= workers or not any(u.startswith(DEFERRED) for u in planned_units):
        return frozenset()
    return timing


def planned(config: pytest.Config, nodeids: list[str], workers: int,
            durations: dict[str, float] | None = None) -> dict[str, int]:
    """plan() of this session's units, recorded durations (read here unless given) and timing
    workers."""
    return plan(nodeids, workers, lambda nodeid: work_unit(config, nodeid),
                recorded_durations(config) if durations is None else durations, timing_of(config, workers))


def timing_of(config: pytest.Config, workers: int) -> frozenset[int]:
    """gpus.timing_workers of this run's GPUs."""
    return gpus.timing_workers(gpus.gpu_count_of_run(config), workers)


# A unit whose name starts with this runs after its worker's other units (deferred): the
# performance suite's, which wait for every child the worker started (compute-sanitizer runs
# use the GPU) before timing anything. Dealt first as large units, they waited 17 and 27 s on
# an H200 pair's nightly half while the workers' other units could have run.
DEFERRED = "after-the-rest:"


def deferred(unit: str) -> str:
    """`unit`, named so that a worker runs it after its other units."""
    return DEFERRED + unit


def choose(queued: Iterable[str], plan: dict[str, int], worker: int,
           timing: frozenset[int] = frozenset()) -> str | None:
    """The unit `worker` takes next from `queued` (xdist's work queue, largest first): a unit
    no plan names (anyone's), then its own planned units, then another worker's (not deferred),
    its own deferred ones last; None when it has none of those left (it then takes the queue's
    next). Its rows come after the tests anyone may run, as in a serial session (the compile
    and correctness suites before the hazards suite): their compute-sanitizer children,
    started at the worker's first kernel test, then run beside that work. Taken first, the
    rows waited for children just started: on one H200 with -n 8 the ci profile's row tests
    spent 181 s in setup, 22-27 s each. Another's row costs no child of its own (the row's
    children are the run's, gemmcheck.judge.once), and its deferred units could not time
    while that row's tests still run: a worker that waited for its turn instead left the
    one-GPU nightly's last rows to two or three workers for ~130 s on an H200.
    A timing worker (`timing`, as `timers` gives it for the plan) starts no children: it
    takes the deferred units first, its own then the other timing workers', and only then
    the rest in the order above."""
    timer = worker in timing
    anyones = own = own_deferred = others = others_deferred = None
    for unit in queued:   # one pass (the controller asks once a unit)
        if unit not in plan:
            if not timer:
                return unit
            anyones = anyones or unit
        elif unit.startswith(DEFERRED):
            if plan[unit] != worker:
                others_deferred = others_deferred or unit
            elif timer:
                return unit
            else:
                own_deferred = own_deferred or unit
        elif plan[unit] == worker:
            own = own or unit
        else:
            others = others or unit
    if timer:
        return others_deferred or anyones or own or others
    return own or others or own_deferred


def deferred_first(queue: "OrderedDict[str, dict]", weight: dict[str, float]) -> "OrderedDict[str, dict]":
    """xdist's work queue with the deferred units first, the longest (by recorded durations)
    first, the others as they were (largest first by test count). A worker that takes
    deferred units then takes the longest first, and what is left at the end is short: on one
    H200 the nightly's longest unit (float64 at N = 8192, 46 s of sampling) was eighth in
    xdist's order, the float32 units first for their test counts."""
    late = sorted((u for u in queue if u.startswith(DEFERRED)), key=lambda u: (-weight.get(u, 0.0), u))
    return OrderedDict([(u, queue[u]) for u in late] + [(u, w) for u, w in queue.items()
                                                         if not u.startswith(DEFERRED)])


def worker_index(workerid: str) -> int:
    """pytest-xdist's worker id ("gw3") -> 3."""
    return int(workerid.removeprefix("gw"))


def make_scheduler(config: pytest.Config, log):
    """xdist's loadscope over units: each unit as one, the largest first, in the order
    `choose` gives (anyone's, then a worker's planned ones, its deferred ones last)."""
    from xdist.scheduler import LoadScopeScheduling

    class UnitScheduling(LoadScopeScheduling):
        _plan: dict[str, int] | None = None
        _timers: frozenset[int] = frozenset()

        def _split_scope(self, nodeid: str) -> str:
            return work_unit(config, nodeid)

        def _reschedule(self, node) -> None:
            # A worker that replaces one that ended (lost_context_plugin) is in self.nodes before its
            # collection is in: xdist's schedule() then reached it (KeyError in
            # _assign_work_unit). It gets work once its collection is registered.
            if node not in self.registered_collections:
                return
            super()._reschedule(node)

        def remove_node(self, node):
            # xdist's loadscope puts every unit the worker ever had back in the queue, finished
            # ones too (each then sent to another worker as an empty list, never completed):
            # only the unfinished units go back, with their finished tests marked so.
            work = self.assigned_work.get(node)
            if work:
                self.assigned_work[node] = {scope: unit for scope, unit in work.items()
                                            if not all(unit.values())}
            return super().remove_node(node)

        def _assign_work_unit(self, node) -> None:
            if self._plan is None:
                nodeids, durations = list(self.collection), recorded_durations(config)
                self._plan = planned(config, nodeids, len(self.nodes), durations)
                self._timers = timers(len(self.nodes), timing_of(config, len(self.nodes)), self._plan)
                self.workqueue = deferred_first(self.workqueue,
                                                shard.unit_weights(nodeids, durations, self._split_scope))
            pick = choose(self.workqueue, self._plan, worker_index(node.gateway.id), self._timers)
            if pick is not None:               # else take the next unit, another worker's
                self.workqueue.move_to_end(pick, last=False)
            try:
                super()._assign_work_unit(node)
            except OSError as exc:
                # The worker ended (its CUDA context lost: worker_exit.leave) between its last
                # report and this send; xdist learns it is down from the next event. The unit
                # stays in its assigned work, and remove_node gives it back then, as xdist's own
                # shutdown() ignores the same error. Raised, it ended the run (INTERNALERROR).
                self.log("not sent to", node.gateway.id, "(it ended):", exc)

    return UnitScheduling(config, log)
