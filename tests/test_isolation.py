"""Isolation: a child that dies during a launch is a CRASH, one that overruns is a HANG, the
parent goes on, and the child's runs come back for the same detectors. No GPU needed:
the children are plain Python (and the numpy stand-in backend)."""

import os
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from gemmcheck.contract import catalog
from gemmcheck.judge import hazards, isolation
from gemmcheck.problems.problem import Problem
from gemmcheck.verdict import Defect

from hazard_stand_ins import matrix_catalog

TESTS = Path(__file__).resolve().parent


def step(i, kernel="good", catalog_path="c.toml", M=9, N=5, K=17):
    return isolation.Step(i, str(catalog_path), kernel, "float32", 4, M, N, K, seed=1)


SAY = f"def say(*w): print({isolation.MARK!r}, *w, flush=True)\n"


def python_child(body: str) -> list[str]:
    """A child that speaks the protocol through say(...)."""
    return [sys.executable, "-u", "-c", SAY + textwrap.dedent(body)]


def test_a_child_killed_by_a_signal_during_a_launch_is_a_crash():
    steps = [step(0), step(1), step(2)]
    result = isolation.supervise(python_child("""
        import os, signal
        say("READY"); say("LAUNCH 0"); say("DONE 0"); say("LAUNCH 1")
        os.kill(os.getpid(), signal.SIGSEGV)
    """), steps, step_timeout=30)
    status = {i: o.status for i, o in result.outcomes.items()}
    assert status == {0: "ok", 1: "crash", 2: "not_run"}
    crash = result.outcomes[1].finding
    assert crash.defect == Defect.CRASH and "SIGSEGV" in crash.summary
    assert result.outcomes[0].finding is None


def test_a_child_gets_a_copy_of_the_environment_and_one_that_cannot_start_is_an_isolation_error(monkeypatch):
    """With env=None a vfork()ed child reads the parent's `environ`, which another thread's
    setenv() may move meanwhile (OSError: [Errno 14] Bad address on an H200 worker)."""
    import subprocess

    seen = []

    class Refused:
        def __init__(self, argv, **kwargs):
            seen.append(kwargs["env"])
            raise OSError(14, "Bad address")

    monkeypatch.setenv("GEMMCHECK_PROBE_VARIABLE", "here")
    monkeypatch.setattr(subprocess, "Popen", Refused)
    with pytest.raises(isolation.IsolationError, match="did not start: .*Bad address"):
        isolation.supervise(["compute-sanitizer"], [step(0)])
    assert seen[0] is not os.environ and seen[0]["GEMMCHECK_PROBE_VARIABLE"] == "here"


def test_a_launch_that_outlasts_the_timeout_is_a_hang_and_the_child_is_killed():
    started = time.monotonic()
    result = isolation.supervise(python_child("""
        import time
        say("READY"); say("LAUNCH 0"); time.sleep(3600)
    """), [step(0)], step_timeout=0.5)
    assert time.monotonic() - started < 30
    out = result.outcomes[0]
    assert out.status == "hang" and out.finding.defect == Defect.HANG
    assert "0.5 s" in out.message
    assert result.returncode is not None and result.returncode < 0  # killed, not left running


def test_a_session_that_ends_stops_the_children_it_no_longer_waits_for():
    """compute-sanitizer runs started ahead of their rows on a thread pool: at the end of
    the session a run under a kernel that hangs is killed, not waited for to its timeout."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        started = time.monotonic()
        future = pool.submit(isolation.supervise, python_child("""
            import time
            say("READY"); say("LAUNCH 0"); time.sleep(3600)
        """), [step(0)], step_timeout=600)
        while not isolation._running:
            assert time.monotonic() - started < 30, "the child never started"
            time.sleep(0.05)
        assert isolation.stop_running_children() == 1
        result = future.result(timeout=30)
    assert time.monotonic() - started < 30
    assert result.returncode is not None and result.returncode < 0
    assert not isolation._running


def test_a_launch_error_the_child_reports_is_a_crash():
    result = isolation.supervise(python_child("""
        say("READY"); say("LAUNCH 0"); say('FAILED 0 "cudaErrorIllegalAddress: an illegal memory access"')
        raise SystemExit(3)
    """), [step(0)])
    out = result.outcomes[0]
    assert out.status == "failed" and out.finding.defect == Defect.CRASH
    assert "illegal memory access" in out.finding.summary


def test_a_child_that_fails_before_it_is_ready_is_an_error_not_a_verdict():
    result = isolation.supervise(python_child("raise SystemExit('no CUDA here')"), [step(0)])
    assert not result.ready and result.outcomes[0].status == "not_run"
    assert "no CUDA here" in result.stderr


def test_a_child_that_is_slow_to_get_ready_is_not_called_a_hang():
    result = isolation.supervise(python_child("import time; time.sleep(3600)"), [step(0)],
                                 ready_timeout=0.5, step_timeout=0.1)
    assert not result.ready and result.outcomes[0].status == "not_run"


# -- the real child (python -m gemmcheck.judge.isolation) on the numpy stand-in backend ---------

@pytest.fixture
def stand_in_catalog(tmp_path):
    return matrix_catalog(tmp_path)


@pytest.fixture
def child_env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), env.get("PYTHONPATH", "")])
    return env


def test_steps_run_in_few_children_and_their_runs_come_back(stand_in_catalog, child_env, tmp_path):
    specs = {s.name: s for s in catalog.load(stand_in_catalog)}
    problem = Problem(9, 5, 17, "float32", "exact", 1)
    plan = [("good", problem), ("segfaults", problem), ("segfaults", Problem(16, 16, 16, "float32")),
            ("floor_grid", problem), ("sleeps", problem), ("good", Problem(16, 16, 16, "float32"))]
    steps = [isolation.Step.of(i, catalog.Instance(specs[k], "float32", 4), p, purpose="test")
             for i, (k, p) in enumerate(plan)]
    outcomes, children = isolation.run_steps(
        steps, backend="hazard_stand_ins:matrix_backend", step_timeout=2, env=child_env,
        workdir=tmp_path / "work")
    status = [outcomes[i].status for i in range(len(plan))]
    assert status == ["ok", "crash", "not_run", "ok", "hang", "ok"]
    assert len(children) == 3  # one to start, one after the crash, one after the hang

    observations = [isolation.observation(outcomes[i]) for i in range(len(plan))]
    assert [f.defect for f in hazards.detect(observations[1])] == [Defect.CRASH]
    assert [f.defect for f in hazards.detect(observations[4])] == [Defect.HANG]
    assert hazards.detect(observations[0]) == [] and hazards.detect(observations[5]) == []
    assert len(observations[0].runs) == 2 and len(observations[0].control) == 1
    assert hazards.classify(hazards.detect(observations[3])).defect == Defect.UNWRITTEN_OUTPUT
    assert "earlier problem" in outcomes[2].message
    for child in children:   # each said where its start-up went, in order, before it was ready
        marks = child.marks
        assert marks["main"] <= marks["backend"] <= marks["prepared"] <= child.ready_at


def test_runs_come_back_bit_for_bit_without_parsing_python(stand_in_catalog, tmp_path, monkeypatch):
    """Row children load runs on pool threads, and CPython 3.11's AST construction races between
    threads (gh-106905): .npz headers go through ast.literal_eval and a catalog's launch
    expressions through ast.parse, so reading runs back must do neither."""
    import ast
    import types

    from gemmcheck.problems.harness import Run

    instance = catalog.Instance({s.name: s for s in catalog.load(stand_in_catalog)}["good"], "float32", 4)
    rng = np.random.default_rng(7)
    made = [Run(instance, 3, 5, 2, (1, 2, 1), (4, 4, 1), rng.integers(0, 2**32, (3, 5), dtype=np.uint32),
                rng.random((3, 5)) < 0.5, {"A": 2}, {"B": 1}) for _ in range(2)]
    made.append(Run(instance, 0, 4, 2, (1, 1, 1), (4, 4, 1), np.zeros((0, 4), np.uint16),
                    np.zeros((0, 4), bool), launched=False))
    made.append(Run(instance, 3, 5, 2, (1, 2, 1), (4, 4, 1), rng.integers(0, 2**32, (3, 5), dtype=np.uint32),
                    np.zeros((3, 5), bool), c_fill="finite",   # the beta = 0 launch with C finite
                    scales={"scale_A": np.array([[0.5, 4.0]])}, output="D"))   # and a kernel's own D and scales
    isolation._save_runs(tmp_path, 3, types.SimpleNamespace(runs=made[:2], control=made[2:3], finite_c=made[3:]))

    def no_parsing(*args, **kwargs):
        raise AssertionError("loading runs parsed Python source")
    loaded_step = isolation.Step.of(3, instance, Problem(3, 5, 2, "float32"), purpose="test")
    monkeypatch.setattr(ast, "literal_eval", no_parsing)
    monkeypatch.setattr(catalog, "load", no_parsing)   # the step's spec is the parent's own
    got = isolation._load_runs(tmp_path, loaded_step)
    back_all = got["runs"] + got["control"] + got["finite_c"]
    assert len(back_all) == len(made)
    for back, sent in zip(back_all, made):
        assert back.C_bits.dtype == sent.C_bits.dtype and back.unwritten.dtype == sent.unwritten.dtype
        assert np.array_equal(back.C_bits, sent.C_bits) and np.array_equal(back.unwritten, sent.unwritten)
        assert (back.grid, back.block, back.guard_damage, back.inputs_changed, back.launched, back.c_fill,
                back.output) == \
            (sent.grid, sent.block, sent.guard_damage, sent.inputs_changed, sent.launched, sent.c_fill, sent.output)
        assert back.scales.keys() == sent.scales.keys()
        assert all(np.array_equal(back.scales[k], v) for k, v in sent.scales.items())
    assert got["runs"][0].C_bits.flags.writeable


def test_a_step_names_its_instantiation_even_where_configs_share_a_tile():
    """The ladder's rungs have several configs at one tile (BM = 128): a child must launch the
    config the step was made for, not the first one at that tile."""
    from dataclasses import asdict

    instances = [i for s in catalog.load(TESTS.parent / "kernels" / "ladder_catalog.toml") for i in s.instances()]
    shared = {(i.spec.name, i.dtype, i.tile) for i in instances}
    assert len(shared) < len(instances)   # the case this test is about is there
    for i, inst in enumerate(instances):
        sent = isolation.Step.of(i, inst, Problem(16, 16, 16, inst.dtype))
        back = isolation.steps._instance(isolation.Step(**asdict(sent)))   # as the child rebuilds it
        assert (back.id, back.params) == (inst.id, inst.params)
        assert sent.instance_key == isolation.instance_key(inst) and sent.instance_label == inst.id


def test_steps_stopped_before_they_start_start_no_child(tmp_path):
    import threading

    stop = threading.Event()
    stop.set()
    with pytest.raises(isolation.IsolationError, match="stopped"):
        isolation.run_steps([step(0)], workdir=tmp_path, stop=stop)
    assert not list(tmp_path.glob("job*.json"))


def test_a_fault_seen_after_the_launch_returned_is_the_steps_crash_not_the_childs_error(
        stand_in_catalog, child_env, tmp_path):
    """A sticky CUDA error raised by a call after the launch (not by the launch) still says the
    step's kernel faulted: on an H200 racecheck's child over broken_unguarded_store reported it
    as its own failure, "could not run its job", and the row failed as a tool that never ran."""
    specs = {s.name: s for s in catalog.load(stand_in_catalog)}
    problem = Problem(9, 5, 17, "float32", "exact", 1)
    steps = [isolation.Step.of(i, catalog.Instance(specs[k], "float32", 4), problem, purpose="test")
             for i, k in enumerate(("good", "segfaults", "good"))]
    outcomes, children = isolation.run_steps(
        steps, backend="hazard_stand_ins:late_fault_backend", step_timeout=5, env=child_env,
        workdir=tmp_path / "work")
    assert [outcomes[i].status for i in range(3)] == ["ok", "failed", "ok"]
    assert outcomes[1].finding.defect == Defect.CRASH and "cudaErrorLaunchFailure" in outcomes[1].message
    assert len(children) == 2   # a fresh child for the step after the fault


def test_a_child_that_cannot_load_its_backend_raises_isolation_error(stand_in_catalog, child_env, tmp_path):
    spec = catalog.load(stand_in_catalog)[0]
    steps = [isolation.Step.of(0, catalog.Instance(spec, "float32", 4), Problem(4, 4, 4, "float32"))]
    with pytest.raises(isolation.IsolationError, match="could not run its job.*ModuleNotFoundError"):
        isolation.run_steps(steps, backend="no_such_module:backend", env=child_env,
                            workdir=tmp_path / "work")


# -- in process on the GPU: a launch that never completes is a KernelHang ----------------------

class _NeverDone:
    """A CUDA event whose work never completes (what a spinning kernel leaves): its query
    answers cudaErrorNotReady (600) for ever."""

    ptr = 0xE7

    def __init__(self, **kw):
        pass

    def record(self):
        pass


class _FakeCupy:
    class cuda:
        Event = _NeverDone


def test_a_gpu_launch_that_outlives_the_hang_timeout_is_a_kernel_hang(monkeypatch):
    from cupy_backends.cuda.api import runtime

    from gemmcheck.backends import KernelHang, KernelLaunchError
    from gemmcheck.backends.cupy_backend import CupyBackend

    from hazard_stand_ins import instance

    gpu = object.__new__(CupyBackend)   # no device here: only the wait is exercised
    gpu._cupy, gpu.hang_timeout_s = _FakeCupy, 0.2
    monkeypatch.setattr(runtime, "eventQuery", lambda ptr: 600 if ptr == _NeverDone.ptr else 0)
    started = time.monotonic()
    with pytest.raises(KernelHang, match=r"did not finish within 0.2 s \(--gemm-hang-timeout\)") as caught:
        gpu._wait(instance(), (1, 1, 1), (4, 4, 1))
    assert 0.2 <= time.monotonic() - started < 5
    assert isinstance(caught.value, KernelLaunchError)
    assert hazards.launch_failure(caught.value).defect == Defect.HANG


def test_a_launch_the_childs_backend_stopped_as_a_hang_is_a_hang_not_a_crash():
    result = isolation.supervise(python_child("""
        import json
        say("READY"); say("LAUNCH 0"); say("HUNG 0", json.dumps("did not finish within 2 s"))
    """), [step(0), step(1)], step_timeout=30)
    out = result.outcomes[0]
    assert out.status == "hang" and out.finding.defect == Defect.HANG, out
    assert out.message == "did not finish within 2 s"
    assert result.outcomes[1].status == "not_run"
