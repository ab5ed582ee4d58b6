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

from collections.abc import Iterable

import pytest

from gemmcheck.pytest_plugin import shard


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


def plan(nodeids: list[str], workers: int, unit_of, durations: dict[str, float] | None = None) -> dict[str, int]:
    """unit -> worker index (0-based) for every unit of more than one test: the largest
    (by `durations`, else by test count) first to the least-loaded worker. Depends only on
    the node ids, the units and the durations, so every process computes the same plan."""
    unit = {n: unit_of(n) for n in nodeids}
    grouped = [n for n in nodeids if unit[n] != n]
    where = shard.assign(grouped, max(1, workers), durations, unit.__getitem__)
    return {unit[n]: index - 1 for n, index in where.items()}


def planned(config: pytest.Config, nodeids: list[str], workers: int) -> dict[str, int]:
    """plan() of this session's units and recorded durations."""
    return plan(nodeids, workers, lambda nodeid: work_unit(config, nodeid), recorded_durations(config))


# A unit whose name starts with this runs after its worker's other units (deferred): the
# performance suite's, which wait for every child the worker started (compute-sanitizer runs
# use the GPU) before timing anything. Dealt first as large units, they waited 17 and 27 s on
# an H200 pair's nightly half while the workers' other units could have run.
DEFERRED = "after-the-rest:"


def deferred(unit: str) -> str:
    """`unit`, named so that a worker runs it after its other units."""
    return DEFERRED + unit


def choose(queued: Iterable[str], plan: dict[str, int], worker: int) -> str | None:
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
    one-GPU nightly's last rows to two or three workers for ~130 s on an H200."""
    own = own_deferred = others = None
    for unit in queued:   # one pass, ending at anyone's first (the controller asks once a unit)
        if unit not in plan:
            return unit
        if unit.startswith(DEFERRED):
            if plan[unit] == worker:
                own_deferred = own_deferred or unit
        elif plan[unit] == worker:
            own = own or unit
        else:
            others = others or unit
    return own or others or own_deferred


def worker_index(workerid: str) -> int:
    """pytest-xdist's worker id ("gw3") -> 3."""
    return int(workerid.removeprefix("gw"))


def make_scheduler(config: pytest.Config, log):
    """xdist's loadscope over units: each unit as one, the largest first, in the order
    `choose` gives (anyone's, then a worker's planned ones, its deferred ones last)."""
    from xdist.scheduler import LoadScopeScheduling

    class UnitScheduling(LoadScopeScheduling):
        _plan: dict[str, int] | None = None

        def _split_scope(self, nodeid: str) -> str:
            return work_unit(config, nodeid)

        def _assign_work_unit(self, node) -> None:
            if self._plan is None:
                self._plan = planned(config, list(self.collection), len(self.nodes))
            pick = choose(self.workqueue, self._plan, worker_index(node.gateway.id))
            if pick is not None:               # else take the next unit, another worker's
                self.workqueue.move_to_end(pick, last=False)
            super()._assign_work_unit(node)

    return UnitScheduling(config, log)
