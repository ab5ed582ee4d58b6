"""The CPU simulator and the GPU compute the same bits on exact inputs.

Exact inputs leave one correct answer (every partial sum exact, one rounding at
the store), so the two backends must agree bit for bit; a difference is a
simulator bug or a kernel whose result depends on more than its inputs.
Runs on a GPU machine that also has g++ (the simulator's compiler).
"""

import numpy as np
import pytest

from gemmcheck import backends
from gemmcheck.harness import run_once
from gemmcheck.problems import Problem

SHAPES = ((4, 4, 4), (33, 17, 65), (64, 64, 64))


@pytest.fixture(scope="session")
def simulator():
    try:
        return backends.create("cpu-sim")
    except backends.BackendUnavailable as exc:
        pytest.skip(f"needs the CPU simulator too: {exc}")


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.instances(lambda i: i.tile in (4, 16))
def test_gpu_and_cpu_simulator_give_identical_bits(backend, simulator, reference):
    if backend.name != "cupy":
        pytest.skip(f"compares the GPU with the simulator; this run's backend is {backend.name}")
    shapes = [s for s in SHAPES if reference.supports(*s)]
    for M, N, K in shapes:
        A, B = Problem(M, N, K, reference.dtype, "exact", seed=7).operands()
        gpu = run_once(backend, reference, A, B).C_bits
        sim = run_once(simulator, reference, A, B).C_bits
        differ = np.argwhere(gpu != sim)
        assert differ.size == 0, (
            f"wrong_values: {reference.id} on M{M}xN{N}xK{K} exact seed 7: the GPU and the CPU "
            f"simulator differ in {len(differ)} of {gpu.size} elements; first C[{differ[0][0]}, "
            f"{differ[0][1]}]: GPU bits {gpu[tuple(differ[0])]:#x}, simulator {sim[tuple(differ[0])]:#x}")
    assert shapes, f"{reference.id} supports none of {SHAPES}"
