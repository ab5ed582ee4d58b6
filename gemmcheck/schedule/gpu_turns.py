"""Workers that share a GPU take turns for device timing.

Under pytest-xdist with more workers than GPUs (``-n 4`` on one H200), each worker that
shares its GPU holds that GPU's lock *shared* for every test it runs and while children it
started (compute-sanitizer runs) are alive, and holds it *exclusive* for its performance
tests' work on the device (gemmcheck.perf.gpu.GpuTimer's `turn`: uploads, checks, sampling,
judgements), once its own children have ended. So no sample is taken while any other
process of the run launches on the card, and everything else runs side by side: the host
work of the correctness and hazards suites (the oracle, hypothesis) spreads over the cores
instead of waiting in turn.

A performance test holds the lock shared for its setup and teardown (fixtures: the backend,
the timer) but not for its call (`call_off_the_gpu`): there its device work is all in turns
and its host work (drawing input sets, pytest's and the benchmark's bookkeeping) holds
nothing, so the other timing workers sample meanwhile. Held shared for the whole test, a
worker's first check and judgements kept every other timer off the card: in ci on one H200
(-n 8) the four timing workers sampled for 10.0 s of the 16.9 s between the last child's and
other test's end and the last test's. Once its timer is made (`timer_made`) no fixture of a
performance test touches the GPU outside a turn, so such a test holds nothing at all: a
shared request waits while any worker wants its turns (flock grants the exclusive requests
that poll between two turns), and in ci on one H200 six timing workers whose sampling was
done waited to end their first tests until no worker wanted a turn, all at the same instant,
their next tests' host work not begun.

The lock is flock(2) on one file per physical GPU, in a folder the controller makes for the
run (so two runs on one machine do not wait for each other). Converting a shared lock to an
exclusive one drops it first, so a worker never waits for the lock while holding it and
two workers that both want to time cannot deadlock. An exclusive request waits until no
worker is inside a test: in practice until the other workers have run their other units
(a worker runs its performance units last: units.deferred).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

import pytest

from gemmcheck import phases, watchdog
from gemmcheck.containment.tools import ToolFailure, retry_once

WORKER_GPU_LOCK = "gemm_gpu_lock"   # workerinput: the lock file of a worker's shared GPU


def make_folder() -> str:
    """The controller's folder for the run's lock files (remove_folder at the end)."""
    return tempfile.mkdtemp(prefix="gemmcheck-gpu-turns-")


def remove_folder(folder: str) -> None:
    shutil.rmtree(folder, ignore_errors=True)


def lock_path(folder: str, physical_gpu: str) -> str:
    """The lock file of one physical GPU (its CUDA_VISIBLE_DEVICES value)."""
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in physical_gpu)
    return str(Path(folder) / f"gpu-{safe}.lock")


# A turn that is not had in this long is a failure of the suite (its lock's holder is stuck,
# or gone without letting go), not a wait: the longest legitimate one is an exclusive turn
# waiting for the other workers' units to end. Tried once more, then the test errors.
TURN_TIMEOUT_S = float(os.environ.get("GEMMCHECK_TURN_TIMEOUT_S", "1800"))
# First and longest sleep between two tries of a lock. Short: a blocking flock was woken the
# moment the lock came free; a poller must look often enough to catch the host-side gap
# between another timing worker's two turns (a few ms of flock calls a second cost nothing).
_POLL_S = (0.001, 0.005)


class GpuTurnFailure(ToolFailure):
    """A GPU turn (its lock file) was not had in time, or could not be taken at all."""

    tool = "the GPU turn lock (gemmcheck.schedule.gpu_turns)"
    todo = ("nothing is known of the kernel; a process of this run holds the GPU's turn and does "
            "not let go (reports/stalls/ names it; GEMMCHECK_TURN_TIMEOUT_S sets the wait), or the "
            "run's lock folder was removed; run again, with fewer workers (-n) if it recurs")


class _Lock:
    """One open file description of the lock file: flock's unit of ownership (two of them
    in one process conflict like two processes). A request waits at most TURN_TIMEOUT_S,
    asking again and again without blocking (a blocking flock cannot be given a deadline),
    and is asked once more (containment.tools.retry_once) before GpuTurnFailure."""

    def __init__(self, path: str) -> None:
        self.path = path
        try:
            self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise GpuTurnFailure(f"{path}: the lock file cannot be opened ({exc})") from exc

    def shared(self) -> None:
        retry_once(lambda: self._take(fcntl.LOCK_SH, "shared"))

    def exclusive(self) -> None:
        retry_once(lambda: self._take(fcntl.LOCK_EX, "exclusive"))

    def _take(self, kind: int, name: str) -> None:
        deadline, pause = time.monotonic() + TURN_TIMEOUT_S, _POLL_S[0]
        while True:
            try:
                fcntl.flock(self._fd, kind | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                pass
            except OSError as exc:
                raise GpuTurnFailure(f"{self.path}: the {name} lock could not be taken ({exc})") from exc
            if time.monotonic() >= deadline:
                raise GpuTurnFailure(f"{self.path}: the {name} lock was not had within {TURN_TIMEOUT_S:g} s")
            time.sleep(pause)
            pause = min(2 * pause, _POLL_S[1])

    def release(self) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        os.close(self._fd)   # releases whatever it held


class GpuTurns:
    """A worker's side of its GPU's lock: `enter_test` / `leave_test` around its tests
    (shared), `alone` while it works on the device for a performance test,
    `children_started` / `children_ended` for the children it runs on the GPU."""

    def __init__(self, path: str) -> None:
        self.path = path
        watchdog.watch_lock(path)
        self.test = _Lock(path)
        self._children = _Lock(path)
        self._running = 0              # children alive
        self._children_held = False    # self._children holds the lock shared for them
        self._alone = False            # this process holds `test` exclusive
        self._in_test = False          # `test` is held shared for a test (outside its turns)
        self.timer_made = False        # this worker's performance timer exists (perf_plugin)
        self._guard = threading.Lock()
        self.waited = 0.0              # seconds spent waiting for turns since take_waited()

    def enter_test(self) -> None:
        """The lock shared for a test (or a part of one)."""
        self.test.shared()
        self._in_test = True

    def leave_test(self) -> None:
        if self._in_test:
            self.test.release()
        self._in_test = False

    def children_started(self) -> None:
        with self._guard:
            self._running += 1
            self._hold_for_children()

    def children_ended(self, *_ignored) -> None:
        """(Also a concurrent.futures done-callback: the future is ignored.)"""
        with self._guard:
            self._running -= 1
            if self._running == 0 and self._children_held:
                self._children.release()
                self._children_held = False

    def _hold_for_children(self) -> None:
        # Not while this process times alone: the others are kept off already, and a shared
        # request of its own would wait for its own exclusive lock forever (a worker whose
        # first kernel test is a performance test makes the backend, and starts its rows'
        # children, inside its turn). Taken when the turn ends instead.
        if self._running and not self._children_held and not self._alone:
            with watchdog.reporting("the GPU's shared hold for its children"):
                self._children.shared()
            self._children_held = True

    @contextlib.contextmanager
    def alone(self):
        """The lock exclusive for the block (converted from the test's shared lock, or taken
        outside one; waits for this process's own children, too), then as it was. Within a
        turn, a turn is the same turn."""
        if self._alone:
            yield
            return
        # (until no other worker is inside a test)
        self.wait_for(self.test.exclusive, "its turn to time alone on the GPU")
        with self._guard:
            self._alone = True
        try:
            yield
        finally:
            if self._in_test:
                self.test.shared()
            else:
                self.test.release()
            with self._guard:
                self._alone = False
                self._hold_for_children()

    def wait_for(self, request, what: str) -> None:
        """request() (a lock request), its wait counted as the `turns` phase and in `waited`."""
        start = time.monotonic()
        with phases.phase("turns"), watchdog.reporting(what):
            request()
        self.waited += time.monotonic() - start

    def take_waited(self) -> float:
        """The seconds waited for turns since the last call (a test's: turns_plugin)."""
        waited, self.waited = self.waited, 0.0
        return waited

    def close(self) -> None:
        self.test.close()
        self._children.close()


# -- a run's turns (turns_plugin opens and closes them) ---------------------------------------

FOLDER = pytest.StashKey[str]()
TURNS = pytest.StashKey[GpuTurns]()


def folder(config: pytest.Config) -> str:
    """The controller's lock folder for this run (made at the first worker that needs it)."""
    if FOLDER not in config.stash:
        config.stash[FOLDER] = make_folder()
    return config.stash[FOLDER]


def turns(config: pytest.Config) -> GpuTurns | None:
    """This worker's turns on a GPU it shares; None when it has the GPU to itself."""
    return config.stash.get(TURNS, None)


@contextlib.contextmanager
def alone(config: pytest.Config):
    """The GPU to this process alone for the block (device timing); a no-op for a worker
    that does not share its GPU, or no worker."""
    worker_turns = turns(config)
    if worker_turns is None:
        yield
        return
    with worker_turns.alone():
        yield
