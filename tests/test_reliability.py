"""A bad kernel costs one failure and one verdict: compile error, crash and hang, on cpu-sim
(the GPU's isolated probe and lost-context handling through the same plugin, with the
CUDA error faked where a GPU is needed)."""

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gemmcheck import containment
from gemmcheck.containment import probe
from gemmcheck.pytest_plugin import build_plugin
from gemmcheck.schedule import rerun
from gemmcheck.contract import catalog
from gemmcheck.backends import KernelLaunchError
from child_env import child_env

ROOT = Path(__file__).resolve().parent.parent
BAD = ROOT / "examples" / "bad" / "catalog.toml"
BUILD_TEST = "suites/compile/test_builds.py::test_every_instantiation_of_the_source_builds[does_not_compile.cu]"


def run_suites(tmp_path, *args):
    env = child_env()
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                           "--gemm-backend=cpu-sim", "--gemm-hang-timeout=2",
                           f"--gemm-verdicts={tmp_path / 'verdicts.json'}",
                           f"--alluredir={tmp_path / 'allure'}", f"--gemm-catalog={BAD}", *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)


def verdict_rows(tmp_path) -> dict:
    return {r["instance"]: r for r in json.loads((tmp_path / "verdicts.json").read_text())["instances"]}


def test_the_bad_catalog_costs_one_failure_per_bad_kernel_and_the_good_one_is_correct(tmp_path):
    out = run_suites(tmp_path, "suites/")
    text = out.stdout + out.stderr
    assert out.returncode == 1, text
    failed = sorted(re.findall(r"^FAILED (\S+)", text, re.M))
    assert failed == sorted([
        BUILD_TEST,
        # the first check that launches each (suites/correctness/test_blas_rules.py runs first)
        "suites/correctness/test_blas_rules.py::test_K0_writes_beta_C0_everywhere[crashes-float32-TILE8-alpha1-beta0]",
        "suites/correctness/test_blas_rules.py::test_K0_writes_beta_C0_everywhere[hangs-float32-TILE8-alpha1-beta0]",
    ]), text
    assert re.search(r"\b3 failed\b", text.splitlines()[-1]) and "error" not in text.splitlines()[-1], text
    rows = verdict_rows(tmp_path)
    assert rows["good-float32-TILE8"]["verdict"] == "correct" and rows["good-float32-TILE8"]["checks"] >= 10
    for instance, defect in (("does_not_compile", "compile_error"), ("crashes", "crash"), ("hangs", "hang")):
        row = rows[f"{instance}-float32-TILE8"]
        assert set(row["defects"]) == {defect} and row["status"] == "unexpected", row
    # short: besides pytest's one-line-per-reason skip summary (-ra in pytest.ini), under 60 lines
    assert "Traceback" not in text and len([x for x in text.splitlines() if not x.startswith("SKIPPED")]) < 60


def test_without_its_build_test_a_kernel_that_does_not_compile_fails_its_first_test_only(tmp_path):
    out = run_suites(tmp_path, "suites/correctness/test_exact_results.py", "--gemm-kernels=does_not_compile")
    text = out.stdout + out.stderr
    assert out.returncode == 1, text
    failed = re.findall(r"^FAILED (\S+)", text, re.M)
    assert len(failed) == 1, text
    assert f"not compiled: see {failed[0]}" in text
    assert "does_not_compile.cu:11:" in text    # the compiler's error at the user's file and line
    assert set(verdict_rows(tmp_path)["does_not_compile-float32-TILE8"]["defects"]) == {"compile_error"}


def test_the_isolated_probe_finds_the_crash_and_the_hang_and_passes_the_good_kernel():
    instances = [i for spec in catalog.load(BAD) for i in spec.instances()]
    lost = containment.probe_instances(instances, "cpu-sim", timeout=2.0)
    assert {k: v.status for k, v in lost.items()} == {"crashes-float32-TILE8": "crash",
                                                      "hangs-float32-TILE8": "hang"}
    assert "no progress for 2.0 s" in lost["hangs-float32-TILE8"].message   # the child's own timeout


def test_probe_problems_are_small_ragged_and_aligned_within_the_claim():
    specs = {s.name: s for s in catalog.load(ROOT / "examples" / "catalog.toml")}
    any_shape = next(iter(specs["sgemm"].instances()))
    aligned_only = next(iter(specs["sgemm_aligned"].instances()))
    shapes = [(s.M, s.N, s.K) for s in containment.probe_steps([any_shape])]
    assert len(shapes) == 2 and any(m % any_shape.tile for m, _, _ in shapes)
    assert [(s.M % 16, s.N % 16, s.K % 4) for s in containment.probe_steps([aligned_only])] == [(0, 0, 0)]


def test_sticky_cuda_errors_are_told_from_others():
    from gemmcheck.backends.cupy_backend import is_sticky

    class CUDARuntimeError(RuntimeError):
        def __init__(self, status, text):
            super().__init__(text)
            self.status = status

    assert is_sticky(CUDARuntimeError(700, "cudaErrorIllegalAddress: an illegal memory access"))
    assert is_sticky(RuntimeError("CUDA_ERROR_LAUNCH_FAILED: unspecified launch failure"))
    assert not is_sticky(CUDARuntimeError(2, "cudaErrorMemoryAllocation: out of memory"))
    assert not is_sticky(ValueError("bad argument"))


LOSES_THE_CONTEXT = """
import pytest
from gemmcheck.backends import KernelLaunchError

def test_a_launch_that_loses_the_context(backend, reference):
    if reference.spec.name != "crashes":
        return
    error = KernelLaunchError(f"{reference.id}: cudaErrorIllegalAddress (stand-in)")
    error.context_lost = True
    raise error

def test_later(backend, reference, request):
    from gemmcheck.pytest_plugin.session import gemm_config
    from gemmcheck.verdict import Verdict

    gemm_config(request.config).verdicts.record(Verdict.for_instance(reference, "later", [], request.node.nodeid))

def test_without_kernels():
    pass
"""


def test_a_lost_cuda_context_fails_once_and_the_rest_runs_in_a_fresh_process(pytester):
    """A fault the probe missed loses the process's CUDA context: that test fails once, the
    lost kernel's other tests skip naming it, and every later test of other kernels runs at
    the end of the session in a child pytest, whose reports, verdicts and allure results are
    this session's: each test counted once, where it ran, none skipped for the lost context."""
    pytester.makeconftest((ROOT / "conftest.py").read_text())
    pytester.makepyfile(test_lose=LOSES_THE_CONTEXT)
    result = pytester.runpytest_subprocess(
        "-q", "-rs", f"--gemm-catalog={BAD}", "--gemm-backend=cpu-sim", "--gemm-kernels=crashes,good",
        "-p", "no:cacheprovider", f"--gemm-verdicts={pytester.path / 'v.json'}",
        f"--alluredir={pytester.path / 'allure'}")
    first = "test_lose.py::test_a_launch_that_loses_the_context[crashes-float32-TILE8]"
    result.stdout.fnmatch_lines([
        "*gemmcheck: 1 test(s) run in a fresh process (the CUDA context of this one was lost)*",
        "crash: crashes-float32-TILE8 (crashes<float, 8>): *cudaErrorIllegalAddress (stand-in)",
        "the CUDA context of this process is lost: every later test that runs other kernels runs at "
        "the end of this session in a fresh process",
        "good-float32-TILE8 * correct *",    # the child's verdict, in this session's summary
        f"SKIPPED [1] test_lose.py:10: not run: crash; see {first}",
        "1 failed, 3 passed, 1 skipped in *"])   # test_later[good] counted once: passed, in the child
    assert "context was lost" not in result.stdout.str()
    assert result.ret == 1
    doc = json.loads((pytester.path / "v.json").read_text())
    rows = {r["instance"]: r for r in doc["instances"]}
    assert set(rows["crashes-float32-TILE8"]["defects"]) == {"crash"}
    assert rows["good-float32-TILE8"]["verdict"] == "correct"
    assert [v["test"] for v in doc["verdicts"] if v["instance"] == "good-float32-TILE8"] == [
        "test_lose.py::test_later[good-float32-TILE8]"]
    assert not list(pytester.path.glob("reports/*-gw*.json"))    # the child's parts were merged
    allure = [json.loads(p.read_text()) for p in (pytester.path / "allure").glob("*-result.json")]
    assert sorted((r["name"], r["status"]) for r in allure) == sorted([
        ("test_a_launch_that_loses_the_context[crashes-float32-TILE8]", "broken"),   # not an assert
        ("test_a_launch_that_loses_the_context[good-float32-TILE8]", "passed"),
        ("test_later[crashes-float32-TILE8]", "skipped"),
        ("test_later[good-float32-TILE8]", "passed"),
        ("test_without_kernels", "passed")])


def test_a_lost_cuda_context_under_xdist_or_too_deep_skips_the_rest_saying_to_rerun(pytester, monkeypatch):
    monkeypatch.setenv("GEMMCHECK_RERUN_AS", f"gw-rerun{rerun.MAX_DEPTH}")   # no child deeper
    pytester.makeconftest((ROOT / "conftest.py").read_text())
    pytester.makepyfile(test_lose=LOSES_THE_CONTEXT)
    result = pytester.runpytest("-q", "-rs", f"--gemm-catalog={BAD}", "--gemm-backend=cpu-sim",
                                "--gemm-kernels=crashes,good", "-p", "no:cacheprovider",
                                f"--gemm-verdicts={pytester.path / 'v.json'}")
    first = "test_lose.py::test_a_launch_that_loses_the_context[crashes-float32-TILE8]"
    assert (f"SKIPPED [1] test_lose.py:10: not run: the CUDA context was lost in {first} (a fault or hang "
            "its probe did not show); rerun without that kernel (--gemm-kernels) in a fresh process"
            in result.stdout.str())
    assert "re-run in a fresh process" not in result.stdout.str()
    result.assert_outcomes(failed=1, passed=2, skipped=2)


def test_the_child_takes_the_sessions_options_but_not_its_paths_outputs_or_workers(tmp_path):
    from types import SimpleNamespace

    config = SimpleNamespace(
        args=["suites/", "suites/hazards"], rootpath=tmp_path,
        invocation_params=SimpleNamespace(dir=tmp_path / "sub", args=(
            "suites/", "-q", "--gemm-catalog=mine.toml", "-n", "2", "-nauto", "--junitxml", "j.xml",
            "--gemm-phases=p.json", "--clean-alluredir", "suites/hazards", "-p", "no:cacheprovider",
            "--gemm-shard", "1/2", "-k", "good")))
    assert rerun.child_args(config, ["suites/x.py::t[a-b]", "suites/y.py::u"]) == [
        "-q", "--gemm-catalog=mine.toml", "-p", "no:cacheprovider", "-k", "good",
        "../suites/x.py::t[a-b]", "../suites/y.py::u"]


def test_a_launch_error_without_a_lost_context_skips_only_its_own_instantiation(pytester):
    pytester.makeconftest((ROOT / "conftest.py").read_text())
    pytester.makepyfile(test_lose=LOSES_THE_CONTEXT.replace("error.context_lost = True", "pass"))
    result = pytester.runpytest("-q", "-rs", f"--gemm-catalog={BAD}", "--gemm-backend=cpu-sim",
                                "--gemm-kernels=crashes,good", "-p", "no:cacheprovider",
                                f"--gemm-verdicts={pytester.path / 'v.json'}")
    first = "test_lose.py::test_a_launch_that_loses_the_context[crashes-float32-TILE8]"
    assert f"SKIPPED [1] test_lose.py:10: not run: crash; see {first}" in result.stdout.str()
    result.assert_outcomes(failed=1, passed=3, skipped=1)


def test_refuse_lost_raises_without_launching_after_a_hang():
    from gemmcheck.backends import KernelHang

    class Config:
        stash = pytest.Stash()

    spec = catalog.load(BAD)[0]
    inst = next(iter(spec.instances()))
    containment.refuse_lost(Config, inst)    # nothing lost: no error
    containment.lose(Config, inst, KernelHang("did not finish within 2 s"), "t::x")
    with pytest.raises(KernelHang, match="not launched again: did not finish within 2 s"):
        containment.refuse_lost(Config, inst)
    assert not issubclass(KernelLaunchError, KernelHang)


def test_a_refused_launch_names_the_problem_that_was_lost_so_its_verdict_does():
    """(On an H200 a kernel lost in the isolated probe on M19xN17xK21 had its verdict "crash at
    launch": the refusal did not carry the probe's problem.)"""
    class Config:
        stash = pytest.Stash()

    inst = next(iter(catalog.load(BAD)[0].instances()))
    lost = KernelLaunchError("in the isolated probe on M19xN17xK21: misaligned address")
    lost.problem = "M19xN17xK21"
    containment.lose(Config, inst, lost, "t::x")
    with pytest.raises(KernelLaunchError) as refused:
        containment.refuse_lost(Config, inst)
    assert containment.unfinished_verdict(inst, refused.value, "t::y").problem == "M19xN17xK21"


def test_a_probe_that_saw_a_crash_or_hang_makes_the_first_test_fail_with_it(pytester, monkeypatch):
    # The probe runs only on the GPU backend; here it is forced on, with cpu-sim in the child.
    monkeypatch.setattr(build_plugin, "_needs_probe", lambda config: True)
    pytester.makeconftest((ROOT / "conftest.py").read_text())
    result = pytester.runpytest("-q", str(ROOT / "suites" / "correctness" / "test_exact_results.py"),
                                f"--gemm-catalog={BAD}", "--gemm-backend=cpu-sim", "--gemm-hang-timeout=2",
                                "--gemm-kernels=crashes,hangs,good", "-p", "no:cacheprovider",
                                f"--gemm-verdicts={pytester.path / 'v.json'}")
    text = result.stdout.str()
    assert "crash: crashes-float32-TILE8 (crashes<float, 8>): " in text
    assert "in the isolated probe on M11xN9xK13" in text and "no progress for 2.0 s" in text
    outcomes = result.parseoutcomes()
    assert outcomes["failed"] == 2 and "error" not in outcomes and outcomes["passed"] >= 10, text
    rows = {r["instance"]: r for r in json.loads((pytester.path / "v.json").read_text())["instances"]}
    assert set(rows["crashes-float32-TILE8"]["defects"]) == {"crash"}
    assert set(rows["hangs-float32-TILE8"]["defects"]) == {"hang"}
    assert rows["good-float32-TILE8"]["verdict"] == "correct"


PROBED_SESSION = """
import time
from pathlib import Path

from gemmcheck import containment

def test_builds(any_kernel):                  # an instantiation test that launches nothing
    Path("built").touch()
    assert "{fail}" != "fail"

def test_launches(reference, backend, request):
    assert containment.containment(request.config).probed
"""


def probed_session(pytester, monkeypatch, fail: bool = False):
    """A session of one test that launches nothing, then one that launches, with the probe
    forced on and stood in for: the stand-in says what it was given and what it waited for."""
    monkeypatch.setattr(build_plugin, "_needs_probe", lambda config: True)
    seen = {}

    def stand_in(instances, backend_name, timeout, stop=None):
        seen["probed"] = sorted(i.id for i in instances)
        deadline = time.monotonic() + 20
        while not (pytester.path / "built").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        seen["ran_beside_the_build_test"] = (pytester.path / "built").exists()
        seen["stopped"] = stop is not None and stop.wait(60 if fail else 0)
        return {}
    monkeypatch.setattr(probe, "probe_instances", stand_in)   # what the probe's thread calls
    pytester.makeconftest((ROOT / "conftest.py").read_text())
    pytester.makepyfile(test_probed=PROBED_SESSION.format(fail="fail" if fail else "pass"))
    result = pytester.runpytest("-q", "-p", "no:cacheprovider", "--gemm-backend=cpu-sim", "-x",
                                "--gemm-kernels=matmul_naive,broken_no_barriers", "--gemm-tiles=8",
                                "--gemm-dtypes=float32", f"--gemm-verdicts={pytester.path / 'v.json'}")
    return result, seen


def test_the_probe_runs_beside_the_tests_that_launch_nothing_and_before_the_first_launch(
        pytester, monkeypatch):
    result, seen = probed_session(pytester, monkeypatch)
    result.assert_outcomes(passed=3)
    assert seen["ran_beside_the_build_test"]   # started at the first instantiation test, not waited for there
    # only what launches here is probed: the broken kernel has only a test that builds it
    assert seen["probed"] == ["matmul_naive-float32-TILE8"] and not seen["stopped"]


def test_the_processes_of_a_run_probe_once_and_share_what_it_found(pytester, monkeypatch, tmp_path):
    """pytest-xdist workers collect the same tests: the first to claim the probe runs it, the
    others take its findings (here two sessions in turn over one run folder)."""
    from gemmcheck.judge.once import Once
    from gemmcheck.schedule import shared_work

    folder = tmp_path / "run"
    folder.mkdir()
    monkeypatch.setattr(shared_work, "once", lambda config: Once(folder))
    first, seen = probed_session(pytester, monkeypatch)
    first.assert_outcomes(passed=3)
    assert seen["probed"] == ["matmul_naive-float32-TILE8"]
    second, seen = probed_session(pytester, monkeypatch)
    second.assert_outcomes(passed=3)
    assert seen == {}                            # not probed again: the first one's findings


def test_a_session_that_ends_before_any_launch_stops_its_probe(pytester, monkeypatch):
    result, seen = probed_session(pytester, monkeypatch, fail=True)
    result.assert_outcomes(failed=1)             # -x: the launching test never runs
    assert seen["stopped"]


def test_the_gpu_backend_refuses_a_lost_instantiation_before_touching_the_device():
    from gemmcheck import backends
    from gemmcheck.backends import KernelHang
    from gemmcheck.backends.cupy_backend import CupyBackend

    inst = next(iter(catalog.load(BAD)[3].instances()))     # hangs
    gpu = object.__new__(CupyBackend)                       # no device needed: it must not be used
    backends.refuse(inst.id, "hang", "in the isolated probe: did not return within 2 s")
    try:
        with pytest.raises(KernelHang, match="not launched in this process: in the isolated probe"):
            gpu.launch(inst, None)
        with pytest.raises(KernelHang):
            gpu.enqueue(inst, None)
    finally:
        backends.clear_refusals()
    with pytest.raises(Exception) as reached:   # not refused any more: it reaches the (absent) device
        gpu.launch(inst, None)
    assert "not launched" not in str(reached.value)


def test_a_search_that_meets_a_crash_or_hang_fails_once_and_waits_one_timeout(tmp_path):
    # TILE 16: the dev profile's hypothesis search runs there; it is these kernels' first test.
    for source in BAD.parent.glob("*.cu"):
        (tmp_path / source.name).write_text(source.read_text())
    (tmp_path / "catalog.toml").write_text(BAD.read_text().replace("tiles = [8]", "tiles = [16]"))
    env = child_env()
    out = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--gemm-backend=cpu-sim",
                          "suites/correctness/test_exact_results.py", "-k", "product_on_any_supported_shape",
                          f"--gemm-catalog={tmp_path / 'catalog.toml'}", "--gemm-kernels=crashes,hangs",
                          "--gemm-hang-timeout=2", f"--gemm-verdicts={tmp_path / 'v.json'}",
                          f"--alluredir={tmp_path / 'allure'}"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    text = out.stdout + out.stderr
    assert "2 failed" in text.splitlines()[-1], text
    assert "hang: hangs-float32-TILE16 (hangs<float, 16>): no progress for 2.0 s" in text
    assert "crash: crashes-float32-TILE16 (crashes<float, 16>): the kernel crashed" in text
    assert "Traceback" not in text and "Flaky" not in text and len(text.splitlines()) < 40, text
    seconds = float(re.search(r" in ([0-9.]+)s", text.splitlines()[-1]).group(1))
    assert seconds < 20, text      # one 2 s timeout, not one per example the search tried


def test_an_in_process_hang_is_not_followed_by_a_rerun_while_its_kernel_still_spins(pytester):
    """A hang's kernel keeps the GPU busy for as long as this process lives: no child then."""
    pytester.makeconftest((ROOT / "conftest.py").read_text())
    pytester.makepyfile(test_lose=LOSES_THE_CONTEXT.replace(
        "from gemmcheck.backends import KernelLaunchError", "from gemmcheck.backends import KernelHang")
        .replace("error = KernelLaunchError(", "error = KernelHang("))
    result = pytester.runpytest("-q", "-rs", f"--gemm-catalog={BAD}", "--gemm-backend=cpu-sim",
                                "--gemm-kernels=crashes,good", "-p", "no:cacheprovider",
                                f"--gemm-verdicts={pytester.path / 'v.json'}")
    assert "re-run in a fresh process" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*not run: the CUDA context was lost in *rerun without that kernel*"])
    result.assert_outcomes(failed=1, passed=2, skipped=2)


STILL_SPINS = """
import atexit, time
from pathlib import Path
from gemmcheck import backends

def _exit_frees_the_gpu_memory():      # as CuPy's teardown waits for a kernel that never ends
    if backends.contexts_lost():
        time.sleep(600)
    Path("exited-normally").write_text("")

atexit.register(_exit_frees_the_gpu_memory)

def test_a_launch(reference):
    if SPIN:
        backends.lose_context(reference.id)
"""


@pytest.mark.parametrize("spins", [True, False], ids=["context-lost", "context-whole"])
def test_a_session_that_lost_its_cuda_context_exits_without_the_teardown_that_waits_for_it(pytester, spins):
    pytester.makeconftest((ROOT / "conftest.py").read_text())
    pytester.makepyfile(test_spin=f"SPIN = {spins}\n" + STILL_SPINS)
    result = pytester.runpytest_subprocess("-q", f"--gemm-catalog={BAD}", "--gemm-backend=cpu-sim",
                                           "--gemm-kernels=good", "-p", "no:cacheprovider", timeout=120)
    result.stdout.fnmatch_lines(["1 passed in *"])
    assert result.ret == 0
    assert (pytester.path / "exited-normally").exists() is not spins


def test_a_run_inside_a_process_that_lost_its_context_earlier_does_not_end_that_process(pytester):
    """pytester runs in this process: a context this process lost earlier (a faked hang) is
    not that run's loss, so its end must not os._exit the process that started it."""
    from gemmcheck import backends

    backends.lose_context("earlier-test-hang")
    pytester.makeconftest((ROOT / "conftest.py").read_text())
    pytester.makepyfile(test_ok="def test_a_launch(reference):\n    pass\n")
    result = pytester.runpytest("-q", f"--gemm-catalog={BAD}", "--gemm-backend=cpu-sim",
                                "--gemm-kernels=good", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)     # reached: the process is still here
