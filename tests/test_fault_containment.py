"""A fault at any shape costs one verdict, serially and under pytest-xdist: a worker whose
CUDA context is lost ends and xdist's replacement runs what it had not run (lost_context);
each test is counted once, where it ran; no test skips for the lost context. The GPU's
sticky error is stood in for (context_lost=True) where no GPU is needed."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BAD = ROOT / "examples" / "bad" / "catalog.toml"

# Every test of `crashes` faults (whichever a worker runs first loses its context), `good`
# records one verdict per test: counts that do not depend on how xdist deals the tests.
LOSES_THE_CONTEXT_IN_A_WORKER = """
import pytest
from gemmcheck.backends import KernelLaunchError

def launch(reference, request):
    from gemmcheck.pytest_plugin.session import gemm_config
    from gemmcheck.verdict import Verdict

    if reference.spec.name == "crashes":
        error = KernelLaunchError(f"{reference.id}: cudaErrorMisalignedAddress (stand-in)")
        error.context_lost = True
        raise error
    gemm_config(request.config).verdicts.record(Verdict.for_instance(reference, "launch", [], request.node.nodeid))

@pytest.mark.parametrize("n", range(13))
def test_launch(backend, reference, request, n):
    launch(reference, request)
"""


def test_a_worker_that_loses_its_context_ends_and_a_fresh_one_runs_the_rest(pytester):
    pytester.makeconftest((ROOT / "conftest.py").read_text())
    pytester.makepyfile(test_lose=LOSES_THE_CONTEXT_IN_A_WORKER)
    result = pytester.runpytest_subprocess(
        "-n", "2", "-rsf", f"--gemm-catalog={BAD}", "--gemm-backend=cpu-sim", "--gemm-kernels=crashes,good",
        "-p", "no:cacheprovider", f"--gemm-verdicts={pytester.path / 'v.json'}",
        f"--alluredir={pytester.path / 'allure'}")
    out = result.stdout.str()
    result.stdout.fnmatch_lines([
        "*replacing crashed worker gw*",
        "crash: crashes-float32-TILE8 (crashes<float, 8>): *cudaErrorMisalignedAddress (stand-in)",
        "the CUDA context of this process is lost: this pytest-xdist worker ends before its next test, "
        "which a fresh worker runs"])
    assert "context was lost" not in out and "crashed while running" not in out
    # 13 tests per kernel: the crash once, its 12 others skip naming it, good's 13 pass
    result.assert_outcomes(failed=1, passed=13, skipped=12)
    failed = [line for line in out.splitlines() if line.startswith("FAILED ")]
    first = failed[0].split()[1]
    assert len(failed) == 1 and first.startswith("test_lose.py::test_launch[crashes-float32-TILE8-")
    assert out.count(f"not run: crash; see {first}") == 1   # -rs folds the 12 into one line
    doc = json.loads((pytester.path / "v.json").read_text())
    good = [v["test"] for v in doc["verdicts"] if v["instance"] == "good-float32-TILE8"]
    assert sorted(good) == sorted(f"test_lose.py::test_launch[good-float32-TILE8-{n}]" for n in range(13))
    rows = {r["instance"]: r for r in doc["instances"]}
    assert set(rows["crashes-float32-TILE8"]["defects"]) == {"crash"}
    allure = [json.loads(p.read_text())["name"] for p in (pytester.path / "allure").glob("*-result.json")]
    assert len(allure) == len(set(allure)) == 26   # each test once
