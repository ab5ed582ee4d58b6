"""One pytest-xdist worker per GPU: which GPUs a run uses and which one a worker owns.

The controller picks the GPUs (all it can see, or ``--gemm-gpus``) and hands worker
k the k-th (with more workers than GPUs: a few to the first GPU, which times the performance
suite, the others round robin over the rest; gpu_index); the worker sets
CUDA_VISIBLE_DEVICES in its pytest_configure, before anything initializes CUDA, so
every CuPy call there sees only its own card as device 0.

It needs pytest-xdist's objects for that: what the controller decides travels to each worker
in its workerinput (the keys below), and the controller keeps the run's GPU count in its
config.stash (plugin.py's pytest_configure_node fills both).
"""

from __future__ import annotations

import argparse
import os

import pytest

from gemmcheck.schedule import gpu_turns

VISIBLE = "CUDA_VISIBLE_DEVICES"
# Keys gemmcheck adds to pytest-xdist's workerinput.
WORKER_GPU = "gemm_gpu"              # the CUDA_VISIBLE_DEVICES value the worker sets
WORKER_OWNS_GPU = "gemm_gpu_owned"   # no other worker of the run shares that GPU
WORKER_GPU_COUNT = "gemm_gpu_count"  # how many GPUs the run spreads over (timing_workers)
RUN_GPU_COUNT = pytest.StashKey[int]()   # the same, in the controller's config


def parse_option(value: str) -> int | tuple[int, ...]:
    """--gemm-gpus: a count ("2": the first two GPUs) or ordinals ("0,1"; one ordinal: "3,")."""
    text = value.strip()
    try:
        if "," not in text:
            count = int(text)
            if count < 1:
                raise argparse.ArgumentTypeError(f"{value!r}: a GPU count must be >= 1")
            return count
        ordinals = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{value!r} is neither a GPU count nor a list of ordinals; e.g. --gemm-gpus 2 or "
            "--gemm-gpus 0,1") from None
    if not ordinals or any(o < 0 for o in ordinals) or len(set(ordinals)) != len(ordinals):
        raise argparse.ArgumentTypeError(f"{value!r}: give distinct ordinals >= 0, e.g. 0,1")
    return ordinals


def visible_count() -> int:
    """How many CUDA devices this process can see (0 without CuPy, driver or device)."""
    from gemmcheck.backends import device

    if not device.cuda_device()[0]:
        return 0
    import cupy

    return cupy.cuda.runtime.getDeviceCount()


def choose(option: int | tuple[int, ...] | None, available: int) -> tuple[int, ...]:
    """The ordinals (among the visible devices) a run spreads over. Raises ValueError
    naming the option and the devices there are when the option asks for more."""
    if option is None:
        return tuple(range(available))
    wanted = tuple(range(option)) if isinstance(option, int) else option
    missing = [o for o in wanted if o >= available]
    if missing:
        raise ValueError(f"--gemm-gpus {','.join(map(str, wanted))}: this machine shows "
                         f"{available} CUDA device(s) (ordinals 0..{available - 1}); "
                         f"no device {', '.join(map(str, missing))}")
    return wanted


def physical(ordinal: int, environ=os.environ) -> str:
    """The CUDA_VISIBLE_DEVICES value that means `ordinal` of the devices visible here."""
    parent = [d.strip() for d in environ.get(VISIBLE, "").split(",") if d.strip()]
    return parent[ordinal] if ordinal < len(parent) else str(ordinal)


# With several GPUs and more workers than GPUs, 1 worker in TIMING_SHARE of each GPU's
# round-robin share goes to the first GPU: its workers time the performance suite from the
# start (units.timers), and being few they keep few performance units in flight there, so
# the rest stay queued for the other GPUs' workers once their rows are done.
TIMING_SHARE = 3


def timing_count(gpu_count: int, workers: int) -> int:
    """How many workers the run's first GPU gets (0: no timing GPU, with one GPU or one
    worker): one where every worker has a GPU of its own, else workers / (TIMING_SHARE *
    gpu_count), rounded up."""
    if gpu_count < 2 or workers < 2:
        return 0
    if workers <= gpu_count:
        return 1
    return -(-workers // (TIMING_SHARE * gpu_count))


def gpu_index(worker_index: int, gpu_count: int, workers: int) -> int:
    """Which of the run's GPUs (an index into them) worker `worker_index` gets: the first
    timing_count workers the first GPU, the others round robin over the rest (over all of
    them with one GPU)."""
    timing = timing_count(gpu_count, workers)
    if not timing:
        return worker_index % gpu_count
    if worker_index < timing:
        return 0
    return 1 + (worker_index - timing) % (gpu_count - 1)


def timing_workers(gpu_count: int, workers: int) -> frozenset[int]:
    """The workers on the run's first GPU, which take the performance suite's units when a run
    spreads over several GPUs (units.timers): their card times while the others run everything
    else, the compute-sanitizer children included. Empty with one GPU, or one worker."""
    return frozenset(range(timing_count(gpu_count, workers)))


def worker_input(gpus: tuple[int, ...], worker_index: int, worker_count: int,
                 environ=os.environ, lock_folder=None) -> dict:
    """What the controller adds to worker `worker_index`'s workerinput. A worker that shares
    its GPU also gets that GPU's lock file (gpu_turns), in the folder `lock_folder()` gives."""
    if not gpus:
        return {}
    where = gpu_index(worker_index, len(gpus), worker_count)
    gpu = physical(gpus[where], environ)
    owned = sum(gpu_index(k, len(gpus), worker_count) == where for k in range(worker_count)) == 1
    given = {WORKER_GPU: gpu, WORKER_OWNS_GPU: owned, WORKER_GPU_COUNT: len(gpus)}
    if not owned and lock_folder is not None:
        given[gpu_turns.WORKER_GPU_LOCK] = gpu_turns.lock_path(lock_folder(), gpu)
    return given


def gpu_count_of_run(config) -> int:
    """How many GPUs this run spreads over, as the controller dealt them (0 on cpu-sim or
    without pytest-xdist): the worker's workerinput says; the controller keeps it in
    RUN_GPU_COUNT once it has configured a worker."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        return int(workerinput.get(WORKER_GPU_COUNT, 0))
    return config.stash.get(RUN_GPU_COUNT, 0)


def pin(workerinput: dict, environ=os.environ) -> str | None:
    """In a worker: restrict CUDA to the worker's GPU. Returns the value set, or None."""
    gpu = workerinput.get(WORKER_GPU)
    if gpu is not None:
        environ[VISIBLE] = gpu
    return gpu


def owns_its_gpu(config) -> bool:
    """True when no other process of this run launches on this process's GPU: no
    pytest-xdist, or a worker pinned to a GPU no other worker has."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None:
        return True
    return bool(workerinput.get(WORKER_OWNS_GPU, False))


def can_time(config) -> bool:
    """Whether this process may time kernels: it owns its GPU, or it shares it and takes
    turns with the others (gpu_turns: no sample while another launches)."""
    return owns_its_gpu(config) or gpu_turns.WORKER_GPU_LOCK in getattr(config, "workerinput", {})
