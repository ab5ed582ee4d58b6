"""Can the run write its reports where it was told to? Asked before any test runs."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def unwritable_dir(path: Path) -> str | None:
    """Why files cannot be created in directory ``path`` (created if missing), or None."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".gemmcheck-probe-"):
            pass
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    return None


def unwritable_file(path: Path) -> str | None:
    """Why file ``path`` cannot be written (its directory is created if missing), or None."""
    path = Path(path)
    if path.is_dir():
        return "it is a directory; give a file name"
    if path.exists() and not os.access(path, os.W_OK):
        return "the file exists and is read-only"
    return unwritable_dir(path.parent)
