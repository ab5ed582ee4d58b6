"""The kill matrix: for every catalog kernel, what it declares and what the detectors establish.

One row per instantiation, two columns:

- plain detectors: guarded launches on the device (values, poison, guard
  swap, guard bands, inputs, repeated launches), kernels declared crash or
  hang in an isolated child;
- with sanitizer: the plain findings plus compute-sanitizer's racecheck,
  synccheck, memcheck and initcheck (exact-size allocations, in children).

A row passes when a reference has no finding in any column, and a broken
kernel is caught and classified as its declared defect: by the plain column
where hardware alone can establish that class, by the sanitizer column
always. A class the plain detectors cannot establish (a divergent barrier
shows only as wrong values on hardware) needs the tool; without it that row
is reported as caught but not classified (a skip that says so), never as a
pass. A class nothing on hardware establishes (a global-memory race: racecheck
sees shared memory only) is caught there as what it explains (nondeterminism,
wrong values) and reported the same way, naming the simulator's tracking that
establishes it; anything else a column shows for it is a mismatch.

On the CPU simulator (cpu-sim) the first column is the *simulator
detectors*: the same value, poison, guard and input checks, plus what the
simulator establishes itself: shared-memory conflicts tracked per barrier
interval (an observed race, with the schedule whose output differs and the
lockstep direction as a detail), global-memory writes tracked per block
within a launch (two blocks writing one address, not both atomically),
divergent barriers exactly, AddressSanitizer
on exact-size buffers (out-of-bounds read or write of A, B or C), and a
crash or stall of its worker process (CRASH / HANG: the worker is the
isolation). It runs the small problems only (races show at any size under
its schedules; 1024^3 takes minutes there). The sanitizer column does not
apply there: compute-sanitizer needs a GPU.

Each row is built on its own (build_row): a kernel that does not build, crashes or hangs
gives its row that verdict (COMPILE_ERROR, CRASH, HANG) and touches no other row, so
rows can be separate tests, spread over processes, and merged afterwards (merge).

Which instantiations: one per kernel (float32 and TILE 16 where declared,
else the declared dtype and the TILE nearest 16) keeps the matrix to ~1 s
of device time per kernel; a defect in the kernel's logic shows in any of
its instantiations. The nightly profile runs every instantiation.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field

from gemmcheck.verdict import defects
from gemmcheck import watchdog
from gemmcheck.judge import hazards, isolation, sanitizer
from gemmcheck.contract.catalog import Instance
from gemmcheck.verdict.detectors import Detector
from gemmcheck.phases import phase, timed
from gemmcheck.verdict import Defect, Finding
from gemmcheck.tables import format_table

NOT_IN_MATRIX = defects.not_in_matrix()   # expect value -> why the matrix leaves it out
ISOLATED = defects.isolated()             # expect values launched in a child process
PREFERRED_DTYPE, PREFERRED_TILE = "float32", 16
HARDWARE, SIMULATOR = "hardware", "simulator"   # the detector sets a first column can hold
COLUMN_TITLES = {HARDWARE: "plain detectors", SIMULATOR: "simulator detectors"}
SANITIZER_NOT_APPLICABLE = "not applicable on cpu-sim"
SANITIZER_ON_SIMULATOR = ("compute-sanitizer needs a GPU; on cpu-sim the simulator's shared-memory, "
                          "global-memory and barrier tracking and AddressSanitizer stand in for it (first column)")


def in_matrix(instance: Instance) -> bool:
    return instance.spec.expect not in NOT_IN_MATRIX


def declares(expect: str):
    """A predicate for `@pytest.mark.instances.with_args(...)` (a named function given alone
    to a mark would be taken for the test it decorates): kernels that declare `expect`."""
    def predicate(instance: Instance) -> bool:
        return instance.spec.expect == expect
    predicate.__name__ = f"declares_{expect}"
    return predicate


def select(instances, *, every: bool = False) -> list[Instance]:
    """The instantiations the matrix runs: one per kernel, or all of them when `every`."""
    instances = [i for i in instances if in_matrix(i)]
    if every:
        return instances
    chosen: dict[str, Instance] = {}
    for inst in instances:
        best = chosen.get(inst.spec.name)
        if best is None or _rank(inst) < _rank(best):
            chosen[inst.spec.name] = inst
    return [i for i in instances if chosen.get(i.spec.name) is i]


def _rank(inst: Instance):
    return (inst.dtype != PREFERRED_DTYPE, abs(inst.tile - PREFERRED_TILE), inst.tile)


@dataclass
class Column:
    """What one set of detectors found for one row."""

    findings: list[Finding] = field(default_factory=list)
    ran: bool = True
    note: str = ""                       # why it did not run, or what it could not see
    unrecognized: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # a tool that could not run at all
    detectors: str = HARDWARE            # which detector set: HARDWARE or SIMULATOR
    not_applicable: str = ""             # set when the column cannot apply to this backend

    @property
    def diagnosis(self) -> hazards.Diagnosis:
        return hazards.classify(self.findings)

    def label(self) -> str:
        if self.not_applicable:
            return self.not_applicable
        return self.diagnosis.label if self.ran else "not run"

    def found(self, *, detector: Detector | str | None = None,
              defect: Defect | str | None = None) -> list[Finding]:
        """The findings of one detector and/or of one class. An unknown detector or defect name
        raises (naming the known ones): a misspelled name must not match nothing and pass."""
        detector = None if detector is None else Detector(detector)
        defect = None if defect is None else Defect(defect)
        return [f for f in self.findings if (detector is None or f.detector == detector)
                and (defect is None or f.defect == defect)]

    @property
    def unfinished(self) -> Finding | None:
        """The COMPILE_ERROR / CRASH / HANG finding when the column's launches did not finish."""
        return unfinished(self.findings)

    def to_json(self) -> dict:
        return {"ran": self.ran, "detectors": self.detectors, "applicable": not self.not_applicable,
                "note": self.note, "diagnosis": self.diagnosis.to_json(),
                "label": self.label(),
                "findings": [{"defect": f.defect.value, "detector": f.detector.value,
                              "summary": f.summary, "count": f.count} for f in self.findings],
                "unrecognized": self.unrecognized, "errors": self.errors}


@dataclass
class Row:
    instance: Instance
    plain: Column
    sanitizer: Column
    problems: list[str]
    seconds: float = 0.0

    @property
    def declared(self) -> Defect | None:
        expect = self.instance.spec.expect
        return None if expect == "correct" else Defect(expect)

    def outcome(self) -> tuple[str, str]:
        """("pass" | "fail" | "needs-tool" | "error", why). "error": a tool of the suite could
        not run (twice): no verdict on the kernel, an error of the suite."""
        declared, plain, tool = self.declared, self.plain, self.sanitizer
        if tool.ran and tool.errors:
            return "error", "compute-sanitizer could not run: " + "\n".join(tool.errors)
        if declared is None:
            found = plain.findings + (tool.findings if tool.ran else [])
            if found or tool.unrecognized:
                return "fail", (f"reference kernel, but: {hazards.classify(found).explanation}"
                                + "".join(f"\nunrecognized sanitizer report: {u}" for u in tool.unrecognized))
            return "pass", "no finding" + (" with or without compute-sanitizer" if tool.ran else "")
        if not plain.findings and not (tool.ran and tool.findings):
            return "fail", f"declared {declared.value}, but no detector found anything"
        if declared in hazards.NEEDS_THE_SIMULATOR and plain.detectors == HARDWARE:
            return self._unseen_on_hardware(declared)
        problems = []
        if declared in hazards.NEEDS_A_TOOL and plain.detectors == HARDWARE:
            pass  # caught (above) is all the plain column can show
        elif plain.diagnosis.defect != declared:
            problems.append(f"plain detectors classify it as {plain.label()}, declared "
                            f"{declared.value}:\n{plain.diagnosis.explanation}")
        if tool.ran and tool.diagnosis.defect != declared:
            problems.append(f"with compute-sanitizer it classifies as {tool.label()}, declared "
                            f"{declared.value}:\n{tool.diagnosis.explanation}")
        if problems:
            return "fail", "\n".join(problems)
        if not tool.ran and declared in hazards.NEEDS_A_TOOL and plain.detectors == HARDWARE:
            return "needs-tool", (f"caught by the plain detectors as {plain.label()}; establishing "
                                  f"{declared.value} needs {hazards.NEEDS_A_TOOL[declared]} "
                                  f"({tool.note})")
        best = tool if tool.ran else plain
        return "pass", f"caught as {declared.value}: {best.diagnosis.explanation}"

    def _unseen_on_hardware(self, declared: Defect) -> tuple[str, str]:
        """The outcome on hardware for a class nothing there establishes (a global-memory
        race): each column that found something must show what the class explains there
        (nondeterminism, wrong values), else it is a mismatch; caught so, the row is
        "needs-tool", naming what would establish it, never a pass."""
        shows = hazards.EXPLAINS.get(declared, frozenset())
        columns = [("plain detectors", self.plain)] if self.plain.findings else []
        columns += [("with compute-sanitizer", self.sanitizer)] if self.sanitizer.ran else []
        problems = [f"{name}: classified as {column.label()}, which {declared.value} does not account for "
                    f"(on hardware it shows as {' or '.join(sorted(d.value for d in shows))}):\n"
                    f"{column.diagnosis.explanation}"
                    for name, column in columns if column.diagnosis.defect not in shows]
        if problems:
            return "fail", f"declared {declared.value}, but " + "\n".join(problems)
        seen = ", ".join(f"{name} as {column.label()}" for name, column in columns)
        return "needs-tool", (f"caught by the {seen}: what {declared.value} shows on hardware, where no "
                              f"detector localizes it (racecheck sees shared memory only); establishing "
                              f"{declared.value} needs {hazards.NEEDS_THE_SIMULATOR[declared]}")

    def to_json(self) -> dict:
        status, why = self.outcome()
        return {"instance": self.instance.id, "kernel": self.instance.spec.name,
                "name_expression": self.instance.name_expression,
                "catalog": str(self.instance.spec.catalog),
                "declared": self.declared.value if self.declared else "correct",
                "plain": self.plain.to_json(), "with_sanitizer": self.sanitizer.to_json(),
                "problems": self.problems, "status": status, "why": why,
                "seconds": round(self.seconds, 2)}


@dataclass
class Settings:
    race_sizes: tuple[int, ...] = (1024,)
    race_repeats: int = 3
    backend_name: str = "auto"
    sanitizer_exe: str | None = None     # None: the sanitizer column is not run
    sanitizer_note: str = sanitizer.MISSING
    tools: tuple[str, ...] = sanitizer.TOOLS
    hang_timeout: float = isolation.STEP_TIMEOUT_S
    isolate_all: bool = False
    log_dir: object = None               # a Path: each tool's raw log is written there
    schedules: tuple[str, ...] = hazards.SIMULATOR_SCHEDULES  # cpu-sim: each launch runs under these
    address_check: bool = True           # cpu-sim: one AddressSanitizer launch per row


def plain_observations(backend, instance: Instance, settings: Settings) -> list[hazards.Observation]:
    """Observe one instantiation in this process on every exposing problem. A launch (or
    build) that fails is the observation's `failure` (COMPILE_ERROR, CRASH or HANG) and the
    instantiation's other problems are not run."""
    from gemmcheck.backends import KernelCompileError, KernelLaunchError

    out = []
    for n, (purpose, problem) in enumerate(hazards.exposing_problems(instance, settings.race_sizes)):
        race = hazards.is_race_stress(purpose)
        try:
            obs = hazards.observe(backend, instance, problem, purpose=purpose, prime=n == 0,
                                  repeats=settings.race_repeats if race else 2, control=not race)
        except (KernelCompileError, KernelLaunchError) as exc:
            obs = hazards.Observation(instance, problem, purpose)
            obs.failure = hazards.launch_failure(exc)
        out.append(obs)
        if obs.failure is not None:
            break
    return out


@timed("isolation")
def isolated_observations(instances, settings: Settings) -> dict[str, list[hazards.Observation]]:
    """Observe instantiations in children: a fault is CRASH, a timeout HANG, a build failure
    COMPILE_ERROR (one child per failure)."""
    steps, owner = [], {}
    for inst in instances:
        for purpose, problem in hazards.exposing_problems(inst, settings.race_sizes):
            race = hazards.is_race_stress(purpose)
            step = isolation.Step.of(len(steps), inst, problem, purpose=purpose,
                                     repeats=settings.race_repeats if race else 2, control=not race)
            steps.append(step)
            owner[step.id] = inst
    out: dict[str, list[hazards.Observation]] = {i.id: [] for i in instances}
    if not steps:
        return out
    outcomes, _ = isolation.run_steps(steps, backend=settings.backend_name,
                                      step_timeout=settings.hang_timeout)
    for step_id, outcome in sorted(outcomes.items()):
        if outcome.status != "not_run":
            out[owner[step_id].id].append(isolation.observation(outcome))
    return out


def simulator_observations(backend, instance: Instance, settings: Settings) -> list[hazards.Observation]:
    """Observe one instantiation on a backend that simulates threads (cpu-sim): the small
    exposing problems, every launch under `settings.schedules`, AddressSanitizer on the
    first (ragged) problem. After a crash, hang or build failure the instantiation's other
    problems are not run (as in an isolated child)."""
    out = []
    for n, (purpose, problem) in enumerate(hazards.exposing_problems(instance, race_sizes=())):
        obs = hazards.observe_simulated(backend, instance, problem, purpose=purpose,
                                        schedules=settings.schedules,
                                        address_check=settings.address_check and n == 0)
        out.append(obs)
        if obs.failure is not None:
            break
    return out


def unfinished(findings) -> Finding | None:
    """The finding that says the row's launches did not finish (COMPILE_ERROR, HANG, CRASH from
    a build, a child or the simulator's worker), if there is one: then nothing else about
    the kernel was checked."""
    detectors = (Detector.ISOLATION, Detector.COMPILER)
    return next((f for f in findings if f.detector in detectors and f.defect in hazards.UNFINISHED.values()),
                None)


def build_row(backend, instance: Instance, settings: Settings,
              children: "RowChildren | None" = None) -> Row:
    """One row of the matrix, on its own: whatever happens to this instantiation (it does not
    build, crashes, hangs) is this row's verdict and touches no other row.

    On a backend that simulates threads (cpu-sim) the first column holds the simulator
    detectors and the sanitizer column does not apply; elsewhere the plain detectors (in a
    child for kernels declared crash or hang, or all with `isolate_all`), then the sanitizer
    column when the tool is there. `children`: a pool the rows share, which may have started
    this row's children (its tools; its plain observation when declared crash or hang) ahead."""
    t0 = time.monotonic()
    if hazards.simulates_threads(backend):
        observations = simulator_observations(backend, instance, settings)
        detectors = SIMULATOR
        tool = Column(ran=False, note=SANITIZER_ON_SIMULATOR, detectors=SIMULATOR,
                      not_applicable=SANITIZER_NOT_APPLICABLE)
    else:
        detectors = HARDWARE
        if instance.spec.expect in ISOLATED and children is not None:
            observations = children.isolated(instance)
        elif settings.isolate_all or instance.spec.expect in ISOLATED:
            observations = isolated_observations([instance], settings)[instance.id]
        else:
            observations = plain_observations(backend, instance, settings)
        tool = Column(ran=False, note=settings.sanitizer_note)
    findings = [f for obs in observations for f in hazards.detect(obs)]
    row = Row(instance, Column(_merge(findings), detectors=detectors), tool,
              [f"{obs.purpose}: {obs.problem.id}" for obs in observations])
    if detectors == HARDWARE and settings.sanitizer_exe:
        row.sanitizer = sanitizer_column(row, settings, children)
    row.seconds = time.monotonic() - t0
    return row


def build(backend, instances, settings: Settings) -> list[Row]:
    """Every row of the matrix, each built on its own (build_row); every row's children (its
    tools, in batches; the plain observation of a kernel declared crash or hang) start at once,
    side by side in small pools."""
    if hazards.simulates_threads(backend):
        return [build_row(backend, inst, settings) for inst in instances]
    children = RowChildren(settings)
    try:
        children.submit_rows(instances)
        return [build_row(backend, inst, settings, children) for inst in instances]
    finally:
        children.close()


def small_problems(instance: Instance, settings: Settings) -> list:
    """The (purpose, problem) pairs compute-sanitizer runs on: the small exposing problems."""
    return [(p, q) for p, q in hazards.exposing_problems(instance, settings.race_sizes)
            if p in hazards.SMALL_PURPOSES]


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
                observe = lambda i=instance, k=key: self._for_all(   # noqa: E731
                    [k], lambda: isolated_observations([i], self.settings)[i.id], lambda obs: [obs])
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
        this host, not of a kernel: isolation.IsolationError); a second failure is raised.
        Not retried once closing: close() killed it."""
        try:
            return sanitizer.run(tool, plan, exe=self.settings.sanitizer_exe, backend=self.settings.backend_name)
        except isolation.IsolationError as first:
            if self._closing.is_set():
                raise
            try:
                return sanitizer.run(tool, plan, exe=self.settings.sanitizer_exe, backend=self.settings.backend_name)
            except isolation.IsolationError as second:
                raise isolation.IsolationError(f"{second} (and once before: {str(first).splitlines()[0]})") from None

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


def sanitizer_column(row: Row, settings: Settings, runs: RowChildren | None = None) -> Column:
    """The plain findings of `row` plus compute-sanitizer's: every tool of `settings.tools` on
    the small problems, side by side (`runs`, shared by many rows, or a pool of this row's
    own), each tool's raw log written to `settings.log_dir`."""
    instance = row.instance
    stopped = unfinished(row.plain.findings)
    if stopped is not None and stopped.defect in (Defect.HANG, Defect.COMPILE_ERROR):
        return Column(list(row.plain.findings),
                      note=f"tools not run: the kernel {'hangs' if stopped.defect == Defect.HANG else 'does not build'}")
    if not small_problems(instance, settings):
        return Column(list(row.plain.findings), note="tools not run: no small problem fits the kernel")
    own = runs is None
    runs = RowChildren(settings) if own else runs
    try:
        results = runs.results(instance)
    finally:
        if own:
            runs.close()
    found, unrecognized, errors = [], [], []
    for tool, result, error in results:
        if error:
            errors.append(error)
            continue
        if settings.log_dir is not None:
            settings.log_dir.mkdir(parents=True, exist_ok=True)
            (settings.log_dir / f"{tool}-{instance.id}.log").write_text(result.log)
        found += result.findings(instance)
        unrecognized += [f"{tool}: {u}" for u in result.reports[instance.id].unrecognized]
        unrecognized += [f"{tool} (no kernel named): {text}" for text in result.unattributed]
    return Column(_merge(row.plain.findings + found),
                  note=f"{', '.join(settings.tools)} on {', '.join(hazards.SMALL_PURPOSES)}",
                  unrecognized=unrecognized, errors=errors)


def _merge(findings: list[Finding]) -> list[Finding]:
    """One finding per (defect, detector) over all problems: the one with the largest count."""
    best: dict = {}
    for f in findings:
        key = (Defect(f.defect), f.detector)
        if key not in best or f.count > best[key].count:
            best[key] = f
    return list(best.values())


def table(rows) -> list[str]:
    """The matrix as text: one line per row (Row objects, or rows of a document's JSON)."""
    rows = [r.to_json() if isinstance(r, Row) else r for r in rows]
    detectors = {r["plain"]["detectors"] for r in rows}
    first = COLUMN_TITLES[detectors.pop()] if len(detectors) == 1 else "first column"
    header = ("instantiation", "declared", first, "with sanitizer", "result", "s")
    return format_table(header, [(r["instance"], r["declared"], r["plain"]["label"], r["with_sanitizer"]["label"],
                                  r["status"], f"{r['seconds']:.1f}") for r in rows])


def merge(documents, order=()) -> dict:
    """One document from several (pytest-xdist workers each write the rows they ran): the
    first document's settings, every row once, in `order` (instance ids) where given."""
    documents = [d for d in documents if d]
    if not documents:
        return {}
    rows = {r["instance"]: r for d in documents for r in d["rows"]}
    rank = {inst_id: n for n, inst_id in enumerate(order)}
    merged = dict(documents[0])
    merged["rows"] = sorted(rows.values(), key=lambda r: (rank.get(r["instance"], len(rank)), r["instance"]))
    merged["seconds"] = round(sum(r["seconds"] for r in merged["rows"]), 1)
    return merged


def runs_on(rows: list[Row], settings: Settings) -> str:
    """The backend the rows ran on: the simulator for simulator rows, else the option resolved."""
    from gemmcheck import backends

    if rows and all(r.plain.detectors == SIMULATOR for r in rows):
        return "cpu-sim"
    return backends.resolve(settings.backend_name)


def document(rows: list[Row], settings: Settings) -> dict:
    simulated = bool(rows) and all(r.plain.detectors == SIMULATOR for r in rows)
    if simulated:
        tool = f"{SANITIZER_NOT_APPLICABLE}: {SANITIZER_ON_SIMULATOR}"
        sizes = {"race_sizes": [], "schedules": list(settings.schedules),
                 "address_check": settings.address_check}
    else:
        tool = settings.sanitizer_exe or f"not run: {settings.sanitizer_note}"
        sizes = {"race_sizes": list(settings.race_sizes), "race_repeats": settings.race_repeats}
    return {"schema": 1,
            "settings": {**sizes, "backend": runs_on(rows, settings), "backend_option": settings.backend_name,
                         "detectors": SIMULATOR if simulated else HARDWARE,
                         "sanitizer": tool, "tools": [] if simulated else list(settings.tools),
                         "hang_timeout_s": settings.hang_timeout},
            "rows": [r.to_json() for r in rows]}
