"""Where the CUDA headers (cuda_fp16.h, cuda_bf16.h, mma.h) are.

CuPy's wheel ships no cuda_fp16.h / cuda_bf16.h; the `nvidia-cuda-runtime`
wheel (a dependency) or a system CUDA does. cuda-pathfinder finds either.
The wheel's set lacks crt/mma.h (WMMA, tensor cores): a system CUDA's include
directory that has it is searched after the first, for what the first lacks.
"""

from __future__ import annotations

import functools
import glob
import os
import shutil
from pathlib import Path


@functools.lru_cache(maxsize=None)
def include_dir() -> str | None:
    try:
        from cuda.pathfinder import find_nvidia_header_directory
    except ImportError:
        return None
    return find_nvidia_header_directory("cudart")



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
    """Include directories for NVRTC: the CUDA headers, then (when they lack crt/mma.h) a
    system CUDA's that has it."""
    first = include_dir()
    dirs = [first] if first else []
    if not first or not (Path(first) / "crt" / "mma.h").is_file():
        wmma = next((str(d) for d in _system_includes() if (d / "crt" / "mma.h").is_file()), None)
        if wmma and wmma not in dirs:
            dirs.append(wmma)
    return tuple(dirs)
