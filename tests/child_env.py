"""The environment of a pytest or python run a test starts: this tree first on the path, then
whatever the caller had there (where the project's dependencies may live, e.g. wheels unpacked
beside an image's Python)."""

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def child_env(*first: Path | str, **extra: str) -> dict[str, str]:
    """os.environ with `first` (default: the repository root) before the caller's PYTHONPATH."""
    path = [str(p) for p in (first or (ROOT,))] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path), **extra}
