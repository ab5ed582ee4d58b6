"""Where the CUDA headers (cuda_fp16.h, cuda_bf16.h) are.

CuPy's wheel ships no cuda_fp16.h / cuda_bf16.h; the `nvidia-cuda-runtime`
wheel (a dependency) or a system CUDA does. cuda-pathfinder finds either.
"""

from __future__ import annotations

import functools


@functools.lru_cache(maxsize=None)
def include_dir() -> str | None:
    try:
        from cuda.pathfinder import find_nvidia_header_directory
    except ImportError:
        return None
    return find_nvidia_header_directory("cudart")

