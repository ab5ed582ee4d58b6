"""Build caches shared by every process of a run (pytest-xdist workers, isolation
children, several sessions): one process builds an entry while the others wait for
it, and files appear whole or not at all.
"""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from gemmcheck.containment.tools import ToolFailure, retry_once

# g++ of the largest source, or NVRTC of a whole catalog file, takes well under this;
# a holder that died releases its lock with its process (flock).
LOCK_TIMEOUT_S = 900


class BuildLockFailure(ToolFailure):
    """The build lock of a cache entry was not had in time, or could not be taken at all:
    a failure of the suite's build cache, not of the kernel being built."""

    tool = "the build cache's lock (gemmcheck.compile.buildlock)"
    todo = ("nothing is known of the kernel; another process holds the entry's lock (see the "
            "lock file's holders: `fuser` on it) or its folder is not writable; end that process or "
            "remove the build cache, then run again")


@contextmanager
def exclusive(entry: Path):
    """Hold the build lock of cache entry `entry` (a file or directory path). Not had within
    LOCK_TIMEOUT_S (or not takeable: an OSError), it is asked for once more
    (containment.tools.retry_once); a second failure raises BuildLockFailure."""
    entry = Path(entry)
    entry.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(entry) + ".lock", timeout=LOCK_TIMEOUT_S)
    retry_once(lambda: _acquire(lock))
    try:
        yield
    finally:
        lock.release()


def _acquire(lock: FileLock) -> None:
    try:
        lock.acquire()
    except Timeout as exc:
        raise BuildLockFailure(f"{lock.lock_file}: not had within {lock.timeout:g} s") from exc
    except OSError as exc:
        raise BuildLockFailure(f"{lock.lock_file}: could not be taken ({exc})") from exc


def write_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` so that a reader sees the old file or the new one, never part."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
