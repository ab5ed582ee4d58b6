"""Work done once per run by whichever process of the run asks first; the others wait for it.

Under pytest-xdist every worker probed every instantiation (8 identical probe children in
ci with -n 8), and a worker that took a row planned for another (xdist hands a busy
worker's pending tests to an idle one) ran that row's compute-sanitizer children again,
though the planned worker had started them: 9 of ci's ~60 children, the last to end, and
~50 of the two-GPU nightly's 326. A host starts children at its own pace (~3.7 a second on
an H200 host, scripts/bench_children.py), so each one saved is time saved.

A folder shared by the run's processes on one host (the controller makes it and names it
to its workers) holds, per piece of work, a claim (the claimant's pid, made with O_EXCL:
one process wins) and, once done, its result (pickled, written whole and renamed in). A
waiter whose claimant died or gave up without a result claims the work and does it itself,
so a lost process costs time, never a result.
"""

from __future__ import annotations

import os
import pickle
import re
import shutil
import tempfile
import threading
import time
from pathlib import Path

POLL_S = 0.05


def make_folder() -> str:
    """A run's folder (the controller's; remove_folder at the end)."""
    return tempfile.mkdtemp(prefix="gemmcheck-once-")


def remove_folder(folder: str) -> None:
    shutil.rmtree(folder, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:   # alive, someone else's
        return True
    return True


class Once:
    """One run's shared work, in `folder`. Keys are any text (made safe for file names)."""

    def __init__(self, folder: str | os.PathLike) -> None:
        self.folder = Path(folder)
        self._mine: set[str] = set()   # claimed here, not yet published
        self._guard = threading.Lock()

    def _path(self, key: str, suffix: str) -> Path:
        return self.folder / (re.sub(r"[^\w.+-]", "_", key) + suffix)

    def claim(self, key: str) -> bool:
        """Whether this process does `key`'s work: True for the first to ask, and for a
        waiter after its claimant is gone (wait)."""
        try:
            fd = os.open(self._path(key, ".claim"), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w") as f:
            f.write(str(os.getpid()))
        with self._guard:
            self._mine.add(key)
        return True

    def publish(self, key: str, value) -> None:
        """`key`'s result, for every process that waits for it."""
        final = self._path(key, ".result")
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".part-")
        with os.fdopen(fd, "wb") as f:
            pickle.dump(value, f)
        os.replace(tmp, final)
        with self._guard:
            self._mine.discard(key)

    def give_up(self, key: str) -> None:
        """Give up a claim of this process without a result: its waiters do the work."""
        with self._guard:
            self._mine.discard(key)
        self._path(key, ".claim").unlink(missing_ok=True)

    def abandon(self) -> None:
        """Give up every claim of this process not yet published (a session that ends with
        children still queued)."""
        with self._guard:
            keys = set(self._mine)
        for key in keys:
            self.give_up(key)

    def published(self, key: str) -> tuple[bool, object]:
        """(True, `key`'s result) when some process of the run published it, else (False, None);
        never waits."""
        try:
            with open(self._path(key, ".result"), "rb") as f:
                return True, pickle.load(f)
        except FileNotFoundError:
            return False, None

    def first(self, key: str, value):
        """The run's first value under `key`: `value`, published, when this process is the first
        to give one; else the one published first (waited for while its process is alive)."""
        if self.claim(key):
            self.publish(key, value)
            return value
        done, got = self.wait(key)
        if done:
            return got
        self.publish(key, value)   # its claimant died without one: this process's is the first
        return value

    def do(self, key: str, work, stop: threading.Event | None = None):
        """`key`'s result: work()'s, published, when this process claims it (first, or after its
        claimant is gone), else the claimant's. The claim is given up if work() fails."""
        if not self.claim(key):
            done, got = self.wait(key, stop)
            if done:
                return got
        return self.deliver([key], work)

    def deliver(self, keys: list[str], work, parts=lambda result: [result]):
        """work()'s result, each of its parts (`parts(result)`, one per key, claimed here)
        published under its key; every key given up if work() fails."""
        try:
            result = work()
        except BaseException:
            for key in keys:
                self.give_up(key)
            raise
        for key, part in zip(keys, parts(result)):
            self.publish(key, part)
        return result

    def wait(self, key: str, stop: threading.Event | None = None) -> tuple[bool, object]:
        """(True, the result) once `key`'s claimant published it; (False, None) when the
        claimant is gone without one and this process has claimed the work in its place (it
        must do it and publish). Raises Stopped once `stop` is set."""
        result, claim = self._path(key, ".result"), self._path(key, ".claim")
        while not (stop is not None and stop.is_set()):
            if result.exists():
                with open(result, "rb") as f:
                    return True, pickle.load(f)
            try:
                text = claim.read_text()
                pid = int(text) if text else os.getpid()   # empty: being written; wait
            except FileNotFoundError:
                pid = None   # given up
            if pid is not None and not _alive(pid):
                # Only one waiter moves the stale claim aside; the claim below is O_EXCL.
                try:
                    os.replace(claim, self._path(key, f".stale-{os.getpid()}-{threading.get_ident()}"))
                except FileNotFoundError:
                    pass
                pid = None
            if pid is None and not claim.exists() and not result.exists() and self.claim(key):
                return False, None
            time.sleep(POLL_S)
        raise Stopped(f"stopped waiting for {key}")


class Stopped(Exception):
    """Once.wait was stopped (the session ends)."""
