"""Where the CUDA headers are: the runtime's (cuda_fp16.h, cuda_bf16.h, mma.h, math_constants.h)
and the CUDA C++ Core Libraries' (libcu++ cuda/std/*, cuda/barrier, cuda/pipeline, which
cooperative_groups.h needs too).

CuPy's wheel ships no cuda_fp16.h / cuda_bf16.h; the `nvidia-cuda-runtime` wheel (a
dependency) or a system CUDA does. The CCCL headers come from the `nvidia-cuda-cccl` wheel
(a dependency), so a device compile finds the same libcu++ on every machine. cuda-pathfinder
finds each. The runtime wheel's set lacks crt/mma.h (WMMA, tensor cores): a system CUDA's
include directory that has it is searched after the others, for what they lack.
"""

from __future__ import annotations

import functools
import glob
import os
import shutil
from pathlib import Path


def _header_directory(name: str) -> str | None:
    try:
        from cuda.pathfinder import find_nvidia_header_directory
    except ImportError:
        return None
    try:
        return find_nvidia_header_directory(name)
    except Exception:   # a cuda-pathfinder that does not know the name
        return None


@functools.lru_cache(maxsize=None)
def include_dir() -> str | None:
    """The CUDA runtime's headers."""
    return _header_directory("cudart")


@functools.lru_cache(maxsize=None)
def cccl_include_dir() -> str | None:
    """The CCCL headers (the directory holding cuda/std/, cuda/barrier, cub/, thrust/)."""
    found = _header_directory("cccl")
    if found and (Path(found) / "cuda" / "std").is_dir():
        return found
    try:   # a cuda-pathfinder that does not know "cccl": the wheel's own location
        import nvidia.cu13 as wheel
    except ImportError:
        return None
    for root in getattr(wheel, "__path__", ()):
        candidate = Path(root) / "include" / "cccl"
        if (candidate / "cuda" / "std").is_dir():
            return str(candidate)
    return None


def _system_includes():
    roots = [os.environ.get(k) for k in ("CUDA_PATH", "CUDA_HOME")]
    nvcc = shutil.which("nvcc")
    if nvcc:
        roots.append(str(Path(os.path.realpath(nvcc)).parent.parent))
    roots += ["/usr/local/cuda", *sorted(glob.glob("/usr/local/cuda-*"), reverse=True)]
    for root in filter(None, roots):
        for include in (Path(root) / "include", Path(root) / "targets" / "x86_64-linux" / "include"):
            yield include


@functools.lru_cache(maxsize=None)
def include_dirs() -> tuple[str, ...]:
    """Include directories for NVRTC: the CCCL headers, the CUDA runtime's, then (when those
    lack crt/mma.h) a system CUDA's that has it."""
    first = include_dir()
    dirs = [d for d in (cccl_include_dir(), first) if d]
    if not first or not (Path(first) / "crt" / "mma.h").is_file():
        wmma = next((str(d) for d in _system_includes() if (d / "crt" / "mma.h").is_file()), None)
        if wmma and wmma not in dirs:
            dirs.append(wmma)
    return tuple(dirs)


def header_elsewhere(header: str, exclude: str = "") -> str | None:
    """The include directory of another CUDA installation (a system CUDA's, the runtime
    wheel's) that has `header`, for a compiler whose own installation (`exclude`, its root)
    lacks it: a wheel nvcc and a system cuBLAS. None when none has it."""
    dirs = [Path(d) for d in (include_dir(),) if d] + list(_system_includes())
    for d in dirs:
        if exclude and str(d.resolve()).startswith(str(Path(exclude).resolve())):
            continue
        if (d / header).is_file():
            return str(d)
    return None
