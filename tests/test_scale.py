"""The suite at scale: shards that cover every test once, one worker per GPU, merged
reports equal to one run's, phase timing, and a run that checked nothing failing."""

import sys
import json
import re
import os
import time
from pathlib import Path

import pytest

from gemmcheck.schedule import gpu_turns, gpus, shard
from gemmcheck import phases
from gemmcheck.report import merge

ROOT = Path(__file__).parent.parent
NARROW = ("--gemm-kernels", "matmul_naive,matmul_tiled_guarded", "--gemm-dtypes", "float32,float16",
          "--gemm-tiles", "16")


@pytest.fixture
def suite(pytester, monkeypatch):
    """A pytester directory with gemmcheck loaded (as the project's conftest does); child
    processes (xdist workers) import this tree's gemmcheck too, not an installed one."""
    pytester.makeconftest((ROOT / "conftest.py").read_text())
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    return pytester


def collected(result) -> set[str]:
    return {line.strip() for line in result.outlines if "::" in line and "[" in line}


# -- sharding ----------------------------------------------------------------------------------

def test_shard_option_parses_and_quotes_a_bad_value():
    assert shard.parse("2/4") == shard.Shard(2, 4)
    for bad in ("0/4", "5/4", "x/4", "2"):
        with pytest.raises(Exception, match=repr(bad).replace("/", ".")):
            shard.parse(bad)


def test_every_test_lands_in_exactly_one_shard(suite):
    suite.makepyfile(test_probe="def test_probe(any_kernel):\n    pass\n"
                                "def test_other(reference):\n    pass\n")
    everything = collected(suite.runpytest("--co", "-q", *NARROW))
    parts = [collected(suite.runpytest("--co", "-q", *NARROW, "--gemm-shard", f"{i}/3"))
             for i in (1, 2, 3)]
    assert len(everything) > 6
    assert set().union(*parts) == everything
    assert sum(len(p) for p in parts) == len(everything)           # disjoint
    assert max(len(p) for p in parts) - min(len(p) for p in parts) <= 1


def test_shards_do_not_depend_on_collection_order():
    ids = [f"t[{i}]" for i in range(20)]
    assert shard.assign(ids, 3) == shard.assign(list(reversed(ids)), 3)


def test_recorded_durations_balance_the_shards():
    durations = {"slow": 10.0, "a": 3.0, "b": 3.0, "c": 3.0, "d": 1.0}
    where = shard.assign(list(durations), 2, durations)
    load = {s: sum(d for n, d in durations.items() if where[n] == s) for s in (1, 2)}
    assert load == {1: 10.0, 2: 10.0}
    # Counting tests instead of time would put the slow test with two others.
    assert sorted(shard.assign(list(durations), 2).values()).count(1) == 3


def test_a_units_tests_share_a_shard_and_units_balance_by_their_summed_time():
    durations = {"r1::a": 4.0, "r1::b": 4.0, "r2::a": 5.0, "x": 2.0, "y": 1.0}
    unit = lambda n: n.split("::")[0]      # noqa: E731
    where = shard.assign(list(durations), 2, durations, unit)
    assert where["r1::a"] == where["r1::b"]
    load = {s: sum(d for n, d in durations.items() if where[n] == s) for s in (1, 2)}
    assert load == {1: 8.0, 2: 8.0}                     # r1 (8) | r2 + x + y (8)
    assert where == shard.assign(list(reversed(list(durations))), 2, durations, unit)


def test_unreadable_durations_name_the_file(tmp_path):
    bad = tmp_path / "durations.json"
    bad.write_text("[1, 2]")
    with pytest.raises(ValueError, match="durations.json"):
        shard.load_durations(bad)


def test_shard_balances_by_the_durations_a_run_wrote(suite):
    suite.makepyfile(test_probe="def test_probe(any_kernel):\n    pass\n")
    assert suite.runpytest(*NARROW, "-p", "no:randomly").ret == 0
    written = suite.path / "reports" / "durations.json"
    durations = shard.load_durations(written)
    assert len(durations) == len(collected(suite.runpytest("--co", "-q", *NARROW)))
    result = suite.runpytest("--co", "-q", *NARROW, "--gemm-shard", "1/2",
                             f"--gemm-shard-durations={written}")
    assert collected(result) and result.ret == 0


# -- one worker per GPU ------------------------------------------------------------------------

def test_gpu_option_is_a_count_or_ordinals():
    assert gpus.parse_option("2") == 2
    assert gpus.parse_option("0,1") == (0, 1)
    assert gpus.parse_option("3,") == (3,)
    for bad in ("0", "a,b", "1,1", "-1,"):
        with pytest.raises(Exception, match=repr(bad)):
            gpus.parse_option(bad)


def test_gpus_chosen_from_the_devices_there_are():
    assert gpus.choose(None, 2) == (0, 1)
    assert gpus.choose(1, 2) == (0,)
    assert gpus.choose((1,), 2) == (1,)
    with pytest.raises(ValueError, match="shows 2 CUDA device"):
        gpus.choose((0, 2), 2)
    assert gpus.choose(None, 0) == ()


def test_each_worker_gets_its_own_gpu_and_knows_whether_it_shares():
    env = {"CUDA_VISIBLE_DEVICES": "4,5"}   # the runner already restricted us to two cards
    inputs = [gpus.worker_input((0, 1), k, 2, env) for k in range(2)]
    assert [i[gpus.WORKER_GPU] for i in inputs] == ["4", "5"]
    assert all(i[gpus.WORKER_OWNS_GPU] for i in inputs)
    # more workers than GPUs: a few on the first (it times: units.timers), the rest round robin
    crowded = [gpus.worker_input((0, 1, 2), k, 9, {}) for k in range(9)]
    assert [i[gpus.WORKER_GPU] for i in crowded] == ["0", "1", "2", "1", "2", "1", "2", "1", "2"]
    assert [i[gpus.WORKER_OWNS_GPU] for i in crowded] == [True] + [False] * 8
    assert not any(gpu_turns.WORKER_GPU_LOCK in i for i in crowded + inputs)   # no folder given
    locked = [gpus.worker_input((0, 1), k, 8, {}, lock_folder=lambda: "/run") for k in range(8)]
    paths = [i[gpu_turns.WORKER_GPU_LOCK] for i in locked]
    assert paths == ["/run/gpu-0.lock"] * 2 + ["/run/gpu-1.lock"] * 6
    assert gpu_turns.WORKER_GPU_LOCK not in gpus.worker_input((0, 1), 0, 2, {}, lambda: "/run")
    one = [gpus.worker_input((0,), k, 3, {}, lambda: "/run") for k in range(3)]      # one GPU: all on it
    assert {i[gpus.WORKER_GPU] for i in one} == {"0"} and not any(i[gpus.WORKER_OWNS_GPU] for i in one)
    assert gpus.worker_input((), 0, 2) == {}
    pinned = {}
    assert gpus.pin(inputs[1], pinned) == "5" and pinned == {"CUDA_VISIBLE_DEVICES": "5"}


def test_each_worker_takes_its_share_of_the_cores_for_numpy_s_thread_pools():
    from threadpoolctl import threadpool_info, threadpool_limits

    from gemmcheck.schedule import cores

    assert cores.share(32, 2) == 16 and cores.share(2, 8) == 1 and cores.share(5, 0) == 5
    assert cores.of_this_process({}) == cores.available()
    assert cores.of_this_process({"workercount": 2}) == cores.share(cores.available(), 2)
    assert cores.limit({}, environ={}) is None                                # not a worker
    assert cores.limit({"workercount": 2}, environ={"OMP_NUM_THREADS": "3"}, cores=8) is None  # the user's
    environ = {}
    with threadpool_limits(limits=None):        # restores this process's pools afterwards
        assert cores.limit({"workercount": 2}, environ=environ, cores=4) == 2
        pools = [p for p in threadpool_info() if p["user_api"] == "blas"]
        assert pools and all(p["num_threads"] == 2 for p in pools), pools
    assert environ == dict.fromkeys(cores.THREAD_VARIABLES, "2")              # for its children


def test_perf_may_time_only_where_the_gpu_is_owned():
    from types import SimpleNamespace
    assert gpus.owns_its_gpu(SimpleNamespace())                              # no xdist
    assert gpus.owns_its_gpu(SimpleNamespace(workerinput={gpus.WORKER_OWNS_GPU: True}))
    assert not gpus.owns_its_gpu(SimpleNamespace(workerinput={gpus.WORKER_OWNS_GPU: False}))
    assert not gpus.owns_its_gpu(SimpleNamespace(workerinput={}))             # xdist on cpu-sim


def _request(action):
    """`action` (a lock request) on a thread of its own: the event it sets once it returns."""
    import threading

    done = threading.Event()
    threading.Thread(target=lambda: (action(), done.set()), daemon=True).start()
    return done


def _acquires_within(action, seconds: float) -> bool:
    """Whether `action` (a lock request) returns within `seconds` (it keeps running if not)."""
    return _request(action).wait(seconds)


def test_a_worker_that_shares_its_gpu_times_only_when_no_other_is_inside_a_test_or_has_children(tmp_path):
    """Two workers' turns on one GPU (two open lock files conflict like two processes): a
    test held shared by one keeps the other from timing; so do its running children; tests
    of both run side by side."""
    path = gpu_turns.lock_path(str(tmp_path), "0")
    first, second = gpu_turns.GpuTurns(path), gpu_turns.GpuTurns(path)
    try:
        first.test.shared()
        assert _acquires_within(second.test.shared, 1.0)           # tests side by side
        second.test.release()
        assert not _acquires_within(second.test.exclusive, 0.3)    # timing waits for the test
        first.test.release()
        assert _wait_for(lambda: _holds_exclusive(path))            # its turn, once the test ends
        second.test.release()
        first.children_started()
        first.children_started()
        first.children_ended()
        assert not _acquires_within(second.test.exclusive, 0.3)    # one child still runs
        first.children_ended()
        assert _wait_for(lambda: _holds_exclusive(path))
    finally:
        first.close()
        second.close()


def test_children_started_during_a_workers_own_turn_do_not_wait_for_it_and_hold_the_gpu_after(tmp_path):
    """A worker whose first kernel test is a performance test makes the backend inside its
    turn, which starts its rows' children: asking the lock for them must not wait for the
    worker's own exclusive hold (it would wait forever); once the turn ends they hold it."""
    path = gpu_turns.lock_path(str(tmp_path), "0")
    mine, other = gpu_turns.GpuTurns(path), gpu_turns.GpuTurns(path)
    try:
        mine.enter_test()
        with mine.alone():
            assert _acquires_within(mine.children_started, 1.0)
        other_times = _acquires_within(other.test.exclusive, 0.3)
        assert not other_times                                  # the child still runs
        mine.leave_test()
        mine.children_ended()
        assert _wait_for(lambda: _holds_exclusive(path))         # the other's turn now
    finally:
        mine.close()
        other.close()


def test_a_turn_returns_the_lock_as_it_found_it_and_a_turn_within_a_turn_is_the_same(tmp_path):
    """A performance test's call holds nothing between its turns (other timers sample then);
    a turn taken inside a test's shared hold (the timer's fixture measuring the copy) gives it
    back shared."""
    path = gpu_turns.lock_path(str(tmp_path), "0")
    mine, other = gpu_turns.GpuTurns(path), gpu_turns.GpuTurns(path)
    try:
        with mine.alone():
            with mine.alone():
                assert _holds_exclusive(path)
            assert _holds_exclusive(path)                               # still the outer turn
        assert _acquires_within(other.test.exclusive, 1.0)              # outside a test: let go
        other.test.release()
        mine.enter_test()
        with mine.alone():
            assert _holds_exclusive(path)
        assert not _acquires_within(other.test.exclusive, 0.3)          # in a test: shared again
        mine.leave_test()
        assert _wait_for(lambda: _holds_exclusive(path))
    finally:
        mine.close()
        other.close()


def test_a_performance_tests_call_holds_the_gpu_only_in_its_turns(tmp_path):
    """turns_plugin: the shared hold is let go for the call of a test that does its device work
    through the performance session's timer, and taken again for its teardown; other tests
    keep it throughout."""
    from types import SimpleNamespace

    from gemmcheck.pytest_plugin import turns_plugin

    path = gpu_turns.lock_path(str(tmp_path), "0")
    mine, other = gpu_turns.GpuTurns(path), gpu_turns.GpuTurns(path)
    config = SimpleNamespace(stash=pytest.Stash())
    config.stash[gpu_turns.TURNS] = mine

    def item(perf: bool, fixtures):
        return SimpleNamespace(config=config, nodeid="t.py::test_x", fixturenames=list(fixtures),
                               get_closest_marker=lambda name: object() if perf and name == "perf" else None)

    def holds_during_call(test) -> bool:
        mine.enter_test()                                  # the protocol's hold
        call = turns_plugin.pytest_runtest_call(test)
        next(call)
        asked = _request(other.test.exclusive)
        held = not asked.wait(0.3)
        if not held:
            other.test.release()
        with pytest.raises(StopIteration):
            call.send(None)
        if not held:   # else the first request still waits: a second would outlive the test
            asked = _request(other.test.exclusive)
        assert not asked.wait(0.3)                         # held again for the teardown
        mine.leave_test()
        assert _wait_for(lambda: _holds_exclusive(path))
        other.test.release()
        return held

    try:
        assert turns_plugin.call_off_the_gpu(item(True, ["perf_session", "perf_size"]))
        assert not turns_plugin.call_off_the_gpu(item(True, ["perf_thresholds"]))   # no timer: no turns
        assert not turns_plugin.call_off_the_gpu(item(False, ["perf_session"]))
        assert not holds_during_call(item(True, ["perf_session"]))
        assert holds_during_call(item(False, ["backend"]))
    finally:
        mine.close()
        other.close()


def test_once_its_worker_has_made_the_timer_a_performance_test_holds_the_gpu_only_in_its_turns(tmp_path):
    """turns_plugin: with the timer made, a performance test's setup and teardown take no
    shared hold (no fixture of it touches the GPU any more): a worker whose sampling is done
    ends its test and starts the next while another worker samples. Before the timer is made,
    and for any other test, the hold stays."""
    from types import SimpleNamespace

    from gemmcheck.pytest_plugin import turns_plugin

    path = gpu_turns.lock_path(str(tmp_path), "0")
    mine, other = gpu_turns.GpuTurns(path), gpu_turns.GpuTurns(path)
    config = SimpleNamespace(stash=pytest.Stash())
    config.stash[gpu_turns.TURNS] = mine

    def item(perf: bool, fixtures):
        return SimpleNamespace(config=config, nodeid="t.py::test_x", fixturenames=list(fixtures), stash=pytest.Stash(),
                               get_closest_marker=lambda name: object() if perf and name == "perf" else None)

    def whole_test(test):
        protocol = turns_plugin.pytest_runtest_protocol(test, None)
        next(protocol)
        call = turns_plugin.pytest_runtest_call(test)
        next(call)
        with pytest.raises(StopIteration):
            call.send(None)
        with pytest.raises(StopIteration):
            protocol.send(None)

    try:
        perf_test, plain_test = item(True, ["perf_session"]), item(False, ["backend"])
        other.test.exclusive()          # another worker's turn, for as long as these tests run
        first = _request(lambda: whole_test(perf_test))
        assert not first.wait(0.5)                                    # no timer yet: its setup waits
        other.test.release()
        assert first.wait(2.0)
        mine.timer_made = True
        other.test.exclusive()
        assert _acquires_within(lambda: whole_test(perf_test), 2.0)   # the whole test beside the turn
        plain = _request(lambda: whole_test(plain_test))
        assert not plain.wait(0.5)                                    # any other test waits
        other.test.release()
        assert plain.wait(2.0)
    finally:
        mine.close()
        other.close()


def test_waiting_for_a_turn_counts_as_the_turns_phase(tmp_path):
    import threading
    from types import SimpleNamespace

    path = gpu_turns.lock_path(str(tmp_path), "0")
    mine, other = gpu_turns.GpuTurns(path), gpu_turns.GpuTurns(path)
    config = SimpleNamespace(stash=pytest.Stash())
    config.stash[gpu_turns.TURNS] = mine
    other.test.shared()                                      # another worker inside a test
    threading.Timer(0.3, other.test.release).start()
    phases.enable()
    try:
        phases.begin()
        mine.enter_test()
        with gpu_turns.alone(config):
            assert _holds_exclusive(path)
        counted = phases.take()
    finally:
        phases.enable(False)
        mine.close()
        other.close()
    assert set(counted) == {"turns"} and counted["turns"] >= 0.25, counted
    assert mine.take_waited() >= 0.25 and mine.take_waited() == 0.0   # a test's, then none


def test_a_tests_recorded_duration_leaves_out_its_wait_for_other_workers_turns():
    """On one H200 with -n 8 the nightly's performance tests at N = 1024 waited ~150 s each
    behind the others' sampling, and the next run's plan dealt them as the largest units."""
    from types import SimpleNamespace

    from gemmcheck.schedule.runstats import WAITED_PROPERTY, RunStats

    stats = RunStats()
    report = lambda when, duration, props=(): SimpleNamespace(   # noqa: E731
        nodeid="perf.py::test_t[N1024]", when=when, duration=duration, user_properties=list(props),
        keywords={}, skipped=False, failed=False, passed=True, worker_id=None)
    stats.add(report("setup", 0.5))
    stats.add(report("call", 150.0))
    stats.add(report("teardown", 0.1, [(WAITED_PROPERTY, 149.0)]))
    assert stats.durations == {"perf.py::test_t[N1024]": pytest.approx(1.6)}


def test_the_durations_file_leaves_out_what_a_test_waited_for_turns(suite):
    suite.makepyfile(test_waits=(
        "import time\n"
        "from gemmcheck.schedule import gpu_turns\n"
        "def test_waits(request, tmp_path):\n"
        "    request.config.stash[gpu_turns.TURNS] = turns = gpu_turns.GpuTurns(str(tmp_path / 'gpu.lock'))\n"
        "    time.sleep(1.0)\n"
        "    turns.waited = 1.0   # as gpu_turns.alone counts a wait\n"))
    assert suite.runpytest("-p", "no:xdist").ret == 0
    durations = shard.load_durations(suite.path / "reports" / "durations.json")
    assert list(durations) == ["test_waits.py::test_waits"] and durations["test_waits.py::test_waits"] < 0.5


def test_the_longest_deferred_units_are_queued_first():
    """On one H200 the nightly's longest performance unit (float64 at N = 8192, 46 s of
    sampling) was eighth in xdist's order (by test count); left for the end it is the tail."""
    from collections import OrderedDict

    from gemmcheck.schedule import units

    f32, f64 = units.deferred("perf-float32-N8192"), units.deferred("perf-float64-N8192")
    queue = OrderedDict([(f32, {"a": False}), ("row-a", {}), (f64, {}), ("t.py::test_x", {})])
    ordered = units.deferred_first(queue, {f32: 26.0, f64: 46.0, "row-a": 99.0})
    assert list(ordered) == [f64, f32, "row-a", "t.py::test_x"]
    assert ordered[f32] == {"a": False} and isinstance(ordered, OrderedDict)


def _holds_exclusive(path: str) -> bool:
    """Whether some open file holds `path` exclusive (a shared request would fail)."""
    import fcntl
    import os

    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def _wait_for(condition, seconds: float = 2.0) -> bool:
    import time

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.01)
    return False


# -- phases ------------------------------------------------------------------------------------

def test_phase_time_is_exclusive_and_off_by_default(monkeypatch):
    clock = iter([0.0, 1.0, 3.0, 10.0])   # outer starts, inner starts, inner ends, outer ends
    monkeypatch.setattr(phases.time, "perf_counter", lambda: next(clock))
    phases.begin()
    with phases.phase("detectors"):
        pass
    assert phases.take() == {}                  # off: nothing counted, the clock untouched
    phases.enable()
    try:
        with phases.phase("detectors"):
            with phases.phase("launch"):
                pass
        assert phases.take() == {"detectors": 8.0, "launch": 2.0}
        with pytest.raises(ValueError, match="unknown phase 'oracel'"):
            with phases.phase("oracel"):
                pass
    finally:
        phases.enable(False)


def test_phases_on_pool_threads_are_not_counted_and_leave_the_tests_phases_whole():
    """compute-sanitizer children run on a thread pool while the test waits: their phases
    overlap the test's and are not counted there (the wait is); on the GPU this used to
    pop the test's phase stack from another thread (IndexError in the kill matrix)."""
    from concurrent.futures import ThreadPoolExecutor
    import threading

    entered = threading.Barrier(5)

    def child():
        with phases.phase("sanitizer"):
            entered.wait(timeout=10)   # four children inside at once, and the test's phase open

    phases.enable()
    try:
        phases.begin()
        with phases.phase("detectors"):
            with ThreadPoolExecutor(4) as pool:
                futures = [pool.submit(child) for _ in range(4)]
                entered.wait(timeout=10)
                for f in futures:
                    f.result()
        assert set(phases.take()) == {"detectors"}
    finally:
        phases.enable(False)


def test_phases_file_records_each_test(suite, tmp_path):
    suite.makepyfile(test_probe=(
        "from gemmcheck import phases\n"
        "@phases.timed('oracle')\n"
        "def judge():\n    return 1\n"
        "def test_probe(any_kernel):\n    assert judge() == 1\n"))
    out = tmp_path / "phases.json"
    assert suite.runpytest(*NARROW, f"--gemm-phases={out}").ret == 0
    doc = json.loads(out.read_text())
    assert doc["collection_s"] > 0 and len(doc["tests"]) == 4
    assert all(set(t) == {"oracle"} for t in doc["tests"].values()), doc["tests"]
    assert set(doc["spans"]) == set(doc["tests"])
    # (spans are rounded to the ms, the wall is not. One full `pytest -n 2` of seven failed one of
    # these `all`s, unsaid which: they now say what they saw)
    assert all(w == "main" and 0 < a <= b <= doc["wall_s"] + 0.001 for w, a, b in doc["spans"].values()), \
        (doc["spans"], doc["wall_s"])


def test_phases_file_under_xdist_says_which_worker_ran_each_test_and_when(suite, tmp_path):
    suite.makepyfile(test_probe="import time\ndef test_probe(any_kernel):\n    time.sleep(0.2)\n")
    out = tmp_path / "phases.json"
    assert suite.runpytest(*NARROW, "-n", "2", "--gemm-backend=cpu-sim", "--gemm-sanitizer=off",
                           f"--gemm-phases={out}").ret == 0
    doc = json.loads(out.read_text())
    spans = doc["spans"].values()
    assert len(doc["spans"]) == 4 and {w for w, _, _ in spans} <= {"gw0", "gw1"}
    assert all(b - a >= 0.2 and b <= doc["wall_s"] for _, a, b in spans)
    # the start-up: the controller's process before its session, each worker's collection
    if sys.platform == "linux":   # read from /proc
        assert doc["process_s"] > 0
    assert set(doc["workers_collected"]) == {"gw0", "gw1"}
    assert all(0 < t <= min(a for _, a, _ in spans) for t in doc["workers_collected"].values())


def test_phases_file_under_xdist_lists_the_child_processes_each_worker_ran(suite, tmp_path):
    suite.makepyfile(test_probe=(
        "import sys\n"
        "from gemmcheck.judge import isolation\n"
        "def test_probe(any_kernel):\n"
        "    say = f'print({isolation.MARK!r}, \"READY\", flush=True)'\n"
        "    step = isolation.Step(0, 'c.toml', 'good', 'float32', 4, 9, 5, 17, seed=1)\n"
        "    isolation.supervise([sys.executable, '-c', say], [step])\n"))
    out = tmp_path / "phases.json"
    assert suite.runpytest(*NARROW, "-n", "2", "--gemm-backend=cpu-sim", "--gemm-sanitizer=off",
                           f"--gemm-phases={out}").ret == 0
    doc = json.loads(out.read_text())
    assert len(doc["children"]) == 4      # one per test, from both workers
    assert {c[0] for c in doc["children"]} <= {"gw0", "gw1"}
    assert all(what == "plain: good-float32-TILE4" and 0 <= start <= ready <= stop <= doc["wall_s"]
               and marks == {} for _, what, start, ready, stop, marks in doc["children"])


def test_a_session_sends_long_waits_reports_to_its_reports_stalls_folder(suite):
    suite.makepyfile(test_probe=(
        "import time\n"
        "from gemmcheck import watchdog\n"
        "def test_probe(any_kernel):\n"
        "    with watchdog.reporting('a probe wait', after=0.1):\n"
        "        time.sleep(0.6)\n"))
    assert suite.runpytest("--gemm-kernels", "matmul_naive", "--gemm-dtypes", "float32", "--gemm-tiles", "16",
                           "--gemm-backend=cpu-sim", "--gemm-sanitizer=off").ret == 0
    reports = list((suite.path / "reports" / "stalls").glob("*.txt"))
    assert len(reports) == 1 and "a probe wait" in reports[0].read_text()


# -- a run that checked nothing fails ----------------------------------------------------------

def test_a_run_whose_kernel_tests_all_skip_fails_with_the_reason(suite):
    suite.makepyfile(test_probe="import pytest\n"
                                "def test_probe(any_kernel):\n    pytest.skip('no card today')\n"
                                "def test_harness():\n    pass\n")
    result = suite.runpytest(*NARROW)
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.fnmatch_lines(["gemmcheck: no kernel was checked: all 4 tests that run kernels "
                                 "were skipped; 4 of them: no card today (exit 5)"])
    assert suite.runpytest(*NARROW, "--co").ret == 0     # only collection was asked


def test_filters_that_leave_no_instantiation_fail(suite):
    suite.makepyfile(test_probe="def test_probe(reference):\n    pass\n")
    result = suite.runpytest("--gemm-kernels", "broken_no_barriers", "--gemm-tiles", "1", "-rs")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    # an empty parametrization is deselected, not pytest's "got empty parameter set" skip
    assert not [line for line in result.stdout.lines if line.startswith("SKIPPED")], result.stdout.str()
    assert ("gemmcheck: no kernel was checked: the selected kernels and filters leave no instantiation "
            "for the 1 test(s) that run kernels (exit 5)") in result.stdout.lines


def test_a_run_that_checked_something_or_failed_keeps_its_status(suite):
    suite.makepyfile(test_probe="import pytest\n"
                                "def test_probe(any_kernel):\n    pass\n"
                                "def test_skipped(any_kernel):\n    pytest.skip('later')\n")
    assert suite.runpytest(*NARROW).ret == pytest.ExitCode.OK
    suite.makepyfile(test_probe="def test_probe(any_kernel):\n    assert 0\n")
    assert suite.runpytest(*NARROW).ret == pytest.ExitCode.TESTS_FAILED
    suite.makepyfile(test_probe="import pytest\ndef test_harness():\n    pytest.skip('x')\n")
    assert suite.runpytest().ret == pytest.ExitCode.OK    # no kernel test was selected


def test_the_gpu_backend_without_a_gpu_checks_nothing_and_fails(suite):
    from gemmcheck.backends import device
    if device.cuda_device()[0]:
        pytest.skip("a CUDA device is here: the cupy backend runs")
    suite.makepyfile(test_probe="def test_probe(backend, any_kernel):\n    pass\n")
    result = suite.runpytest(*NARROW, "--gemm-backend", "cupy")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.fnmatch_lines(["gemmcheck: no kernel was checked*"])


# -- merging the parts' reports ------------------------------------------------------------------

RECORDING = """
from gemmcheck.verdict import Defect, Finding, Verdict

def test_probe(any_kernel, verdicts, request):
    findings = []
    if any_kernel.spec.name == "matmul_naive" and any_kernel.tile == 16:
        findings = [Finding(Defect.WRONG_VALUES, "exact-bits", "off by one", count=1, where=(0, 1))]
    verdicts.record(Verdict.for_instance(any_kernel, "M4xN4xK4", findings, test=request.node.nodeid))
"""


def _comparable(doc: dict) -> dict:
    return {"instances": sorted(doc["instances"], key=lambda r: r["instance"]),
            "verdicts": sorted(doc["verdicts"], key=lambda v: (v["test"], v["problem"]))}


def test_merging_two_shards_gives_the_unsharded_verdicts(suite, tmp_path):
    suite.makepyfile(test_probe=RECORDING)
    whole = tmp_path / "whole.json"
    assert suite.runpytest(*NARROW, f"--gemm-verdicts={whole}", "-p", "no:allure_pytest").ret == 0
    parts = []
    for i in (1, 2):
        part = tmp_path / f"part{i}"
        suite.runpytest(*NARROW, f"--gemm-verdicts={part / 'verdicts.json'}", "--gemm-shard", f"{i}/2",
                        "-p", "no:allure_pytest")
        parts.append(part)
    one = json.loads((parts[0] / "verdicts.json").read_text())
    assert any(r["status"] == "not_checked" for r in one["instances"])   # a part alone is partial
    assert merge.main([str(tmp_path / "merged"), *map(str, parts)]) == 0
    merged = json.loads((tmp_path / "merged" / "verdicts.json").read_text())
    expected = json.loads(whole.read_text())
    assert _comparable(merged) == _comparable(expected)
    assert merged["run"]["parts"] == 2


def test_merging_kill_matrix_perf_and_allure(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for part, rows, kernels, results in ((a, ["k1"], {"x-N1": 1}, ["u1"]), (b, ["k2"], {"y-N1": 2}, ["u2"])):
        (part / "performance").mkdir(parents=True)
        (part / "kill_matrix.json").write_text(json.dumps({"schema": 1, "settings": {"s": 1}, "seconds": 2,
                                                           "rows": [{"instance": r, "status": "pass"} for r in rows]}))
        (part / "performance" / "perf.json").write_text(json.dumps({"device": "H200", "kernels": kernels,
                                                                    "cublas": {}}))
        (part / "allure-results").mkdir()
        for r in results:
            (part / "allure-results" / f"{r}-result.json").write_text("{}")
        (part / "allure-results" / "environment.properties").write_text(f"part={part.name}\n")
    assert merge.main([str(tmp_path / "out"), str(a), str(b)]) == 0
    out = tmp_path / "out"
    km = json.loads((out / "kill_matrix.json").read_text())
    assert [r["instance"] for r in km["rows"]] == ["k1", "k2"] and km["seconds"] == 4
    assert json.loads((out / "performance" / "perf.json").read_text())["kernels"] == {"x-N1": 1, "y-N1": 2}
    assert sorted(p.name for p in (out / "allure-results").iterdir()) == [
        "environment.properties", "u1-result.json", "u2-result.json"]


def test_merging_hosts_joins_their_performance_tables(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for part, table in ((a, "kernel x 1.0\n"), (b, "kernel y 2.0\n")):
        (part / "performance").mkdir(parents=True)
        (part / "performance" / "perf.json").write_text(json.dumps({"device": "H200", "kernels": {}, "cublas": {}}))
        (part / "performance" / "summary.txt").write_text(table)
    assert merge.main([str(tmp_path / "out"), str(a), str(b)]) == 0
    assert (tmp_path / "out" / "performance" / "summary.txt").read_text() == (
        f"== {a} ==\nkernel x 1.0\n\n== {b} ==\nkernel y 2.0\n")


WORKER_PERF_PARTS = """
import json, time
from pathlib import Path

def test_two_workers_timed_things(request):
    parts = Path(request.config.rootpath) / "reports" / "performance" / "parts"
    for worker, kernel in (("gw0", "x-N1024"), ("gw1", "y-N1024")):
        (parts / worker).mkdir(parents=True)
        (parts / worker / "perf.json").write_text(json.dumps(
            {"device": "H200", "kernels": {kernel: {"tflops": 1.0}}, "cublas": {}}))
        (parts / worker / "summary.txt").write_text(f"table of {worker}\\n")
    (parts / "gw0" / "roofline.png").write_bytes(b"png")
"""


def test_the_session_joins_what_its_workers_timed_into_one_perf_json_and_summary(suite):
    """Under pytest-xdist each worker writes the performance reports of what it timed in a
    folder of its own (it prints no summary); the session joins them at its end and prints
    each worker's table. Here the parts are written by a test, as workers would."""
    stale = suite.path / "reports" / "performance" / "parts" / "gw7"
    stale.mkdir(parents=True)
    (stale / "perf.json").write_text(json.dumps({"device": "H100", "kernels": {}, "cublas": {}}))
    old = time.time() - 3600
    os.utime(stale / "perf.json", (old, old))
    os.utime(stale, (old, old))
    suite.makepyfile(test_parts=WORKER_PERF_PARTS)
    result = suite.runpytest("-p", "no:allure_pytest", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(["*gemmcheck: performance*per worker*", "== gw0 ==", "table of gw0",
                                 "== gw1 ==", "table of gw1", "wrote *summary.txt", "wrote *perf.json",
                                 "wrote *gw0*roofline.png"])
    out = suite.path / "reports" / "performance"
    assert json.loads((out / "perf.json").read_text())["kernels"] == {"x-N1024": {"tflops": 1.0},
                                                                      "y-N1024": {"tflops": 1.0}}
    assert not stale.exists()                     # an earlier run's part: removed, not joined


def test_an_xdist_worker_writes_its_performance_reports_in_a_folder_of_its_own(suite):
    pytest.importorskip("xdist")
    suite.makepyfile(test_where="""
import os
from gemmcheck.pytest_plugin.perf_plugin import perf_config

def test_where(request):
    print("REPORTS", os.environ["PYTEST_XDIST_WORKER"], perf_config(request.config).reports)
    assert perf_config(request.config).reports.parts[-3:] == ("performance", "parts",
                                                              os.environ["PYTEST_XDIST_WORKER"])
""")
    result = suite.runpytest("-n", "2", "-p", "no:allure_pytest", "-p", "no:cacheprovider",
                             "--gemm-backend=cpu-sim")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()


def test_merge_refuses_what_cannot_be_one_report(tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    for part, status, device in ((a, "pass", "H200"), (b, "fail", "H100")):
        (part / "performance").mkdir(parents=True)
        (part / "kill_matrix.json").write_text(json.dumps({"rows": [{"instance": "k", "status": status}]}))
    assert merge.main([str(tmp_path / "out"), str(a), str(b)]) == 2
    assert "row k is pass in one part and fail in another" in capsys.readouterr().err
    with pytest.raises(merge.MergeError, match="different devices"):
        merge.merge_perf([{"device": "H200"}, {"device": "H100"}])
    assert merge.main([str(tmp_path / "out"), str(tmp_path / "nope")]) == 2


def test_under_xdist_the_controller_sees_that_nothing_was_checked(suite):
    pytest.importorskip("xdist")
    suite.makepyfile(test_probe="import pytest\n"
                                "def test_probe(any_kernel):\n    pytest.skip('no card today')\n")
    result = suite.runpytest(*NARROW, "-n", "2")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.fnmatch_lines(["gemmcheck: no kernel was checked: all 4 tests*no card today*"])
    suite.makepyfile(test_probe="def test_probe(any_kernel):\n    pass\n")
    assert suite.runpytest(*NARROW, "-n", "2").ret == pytest.ExitCode.OK
    durations = shard.load_durations(suite.path / "reports" / "durations.json")
    assert len(durations) == 4    # written once, by the controller, for every worker's tests


# -- builds shared by every worker -------------------------------------------------------------

def _build_once(entry: str, log: str) -> None:
    import time
    from gemmcheck.compile import buildlock
    with buildlock.exclusive(Path(entry)):
        if not Path(entry).exists():
            with open(log, "a") as out:
                out.write("built\n")
            time.sleep(0.3)                       # long enough for the other process to arrive
            buildlock.write_atomic(Path(entry), b"module")


def test_two_processes_building_one_entry_build_it_once(tmp_path):
    import multiprocessing
    entry, log = tmp_path / "cache" / "module.so", tmp_path / "log"
    procs = [multiprocessing.get_context("fork").Process(target=_build_once, args=(str(entry), str(log)))
             for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    assert [p.exitcode for p in procs] == [0, 0]
    assert log.read_text() == "built\n" and entry.read_bytes() == b"module"


def test_no_plugin_module_imports_another():
    import ast
    paths = sorted((ROOT / "gemmcheck" / "pytest_plugin").glob("*plugin.py"))
    plugins = {f"gemmcheck.pytest_plugin.{path.stem}" for path in paths}
    assert len(plugins) >= 5, plugins   # the glob still finds the plugin modules
    for path in paths:
        tree = ast.parse(path.read_text())
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        imported |= {f"{n.module}.{a.name}" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                     and n.module for a in n.names}
        imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        others = (imported & plugins) - {f"gemmcheck.pytest_plugin.{path.stem}"}
        assert not others, f"{path.name} imports {sorted(others)}; share state through gemmcheck.pytest_plugin.session"


def test_a_suite_plugin_adds_its_skip_reasons_through_one_hook(suite):
    suite.makeconftest((ROOT / "conftest.py").read_text() + (
        "\ndef pytest_gemm_skip_reason(config, item):\n"
        "    return 'needs a tool' if 'needs_tool' in item.name else None\n"))
    suite.makepyfile(test_probe="def test_needs_tool():\n    pass\ndef test_plain():\n    pass\n")
    result = suite.runpytest("-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED*needs a tool"])


@pytest.mark.gpu
def test_each_xdist_worker_sees_only_its_own_gpu(suite, tmp_path):
    pytest.importorskip("xdist")
    if gpus.visible_count() < 2:
        pytest.skip(f"needs 2 CUDA devices; found {gpus.visible_count()}")
    suite.makepyfile(test_probe=(
        "import os, cupy\n"
        "def test_probe(any_kernel, tmp_path_factory):\n"
        f"    out = {str(tmp_path)!r} + '/' + os.environ['PYTEST_XDIST_WORKER']\n"
        "    open(out, 'w').write(os.environ['CUDA_VISIBLE_DEVICES'] + ' ' + "
        "str(cupy.cuda.runtime.getDeviceCount()))\n"))
    assert suite.runpytest(*NARROW, "-n", "2", "--gemm-gpus", "2").ret == 0
    seen = sorted(p.read_text() for p in tmp_path.iterdir() if p.name.startswith("gw"))
    assert [s.split()[1] for s in seen] == ["1", "1"]          # one device each
    assert len({s.split()[0] for s in seen}) == 2               # and not the same one


ROW_TESTS = """
import os
from pathlib import Path

def _log(request, matrix_row):
    with open(Path(os.environ["ROW_LOG"]), "a") as out:
        out.write(f"{os.environ.get('PYTEST_XDIST_WORKER')} {request.node.nodeid}\\n")

def test_first_claim(matrix_row, request):
    _log(request, matrix_row)

def test_second_claim(matrix_row, request):
    _log(request, matrix_row)

def test_third_claim(matrix_row, request):
    _log(request, matrix_row)
"""


def test_under_xdist_a_rows_tests_share_one_worker_and_keep_their_own_ids(suite, monkeypatch):
    """-n alone (xdist's "load") would send a row's tests to whichever worker is free, and each
    worker would build the row again; the plugin's scheduler deals a row's tests as one unit,
    and the ids are those a serial run prints (xdist's loadgroup would rewrite them, and on
    pytest >= 9.2 silently groups nothing)."""
    pytest.importorskip("xdist")
    log = suite.path / "rows.log"
    monkeypatch.setenv("ROW_LOG", str(log))
    suite.makepyfile(test_rows=ROW_TESTS)
    result = suite.runpytest(*NARROW, "-n", "2", "-v", "--gemm-backend=cpu-sim", "--gemm-sanitizer=off")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    runs = [line.split() for line in log.read_text().splitlines()]
    workers = {}
    for worker, nodeid in runs:
        workers.setdefault(nodeid.split("[")[1], set()).add(worker)
    assert len(runs) == 3 * len(workers) == 3 * 2 and all(len(w) == 1 for w in workers.values()), runs
    assert len({w for ws in workers.values() for w in ws}) == 2           # one row per kernel, one each
    assert "@" not in result.stdout.str() and not any("@" in n for _, n in runs)
    durations = shard.load_durations(suite.path / "reports" / "durations.json")
    assert sorted(durations) == sorted(n for _, n in runs)


def test_a_rows_tests_land_in_one_shard(suite):
    """Dealt test by test, every shard holding a test of a row built the row again (the
    nightly's ~6 tests of a row on ~6 hosts)."""
    suite.makepyfile(test_rows=ROW_TESTS)
    args = ("--co", "-q", *NARROW, "--gemm-backend=cpu-sim")
    parts = [collected(suite.runpytest(*args, "--gemm-shard", f"{i}/3")) for i in (1, 2, 3)]
    rows = {}
    for index, part in enumerate(parts):
        for nodeid in part:
            rows.setdefault(nodeid.split("[")[1], set()).add(index)
    assert len(rows) == 2 and sum(map(len, parts)) == 6, parts
    assert all(len(shards) == 1 for shards in rows.values()), rows
    assert sum(1 for p in parts if p) == 2, parts      # one row each, the third shard empty


def test_a_worker_takes_anyones_units_then_its_own_then_anothers_rows_and_its_deferred_ones_last():
    """A row waits for the compute-sanitizer children its worker started at its first kernel
    test: taken first, rows waited 22-27 s each (one H200, ci, -n 8). The performance suite's
    units wait for every child their worker started before they time anything: dealt first
    (they are large), they waited 17 and 27 s on an H200 pair."""
    from gemmcheck.schedule import units

    perf = units.deferred("perf-float32-N8192")
    queued = [perf, "row-a", "row-b", "test_x.py::test_alone"]
    plan = {perf: 0, "row-a": 1, "row-b": 0}
    assert units.choose(queued, plan, 0) == "test_x.py::test_alone"     # anyone's first
    assert units.choose(queued[:3], plan, 0) == "row-b"                 # then its own, not deferred
    assert units.choose([perf, "row-a"], plan, 0) == "row-a"            # another's row (its children
    assert units.choose([perf], plan, 0) == perf                        # are the run's), its deferred last
    assert units.choose([units.deferred("perf-b")], {units.deferred("perf-b"): 1}, 0) is None   # none left
    assert units.choose(queued[1:], {}, 1) == "row-a"                   # unplanned: anyone's, in order


def test_a_worker_that_ended_before_its_next_unit_was_sent_gives_it_back_and_the_run_goes_on():
    """A worker whose CUDA context was lost ends right after its last report; the controller,
    handling that report, sent it its next unit: the send raised OSError and the run ended in an
    INTERNALERROR (one CPU CI run in four, tests/test_fault_containment.py). The unit stays with
    the ended worker until xdist removes it, then goes to another."""
    from types import SimpleNamespace

    from gemmcheck.schedule import units

    class Worker:
        shutting_down = False

        def __init__(self, workerid, ended=False):
            self.gateway, self.ended, self.sent = SimpleNamespace(id=workerid), ended, []

        def send_runtest_some(self, indices):
            if self.ended:
                raise OSError("cannot send to <Channel id=1 closed>")
            self.sent.append(indices)

        def shutdown(self):
            self.shutting_down = True

    options = {"tx": ["2*popen"], "gemm_shard_durations": None, "gemm_gpus": None}
    config = SimpleNamespace(getvalue=options.get, getoption=lambda name, default=None: options.get(name, default),
                             option=SimpleNamespace(loadscopereorder=True), stash={},
                             hook=SimpleNamespace(pytest_gemm_work_unit=lambda config, nodeid: None))
    scheduler = units.make_scheduler(config, None)
    collection = [f"test_x.py::test_{n}" for n in range(8)]
    ended, alive = Worker("gw0", ended=True), Worker("gw1")
    for worker in (ended, alive):
        scheduler.add_node(worker)
        scheduler.add_node_collection(worker, collection)
    scheduler.schedule()                      # each takes units; the ended one's send fails quietly
    assert scheduler.remove_node(ended) in collection   # its unsent units go back to the queue
    while alive.sent:
        for index in alive.sent.pop(0):
            scheduler.mark_test_complete(alive, index)
    assert scheduler.tests_finished and alive.shutting_down
    assert scheduler.workqueue == {} and all(all(unit.values()) for unit in scheduler.assigned_work[alive].values())


def test_with_several_gpus_the_first_gpus_workers_time_and_the_others_run_the_rest():
    """On an H200 pair the nightly's timing waited for the last compute-sanitizer children on
    both cards, then closed the run alone (~90 s of 260): the children cost the host, so the
    second card hardly sped them up. The first card's workers take the performance units
    from the start; the rows (and their children) go to the others."""
    from gemmcheck.schedule import units

    assert gpus.timing_workers(2, 16) == {0, 1, 2}               # the first GPU's workers
    assert gpus.timing_workers(2, 2) == gpus.timing_workers(4, 8) == {0}
    assert gpus.timing_workers(1, 8) == gpus.timing_workers(2, 1) == frozenset()
    assert [gpus.gpu_index(k, 2, 16) for k in range(16)] == [0] * 3 + [1] * 13
    assert gpus.worker_input((0, 1), 3, 4, {})[gpus.WORKER_GPU_COUNT] == 2
    perf = [f"perf.py::test_t[{d}-{k}]" for d in ("f32", "f64") for k in range(3)]
    rows = [f"haz.py::test_{t}[row{r}]" for r in range(6) for t in ("a", "b")]
    unit_of = lambda n: (units.deferred("perf-" + n.split("[")[1][:3]) if n.startswith("perf")  # noqa: E731
                         else n.split("[")[1][:-1] if n.startswith("haz") else n)
    nodeids = perf + rows + ["corr.py::test_alone"]
    timing = frozenset({0, 2})
    split = units.plan(nodeids, 4, unit_of, timing=timing)
    assert {w for u, w in split.items() if u.startswith(units.DEFERRED)} == {0, 2}, split
    assert {w for u, w in split.items() if u.startswith("row")} == {1, 3}, split
    assert units.timers(4, timing, split) == timing
    # no performance units, or no worker besides the timing ones: the usual plan
    assert units.timers(4, timing, [unit_of(n) for n in rows]) == frozenset()
    assert units.plan(rows, 4, unit_of, timing=timing) == units.plan(rows, 4, unit_of)
    assert units.timers(2, frozenset({0, 1}), split) == frozenset()
    assert units.plan(nodeids, 2, unit_of, timing=frozenset({0, 1})) == units.plan(nodeids, 2, unit_of)
    # a timing worker: the deferred units first (its own, then another's), then the rest
    f32, f64 = units.deferred("perf-f32"), units.deferred("perf-f64")
    plan = {f32: 0, f64: 2, "row0": 1, "row1": 3}
    queued = [f32, f64, "row0", "row1", "corr.py::test_alone"]
    assert units.choose(queued, plan, 2, timing) == f64
    assert units.choose(queued, plan, 0, timing) == f32
    assert units.choose(queued[1:], plan, 0, timing) == f64
    assert units.choose(queued[2:], plan, 0, timing) == "corr.py::test_alone"
    assert units.choose(queued[2:4], plan, 0, timing) == "row0"
    # the others as before: anyone's, their rows, another's rows, then (None) what is left
    assert units.choose(queued, plan, 1, timing) == "corr.py::test_alone"
    assert units.choose(queued[:4], plan, 1, timing) == "row0"
    assert units.choose(queued[:2] + ["row1"], plan, 1, timing) == "row1"
    assert units.choose(queued[:2], plan, 1, timing) is None


def test_under_xdist_with_two_gpus_the_timing_workers_run_the_performance_units_first(suite, tmp_path, monkeypatch):
    """The scheduler end to end (on cpu-sim, the controller told it has two GPUs; the
    workers, which compute the plan too, are not): the first GPU's worker starts with the
    performance units and runs no row; the others run the rows, and a performance unit only
    once nothing else is left."""
    pytest.importorskip("xdist")
    monkeypatch.setattr(gpus, "gpu_count_of_run", lambda config: 2)   # in this process: the controller
    monkeypatch.setenv("ROW_LOG", str(tmp_path / "rows.log"))
    suite.makepyfile(test_perf=(ROOT / "suites" / "performance" / "test_throughput.py").read_text(),
                     test_rows=ROW_TESTS)
    out = tmp_path / "phases.json"
    result = suite.runpytest(*NARROW, "-n", "4", "--gemm-profile", "nightly", "--gemm-backend=cpu-sim",
                             "--gemm-sanitizer=off", f"--gemm-phases={out}")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert gpus.timing_workers(2, 4) == {0}
    in_unit = lambda n: n.startswith("test_perf.py") and bool(re.search(r"[-\[]N\d+\]$", n))   # noqa: E731
    by_worker = {}
    for nodeid, (worker, start, stop) in json.loads(out.read_text())["spans"].items():
        by_worker.setdefault(worker, []).append((start, stop, nodeid))
    ran = {w: [n for _, _, n in sorted(tests)] for w, tests in by_worker.items()}
    timing = ran["gw0"]                  # every performance unit it took, then the rest
    last_unit = max(k for k, n in enumerate(timing) if in_unit(n))
    assert all(in_unit(n) for n in timing[:last_unit + 1]), timing
    for worker in ("gw1", "gw2", "gw3"):     # the rest, then whatever performance unit is left
        tests = ran[worker]
        first_unit = next((k for k, n in enumerate(tests) if in_unit(n)), len(tests))
        assert not any(n.startswith("test_rows.py") for n in tests[first_unit:]), (worker, tests)
    units_run = sum(in_unit(n) for n in timing)
    assert units_run > sum(in_unit(n) for w in ("gw1", "gw2", "gw3") for n in ran[w]), ran


def test_every_test_that_needs_the_device_timer_runs_among_the_performance_units(suite):
    """A test that waits for its worker's children and turns before it can time anything,
    taken first as anyone's unit, held its worker (and the rows dealt to it) from ~40 s to
    ~190 s of a nightly on one H200."""
    from gemmcheck.schedule import units

    suite.makepyfile(test_perf=(ROOT / "suites" / "performance" / "test_throughput.py").read_text())
    items, _ = suite.inline_genitems("--gemm-profile", "nightly", "--gemm-backend=cpu-sim")
    # (A test over an empty parameter set, as the batched ones over a catalog without batches, is
    # skipped before it needs anything: pytest marks it skip.)
    empty = lambda i: any("empty parameter set" in str(m.kwargs.get("reason", "")) for m in i.iter_markers("skip"))  # noqa: E731
    timing = [i for i in items if "perf_session" in i.fixturenames and not empty(i)]
    assert len(timing) > 100, len(timing)
    loose = [i.nodeid for i in timing if not units.work_unit(i.config, i.nodeid).startswith(units.DEFERRED)]
    assert not loose, loose


def test_the_performance_tests_of_one_dtype_and_size_land_in_one_shard(suite):
    """A claim reads the measurements of its kernel and of its baseline kernel (the best of its
    TILEs); a shard without them timed them again (16 s for one claim at N = 8192 on the H200)."""
    suite.makepyfile(test_perf=(ROOT / "suites" / "performance" / "test_throughput.py").read_text())
    args = ("--co", "-q", "--gemm-profile", "nightly", "--gemm-backend=cpu-sim")
    parts = [collected(suite.runpytest(*args, "--gemm-shard", f"{i}/4")) for i in (1, 2, 3, 4)]
    shards_of = {}
    for index, part in enumerate(parts):
        for nodeid in part:
            param = nodeid.split("[")[1].rstrip("]")
            size = param.rpartition("N")[2]
            dtype = next((d for d in ("bfloat16", "float16", "float32", "float64") if f"-{d}-" in f"-{param}-"),
                         "float32" if param == f"N{size}" else None)
            if size.isdigit() and dtype:
                shards_of.setdefault((dtype, size), set()).add(index)
    assert len(shards_of) == 16, sorted(shards_of)      # 4 dtypes x the nightly's 4 sizes
    assert all(len(shards) == 1 for shards in shards_of.values()), shards_of
    assert all(parts), parts                            # and the units still spread over every shard


AHEAD_TESTS = ROW_TESTS + """
import time

import pytest

from gemmcheck.pytest_plugin.hazards_plugin import rows_ahead

@pytest.fixture(autouse=True, scope="session")
def both_workers_started():
    # A worker that starts late has its planned rows taken by the other (by design: none
    # waits for a slow one); on a busy host that made which worker ran which row vary.
    Path(os.environ["ROW_LOG"] + "." + os.environ["PYTEST_XDIST_WORKER"]).touch()
    end = time.monotonic() + 60
    while len(list(Path(os.environ["ROW_LOG"]).parent.glob("rows.log.gw*"))) < 2 and time.monotonic() < end:
        time.sleep(0.05)

def test_fourth_claim(matrix_row, request):
    ahead = ",".join(i.id for i in rows_ahead(request.config, request.session.items))
    with open(Path(os.environ["ROW_LOG"] + ".ahead"), "a") as out:
        out.write(f"{os.environ.get('PYTEST_XDIST_WORKER')} {ahead}\\n")
"""


def test_under_xdist_each_worker_runs_the_rows_planned_for_it(suite, monkeypatch):
    """A worker starts the compute-sanitizer runs of its planned rows at once, so the
    scheduler must give it those rows (dealt as workers came free, which worker got which
    row depended on timing)."""
    pytest.importorskip("xdist")
    from gemmcheck.schedule import units

    log = suite.path / "rows.log"
    monkeypatch.setenv("ROW_LOG", str(log))
    suite.makepyfile(test_rows=AHEAD_TESTS)
    four = ("--gemm-kernels", "matmul_naive,matmul_tiled,matmul_tiled_guarded,matmul_tiled_padded",
            "--gemm-dtypes", "float32", "--gemm-tiles", "16")
    result = suite.runpytest(*four, "-n", "2", "--gemm-backend=cpu-sim", "--gemm-sanitizer=off")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    runs = [line.split() for line in log.read_text().splitlines()]
    row = lambda nodeid: nodeid.split("[")[1][:-1]      # noqa: E731
    ran_on = {row(n): int(w.removeprefix("gw")) for w, n in runs}
    assert len(ran_on) == 4, runs
    expected = units.plan(sorted(n for _, n in runs), 2, row)
    assert set(expected.values()) == {0, 1}, expected
    # Each worker starts with a row planned for it; it runs another's only once none of its
    # own is left (by design: none waits for a slow worker; on a busy GPU host the second
    # worker was slow enough that the first took one of its rows).
    for w in (0, 1):
        rows_run = [row(n) for worker, n in runs if worker == f"gw{w}"]
        assert rows_run and expected[rows_run[0]] == w, (w, rows_run, expected)
        taken = [r for r in rows_run if expected[r] != w]
        own = [r for r in rows_run if expected[r] == w]
        assert not taken or rows_run.index(taken[0]) > rows_run.index(own[-1]), (w, rows_run, expected)
    # and the rows whose tools a worker starts ahead are the ones planned for it
    ahead = {line.split()[0]: set(line.split()[1].split(","))
             for line in (suite.path / "rows.log.ahead").read_text().splitlines()}
    assert ahead == {f"gw{w}": {r for r, v in expected.items() if v == w} for w in (0, 1)}, ahead


def test_a_tests_row_is_read_from_its_parameter_id():
    from gemmcheck.pytest_plugin.hazards_plugin import row_of

    rows = frozenset({"matmul_tiled-float32-TILE16", "x-float16-TILE8"})
    assert row_of("suites/hazards/test_bounds.py::test_a[matmul_tiled-float32-TILE16]", rows) == \
        "matmul_tiled-float32-TILE16"
    assert row_of("suites/a.py::Cls::test_b[x-float16-TILE8]", rows) == "x-float16-TILE8"
    for other in ("suites/a.py::test_c[matmul_tiled-float32-TILE32]", "suites/a.py::test_d",
                  "suites/a.py::test_e[matmul_tiled-float32-TILE16-M4xN4xK4]"):
        assert row_of(other, rows) is None


def test_the_detector_benchmark_runs_and_its_stand_in_is_caught(capsys):
    import script_loader

    bench = script_loader.load("bench_detectors")
    assert bench.main(["64", "--launches", "3"]) == 0
    assert "found wrong_values, nondeterminism" in capsys.readouterr().out


def test_the_performance_suite_asks_the_plugins_to_quiet_the_gpu_before_it_times(suite):
    """perf_session calls pytest_gemm_before_device_timing first (the hazards plugin waits
    there for the kill matrix's children), also where it then skips for want of a GPU."""
    suite.makeconftest((ROOT / "conftest.py").read_text() + (
        "\nCALLS = []\n"
        "def pytest_gemm_before_device_timing(config):\n"
        "    CALLS.append(1)\n"
        "    config.rootpath.joinpath('quieted').write_text(str(len(CALLS)))\n"))
    suite.makepyfile(test_probe="def test_timed(perf_session):\n    pass\n")
    result = suite.runpytest("-p", "no:cacheprovider", "--gemm-backend", "cpu-sim")
    result.assert_outcomes(skipped=1)
    assert (suite.path / "quieted").read_text() == "1"
