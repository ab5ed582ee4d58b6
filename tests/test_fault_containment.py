"""A fault at any shape costs one verdict, serially and under pytest-xdist: a worker whose
CUDA context is lost ends and xdist's replacement runs what it had not run (lost_context_plugin);
each test is counted once, where it ran; no test skips for the lost context. The GPU's
sticky error is stood in for (context_lost=True) where no GPU is needed."""

import json
import subprocess
import sys
from pathlib import Path

from child_env import child_env

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

def test_nothing_more(backend, reference, request):
    if reference.spec.name == "crashes":
        launch(reference, request)
    pytest.skip("nothing more to check")
"""


@pytest.mark.parametrize("workers", [("-n", "2"), ()], ids=["xdist", "serial"])
def test_a_process_that_loses_its_context_ends_and_a_fresh_one_runs_the_rest(pytester, workers):
    pytester.makeconftest((ROOT / "conftest.py").read_text())
    pytester.makepyfile(test_lose=LOSES_THE_CONTEXT_IN_A_WORKER)
    result = pytester.runpytest_subprocess(
        *workers, "-rsf", f"--gemm-catalog={BAD}", "--gemm-backend=cpu-sim", "--gemm-kernels=crashes,good",
        "-p", "no:cacheprovider", f"--gemm-verdicts={pytester.path / 'v.json'}",
        f"--alluredir={pytester.path / 'allure'}")
    out = result.stdout.str()
    result.stdout.fnmatch_lines([
        "*replacing crashed worker gw*" if workers else "*1 test(s) run in a fresh process*",
        "crash: crashes-float32-TILE8 (crashes<float, 8>): *cudaErrorMisalignedAddress (stand-in)",
        "the CUDA context of this process is lost: " + (
            "this pytest-xdist worker ends before its next test, which a fresh worker runs" if workers
            else "every later test that runs other kernels runs at the end of this session in a fresh process")])
    assert "context was lost" not in out and "crashed while running" not in out
    # 14 tests per kernel: the crash once, its 13 others skip naming it, good's 13 pass and
    # its last skips (in the fresh process, serially: its skip is reported here)
    result.assert_outcomes(failed=1, passed=13, skipped=14)
    assert "SKIPPED [1] test_lose.py:21: nothing more to check" in out
    failed = [line for line in out.splitlines() if line.startswith("FAILED ")]
    first = failed[0].split()[1]
    assert len(failed) == 1 and first.startswith("test_lose.py::test_launch[crashes-float32-TILE8-")
    assert f"not run: crash; see {first}" in out
    doc = json.loads((pytester.path / "v.json").read_text())
    good = [v["test"] for v in doc["verdicts"] if v["instance"] == "good-float32-TILE8"]
    assert sorted(good) == sorted(f"test_lose.py::test_launch[good-float32-TILE8-{n}]" for n in range(13))
    rows = {r["instance"]: r for r in doc["instances"]}
    assert set(rows["crashes-float32-TILE8"]["defects"]) == {"crash"}
    allure = [json.loads(p.read_text())["name"] for p in (pytester.path / "allure").glob("*-result.json")]
    assert len(allure) == len(set(allure)) == 28   # each test once



REFUSED_BY_THE_BACKEND = """
from gemmcheck.backends.cpu_sim import NotSimulated

def test_launch(backend, reference):
    raise NotSimulated(f"{reference.id}: uses what the CPU simulator does not model (stand-in)\\nmore")
"""


def test_a_backend_that_does_not_run_a_kernel_skips_its_test_never_calls_it_a_crash(pytester):
    pytester.makeconftest((ROOT / "conftest.py").read_text())
    pytester.makepyfile(test_refused=REFUSED_BY_THE_BACKEND)
    result = pytester.runpytest_subprocess(
        "-rs", f"--gemm-catalog={BAD}", "--gemm-backend=cpu-sim", "--gemm-kernels=good", "-p", "no:cacheprovider",
        f"--gemm-verdicts={pytester.path / 'v.json'}", "-p", "no:xdist")
    result.stdout.fnmatch_lines(["SKIPPED * good-float32-TILE8: uses what the CPU simulator does not model (stand-in)"])
    result.assert_outcomes(skipped=1)
    doc = json.loads((pytester.path / "v.json").read_text())
    assert not any("crash" in row["defects"] for row in doc["instances"])

# -- a real kernel that faults only at M > 48 (kernels/broken_faults_at_shapes.cu) ----------

FAULTS_AT_SHAPES = ROOT / "tests" / "data" / "faults_at_shapes" / "catalog.toml"
FAULTING = "faults_at_large_m-float32-TILE16"   # at M > 48: the shapes M 64, 600
MISALIGNED = "vector_loads_odd_k-float32-TILE16"  # float4 loads of A's rows at K % 4 != 0: K 21
LAUNCHES_AT_SHAPES = """
import pytest
from gemmcheck.judge import hazards
from gemmcheck.problems.problem import Problem
from gemmcheck.verdict import Verdict

@pytest.mark.parametrize("M, K", [(17, 20), (33, 20), (64, 20), (40, 21), (600, 20), (24, 20)],
                         ids=["17", "33", "64", "40", "600", "24"])
def test_launch(backend, any_kernel, M, K, verdicts, request):
    obs = hazards.observe(backend, any_kernel, Problem(M, 24, K, any_kernel.dtype, "exact", 1))
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
    env = child_env()
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rsf",
                             f"--gemm-backend={backend}", f"--gemm-catalog={FAULTS_AT_SHAPES}",
                             f"--gemm-verdicts={where / 'v.json'}", f"--alluredir={where / 'allure'}",
                             "test_shapes.py", *args],
                            cwd=where, env=env, capture_output=True, text=True, timeout=600)
    rows = {r["instance"]: r for r in json.loads((where / "v.json").read_text())["instances"]}
    return result, rows


def assert_one_fault_costs_one_verdict(tmp_path: Path, backend: str) -> None:
    """Serially and under -n 2: each faulting instantiation's verdict is crash, with the shape;
    its first test that meets the fault fails, its later tests skip naming it; every other
    instantiation has the verdict and the check count of a run without the faulting kernels;
    no test skips for a lost context; each test is reported once."""
    _, without = run_catalog(tmp_path, "without", backend, "--gemm-kernels=good,unguarded_store")
    for name, args in (("serial", ()), ("xdist", ("-n", "2"))):
        result, rows = run_catalog(tmp_path, name, backend, *args)
        out = result.stdout
        assert "context was lost" not in out and "crashed while running" not in out, out[-3000:]
        # no destructor's traceback from the process that lost its context, after the summary
        assert "Exception ignored in" not in out + result.stderr, (out + result.stderr)[-3000:]
        assert {k: (r["verdict"], r["checks"]) for k, r in rows.items() if k not in (FAULTING, MISALIGNED)} == {
            k: (r["verdict"], r["checks"]) for k, r in without.items()}, (name, rows, without, out[-3000:])
        verdicts = json.loads((tmp_path / name / "v.json").read_text())["verdicts"]
        for faulting in (FAULTING, MISALIGNED):
            assert set(rows[faulting]["defects"]) == {"crash"}, (name, rows[faulting], out[-3000:])
            crash = [v for v in verdicts if v["instance"] == faulting and v["findings"]]
            failed = [line.split()[1] for line in out.splitlines()
                      if line.startswith(f"FAILED test_shapes.py::test_launch[{faulting}-")]
            assert len(crash) == 1 and [crash[0]["test"]] == failed, (name, crash, failed, out[-3000:])
            # (under -n 2 another worker may have run its later shapes before the fault)
            assert f"not run: crash; see {failed[0]}" in out or args, out[-3000:]
        # serially the first shape with M > 48 is M 64; under -n 2 either of M 64 and M 600
        crash = [v for v in verdicts if v["instance"] == FAULTING and v["findings"]]
        M = crash[0]["test"].rpartition("-")[2].rstrip("]")
        assert M == "64" or (args and M == "600"), crash
        assert f"; problem M{M} N24 K20" in crash[0]["findings"][0]["summary"], crash
        # the misaligned float4 load: the same defect class on both backends, saying so; on the
        # GPU the isolated probe's ragged shape (K 21) meets it before any launch here
        crash = [v for v in verdicts if v["instance"] == MISALIGNED and v["findings"]]
        summary = crash[0]["findings"][0]["summary"]
        assert "misaligned" in summary.lower(), summary
        if backend == "cpu-sim":   # (the only shape with K 21)
            assert crash[0]["test"] == f"test_shapes.py::test_launch[{MISALIGNED}-40]", crash
            assert "; problem M40 N24 K21" in summary, summary
        # 5 instantiations x 6 shapes: good's 12 pass, the broken kernel's 6 fail, each
        # faulting kernel fails once (the fault) and skips its tests after it
        assert "8 failed" in out.splitlines()[-1], out[-3000:]
        allure = [json.loads(p.read_text())["name"] for p in (tmp_path / name / "allure").glob("*-result.json")]
        assert len(allure) == len(set(allure)) == 30, (name, sorted(allure))


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


# -- the suite's own tools: retried once, never published from a closing worker --------------

def _row_children(tmp_path, shared=True):
    from gemmcheck.judge import kill_matrix
    from gemmcheck.judge.once import Once

    return kill_matrix.RowChildren(kill_matrix.Settings(sanitizer_exe="compute-sanitizer"),
                                   shared=Once(tmp_path) if shared else None)


def test_a_tool_run_whose_child_could_not_run_is_tried_once_more(tmp_path, monkeypatch):
    from gemmcheck.judge import isolation, sanitizer

    calls = []

    def flaky(tool, plan, **kwargs):
        calls.append(tool)
        if len(calls) == 1:
            raise isolation.IsolationError("the isolated child could not run its job (killed by SIGKILL)")
        return "a run"
    monkeypatch.setattr(sanitizer, "run", flaky)
    children = _row_children(tmp_path)
    try:
        assert children._tool_run("racecheck", []) == "a run" and calls == ["racecheck", "racecheck"]
        monkeypatch.setattr(sanitizer, "run", lambda *a, **k: (_ for _ in ()).throw(
            isolation.IsolationError("killed by SIGKILL")))
        with pytest.raises(isolation.IsolationError, match="tried twice; the first time: killed by SIGKILL"):
            children._tool_run("racecheck", [])
    finally:
        children.close()


def test_what_a_closing_worker_ran_is_not_published_to_the_others(tmp_path):
    """A pytest-xdist worker that ends kills the children it runs: what they said (a child
    "killed by SIGKILL") must not become another worker's verdict on that row. Given up
    instead, the row's key is claimed and run by the worker that waits for it."""
    from gemmcheck.judge import kill_matrix
    from gemmcheck.judge.once import Once

    children = _row_children(tmp_path)
    key = "racecheck some-row"
    assert children._shared.claim(key)

    def killed_while_closing():
        children._closing.set()   # close() ran meanwhile and killed the child
        return (None, "racecheck: the isolated child could not run its job (killed by SIGKILL)", {})
    with pytest.raises(kill_matrix.Closing):
        children._for_all([key], killed_while_closing, lambda result: [result])
    other = Once(tmp_path)
    assert other.published(key) == (False, None)
    assert other.claim(key)   # a waiting worker takes the work over
    children.close()


def test_a_finishing_worker_lets_its_running_children_end_and_publishes_them(tmp_path):
    import threading
    import time

    from gemmcheck.judge.once import Once

    children = _row_children(tmp_path)
    key = "memcheck another-row"
    assert children._shared.claim(key)
    started = threading.Event()

    def slow():
        started.set()
        time.sleep(0.5)
        return "its result"
    future = children._start(children._pool, children._for_all, [key], slow, lambda r: [r])
    started.wait(5)
    children.close(finish=True)
    assert future.result() == "its result"
    assert Once(tmp_path).published(key) == (True, "its result")


def test_a_row_whose_tool_could_not_run_is_a_pytest_error_not_the_kernels_failure(pytester, monkeypatch):
    """The kill-matrix row's test errors in setup (allure: broken); the row's other tests run."""
    from gemmcheck.judge import kill_matrix

    real = kill_matrix.build_row

    def tool_failed(backend, instance, settings, children=None):
        row = real(backend, instance, settings, children)
        row.sanitizer = kill_matrix.Column(ran=True, errors=[
            "racecheck: the isolated child could not run its job (killed by SIGKILL) (and once before: ...)"])
        return row
    monkeypatch.setattr(kill_matrix, "build_row", tool_failed)
    pytester.makeconftest((ROOT / "conftest.py").read_text())
    pytester.makepyfile(test_rows="""
def test_kill_matrix(matrix_row):
    pass

def test_another_claim(matrix_row):
    pass
""")
    result = pytester.runpytest("-q", f"--gemm-catalog={BAD}", "--gemm-backend=cpu-sim", "--gemm-kernels=good",
                                "-p", "no:cacheprovider", f"--gemm-verdicts={pytester.path / 'v.json'}")
    result.assert_outcomes(errors=1, passed=1)
    result.stdout.fnmatch_lines(["*SuiteToolError: compute-sanitizer: good-float32-TILE8: could not run (tried "
                                 "twice), no verdict on the kernel: racecheck: *killed by SIGKILL*"])


def test_after_a_lost_context_only_cuda_errors_of_freed_objects_are_dropped():
    """CuPy's destructors fail once the context is lost; each would print a traceback after the
    summary. Those are dropped; any other unraisable exception still reaches pytest."""
    from types import SimpleNamespace

    from gemmcheck.backends import dropping_cuda_errors

    class CUDARuntimeError(RuntimeError):   # CuPy's, by name: the backends do not import CuPy
        pass

    seen = []
    hook = dropping_cuda_errors(seen.append)
    cuda, other = (SimpleNamespace(exc_value=e) for e in (CUDARuntimeError("cudaErrorIllegalAddress"),
                                                          ValueError("a real bug")))
    hook(cuda)
    hook(other)
    assert seen == [other]
