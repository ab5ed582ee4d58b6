"""The child processes of many rows side by side: their compute-sanitizer runs, in batches,
and the isolated observations of kernels declared to crash or hang."""

from __future__ import annotations

import os
import threading

from gemmcheck import watchdog
from gemmcheck.containment.tools import retry_once
from gemmcheck.judge import hazards, isolation, sanitizer
from gemmcheck.contract.catalog import Instance
from gemmcheck.phases import phase
from gemmcheck.verdict import Defect
from gemmcheck.judge.kill_matrix.selection import ISOLATED
from gemmcheck.judge.kill_matrix.settings import Settings
from gemmcheck.judge.kill_matrix.observing import isolated_observations, small_problems


class Closing(RuntimeError):
    """A row's children ran while their RowChildren closed: no result to publish."""


class RowChildren:
    """The child processes of many rows, side by side: each row's compute-sanitizer runs and,
    for a kernel declared to crash or hang, its plain observation (a child that waits out
    the hang timeout: 12 s of the H200's ci run when it waited in turn). Small pools of
    threads, each waiting on its own child (the GPU sees several small launches at once,
    which the tools allow). `submit` / `submit_rows` start rows' children ahead of their tests;
    `results` and `isolated` wait for them; `wait` for all (before device timing).

    A tool runs over the rows submitted together in few children (`batches`), not one child
    per row and tool: each child pays its start under the tool (Python, CuPy, a CUDA context
    the tool instruments) once for many rows. A child's steps are told apart by the kernel
    each report names and the step it falls in (sanitizer.run), and a crash costs only a
    fresh child for the steps left (isolation.run_steps). A kernel declared to crash has its
    children to itself (ALONE). One whose declared defect floods a tool with reports
    (sanitizer.FLOODS: a child prints 100; memcheck's reads and writes out of bounds,
    synccheck's divergent barriers) ends a batch under that tool, one a batch: its reports
    come after every other row's, so they silence none. And a batch's verdict on a row is
    checked alone (`suspect`): a row whose launch failed under the tool with no report from it
    (in a batch of defects on an H200, memcheck once said nothing of broken_unguarded_loads'
    read outside A, whose launch then faulted as a plain crash), a row declared correct that
    the tool reports on or whose launch did not finish, a row with no report from a child that
    reached the tool's print limit, or a row declared to flood the tool that it said nothing
    of, is run again in a child of its own, and that child's run is the row's. So whatever a
    broken kernel leaves behind in a child never stands as a reference's verdict, and
    references share batches with defects (kept apart, a worker of ci's -n 8 with one row of
    each ran two children per tool).

    Children cost the host more than their work: on an H200 host a child's start (its `backend`
    part above all: CuPy's import and CUDA's start) takes longer the more start beside it, on
    one GPU or two alike: ~3.7 children a second at best on one GPU, ~4 on two
    (scripts/bench_children.py). So rows share children.
    """

    PLAIN = "plain"   # the key of a row's isolated plain observation
    # Children of their own under every tool: a declared fault ends the child's context each
    # time. A read or write out of bounds reaches no other row of its batch: a child's steps
    # run one after another, each on buffers of its own, allocated exactly (no memory pool),
    # synchronized and freed before the next step's launch; a fault it causes ends the child,
    # the steps left run in a fresh one and the row's verdict is checked alone (`suspect`).
    # Both flood memcheck (sanitizer.FLOODS), so end a batch there. Alone under every tool, the
    # nightly's 12 unguarded stores took 48 of 142 children on an H200 pair (-n 16); alone
    # under the tool they flood, the floods took 28 of a single H200's 131 memcheck children.
    ALONE = frozenset({Defect.CRASH.value})
    # A batch's rows wait for the whole batch, so not all of a process's rows in one: on an
    # H200 a child's work on a row takes ~0.2-3 s (racecheck on a racing kernel the longest),
    # its start 2 s alone and 10-15 s among 30 others. At 8 a worker's ~12 rows of the nightly
    # (-n 16 on an H200 pair) took two children per tool.
    MAX_BATCH_ROWS = 16

    def __init__(self, settings: Settings, workers: int | None = None, turns=None,
                 cores: int | None = None, shared=None) -> None:
        """`turns`: a pytest-xdist worker's gpu_turns.GpuTurns when it shares its GPU: the
        children hold the GPU (shared) while they run, so no other worker times then.
        `shared`: the run's once.Once when other processes of the run build rows too: a
        row's tool runs once per run, by the process that claims them first, and the others
        wait for its results (a worker that took another's planned row ran its children again:
        9 of ci's ~60 children, the last to end).
        `cores`: the cores this process may use (a worker's share; the host's by default):
        the children run half as many at once, 2 at least and 8 at most. More gain nothing:
        the host starts children at its own pace (on an H200 host 16 at once started 3.7 a
        second, 32 at once 3.2; scripts/bench_children.py), and each waits longer to start.
        For the same reason a tool's rows go in as few batches as MAX_BATCH_ROWS allows."""
        from concurrent.futures import ThreadPoolExecutor

        self.settings = settings
        self._turns = turns
        cores = cores or os.cpu_count() or 2
        workers = workers or max(2, min(8, cores // 2))
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="row-children")
        # A kernel declared to hang waits out its timeout in its child, using no core: it
        # never waits behind the tools' runs (it did, 10.7 s at the end of ci's hazards suite).
        self._isolated_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="row-children-isolated")
        self._shared = shared
        # Threads that wait for another process's runs (no child, no core): as many as it takes.
        self._waiting_pool = ThreadPoolExecutor(max_workers=32, thread_name_prefix="row-children-waiting")
        self._closing = threading.Event()
        self._futures: dict = {}

    def submit(self, instance: Instance) -> None:
        """Start one row's children (submit_rows)."""
        self.submit_rows([instance])

    def submit_rows(self, instances) -> None:
        """Start these rows' children: each one's isolated plain observation when declared crash
        or hang; the tools over the rows, in batches (in the order given: a batch's rows wait
        for the whole batch, so the first rows go in the first batch), unless declared to hang
        (a hang is not run under the tools)."""
        tool_rows = []
        for instance in instances:
            expect = instance.spec.expect
            if expect in ISOLATED and (instance.id, self.PLAIN) not in self._futures:
                key = self._key(instance, self.PLAIN)
                # (its child not ready, or killed before it was: tried once more, then the
                # row's test errors; a fault or a timeout in a launch is the kernel's verdict)
                observe = lambda i=instance, k=key: self._for_all(   # noqa: E731
                    [k], lambda: retry_once(lambda: isolated_observations([i], self.settings)[i.id],
                                                  stop=self._closing), lambda obs: [obs])
                if self._claim(instance, self.PLAIN):
                    self._futures[(instance.id, self.PLAIN)] = self._start(self._isolated_pool, observe)
                else:   # a hang's 10 s, waited out once (ci ran broken_hangs twice, the second to 37 s)
                    self._futures[(instance.id, self.PLAIN)] = self._waiting_pool.submit(
                        self._theirs, key, self._isolated_pool, observe)
            if not self.settings.sanitizer_exe or expect == Defect.HANG.value:
                continue
            if any((instance.id, tool) in self._futures for tool in self.settings.tools):
                continue
            problems = small_problems(instance, self.settings)
            if problems:
                tool_rows.append((instance, problems))
        tools = self.settings.tools
        mine = {tool: [r for r in tool_rows if self._claim(r[0], tool)] for tool in tools}
        batches = {tool: self.batches(mine[tool], tool=tool) for tool in tools}
        for n in range(max((len(b) for b in batches.values()), default=0)):   # first rows first, every tool
            for tool in tools:
                if n < len(batches[tool]):
                    plan = batches[tool][n]
                    future = self._start(self._pool, self._run_for_all, tool, plan)
                    for instance, _ in plan:
                        self._futures[(instance.id, tool)] = future
        for tool in tools:
            for instance, problems in tool_rows:
                if (instance.id, tool) not in self._futures:   # another process runs it
                    self._futures[(instance.id, tool)] = self._waiting_pool.submit(
                        self._theirs, self._key(instance, tool), self._pool, self._run_for_all,
                        tool, [(instance, problems)])

    @staticmethod
    def _key(instance: Instance, tool: str) -> str:
        return f"{tool} {instance.id}"

    def _claim(self, instance: Instance, tool: str) -> bool:
        return self._shared is None or self._shared.claim(self._key(instance, tool))

    def _for_all(self, keys: list[str], work, parts):
        """work()'s result, and each part of it (`parts(result)`, one per key) published to the
        run's other processes under its key (once.Once.deliver)."""
        if self._shared is None:
            return work()

        def unless_closing():
            result = work()
            if self._closing.is_set():
                # Its children may have been killed by close(): given up, not published, so a
                # worker that waits for it runs it itself. Published, a child killed here had
                # been another worker's row's "compute-sanitizer could not run: ... killed by
                # SIGKILL" (6 of 7 runs of the examples with -n 8 on one H200).
                raise Closing(f"closed while running {', '.join(keys)}")
            return result
        return self._shared.deliver(keys, unless_closing, parts)

    def _run_for_all(self, tool: str, plan):
        """_run, its verdict on each row published as the row sees it (ToolRun.of), in _run's
        form."""
        def parts(result):
            for instance, _ in plan:
                yield (*self._seen_by(result, instance), {})
        return self._for_all([self._key(i, tool) for i, _ in plan], lambda: self._run(tool, plan), parts)

    @staticmethod
    def _seen_by(result, instance: Instance) -> tuple:
        """(ToolRun as `instance`'s row sees it (ToolRun.of) or None, error or None) of a _run
        result: the row's own run when it was run again alone."""
        run, error, again = result
        run, error = again.get(instance.id, (run, error))
        return (run.of(instance) if run is not None else None), error

    def _theirs(self, key: str, pool, fn, *args):
        """What another process of the run claimed to do under `key`; fn(*args) on `pool` here
        when that process is gone without it."""
        done, got = self._shared.wait(key, stop=self._closing)
        return got if done else self._start(pool, fn, *args).result()

    @classmethod
    def batches(cls, rows, at_least: int = 1, tool: str | None = None) -> list[list]:
        """Rows ([(instance, problems)]) in batches for one child each: in order, split into runs
        of consecutive rows, at least `at_least` of them, and one for each row whose reports
        flood `tool` (sanitizer.FLOODS), where there are as many rows, and at most
        MAX_BATCH_ROWS rows each; each flood last in a batch (those left over one each, after
        them), then rows of ALONE, one each."""
        floods_tool = sanitizer.FLOODS.get(tool, frozenset()) - cls.ALONE
        alone = [[r] for r in rows if r[0].spec.expect in cls.ALONE]
        floods = [r for r in rows if r[0].spec.expect in floods_tool]
        part = [r for r in rows if r[0].spec.expect not in cls.ALONE | floods_tool]
        room = cls.MAX_BATCH_ROWS - bool(floods)   # a flood's place kept
        n = max(min(max(at_least, len(floods)), len(part)), -(-len(part) // room))
        size = -(-len(part) // n) if n else 1
        batches = [part[i:i + size] for i in range(0, len(part), size)]
        ends = len(batches)
        batches = [b + [f] for b, f in zip(batches, floods)] + batches[len(floods):]
        return batches + [[f] for f in floods[ends:]] + alone

    def _start(self, pool, fn, *args):
        if self._turns is not None:
            self._turns.children_started()
        future = pool.submit(fn, *args)
        if self._turns is not None:
            future.add_done_callback(self._turns.children_ended)
        return future

    def _run(self, tool: str, plan, retry: bool = True):
        """(ToolRun or None, error or None, {instance id: (ToolRun, error)} of rows run again
        alone because the batch's verdict on them was suspect, or, alone already, because
        their launch failed under the tool with no report from it: the tool's word is then
        asked once more (`retry`). On an H200 memcheck's child over broken_unguarded_loads-
        float64-TILE8 alone once faulted with no report, as one had in a batch, and a child of
        its own then reported the read. A second such failure is the row's verdict.)"""
        try:
            run = self._tool_run(tool, plan)
        except isolation.IsolationError as exc:
            return None, f"{tool}: {exc}", {}
        again = {}
        for instance, problems in plan:
            if len(plan) > 1:
                why = self.suspect(run, instance)
                note = f"(run again alone: in a batch of {len(plan)} rows {why})"
            else:   # (a kernel declared to crash does what it says)
                why = (self.failed_silently(run, instance)
                       if retry and instance.spec.expect != Defect.CRASH.value else None)
                note = f"(run again: alone, {why})"
            if why:
                alone, error, _ = self._run(tool, [(instance, problems)], retry=False)
                if alone is not None:
                    alone.log = f"{note}\n" + alone.log
                again[instance.id] = (alone, error)
        return run, None, again

    def _tool_run(self, tool: str, plan) -> sanitizer.ToolRun:
        """sanitizer.run, once more when its child could not run (a failure of the tool or of
        this host, not of a kernel: isolation.IsolationError, a ToolFailure); a second failure
        is raised. Not retried once closing: close() killed it."""
        return retry_once(
            lambda: sanitizer.run(tool, plan, exe=self.settings.sanitizer_exe, backend=self.settings.backend_name,
                                  hang_timeout_s=self.settings.hang_timeout),
            stop=self._closing)

    @staticmethod
    def failed_silently(run: sanitizer.ToolRun, instance: Instance) -> str | None:
        """Why this row's launch under the tool says nothing of the kernel: it failed with no
        report from the tool (a fault the tool did not explain), or None."""
        ended = {o.status for o in run.outcomes_of(instance).values()}
        if not run.reports[instance.id].findings and ended & {"crash", "failed"}:
            return f"its launch failed under {run.tool} with no report from it"
        return None

    @staticmethod
    def suspect(run: sanitizer.ToolRun, instance: Instance) -> str | None:
        """Why a batch's verdict on this row needs a child of its own, or None: a launch that
        failed under the tool with no report from it; for a kernel declared correct, any
        report or any launch that did not finish (a hang too: a reference is never called
        wrong on a batch's word)."""
        reported = run.reports[instance.id].findings
        ended = {o.status for o in run.outcomes_of(instance).values()}
        if instance.spec.expect == "correct" and (reported or ended & {"crash", "failed", "hang"}):
            return (f"{run.tool} reported on a kernel declared correct" if reported
                    else f"a launch of a kernel declared correct did not finish under {run.tool}")
        if failed := RowChildren.failed_silently(run, instance):
            return failed
        if not reported and instance.id in run.unprinted:
            return (f"{run.tool} stopped printing reports in its child ({sanitizer.PRINT_LIMIT} "
                    f"printed), so its silence on this row says nothing")
        if not reported and instance.spec.expect in sanitizer.FLOODS.get(run.tool, ()):
            return f"{run.tool} said nothing of a kernel declared to flood it with reports"
        return None

    def isolated(self, instance: Instance) -> list[hazards.Observation]:
        """The plain observations of a kernel declared crash or hang, made in a child."""
        self.submit(instance)
        with phase("isolation"), watchdog.reporting(f"the isolated observation of {instance.id}"):
            return self._futures[(instance.id, self.PLAIN)].result()   # a child on a pool thread

    def results(self, instance: Instance) -> list[tuple]:
        """[(tool, ToolRun or None, error or None)] for every tool, once they have run: each
        ToolRun as this row sees it (ToolRun.of), whatever batch it ran in."""
        self.submit(instance)
        with phase("sanitizer"), watchdog.reporting(f"the compute-sanitizer runs of {instance.id}"):
            return [(tool, *self._seen_by(self._futures[(instance.id, tool)].result(), instance))
                    for tool in self.settings.tools]

    def wait(self) -> None:
        """Until every child started so far has ended (their results are kept)."""
        from concurrent.futures import wait

        with phase("sanitizer"), watchdog.reporting("every child this process started (before device timing)"):
            wait(list(self._futures.values()))

    def close(self, *, finish: bool = False) -> None:
        """Stop: runs not started are cancelled, running children killed (a session that
        ends does not wait up to the step timeout for a kernel that hangs under a tool).
        With `finish` (a pytest-xdist worker whose session ended normally) the children that
        run now end first: another worker may be waiting for them (xdist shuts a worker down
        as soon as its queue is empty, while others still run the rows it planned). Nothing
        made while closing is published (_for_all): what a killed child said is not a result."""
        pools = (self._pool, self._isolated_pool, self._waiting_pool)
        if finish:   # (not the waiting pool: it may wait for a worker that waits for this one)
            for pool in (self._pool, self._isolated_pool):
                pool.shutdown(wait=False, cancel_futures=True)
            for pool in (self._pool, self._isolated_pool):
                pool.shutdown(wait=True)
        self._closing.set()
        for pool in pools:
            pool.shutdown(wait=False, cancel_futures=True)
        if any(not f.done() for f in self._futures.values()):
            isolation.stop_running_children()
        for pool in pools:
            pool.shutdown(wait=True)
        if self._shared is not None:
            self._shared.abandon()   # what others wait for and this process did not finish
