"""Build caches shared by every process of a run (pytest-xdist workers, isolation
children, several sessions): one process builds an entry while the others wait for
it, and files appear whole or not at all.
"""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock

# g++ of the largest source, or NVRTC of a whole catalog file, takes well under this;
# a holder that died releases its lock with its process (flock).
LOCK_TIMEOUT_S = 900


@contextmanager
def exclusive(entry: Path):
    """Hold the build lock of cache entry `entry` (a file or directory path)."""
    entry = Path(entry)
    entry.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(entry) + ".lock", timeout=LOCK_TIMEOUT_S):
        yield


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
