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


# -- a real kernel that faults only at M > 48 (kernels/broken_faults_at_shapes.cu) ----------

FAULTS_AT_SHAPES = ROOT / "tests" / "data" / "faults_at_shapes" / "catalog.toml"
FAULTING = "faults_at_large_m-float32-TILE16"
LAUNCHES_AT_SHAPES = """
import pytest
from gemmcheck.judge import hazards
from gemmcheck.problems.problem import Problem
from gemmcheck.verdict import Verdict

@pytest.mark.parametrize("M", [17, 33, 64, 40, 600, 24])
def test_launch(backend, any_kernel, M, verdicts, request):
    obs = hazards.observe(backend, any_kernel, Problem(M, 24, 20, any_kernel.dtype, "exact", 1))
    found = hazards.detect(obs)
    verdicts.record(Verdict.for_instance(any_kernel, f"M{M}", found, request.node.nodeid))
    assert not found, [f.summary for f in found]
"""


def run_catalog(tmp_path: Path, name: str, backend: str, *args) -> tuple[subprocess.CompletedProcess, dict]:
    """The launches above over tests/data/faults_at_shapes (a faulting kernel next to a good
    and a broken one), in a pytest of its own; (its result, verdicts.json by instance)."""
    where = tmp_path / name
    where.mkdir()
    (where / "conftest.py").write_text((ROOT / "conftest.py").read_text())
    (where / "test_shapes.py").write_text(LAUNCHES_AT_SHAPES)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rsf",
                             f"--gemm-backend={backend}", f"--gemm-catalog={FAULTS_AT_SHAPES}",
                             f"--gemm-verdicts={where / 'v.json'}", f"--alluredir={where / 'allure'}",
                             "test_shapes.py", *args],
                            cwd=where, env=env, capture_output=True, text=True, timeout=600)
    rows = {r["instance"]: r for r in json.loads((where / "v.json").read_text())["instances"]}
    return result, rows


def assert_one_fault_costs_one_verdict(tmp_path: Path, backend: str) -> None:
    """Serially and under -n 2: the faulting instantiation's verdict is crash, with the shape;
    its first test with M > 48 fails, its later tests skip naming it; every other instantiation
    has the verdict and the check count of a run without the faulting kernel; no test skips
    for a lost context; each test is reported once."""
    _, without = run_catalog(tmp_path, "without", backend, "--gemm-kernels=good,unguarded_store")
    for name, args in (("serial", ()), ("xdist", ("-n", "2"))):
        result, rows = run_catalog(tmp_path, name, backend, *args)
        out = result.stdout
        assert "context was lost" not in out and "crashed while running" not in out, out[-3000:]
        assert {k: (r["verdict"], r["checks"]) for k, r in rows.items() if k != FAULTING} == {
            k: (r["verdict"], r["checks"]) for k, r in without.items()}, name
        assert rows[FAULTING]["defects"] == {"crash": 1} or set(rows[FAULTING]["defects"]) == {"crash"}
        first = f"test_shapes.py::test_launch[{FAULTING}-64]"
        assert f"FAILED {first}" in out, out[-3000:]
        crash = [v for v in json.loads((tmp_path / name / "v.json").read_text())["verdicts"]
                 if v["instance"] == FAULTING and v["findings"]]
        assert [v["test"] for v in crash] == [first]
        assert "; problem M64 N24 K20" in crash[0]["findings"][0]["summary"]   # the shape
        # 4 instantiations x 6 shapes: the fault once, good's 12 pass, the broken kernel's 6
        # fail, the faulting kernel's M 17 and 33 pass, M 64 fails, the 3 after skip
        assert "7 failed" in out.splitlines()[-1], out[-3000:]
        allure = [json.loads(p.read_text())["name"] for p in (tmp_path / name / "allure").glob("*-result.json")]
        assert len(allure) == len(set(allure)) == 24, name


def test_a_kernel_that_faults_only_at_large_m_costs_one_verdict_on_cpu_sim(tmp_path):
    assert_one_fault_costs_one_verdict(tmp_path, "cpu-sim")


@pytest.mark.gpu
def test_a_kernel_that_faults_only_at_large_m_costs_one_verdict_on_the_gpu(tmp_path):
    """On the GPU the fault is a sticky illegal address: the process's context is lost, and
    the rest runs in a fresh process (serially) or a fresh worker (-n 2)."""
    from gemmcheck.backends import device

    found, why = device.cuda_device()
    if not found:
        pytest.skip(f"needs a CUDA device; {why}")
    assert_one_fault_costs_one_verdict(tmp_path, "cupy")
