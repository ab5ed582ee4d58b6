"""The performance suite's CuPy kernels compiled ahead, once per run (gemmcheck.perf.warm):
what the child runs, how it is started, waited for and shared, and, on a GPU, that a timed
test's judging then finds every kernel in CuPy's cache."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gemmcheck.backends import device
from gemmcheck.contract import catalog
from gemmcheck.judge.once import Once
from gemmcheck.perf import gpu as perf_gpu, warm

from test_perf_gpu_path import FakeGpu


def _instance(dtype, layouts=None, expect="correct"):
    spec = catalog.KernelSpec(name="k", source=Path("k.cu"), entry="k", dtypes=(dtype,), tiles=(16,),
                              expect=expect, layouts=layouts or {})
    return catalog.Instance(spec, dtype, 16)


def test_the_kinds_are_each_dtype_and_layout_timed_and_float32_row_major_always():
    kinds = warm.kinds_of([_instance("bfloat16"), _instance("bfloat16"),
                           _instance("float64", {"A": "row", "C": "col"})])
    assert kinds == [("bfloat16", ()), ("float32", ()), ("float64", (("C", "col"),))]
    assert warm.kinds_of([]) == [("float32", ())]


def test_the_child_judges_each_kind_on_tiny_sets_and_compiles_the_hold_kernel(monkeypatch):
    gpu = FakeGpu()
    cp = gpu.module()["cupy"]
    cp.cuda.Device.synchronize = lambda self: gpu.log.append("synchronize")
    cp.RawKernel.compile = lambda self: gpu.log.append("compile hold")
    judged = []
    real_check = perf_gpu.output_check

    def output_check(cupy, sets, index):
        judged.append((sets.dtype.name, sets.size, sets.layouts["C"], index == sets.check_set))
        return real_check(cupy, sets, index)
    monkeypatch.setattr(perf_gpu, "output_check", output_check)
    warm.compile_judging(cp, [("float32", ()), ("float16", (("C", "col"),))], size=8)
    assert judged == [("float32", 8, "row", True), ("float16", 8, "col", True)]
    assert gpu.log[-2:] == ["compile hold", "synchronize"]


def test_the_command_hands_the_kinds_to_the_childs_main(monkeypatch):
    kinds = [("bfloat16", ()), ("float32", (("A", "col"), ("C", "col")))]
    argv = warm.command(kinds)
    assert argv[:3] == [sys.executable, "-m", "gemmcheck.perf.warm"]
    got = []
    monkeypatch.setitem(sys.modules, "cupy", object())
    monkeypatch.setattr(warm, "compile_judging", lambda cupy, k: got.append(k))
    assert warm.main(argv[3:]) == 0
    assert got == [kinds]


def _fake_child(monkeypatch, tmp_path, body: str):
    """warm.command runs `body` (Python) instead of the real child; each start appends to a file."""
    log = tmp_path / "starts"
    script = tmp_path / "child.py"
    script.write_text(f"open({str(log)!r}, 'a').write('x')\n" + textwrap.dedent(body))
    monkeypatch.setattr(warm, "command", lambda kinds: [sys.executable, str(script)])
    return log


def test_a_child_that_ends_well_is_waited_for_and_held_for_while_it_runs(monkeypatch, tmp_path):
    _fake_child(monkeypatch, tmp_path, "import time; time.sleep(0.3)")
    events = []
    ahead = warm.Ahead([("float32", ())], hold=(lambda: events.append("held"), lambda: events.append("let go")))
    assert ahead.wait(30) is None
    assert events == ["held", "let go"]


def test_a_child_that_fails_or_outstays_its_limit_is_a_note_not_an_error(monkeypatch, tmp_path):
    _fake_child(monkeypatch, tmp_path, "import sys; print('nvrtc: no such option', file=sys.stderr); sys.exit(3)")
    assert warm.Ahead([("float32", ())]).wait(30) == "exit 3: nvrtc: no such option"
    _fake_child(monkeypatch, tmp_path, "import time; time.sleep(60)")
    assert warm.Ahead([("float32", ())], timeout=0.5).wait(30) == "killed after 0.5 s"
    slow = warm.Ahead([("float32", ())])
    assert slow.wait(0.2) == "still compiling after 0.2 s"
    slow.stop()
    assert slow.wait(30).startswith("exit -9")


def test_the_processes_of_a_run_start_one_child_and_all_wait_for_it(monkeypatch, tmp_path):
    starts = _fake_child(monkeypatch, tmp_path, "import time; time.sleep(0.5)")
    folder = tmp_path / "once"
    folder.mkdir()
    # Each process of the run has its own handle on the run's folder.
    aheads = [warm.Ahead([("float32", ())], shared=Once(folder)) for _ in range(3)]
    assert [a.wait(30) for a in aheads] == [None, None, None]
    assert starts.read_text() == "x"
    other_kinds = warm.Ahead([("float16", ())], shared=Once(folder))
    assert other_kinds.wait(30) is None and starts.read_text() == "xx"


# -- on a GPU ---------------------------------------------------------------------------------

JUDGE = """
import json, sys
import cupy
from gemmcheck.contract import dtypes as dt
from gemmcheck.perf import gpu
from gemmcheck.perf.inputs import InputSets
for name, layouts in json.loads(sys.argv[1]):
    sets = InputSets(cupy, dt.get(name), int(sys.argv[2]), 0, seed=1, layouts=dict(layouts)).upload()
    sets.poison(sets.check_set)
    gpu.output_check(cupy, sets, sets.check_set)
gpu.hold_kernel(cupy)((1,), (1,), (cupy.uint64(1000),))
cupy.cuda.Device().synchronize()
"""


def _cache(tmp_path, name, *argv):
    folder = tmp_path / name
    env = {**os.environ, "CUPY_CACHE_DIR": str(folder),
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1]), os.environ.get("PYTHONPATH", "")])}
    for args in argv:
        done = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
    return {p.name for p in folder.rglob("*") if p.is_file()}


@pytest.mark.gpu
def test_after_the_child_a_timed_tests_judging_compiles_nothing(tmp_path):
    here, why_not = device.cuda_device()
    if not here:
        pytest.skip(why_not)
    kinds = [("bfloat16", ()), ("float32", (("C", "col"),))]
    judge_at_1024 = ["-c", JUDGE, warm.command(kinds)[-1], "1024"]
    # Cold, that judging compiles: the cache is how a compile shows.
    cold = _cache(tmp_path, "cold", judge_at_1024)
    assert len(cold) >= 10, cold
    ahead = _cache(tmp_path, "ahead", warm.command(kinds)[1:])
    assert cold <= ahead, cold - ahead
    assert _cache(tmp_path, "ahead", judge_at_1024) == ahead

