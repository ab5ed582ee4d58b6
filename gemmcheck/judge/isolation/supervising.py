"""The parent side of one child: start it, watch its READY / LAUNCH / DONE lines against the
clock, kill its process group when a step overruns, classify each step (ok, failed, crash, hang,
compile_error, not_run), and stop the children still running when a session ends."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field

from gemmcheck import phases
from gemmcheck.containment.tools import ToolFailure
from gemmcheck.judge.isolation.steps import MARK, StepOutcome

READY_TIMEOUT_S = 180.0   # imports, CUDA init, compiling (CuPy's cache makes it ~1 s when warm)
STEP_TIMEOUT_S = 10.0     # one step: a few launches of at most ~1024^3, well under a second healthy


class IsolationError(ToolFailure):
    """The child could not run its job (not a verdict on a kernel): the message has its output.
    A tool failure of the suite (gemmcheck.containment.tools): a step that outlived its
    timeout is the kernel's hang, a child that died during a launch its crash; a child that
    did not start, said ERROR, was not ready in time or died before it was is this."""

    tool = "the isolated child (gemmcheck.judge.isolation)"
    todo = ("nothing is known of the kernel; run the test again; if the child fails the same way, "
            "read its output below (a host out of memory or processes, a broken CUDA install)")


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
    not_ready_in: float | None = None   # killed for not being ready within this many seconds


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
    rows = dict.fromkeys(s.instance_label for s in steps)
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
    return ChildResult(outcomes, proc.returncode, lines, stderr, ready, error, ready_at, marks,
                       ready_timeout if killed_for == "ready" else None)


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
