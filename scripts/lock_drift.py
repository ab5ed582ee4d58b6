#!/usr/bin/env python
"""Say which installed packages differ from requirements.lock: run it with the Python of an
environment that installed the newest versions pyproject.toml allows (the nightly's `newest`
job), so a test that broke overnight comes with the upstream releases that moved.

    .venv/bin/python scripts/lock_drift.py [requirements.lock]

Prints `name: locked -> installed` for each package whose version differs, `(not locked)` or
`(not installed)` for a package on one side only, then a count. Always exits 0 when the lock
can be read: the tests decide whether the night failed, this only explains it.
"""

from __future__ import annotations

import re
import sys
from importlib import metadata
from pathlib import Path

# What a virtual environment brings and the project itself: never in the lock, never drift.
NOT_LOCKED_BY_DESIGN = {"pip", "setuptools", "wheel", "gemmcheck"}

# `name==version` opening a requirement line; hashes, markers and `# via` lines follow it.
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")


def canonical(name: str) -> str:
    """PEP 503's form, so `ml_dtypes`, `ML-Dtypes` and `ml.dtypes` are one package."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_lock(text: str) -> dict[str, str]:
    """canonical name -> pinned version, for every `name==version` line of a pip requirements file."""
    return {canonical(m[1]): m[2] for m in map(_PIN.match, text.splitlines()) if m}


def installed_versions() -> dict[str, str]:
    """canonical name -> version, for every distribution the running Python sees."""
    return {canonical(d.metadata["Name"]): d.version for d in metadata.distributions()}


def drift(locked: dict[str, str], installed: dict[str, str]) -> list[str]:
    """One `name: locked -> installed` line per package that differs, sorted by name."""
    lines = []
    for name in sorted((locked.keys() | installed.keys()) - NOT_LOCKED_BY_DESIGN):
        was, now = locked.get(name), installed.get(name)
        if was != now:
            lines.append(f"{name}: {was or '(not locked)'} -> {now or '(not installed)'}")
    return lines


def main(argv: list[str]) -> int:
    path = Path(argv[0] if argv else "requirements.lock")
    try:
        locked = read_lock(path.read_text())
    except OSError as error:
        print(f"lock_drift: cannot read the lock {path}: {error.strerror}; pass its path "
              "(python scripts/lock_drift.py requirements.lock)", file=sys.stderr)
        return 2
    if not locked:
        print(f"lock_drift: {path} pins nothing (no `name==version` line); is it a lock made by "
              "scripts/lock.sh?", file=sys.stderr)
        return 2
    lines = drift(locked, installed_versions())
    for line in lines:
        print(line)
    print(f"{len(lines)} package(s) differ from {path}" if lines else f"every package as {path} pins")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
