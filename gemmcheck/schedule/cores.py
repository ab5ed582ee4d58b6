"""Each pytest-xdist worker's share of the host's cores, for numpy's BLAS and OpenMP pools.

numpy's BLAS (OpenBLAS here) starts one thread per core in every process. With one worker per
GPU, N workers ran N pools of that size on the same cores: on an H200 pair's 32 cores, two
workers took 15 % longer per property test and 25 % longer per hazards test of the nightly
than one process with 16 threads (measured 2026-11-30; the compute-sanitizer children share the
cores too). A worker limits its pools to cores / workers (threadpoolctl, at configure: numpy is
loaded by then, so its environment variables are read already) and sets OMP_NUM_THREADS,
OPENBLAS_NUM_THREADS and MKL_NUM_THREADS for the children it starts (compute-sanitizer runs,
isolated launches). A user who set any of them keeps them all.
"""

from __future__ import annotations

import os

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def available() -> int:
    """The cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:   # not on Linux
        return os.cpu_count() or 1


def share(cores: int, workers: int) -> int:
    """Threads for each of `workers` processes on `cores` cores: at least one."""
    return max(1, cores // max(1, workers))


def of_this_process(workerinput: dict) -> int:
    """The cores this process may use: its share among the run's pytest-xdist workers (all it
    may run on, outside xdist)."""
    return share(available(), int(workerinput.get("workercount") or 1))


def limit(workerinput: dict, environ=os.environ, cores: int | None = None) -> int | None:
    """In a pytest-xdist worker: limit this process's BLAS and OpenMP pools to its share of
    the cores. Returns the share, or None when nothing was limited (not a worker, or the
    user chose thread counts)."""
    workers = int(workerinput.get("workercount") or 0)
    if workers < 1 or any(v in environ for v in THREAD_VARIABLES):
        return None
    threads = share(available() if cores is None else cores, workers)
    for variable in THREAD_VARIABLES:
        environ[variable] = str(threads)
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=threads)   # kept for the life of the process
    return threads
