"""Risky launches in a child process: a fault is CRASH, a timeout is HANG.

A kernel that faults leaves its process's CUDA context unusable, and one
that never returns blocks its process forever. Such launches (catalog
`expect` crash or hang, and everything under compute-sanitizer) run in a
child: `python -m gemmcheck.judge.isolation JOB OUTDIR`. The child announces each
step on stdout (READY, LAUNCH id, then DONE id, FAILED id, HUNG id: the backend stopped
a launch that outlived its hang timeout, or UNBUILT id: the instantiation did not compile); the parent watches the clock
between them, kills the child's process group when a step overruns, and
starts a fresh child for the steps left. Child startup costs about a second
and a half on a warm machine, so steps are batched: one child runs every
step it can, and only a crash or hang costs another.

Each step is one Observation (hazards.observe) of one instantiation on one
problem; its runs come back as raw bytes described in JSON and become the same Run objects
an in-process launch gives, so the same detectors judge them.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from gemmcheck import phases
from gemmcheck.verdict.detectors import Detector
from gemmcheck.verdict import Finding

MARK = "@@gemmcheck"
READY_TIMEOUT_S = 180.0   # imports, CUDA init, compiling (CuPy's cache makes it ~1 s when warm)
STEP_TIMEOUT_S = 10.0     # one step: a few launches of at most ~1024^3, well under a second healthy


class IsolationError(RuntimeError):
    """The child could not run its job (not a verdict on a kernel): the message has its output."""


@dataclass(frozen=True)
class Step:
    """One problem on one instantiation, run in a child."""

    id: int
    catalog: str
    kernel: str
    dtype: str
    tile: int
    M: int
    N: int
    K: int
    seed: int
    purpose: str = ""
    repeats: int = 2
    control: bool = True

    @property
    def instance_key(self) -> tuple:
        return (self.catalog, self.kernel, self.dtype, self.tile)

    @classmethod
    def of(cls, id, instance, problem, *, purpose="", repeats=2, control=True) -> "Step":
        step = cls(id, str(instance.spec.catalog), instance.spec.name, instance.dtype, instance.tile,
                   problem.M, problem.N, problem.K, problem.seed, purpose, repeats, control)
        _SPECS.setdefault((step.catalog, step.kernel), instance.spec)   # see _spec
        return step

    @property
    def problem(self):
        from gemmcheck.problems.problem import Problem

        return Problem(self.M, self.N, self.K, self.dtype, "exact", self.seed)


@dataclass
class StepOutcome:
    """What happened to one step: ok, failed (launch error), crash, hang, or not_run."""

    step: Step
    status: str
    message: str = ""
    output: list[str] = field(default_factory=list)  # child output lines printed during the step
    seconds: float = 0.0
    runs: dict = field(default_factory=dict)         # "runs" / "control" -> [Run], when ok

    @property
    def finding(self) -> Finding | None:
        """CRASH, HANG or COMPILE_ERROR for a launch that did not complete; None otherwise."""
        from gemmcheck.judge import hazards

        if self.status == "hang":
            return hazards.unfinished("hang", self.message)
        if self.status == "compile_error":
            return hazards.unfinished("compile_error", f"the kernel did not build: {self.message}",
                                      detector=Detector.COMPILER)
        if self.status in ("failed", "crash"):
            return hazards.unfinished(self.status, f"the launch failed: {self.message}")
        return None


@dataclass
class ChildResult:
    outcomes: dict[int, StepOutcome]
    returncode: int | None
    lines: list[str]          # every stdout line, markers included
    stderr: str
    ready: bool
    error: str = ""           # the child's own failure (not a kernel's): set when it said ERROR
    ready_at: float | None = None   # epoch second it said READY (its start-up done)
    marks: dict = field(default_factory=dict)   # its start-up: {"main", "backend", "prepared": epoch}


# -- the parent side ----------------------------------------------------------------------

def _reader(stream, q: queue.Queue) -> None:
    for line in iter(stream.readline, ""):
        q.put(line.rstrip("\n"))
    q.put(None)


# Children being supervised right now, so a session that ends can stop the ones it no
# longer waits for (compute-sanitizer runs started ahead on a thread pool).
_running: set[subprocess.Popen] = set()
_running_lock = threading.Lock()


def stop_running_children() -> int:
    """Kill every child this process is supervising; returns how many there were."""
    with _running_lock:
        procs = list(_running)
    for proc in procs:
        _kill(proc)
    return len(procs)


def supervise(argv, steps, *, ready_timeout: float = READY_TIMEOUT_S,
              step_timeout: float = STEP_TIMEOUT_S, env=None) -> ChildResult:
    """Run a child that speaks the READY / LAUNCH / DONE protocol; classify each step.

    A step that is in flight when the child dies is a crash; one that outlasts
    `step_timeout` is a hang (the child's process group is killed). Steps the
    child never reached are not_run.
    """
    by_id = {s.id: s for s in steps}
    outcomes: dict[int, StepOutcome] = {}
    began = time.time()
    # The environment goes as a copy of its own: with env=None the vfork()ed child reads the
    # process's `environ` while other threads run, and a setenv() there can move it (an H200
    # worker's compute-sanitizer child failed to start: OSError [Errno 14] Bad address).
    env = dict(os.environ) if env is None else dict(env)
    try:
        proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=env, start_new_session=True, errors="replace")
    except OSError as exc:
        raise IsolationError(f"the child {argv[0]!r} did not start: {exc}") from exc
    with _running_lock:
        _running.add(proc)
    result = None
    try:
        result = _supervise(proc, steps, by_id, outcomes, ready_timeout, step_timeout)
        return result
    finally:
        with _running_lock:
            _running.discard(proc)
        phases.child_ran(_child_label(argv, steps), began, result.ready_at if result else None, time.time(),
                         result.marks if result else {})


def _child_label(argv, steps) -> str:
    """'racecheck: row, row' (or 'plain: ...'): the tool a child ran under and its rows."""
    argv = list(argv)
    tool = argv[argv.index("--tool") + 1] if "--tool" in argv[:-1] else "plain"
    rows = dict.fromkeys(f"{s.kernel}-{s.dtype}-TILE{s.tile}" for s in steps)
    return f"{tool}: {', '.join(rows)}"


def _supervise(proc, steps, by_id, outcomes, ready_timeout, step_timeout) -> ChildResult:
    lines_q: queue.Queue = queue.Queue()
    err_chunks: list[str] = []
    readers = [threading.Thread(target=_reader, args=(proc.stdout, lines_q), daemon=True),
               threading.Thread(target=lambda: err_chunks.append(proc.stderr.read()), daemon=True)]
    for t in readers:
        t.start()
    lines: list[str] = []
    error = ""
    ready, current, started = False, None, time.monotonic()
    deadline = started + ready_timeout
    killed_for, ready_at, marks = None, None, {}
    while True:
        try:
            line = lines_q.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            killed_for = "ready" if not ready else "step"
            _kill(proc)
            break
        if line is None:
            break
        lines.append(line)
        if current is not None and not line.startswith(MARK):
            outcomes[current].output.append(line)
        if not line.startswith(MARK):
            continue
        word, _, rest = line[len(MARK):].strip().partition(" ")
        if word == "ERROR":
            error = json.loads(rest) if rest else "unknown error"
        elif word == "READY":
            ready, deadline, ready_at = True, time.monotonic() + step_timeout, time.time()
            marks = _marks(rest)
        elif word == "LAUNCH":
            current = int(rest)
            outcomes[current] = StepOutcome(by_id[current], "running")
            started, deadline = time.monotonic(), time.monotonic() + step_timeout
        elif word in ("DONE", "FAILED", "HUNG", "UNBUILT"):
            step_id, _, message = rest.partition(" ")
            out = outcomes[int(step_id)]
            out.status = {"DONE": "ok", "FAILED": "failed", "HUNG": "hang", "UNBUILT": "compile_error"}[word]
            out.message = json.loads(message) if message else ""
            out.seconds = time.monotonic() - started
            current, deadline = None, time.monotonic() + step_timeout
    proc.wait()
    for t in readers:
        t.join(timeout=5)
    stderr = "".join(err_chunks)
    if current is not None and error:
        outcomes[current].status, outcomes[current].message = "not_run", "the child failed: " + error
    elif current is not None:
        out = outcomes[current]
        out.seconds = time.monotonic() - started
        if killed_for == "step":
            out.status = "hang"
            out.message = (f"the launch did not return within {step_timeout:g} s; "
                           "the child process was killed")
        else:
            out.status = "crash"
            out.message = f"the child process died during the launch ({_exit_text(proc.returncode)})"
    for step in steps:
        outcomes.setdefault(step.id, StepOutcome(step, "not_run"))
    if killed_for == "ready" and current is None:
        stderr += f"\n(killed: not ready within {ready_timeout:g} s)"
    return ChildResult(outcomes, proc.returncode, lines, stderr, ready, error, ready_at, marks)


STARTUP_PARTS = ("start and imports", "backend", "prepare")


def startup_parts(began: float, marks: dict) -> dict[str, float] | None:
    """Where a child's start-up went, from when it was started and its READY marks (one clock):
    the tool's and interpreter's start with gemmcheck's imports, making the backend, preparing
    the kernels (STARTUP_PARTS, seconds); None for a child that sent no marks."""
    if not {"main", "backend", "prepared"} <= set(marks):
        return None
    return dict(zip(STARTUP_PARTS, (marks["main"] - began, marks["backend"] - marks["main"],
                                    marks["prepared"] - marks["backend"])))


def _marks(rest: str) -> dict:
    """READY's optional start-up marks ({"main": epoch, ...}); {} from a child that sent none."""
    try:
        marks = json.loads(rest) if rest else {}
    except ValueError:
        return {}
    return {k: float(v) for k, v in marks.items()} if isinstance(marks, dict) else {}


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # our own child's group: start_new_session=True
    except ProcessLookupError:
        pass


def _exit_text(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


def child_command(job: Path, outdir: Path) -> list[str]:
    return [sys.executable, "-u", "-m", "gemmcheck.judge.isolation", str(job), str(outdir)]


def run_steps(steps, *, backend: str = "cupy", prefix=(), exact_allocations: bool = False,
              ready_timeout: float = READY_TIMEOUT_S, step_timeout: float = STEP_TIMEOUT_S,
              workdir: Path | None = None, env=None, hang_timeout_s: float | None = None,
              stop: threading.Event | None = None):
    """Run `steps` in as few children as possible; return ({step id: StepOutcome}, [ChildResult]).

    After a step crashes or hangs, the rest of that instantiation's steps are
    not run (not_run, saying why) and a fresh child takes the other steps.
    `prefix` goes before the child's command (compute-sanitizer and its options).
    `hang_timeout_s`: the child's backend's own hang timeout (a launch it stops itself is
    reported HUNG, a hang); keep it below `step_timeout`. `stop`: once set, no further child
    starts (IsolationError), so the one running can be killed (stop_running_children) for good.
    """
    steps = list(steps)
    outcomes: dict[int, StepOutcome] = {}
    children: list[ChildResult] = []
    tmp = tempfile.TemporaryDirectory(prefix="gemmcheck-iso-") if workdir is None else None
    base = Path(tmp.name if tmp else workdir)
    try:
        remaining = steps
        while remaining:
            if stop is not None and stop.is_set():
                raise IsolationError("stopped before its steps were done: the session ended")
            n = len(children)
            job, outdir = base / f"job{n}.json", base / f"out{n}"
            outdir.mkdir(parents=True, exist_ok=True)
            job.write_text(json.dumps({"backend": backend, "exact_allocations": exact_allocations,
                                       "hang_timeout_s": hang_timeout_s,
                                       "steps": [asdict(s) for s in remaining]}))
            result = supervise([*prefix, *child_command(job, outdir)], remaining,
                               ready_timeout=ready_timeout, step_timeout=step_timeout, env=env)
            children.append(result)
            if result.error or not result.ready:
                raise IsolationError(
                    f"the isolated child ({' '.join(prefix) or 'python'}) could not run its job "
                    f"({result.error or _exit_text(result.returncode)}); its output:\n"
                    + "\n".join(result.lines[-40:]) + "\n" + result.stderr[-4000:])
            dead = set()
            for step in remaining:
                out = result.outcomes[step.id]
                if out.status == "ok":
                    out.runs = _load_runs(outdir, step)
                if out.status != "not_run":
                    outcomes[step.id] = out
                if out.status in ("failed", "crash", "hang", "compile_error"):
                    dead.add(step.instance_key)
            still = []
            for step in remaining:
                if step.id in outcomes:
                    continue
                if step.instance_key in dead:
                    outcomes[step.id] = StepOutcome(step, "not_run", "an earlier problem of this "
                                                    "instantiation crashed, hung or did not build")
                else:
                    still.append(step)
            if len(still) == len(remaining):
                raise IsolationError("the isolated child made no progress; its output:\n"
                                     + "\n".join(result.lines[-40:]) + "\n" + result.stderr[-4000:])
            remaining = still
    finally:
        if tmp:
            tmp.cleanup()
    return outcomes, children


# -- runs travel as raw bytes ---------------------------------------------------------------
# Not .npz: numpy parses every .npy header with ast.literal_eval, and on CPython 3.11 AST
# construction races between threads (gh-106905: "AST constructor recursion depth mismatch").
# Row children load their runs on pool threads, so shapes and dtypes ride in the JSON instead.

# The launches of an Observation that travel: its runs, the control runs, and the beta = 0
# launch with C finite (finite_c: what establishes reads_c_at_beta_zero).
RUN_KINDS = ("runs", "control", "finite_c")


def _save_runs(outdir: Path, step_id: int, obs) -> None:
    meta = {kind: [] for kind in RUN_KINDS}
    with open(outdir / f"step{step_id}.bin", "wb") as blob:
        for kind in RUN_KINDS:
            for run in getattr(obs, kind):
                meta[kind].append({"grid": list(run.grid), "block": list(run.block),
                                   "C": _write_array(blob, run.C_bits),
                                   "unwritten": _write_array(blob, run.unwritten),
                                   "guard_damage": run.guard_damage,
                                   "inputs_changed": run.inputs_changed,
                                   "launched": run.launched, "c_fill": run.c_fill})
    (outdir / f"step{step_id}.json").write_text(json.dumps(meta))


def _write_array(blob, array: np.ndarray) -> dict:
    array = np.ascontiguousarray(array)
    where = {"dtype": array.dtype.str, "shape": list(array.shape), "offset": blob.tell()}
    blob.write(array.tobytes())
    return where


def _read_array(data: bytearray, where: dict) -> np.ndarray:
    dtype = np.dtype(where["dtype"])
    count = int(np.prod(where["shape"], dtype=np.int64))
    return np.frombuffer(data, dtype, count, where["offset"]).reshape(where["shape"])


def _load_runs(outdir: Path, step: Step) -> dict:
    from gemmcheck.problems.harness import Run

    instance = _instance(step)
    meta = json.loads((outdir / f"step{step.id}.json").read_text())
    data = bytearray((outdir / f"step{step.id}.bin").read_bytes())  # writable, as np.load's were
    return {kind: [Run(instance, step.M, step.N, step.K, tuple(m["grid"]), tuple(m["block"]),
                       _read_array(data, m["C"]), _read_array(data, m["unwritten"]),
                       dict(m["guard_damage"]), dict(m["inputs_changed"]),
                       launched=m["launched"], c_fill=m["c_fill"])
                   for m in meta.get(kind, [])]
            for kind in RUN_KINDS}


def observation(outcome: StepOutcome):
    """The hazards.Observation a step's outcome amounts to (CRASH/HANG as its failure)."""
    from gemmcheck.judge import hazards

    step = outcome.step
    obs = hazards.Observation(_instance(step), step.problem, step.purpose)
    obs.runs, obs.control = outcome.runs.get("runs", []), outcome.runs.get("control", [])
    obs.finite_c = outcome.runs.get("finite_c", [])
    obs.failure = outcome.finding
    return obs


# (catalog path, kernel name) -> KernelSpec: the parent's own, from Step.of, so that runs read
# back on pool threads (kill-matrix children, the probe) never load a catalog there: loading
# parses launch expressions with ast.parse, which races between threads on CPython 3.11
# (gh-106905). A child, single-threaded, loads its catalog once.
_SPECS: dict[tuple[str, str], object] = {}
_SPECS_LOCK = threading.Lock()


def _spec(step: Step):
    key = (step.catalog, step.kernel)
    if key not in _SPECS:
        from gemmcheck.contract import catalog

        with _SPECS_LOCK:
            if key not in _SPECS:
                for spec in catalog.load(step.catalog):
                    _SPECS.setdefault((step.catalog, spec.name), spec)
    return _SPECS[key]


def _instance(step: Step):
    from gemmcheck.contract import catalog

    return catalog.Instance(_spec(step), step.dtype, step.tile)


# -- the child side -------------------------------------------------------------------------

def _say(word: str, rest: str = "") -> None:
    print(f"{MARK} {word} {rest}".rstrip(), flush=True)


def _make_backend(name: str, exact_allocations: bool):
    if ":" in name:  # "module:factory", e.g. a test's stand-in backend
        import importlib

        module, attr = name.split(":")
        return getattr(importlib.import_module(module), attr)()
    from gemmcheck import backends

    if exact_allocations:
        backends.backend_class(name).allocate_exactly()
    return backends.create(name)


def child_main(job_path: str, outdir: str) -> int:
    from gemmcheck.judge import hazards
    from gemmcheck.backends import KernelCompileError, KernelHang, KernelLaunchError
    from gemmcheck.backends.cupy_backend import is_sticky
    from gemmcheck.problems.harness import GuardedGemm

    job = json.loads(Path(job_path).read_text())
    out = Path(outdir)
    steps = [Step(**s) for s in job["steps"]]
    marks = {"main": _MAIN_AT or time.time()}   # where its start-up went (the parent's timeline)
    try:
        backend = _make_backend(job["backend"], job.get("exact_allocations", False))
        marks["backend"] = time.time()
        if job.get("hang_timeout_s"):
            backend.hang_timeout_s = float(job["hang_timeout_s"])
        instances = {s.id: _instance(s) for s in steps}
        backend.prepare(list({i.id: i for i in instances.values()}.values()))
        marks["prepared"] = time.time()
    except Exception as exc:
        _say("ERROR", json.dumps(f"{type(exc).__name__}: {exc}"))
        return 2
    _say("READY", json.dumps(marks))
    unbuilt = set()   # instantiations that did not compile: their other steps are not run
    primed = set()    # instantiations launched in this child (hazards.observe's prime)
    for step in steps:
        if step.instance_key in unbuilt:
            continue
        instance = instances[step.id]
        problem = step.problem
        _say("LAUNCH", str(step.id))
        try:
            if job.get("exact_allocations"):
                gemm = GuardedGemm(backend, instance, *hazards.operands(problem), guard=0)
                obs = hazards.Observation(instance, problem, step.purpose,
                                          [gemm.run() for _ in range(step.repeats)])
            else:
                obs = hazards.observe(backend, instance, problem, repeats=step.repeats,
                                      control=step.control, purpose=step.purpose,
                                      prime=step.instance_key not in primed)
                primed.add(step.instance_key)
        except KernelCompileError as exc:
            # This instantiation's verdict; the context is fine, so go on with the next step.
            _say("UNBUILT", f"{step.id} {json.dumps(str(exc))}")
            unbuilt.add(step.instance_key)
            continue
        except KernelLaunchError as exc:
            # The context is unusable now (or busy, after a hang): report and leave; the
            # parent restarts a child.
            _say("HUNG" if isinstance(exc, KernelHang) else "FAILED", f"{step.id} {json.dumps(str(exc))}")
            return 3
        except Exception as exc:
            if is_sticky(exc):
                # A fault that left the context unusable, seen by a call after the launch had
                # returned (on an H200, racecheck over broken_unguarded_store: CuPy's
                # cudaErrorLaunchFailure from the step's next call): the step's kernel did it.
                _say("FAILED", f"{step.id} {json.dumps(f'{type(exc).__name__}: {exc}')}")
                return 3
            # not the kernel's doing (a compile error, a bug here)
            _say("ERROR", json.dumps(f"{type(exc).__name__}: {exc}"))
            return 2
        _save_runs(out, step.id, obs)
        _say("DONE", str(step.id))
    return 0


_MAIN_AT = None   # when the child's module had loaded (its interpreter and imports done)

if __name__ == "__main__":
    _MAIN_AT = time.time()
    sys.exit(child_main(sys.argv[1], sys.argv[2]))
