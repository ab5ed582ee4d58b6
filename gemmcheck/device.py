"""Is there a CUDA device here, and what is it? Asked once per process."""

from __future__ import annotations

import functools
import shutil


@functools.lru_cache(maxsize=None)
def cuda_device() -> tuple[bool, str]:
    """(True, 'NVIDIA H200, compute capability 9.0, ...') or (False, why not)."""
    try:
        import cupy
    except Exception as exc:  # ImportError, or a broken CUDA install under it
        return False, f"no CUDA device: cupy does not import ({type(exc).__name__}: {exc})"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        if "cudaErrorInsufficientDriver" in str(exc):
            # What the runtime says on a machine with no NVIDIA driver at all.
            return False, ("no CUDA device: no NVIDIA driver here, or one too old for this CUDA "
                           "runtime (cudaErrorInsufficientDriver)")
        return False, f"no CUDA device: {type(exc).__name__}: {exc}"
    if count < 1:
        return False, "no CUDA device: the CUDA runtime reports 0 devices"
    props = cupy.cuda.runtime.getDeviceProperties(0)
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    return True, (f"{name}, compute capability {props['major']}.{props['minor']}, "
                  f"{props['multiProcessorCount']} SMs, CuPy {cupy.__version__}")


def tool(name: str) -> str | None:
    """Path of a CUDA command-line tool (compute-sanitizer, ncu) on PATH, or None."""
    return shutil.which(name)
