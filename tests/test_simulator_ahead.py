"""gemmcheck.pytest_plugin.simulator_plugin: a GPU session that compares the GPU with the CPU
simulator builds the simulator's modules of the compared instantiations from the end of
collection, on a thread, not in the comparison's first test; without a GPU nothing starts."""

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

COMPARED = """
import pytest
from gemmcheck.problems.harness import run_once
from gemmcheck.problems.problem import Problem

@pytest.mark.with_simulator
@pytest.mark.instances.with_args(lambda i: i.spec.name == "matmul_tiled" and i.tile == 4
                                 and i.dtype in ("float32", "float64"))
def test_compared(cpu_simulator, reference):
    problem = Problem(4, 4, 4, reference.types, "exact", seed=7)
    A, B = problem.operands()
    assert cpu_simulator.name == "cpu-sim"
    assert run_once(cpu_simulator, reference, A, B).C_bits is not None

@pytest.mark.with_simulator
@pytest.mark.skip(reason="skipped: not built")
@pytest.mark.instances.with_args(lambda i: i.spec.name == "matmul_naive" and i.tile == 4 and i.dtype == "float32")
def test_skipped(cpu_simulator, reference):
    pass
"""

# Records, in the session, what the plugin started by the end of collection and what it built.
RECORDER = """
import json, os
import pytest
from gemmcheck.backends import device
from gemmcheck.pytest_plugin import simulator_plugin

if os.environ.get("STAND_IN_GPU"):
    device.cuda_device = lambda: (True, "")   # a GPU session, as far as the plugin asks
seen = {"built": []}
real = simulator_plugin._made

def recording(instances):
    seen["built"].append(sorted(i.id for i in instances))
    return real(instances)
simulator_plugin._made = recording

@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    seen["ahead"] = simulator_plugin.AHEAD in session.config.stash

def pytest_sessionfinish(session):
    (session.config.rootpath / "seen.json").write_text(json.dumps(seen))
"""


@pytest.mark.parametrize("gpu", [True, False], ids=["gpu-session", "no-gpu"])
def test_the_compared_instantiations_build_from_the_end_of_collection(pytester, monkeypatch, gpu):
    pytester.makeconftest((ROOT / "conftest.py").read_text() + RECORDER)
    pytester.makepyfile(test_compare=COMPARED)
    if gpu:
        monkeypatch.setenv("STAND_IN_GPU", "1")
    result = pytester.runpytest_subprocess("--gemm-backend=cupy", "-p", "no:cacheprovider", "-p", "no:xdist",
                                           f"--gemm-verdicts={pytester.path / 'v.json'}")
    result.assert_outcomes(passed=2, skipped=1)
    seen = json.loads((pytester.path / "seen.json").read_text())
    # ahead only in a GPU session; either way one build, of the compared tests that run only
    assert seen["ahead"] is gpu
    assert seen["built"] == [["matmul_tiled-float32-TILE4", "matmul_tiled-float64-TILE4"]]
