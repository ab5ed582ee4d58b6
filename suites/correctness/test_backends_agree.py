"""The CPU simulator and the GPU compute the same bits on exact inputs.

Exact inputs leave one correct answer (every partial sum exact, one rounding at
the store), so the two backends must agree bit for bit; a difference is a
simulator bug or a kernel whose result depends on more than its inputs.
Runs on a GPU machine that also has g++ (the simulator's compiler); the simulator's builds
start at the end of collection (gemmcheck.pytest_plugin.simulator_plugin).
"""

import numpy as np
import pytest

from gemmcheck.problems.harness import run_once
from gemmcheck.judge.oracle import judge
from gemmcheck.problems.problem import Problem

SHAPES = ((4, 4, 4), (33, 17, 65), (64, 64, 64))


@pytest.mark.gpu
@pytest.mark.with_simulator
@pytest.mark.slow
@pytest.mark.instances.with_args(lambda i: i.tile in (4, 16))
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "M{}xN{}xK{}".format(*s))
def test_gpu_and_cpu_simulator_give_identical_bits(backend, cpu_simulator, require_in_scope, reference,
                                                    assert_judged, shape):
    if not backend.runs_on_cuda_device:
        pytest.skip(f"compares the GPU with the simulator; this run's backend is {backend.name}")
    require_in_scope(reference, *shape)
    if reference.types.epilogue.transcendental:
        pytest.skip(f"{reference.types.epilogue.activation} is not exact in floating point: each backend's "
                    "library may round it its own way (both are held to the bound)")
    problem = Problem(*shape, reference.types, "exact", seed=7)
    A, B = problem.operands()
    runs = {"GPU": run_once(backend, reference, A, B), "CPU simulator": run_once(cpu_simulator, reference, A, B)}
    for where, run in runs.items():
        assert_judged(judge(run, A, B, exact=True, problem=f"{problem.label} on the {where}"))
    # Both hold the one exact answer; only the sign of a zero result may still differ.
    gpu, sim = runs["GPU"].C_bits, runs["CPU simulator"].C_bits
    assert np.array_equal(gpu, sim), (
        f"{reference.id} on {problem.label}: both correct, but zero signs differ at "
        f"{np.argwhere(gpu != sim)[:4].tolist()}")
