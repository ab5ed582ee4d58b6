"""Where nvcc is, and whether it can build here.

nvcc is found as the other CUDA tools are: ``GEMMCHECK_NVCC`` (a path) when set, else
cuda-pathfinder (the ``nvidia-cuda-nvcc`` wheel first, a dependency, then ``CUDA_PATH`` /
``CUDA_HOME`` and a system CUDA), else ``nvcc`` on PATH and ``/usr/local/cuda*/bin/nvcc``.
It needs a host compiler (nvcc preprocesses with it, also for a device-only build):
``NVCC_CCBIN`` when set, else ``gcc`` on PATH.
"""

from __future__ import annotations

import functools
import glob
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

ENVIRONMENT = "GEMMCHECK_NVCC"
_RELEASE = re.compile(r"release (?P<version>\d+\.\d+), V(?P<build>[\d.]+)")


@dataclass(frozen=True)
class Nvcc:
    path: str        # the nvcc executable, symlinks resolved
    version: str     # "13.0"
    build: str       # "13.0.88": ptxas's version too, part of every cache key

    def describe(self) -> str:
        return f"nvcc {self.build} ({self.path})"


class NvccMissing(RuntimeError):
    """No usable nvcc: the message says where it was looked for and what to install."""


def _candidates():
    given = os.environ.get(ENVIRONMENT)
    if given:
        yield given
        return
    try:
        from cuda.pathfinder import find_nvidia_binary_utility
        yield find_nvidia_binary_utility("nvcc")
    except Exception:   # an older cuda-pathfinder without binary utilities
        pass
    yield shutil.which("nvcc")
    yield from sorted(glob.glob("/usr/local/cuda*/bin/nvcc"), reverse=True)


@functools.lru_cache(maxsize=None)
def _probe(path: str) -> Nvcc | str:
    """The Nvcc at `path`, or why it cannot build."""
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{path} does not run: {exc}"
    found = _RELEASE.search(out.stdout)
    if out.returncode or not found:
        return f"{path} --version failed: {(out.stderr or out.stdout).strip()[:200]}"
    host = os.environ.get("NVCC_CCBIN") or "gcc"
    if not shutil.which(host):
        return f"{path} needs a host compiler and '{host}' is not on PATH (install g++, or set NVCC_CCBIN)"
    return Nvcc(str(Path(path).resolve()), found["version"], found["build"])


@functools.lru_cache(maxsize=None)
def find() -> Nvcc | None:
    """The nvcc to build with, or None (``why_missing`` says why)."""
    for path in filter(None, _candidates()):
        found = _probe(path)
        if isinstance(found, Nvcc):
            return found
    return None


def why_missing() -> str:
    """Why `find` found none: what was tried, and the fix."""
    tried = [p for p in dict.fromkeys(filter(None, _candidates()))]
    reasons = [r for r in (_probe(p) for p in tried) if isinstance(r, str)]
    where = "; ".join(reasons) if reasons else (
        f"not found (looked at ${ENVIRONMENT}, the nvidia-cuda-nvcc wheel, CUDA_PATH / CUDA_HOME, PATH and "
        "/usr/local/cuda*/bin)")
    return f"nvcc: {where}; install it with `pip install nvidia-cuda-nvcc` (a gemmcheck dependency) or a CUDA toolkit"


def require() -> Nvcc:
    found = find()
    if found is None:
        raise NvccMissing(why_missing())
    return found
