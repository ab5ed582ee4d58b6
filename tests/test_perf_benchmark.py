"""pytest-benchmark records device-event times, not host time: the clock adapter, and
the whole path through the plugin (made-up times, no GPU)."""

import json
from pathlib import Path

import pytest

from gemmcheck import perf

TIMES = [1.5e-3, 1.25e-3, 2.0e-3, 1.75e-3, 1.0e-3]


def test_the_clock_advances_only_by_the_recorded_times():
    clock = perf.DeviceClock().replay(TIMES)
    assert clock.rounds == len(TIMES)
    durations = []
    for _ in range(len(TIMES)):
        # What pytest-benchmark does for one round: timer(), target(), timer().
        start = clock()
        clock()          # reading the clock takes no time
        clock.advance()
        durations.append(clock() - start)
    assert durations == pytest.approx(TIMES, abs=1e-15)
    with pytest.raises(RuntimeError, match="more often than there are recorded times"):
        clock.advance()


@pytest.mark.parametrize("bad", [[], [1e-3, 0.0], [float("nan")], [-1e-3]])
def test_the_clock_refuses_impossible_times(bad):
    with pytest.raises(ValueError, match="positive and finite"):
        perf.DeviceClock().replay(bad)


RECORDING_TEST = f"""
import pytest
from gemmcheck import perf

TIMES = {TIMES!r}

def test_record(record_benchmark):
    m = perf.Measurement("k-float32-TILE32", 4096, tuple(TIMES), flops=2 * 4096**3)
    record_benchmark(m, group="float32 N=4096", tflops=round(m.tflops, 3), ratio_to_cublas=0.174)
"""


@pytest.fixture
def recording(pytester):
    pytester.makeconftest((Path(__file__).parent.parent / "conftest.py").read_text())
    pytester.makepyfile(test_rec=RECORDING_TEST)
    return pytester


def test_benchmark_json_holds_the_device_times_and_extra_info(recording):
    result = recording.runpytest("-q", "--benchmark-json=bench.json", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    bench = json.loads((recording.path / "bench.json").read_text())["benchmarks"]
    assert len(bench) == 1
    stats = bench[0]["stats"]
    assert stats["rounds"] == len(TIMES) and stats["iterations"] == 1
    assert stats["min"] == pytest.approx(min(TIMES)) and stats["max"] == pytest.approx(max(TIMES))
    assert stats["median"] == pytest.approx(sorted(TIMES)[2])
    assert sorted(stats["data"]) == pytest.approx(sorted(TIMES))
    assert bench[0]["group"] == "float32 N=4096"
    assert bench[0]["extra_info"] == {"tflops": round(2 * 4096**3 / sorted(TIMES)[2] / 1e12, 3),
                                      "ratio_to_cublas": 0.174}
    assert bench[0]["options"]["timer"] == "gemmcheck_device_clock"


def test_saved_runs_go_under_reports_benchmarks(recording):
    result = recording.runpytest("-q", "--benchmark-save=night1", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    saved = list((recording.path / "reports" / "benchmarks").rglob("*night1.json"))
    assert len(saved) == 1, list(recording.path.rglob("*.json"))
    assert not (recording.path / ".benchmarks").exists()


def test_a_slower_night_fails_the_compare_gate(recording):
    recording.runpytest("-q", "--benchmark-save=base", "-p", "no:cacheprovider").assert_outcomes(passed=1)
    same = recording.runpytest("-q", "--benchmark-compare", "--benchmark-compare-fail=median:5%",
                               "-p", "no:cacheprovider")
    assert same.ret == 0, same.stdout.str()
    slower = RECORDING_TEST.replace(f"TIMES = {TIMES!r}", f"TIMES = {[t * 1.2 for t in TIMES]!r}")
    recording.makepyfile(test_rec=slower)
    result = recording.runpytest("-q", "--benchmark-compare", "--benchmark-compare-fail=median:5%",
                                 "-p", "no:cacheprovider")
    assert result.ret != 0
    assert "Performance has regressed" in result.stdout.str() + result.stderr.str()


def test_the_suite_runs_without_pytest_benchmark(recording):
    recording.runpytest("-q", "-p", "no:benchmark", "-p", "no:cacheprovider").assert_outcomes(passed=1)
    disabled = recording.runpytest("-q", "--benchmark-disable", "-p", "no:cacheprovider")
    disabled.assert_outcomes(passed=1)
    # (under xdist, where pytest-benchmark disables itself, the nightly printed this 50 times)
    assert "not used at all" not in disabled.stdout.str(), disabled.stdout.str()


def _item(*markers):
    from types import SimpleNamespace
    return SimpleNamespace(get_closest_marker=lambda name: name if name in markers else None)


def test_perf_tests_run_in_a_worker_that_owns_its_gpu_or_takes_turns_on_it_and_skip_otherwise():
    from types import SimpleNamespace

    from gemmcheck.pytest_plugin import perf_plugin
    from gemmcheck.schedule import gpu_turns, gpus

    shared = SimpleNamespace(workerinput={gpus.WORKER_GPU: "0", gpus.WORKER_OWNS_GPU: False})
    owned = SimpleNamespace(workerinput={gpus.WORKER_GPU: "1", gpus.WORKER_OWNS_GPU: True})
    turns = SimpleNamespace(workerinput={**shared.workerinput, gpu_turns.WORKER_GPU_LOCK: "/run/gpu-0.lock"})
    assert "shares its GPU with another" in perf_plugin.pytest_gemm_skip_reason(shared, _item("perf"))
    assert perf_plugin.pytest_gemm_skip_reason(owned, _item("perf")) is None
    assert perf_plugin.pytest_gemm_skip_reason(turns, _item("perf")) is None
    assert perf_plugin.pytest_gemm_skip_reason(SimpleNamespace(), _item("perf")) is None   # no xdist
    assert perf_plugin.pytest_gemm_skip_reason(shared, _item("gpu")) is None               # not timed
