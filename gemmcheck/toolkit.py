"""Where the CUDA headers are, and the NVRTC options every compile uses.

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


def nvrtc_options() -> tuple[str, ...]:
    options = ["-std=c++17"]
    if include_dir():
        options.append(f"-I{include_dir()}")
    return tuple(options)
