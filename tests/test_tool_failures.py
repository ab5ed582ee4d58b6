"""A failure of the suite's own tools is tried once more, then an error of the suite (pytest
`error`, allure "broken"), never the kernel's `fail` and never a pass; a kernel's own hang or
crash is still its verdict. Each tool's failure is simulated: once (the test's real outcome
stands), twice (the test errors, naming the tool)."""

import json
import sys
import threading
from pathlib import Path

import pytest

from gemmcheck.containment import tools
from gemmcheck.judge import isolation
from gemmcheck.pytest_plugin import build_plugin

ROOT = Path(__file__).resolve().parent.parent
BAD = ROOT / "examples" / "bad" / "catalog.toml"


# -- one definition, one retry ---------------------------------------------------------------

def failing(times: int, result="done"):
    """A tool that fails `times` times, then gives `result`; its calls in `.calls`."""
    calls = []

    def work():
        calls.append(len(calls))
        if len(calls) <= times:
            raise tools.ToolFailure(f"attempt {len(calls)} failed", tool="a stand-in tool")
        return result
    work.calls = calls
    return work


def passes_once_errors_twice(pytester, fails, error, **test_file):
    """Run the one test of `test_file` (a template of FAILS = {fails}) in a pytest of its own: a
    tool that failed once was retried and the test passed; twice, the test is an error, `error`
    its summary line."""
    (name, template), = test_file.items()
    pytester.makepyfile(**{name: template.format(fails=fails)})
    result = pytester.runpytest("-rfE", "-vv", "-p", "no:cacheprovider")
    if fails == 1:
        result.assert_outcomes(passed=1)
    else:
        result.assert_outcomes(errors=1)
        result.stdout.fnmatch_lines([error])


def test_a_tool_that_fails_once_is_tried_once_more_and_its_result_stands():
    work = failing(1)
    assert tools.retry_once(work) == "done" and len(work.calls) == 2


def test_a_tool_that_fails_twice_raises_naming_the_tool_and_both_failures():
    work = failing(2)
    with pytest.raises(tools.ToolFailure) as caught:
        tools.retry_once(work)
    text = str(caught.value)
    assert len(work.calls) == 2
    assert text.startswith("a stand-in tool: attempt 2 failed (tried twice; the first time: attempt 1 failed)")
    assert "\nwhat to do: " in text


def test_a_tool_stopped_by_the_session_is_not_tried_again():
    stop = threading.Event()
    stop.set()
    work = failing(1)
    with pytest.raises(tools.ToolFailure):
        tools.retry_once(work, stop=stop)
    assert len(work.calls) == 1


def test_anything_else_is_not_retried():
    calls = []

    def kernel_bug():
        calls.append(1)
        raise AssertionError("wrong values")
    with pytest.raises(AssertionError):
        tools.retry_once(kernel_bug)
    assert calls == [1]


# -- a test that meets one: its outcome category ----------------------------------------------

RAISES_IN_CALL = """
from gemmcheck.containment.tools import ToolFailure

def test_meets_a_tool_failure():
    raise ToolFailure("it broke", tool="a stand-in tool")

def test_fails_on_its_own():
    assert 1 == 2

def test_passes():
    pass
"""


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["serial", "xdist"])
def test_a_tool_failure_in_a_tests_call_is_an_error_not_a_failure(pytester, workers):
    pytester.makepyfile(test_tool=RAISES_IN_CALL)
    result = pytester.runpytest_subprocess("-rfE", "-vv", "-p", "no:cacheprovider", *workers,
                                           f"--junitxml={pytester.path / 'j.xml'}")
    result.assert_outcomes(errors=1, failed=1, passed=1)
    result.stdout.fnmatch_lines(["FAILED test_tool.py::test_fails_on_its_own - *",
                                 "ERROR test_tool.py::test_meets_a_tool_failure - *a stand-in tool: it broke"])


# -- the isolated child: not ready in time is the tool's; a launch that does not return the kernel's

def _step():
    return isolation.Step(0, "catalog.toml", "k", "float32", 8, 9, 9, 9, 1)


def _child(script: str) -> list[str]:
    # (python -c ignores the child's own command line after it)
    return [sys.executable, "-c", script]


def test_a_launch_that_does_not_return_is_the_kernels_hang_not_a_tool_failure(tmp_path):
    hangs = _child("print('@@gemmcheck READY', flush=True); print('@@gemmcheck LAUNCH 0', flush=True); "
                   "import time; time.sleep(60)")
    outcomes, _ = isolation.run_steps([_step()], prefix=hangs, step_timeout=1.0, workdir=tmp_path)
    assert outcomes[0].status == "hang" and "did not return within 1 s" in outcomes[0].message
    assert [f.defect.value for f in [outcomes[0].finding]] == ["hang"]


def test_a_child_that_is_not_ready_in_time_is_a_tool_failure_not_a_hang(tmp_path):
    never_ready = _child("import time; time.sleep(60)")
    with pytest.raises(tools.ToolFailure) as caught:
        isolation.run_steps([_step()], prefix=never_ready, ready_timeout=1.0, workdir=tmp_path)
    assert isinstance(caught.value, isolation.IsolationError)
    assert str(caught.value).startswith("the isolated child (gemmcheck.judge.isolation): ")
    assert "not ready within 1 s" in str(caught.value)


def test_a_child_killed_by_a_signal_before_it_was_ready_is_a_tool_failure(tmp_path):
    killed = _child("import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    with pytest.raises(isolation.IsolationError, match="killed by SIGKILL"):
        isolation.run_steps([_step()], prefix=killed, workdir=tmp_path)


def never_ready_for(monkeypatch, times: int) -> list:
    """The isolated child's first `times` starts become a child that is never ready (a host
    too slow to start one in time); the others are the real child."""
    from gemmcheck.judge.isolation import running

    real, starts = running.supervise, []

    def supervise(argv, steps, **kwargs):
        starts.append(len(starts))
        if len(starts) <= times:
            return real(_child("import time; time.sleep(60)"), steps, **{**kwargs, "ready_timeout": 0.5})
        return real(argv, steps, **kwargs)
    monkeypatch.setattr(running, "supervise", supervise)
    return starts


@pytest.mark.parametrize("fails", [1, 2])
def test_a_probe_whose_child_is_not_ready_is_tried_once_more_then_the_launching_tests_error(
        pytester, monkeypatch, fails):
    # The probe runs only on the GPU backend; here it is forced on, with cpu-sim in its child.
    monkeypatch.setattr(build_plugin, "_needs_probe", lambda config: True)
    assert_probe_retried(pytester, monkeypatch, fails, "cpu-sim")


@pytest.mark.gpu
@pytest.mark.parametrize("fails", [1, 2])
def test_on_the_gpu_a_probe_whose_child_is_not_ready_is_tried_once_more_then_the_launching_tests_error(
        pytester, monkeypatch, fails):
    from gemmcheck.backends import device

    found, why = device.cuda_device()
    if not found:
        pytest.skip(f"needs a CUDA device; {why}")
    assert_probe_retried(pytester, monkeypatch, fails, "cupy")


def assert_probe_retried(pytester, monkeypatch, fails: int, backend: str) -> None:
    starts = never_ready_for(monkeypatch, fails)
    pytester.makeconftest((ROOT / "conftest.py").read_text())
    result = pytester.runpytest("-rfE", "-vv", str(ROOT / "suites" / "correctness" / "test_exact_results.py"),
                                f"--gemm-catalog={BAD}", f"--gemm-backend={backend}", "--gemm-kernels=crashes,good",
                                "-p", "no:cacheprovider", f"--gemm-verdicts={pytester.path / 'v.json'}")
    outcomes = result.parseoutcomes()
    rows = {r["instance"]: r for r in json.loads((pytester.path / "v.json").read_text())["instances"]}
    assert len(starts) >= 2
    if fails == 1:   # the retried probe found the crash; the rest is judged as always
        assert "error" not in outcomes and outcomes["failed"] == 1 and outcomes["passed"] >= 10, outcomes
        assert rows["good-float32-TILE8"]["verdict"] == "correct"
        assert set(rows["crashes-float32-TILE8"]["defects"]) == {"crash"}
        assert "in the isolated probe on M11xN9xK13" in result.stdout.str()
    else:            # no kernel judged: every launching test errors, naming the tool
        assert outcomes["errors"] >= 10 and "failed" not in outcomes and "passed" not in outcomes, outcomes
        assert {r["verdict"] for r in rows.values()} == {"not_checked"}
        result.stdout.fnmatch_lines(["ERROR *test_exact_results.py::* - *IsolationError: the isolated child "
                                     "(gemmcheck.judge.isolation): *not ready within 0.5 s; killed) (tried twice*"])


@pytest.mark.parametrize("fails", [1, 2])
def test_a_kernel_declared_to_crash_whose_isolated_child_could_not_run_is_tried_once_more(monkeypatch, fails):
    """The kill matrix's plain observation of a kernel declared crash or hang, in a child:
    its child could not run once, the observation still comes (the retry); twice, a
    ToolFailure (the row's test errors)."""
    from types import SimpleNamespace

    from gemmcheck.judge import kill_matrix
    from gemmcheck.judge.kill_matrix import row_children

    calls = []

    def observations(instances, settings):
        calls.append(1)
        if len(calls) <= fails:
            raise isolation.IsolationError("the isolated child (python) could not run its job (killed by SIGKILL)")
        return {i.id: ["an observation"] for i in instances}
    monkeypatch.setattr(row_children, "isolated_observations", observations)
    instance = SimpleNamespace(id="k-float32-TILE8", spec=SimpleNamespace(expect="crash"))
    children = kill_matrix.RowChildren(kill_matrix.Settings())
    try:
        if fails == 1:
            assert children.isolated(instance) == ["an observation"]
        else:
            with pytest.raises(tools.ToolFailure, match=r"killed by SIGKILL\) \(tried twice"):
                children.isolated(instance)
    finally:
        children.close()
    assert len(calls) == 2


# -- the build lock -----------------------------------------------------------------------------

BUILDS_UNDER_THE_LOCK = """
from filelock import FileLock, Timeout
from gemmcheck.compile import buildlock

FAILS = {fails}

def test_builds(tmp_path, monkeypatch):
    real, tries = FileLock.acquire, []

    def acquire(self, *args, **kwargs):   # its holder does not let go in time, FAILS times
        tries.append(1)
        if len(tries) <= FAILS:
            raise Timeout(self.lock_file)
        return real(self, *args, **kwargs)
    monkeypatch.setattr(FileLock, "acquire", acquire)
    with buildlock.exclusive(tmp_path / "entry"):
        (tmp_path / "entry").write_text("built")
    assert (tmp_path / "entry").read_text() == "built" and len(tries) == FAILS + 1
"""


@pytest.mark.parametrize("fails", [1, 2])
def test_a_build_lock_not_had_in_time_is_asked_for_once_more_then_the_test_errors(pytester, fails):
    passes_once_errors_twice(pytester, fails, test_build=BUILDS_UNDER_THE_LOCK, error=(
        "ERROR test_build.py::test_builds - *BuildLockFailure: the build cache's lock "
        "(gemmcheck.compile.buildlock): *entry.lock: not had within 900 s (tried twice*"))


def test_a_build_lock_that_cannot_be_taken_is_a_tool_failure(tmp_path, monkeypatch):
    from filelock import FileLock

    from gemmcheck.compile import buildlock

    def refused(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(FileLock, "acquire", refused)
    with pytest.raises(buildlock.BuildLockFailure, match="could not be taken .*Permission denied.*tried twice"):
        with buildlock.exclusive(tmp_path / "entry"):
            pass


# -- the GPU turn lock --------------------------------------------------------------------------

TAKES_A_TURN = """
from gemmcheck.schedule import gpu_turns

FAILS = {fails}

def test_times_alone(tmp_path, monkeypatch):
    path = gpu_turns.lock_path(str(tmp_path), "0")
    mine, other = gpu_turns.GpuTurns(path), gpu_turns.GpuTurns(path)
    other.enter_test()   # another worker inside a test that does not end in time, FAILS times
    monkeypatch.setattr(gpu_turns, "TURN_TIMEOUT_S", 0.2)
    real, tries = gpu_turns._Lock._take, []

    def take(self, kind, name):
        try:
            return real(self, kind, name)
        finally:
            tries.append(1)
            if len(tries) == FAILS:
                other.leave_test()
    monkeypatch.setattr(gpu_turns._Lock, "_take", take)
    with mine.alone():
        pass
    assert len(tries) == FAILS + 1
"""


@pytest.mark.parametrize("fails", [1, 2])
def test_a_gpu_turn_not_had_in_time_is_asked_for_once_more_then_the_test_errors(pytester, fails):
    passes_once_errors_twice(pytester, fails, test_turn=TAKES_A_TURN, error=(
        "ERROR test_turn.py::test_times_alone - *GpuTurnFailure: the GPU turn lock "
        "(gemmcheck.schedule.gpu_turns): *gpu-0.lock: the exclusive lock was not had within 0.2 s (tried twice*"))


HELD_BY_ANOTHER_WORKER = """
import pytest
from gemmcheck.schedule import gpu_turns

@pytest.hookimpl(trylast=True)
def pytest_configure(config):   # a worker that shares its GPU; another holds it and never lets go
    path = gpu_turns.lock_path(str(config.rootpath), "0")
    config.stash[gpu_turns.TURNS] = gpu_turns.GpuTurns(path)
    config.other = gpu_turns._Lock(path)
    config.other.exclusive()
    gpu_turns.TURN_TIMEOUT_S = 0.2
"""


def test_a_turn_not_had_at_a_tests_start_is_its_setup_error_and_the_session_goes_on(pytester):
    """The shared hold for a test is taken around the test's whole protocol, outside its
    phases: not had there, the test's setup errors (turns_plugin), not the session."""
    pytester.makeconftest(HELD_BY_ANOTHER_WORKER)
    pytester.makepyfile(test_held="def test_one():\n    pass\n\ndef test_two():\n    pass\n")
    result = pytester.runpytest_subprocess("-rfE", "-vv", "-p", "no:cacheprovider")
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["ERROR test_held.py::test_one - *GpuTurnFailure: the GPU turn lock "
                                 "(gemmcheck.schedule.gpu_turns): *the shared lock was not had within 0.2 s "
                                 "(tried twice*"])


def test_a_turn_lock_that_cannot_be_opened_is_a_tool_failure(tmp_path):
    from gemmcheck.schedule import gpu_turns

    with pytest.raises(gpu_turns.GpuTurnFailure, match="cannot be opened"):
        gpu_turns.GpuTurns(str(tmp_path / "removed" / "gpu-0.lock"))   # the run's folder is gone


# -- the fresh process after a lost context -----------------------------------------------------

# Every test of `crashes` faults (the stand-in for a sticky error: the rest of the session runs
# in a fresh process); that process is killed by a signal at good's test 5, FAILS times.
DIES_IN_THE_FRESH_PROCESS = """
import os, signal
from pathlib import Path

import pytest
from gemmcheck.backends import KernelLaunchError

FAILS = {fails}

def test_first(backend, reference):
    if reference.spec.name == "crashes":
        error = KernelLaunchError(f"{{reference.id}}: cudaErrorIllegalAddress (stand-in)")
        error.context_lost = True
        raise error

@pytest.mark.parametrize("n", range(8))
def test_launch(backend, reference, n):
    deaths = Path(os.environ["DEATHS"])
    if os.environ.get("GEMMCHECK_RERUN_AS") and n == 5 and len(deaths.read_text()) < FAILS:
        deaths.write_text(deaths.read_text() + "x")
        os.kill(os.getpid(), signal.SIGKILL)   # the host's OOM killer, say
"""


@pytest.mark.parametrize("fails", [1, 2])
def test_a_fresh_process_that_dies_is_run_once_more_then_its_tests_error(pytester, monkeypatch, fails):
    deaths = pytester.path / "deaths"
    deaths.write_text("")
    monkeypatch.setenv("DEATHS", str(deaths))
    pytester.makeconftest((ROOT / "conftest.py").read_text())
    pytester.makepyfile(test_fresh=DIES_IN_THE_FRESH_PROCESS.format(fails=fails))
    result = pytester.runpytest_subprocess("-rfE", "-vv", f"--gemm-catalog={BAD}", "--gemm-backend=cpu-sim",
                                           "--gemm-kernels=crashes,good", "-p", "no:cacheprovider",
                                           f"--gemm-verdicts={pytester.path / 'v.json'}")
    assert len(deaths.read_text()) == fails
    # crashes: its first test fails, its 8 others skip naming it; good's first passes here, its
    # 8 others run in the fresh process
    if fails == 1:
        result.assert_outcomes(failed=1, passed=9, skipped=8)
    else:   # good's tests 0-4 passed in the first; 5-7 never ran: errors, naming the tool
        result.assert_outcomes(failed=1, passed=6, skipped=8, errors=3)
        result.stdout.fnmatch_lines(["ERROR test_fresh.py::test_launch[[]good-float32-TILE8-5[]] - the fresh "
                                     "pytest process (gemmcheck.schedule.rerun): *killed by signal 9*"])


# -- the CPU simulator's g++: a build that outlives its deadline -----------------------------

def test_a_g_plus_plus_run_past_its_deadline_is_a_tool_failure_not_a_compile_error(monkeypatch):
    import subprocess
    from gemmcheck.backends.cpu_sim import build

    def too_slow(cmd, **kw):
        raise subprocess.TimeoutExpired(cmd, kw.get("timeout"))
    monkeypatch.setattr(build.subprocess, "run", too_slow)
    with pytest.raises(tools.ToolFailure) as caught:
        build._run(["g++", "kernel.cpp"], "kernel.cu")
    assert not isinstance(caught.value, build.BuildError)   # a BuildError would be compile_error
    assert str(caught.value).startswith("g++ (the CPU simulator's build): kernel.cu: g++ ran longer than")


@pytest.mark.parametrize("timeouts, outcome", [(1, "built"), (2, "tool failure")])
def test_a_simulator_build_that_timed_out_is_built_once_more_then_errors(monkeypatch, timeouts, outcome):
    from gemmcheck.backends.cpu_sim import build
    from gemmcheck.contract import catalog
    from simulator import simulator

    inst = catalog.Instance(catalog.load(ROOT / "kernels" / "catalog.toml")[1], "float32", 16)
    real, calls = build.module, []

    def module(source, instances, defines):
        calls.append(source)
        if len(calls) <= timeouts:
            raise build.BuildTimeout(f"{source.name}: g++ ran longer than {build.COMPILE_TIMEOUT_S} s")
        return real(source, instances, defines)
    monkeypatch.setattr(build, "module", module)
    with simulator() as sim:
        if outcome == "built":
            assert sim.build_error(inst) is None and len(calls) == 2
        else:
            with pytest.raises(build.BuildTimeout, match="tried twice"):
                sim.build_error(inst)   # an error of the suite, never the kernel's compile_error
            assert len(calls) == 2
