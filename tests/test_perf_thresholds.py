"""The thresholds file: it parses, every claim names real kernels, bad entries fail with
the cause; and judging a claim gives the right verdict and message (on made-up rates)."""

import copy
import math
import time
import tomllib

import pytest

from gemmcheck.contract import catalog
from gemmcheck import perf
from gemmcheck.contract import dtypes as dt
from gemmcheck.perf import selection

BUILTIN = tomllib.loads(perf.BUILTIN_THRESHOLDS.read_text())


def test_the_builtin_thresholds_parse():
    thresholds = perf.load_thresholds(perf.BUILTIN_THRESHOLDS)
    assert thresholds.timing.tiles == (16, 32)
    assert len(thresholds.thresholds) == len(BUILTIN["threshold"]) >= 8


def test_every_builtin_claim_names_a_catalog_instantiation():
    # The thresholds file holds the builtin catalog's kernels and the ladder's (--gemm-catalog all).
    specs = {s.name: s for s in catalog.load_all(catalog.NAMED["all"])}
    thresholds = perf.load_thresholds(perf.BUILTIN_THRESHOLDS)
    assert selection.unknown_instantiations(specs.values(), thresholds) == []
    for t in thresholds.thresholds:
        spec = specs.get(t.kernel)
        assert spec is not None, f"{t.id}: no kernel {t.kernel!r} in the catalog"
        assert t.config is not None or t.tile in thresholds.timing.tiles, t.id
        if t.baseline not in (perf.CUBLAS, perf.FP32_PEAK):
            assert t.baseline in specs, f"{t.id}: no baseline kernel {t.baseline!r}"


def test_every_too_slow_kernel_is_held_to_the_same_bar_as_a_reference():
    # The kill is only honest if the slowed kernel faces a bar a reference passes.
    thresholds = perf.load_thresholds(perf.BUILTIN_THRESHOLDS).thresholds
    specs = {s.name: s for s in catalog.load_all(catalog.NAMED["all"])}
    for slow in (t for t in thresholds if specs[t.kernel].expect == "too_slow"):
        twins = [t for t in thresholds if specs[t.kernel].is_reference and t.dtype == slow.dtype
                 and t.baseline == slow.baseline and t.baseline_tile == slow.baseline_tile
                 and t.at_least == slow.at_least]
        assert twins, f"{slow.id}: no reference kernel is held to the same bar"


def _with(**changes):
    data = copy.deepcopy(BUILTIN)
    entry = data["threshold"][0]
    for key, value in changes.items():
        if value is None:
            entry.pop(key, None)
        else:
            entry[key] = value
    return data


@pytest.mark.parametrize("data, message", [
    (_with(at_least=-0.5), "'at_least' must be a positive number (a ratio), got -0.5"),
    (_with(at_least="0.14"), "'at_least' must be a positive number (a ratio), got '0.14'"),
    (_with(at_least=None), "missing required field 'at_least'"),
    (_with(dtype="float8"), "unknown dtype 'float8'"),
    (_with(tile=0), "'tile' must be a positive integer, got 0"),
    (_with(speedup=2), "unknown field(s) ['speedup']"),
    (_with(baseline_tile=16), "'baseline_tile' is only for a kernel baseline, not 'cublas'"),
    (_with(baseline="matmul_naive", baseline_tile="worst"), "'baseline_tile' must be a positive integer or \"best\""),
    (_with(baseline="matmul_tiled", baseline_tile=32), "a kernel cannot be its own baseline"),
    (_with(min_size=4096, max_size=1024), "'max_size' 1024 is below 'min_size' 4096"),
    ({**BUILTIN, "thresholds": []}, "unknown top-level keys ['thresholds']"),
    ({**BUILTIN, "timing": {"tiles": []}}, "'tiles' must be a non-empty list"),
    ({**BUILTIN, "timing": {"warmup": 0}}, "'warmup' must be an integer >= 1"),
    ({**BUILTIN, "timing": {"max_spread": -1}}, "'max_spread' must be a positive number"),
    ({**BUILTIN, "timing": {"enough_seconds": 0}}, "'enough_seconds' must be a positive number"),
    ({**BUILTIN, "timing": {"repeats": 5}}, "[timing]: unknown field(s) ['repeats']"),
    ({**BUILTIN, "threshold": BUILTIN["threshold"][:1] * 2}, "listed twice"),
])
def test_bad_thresholds_fail_with_the_cause(data, message):
    with pytest.raises(perf.ThresholdError) as info:
        perf.parse_thresholds(data, "thresholds.toml")
    text = str(info.value)
    assert text.startswith("thresholds.toml: ") and message in text, text


def test_the_failing_entry_is_named_in_the_error():
    with pytest.raises(perf.ThresholdError, match=r"threshold #1 \(matmul_tiled-float32-TILE32 vs cublas\)"):
        perf.parse_thresholds(_with(at_least=0), "thresholds.toml")


def test_a_missing_or_broken_file_is_named(tmp_path):
    with pytest.raises(perf.ThresholdError, match="thresholds file not found"):
        perf.load_thresholds(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[[threshold]\n")
    with pytest.raises(perf.ThresholdError, match="bad.toml: not valid TOML"):
        perf.load_thresholds(bad)


def test_a_bad_thresholds_option_stops_the_run(pytester, tmp_path):
    from pathlib import Path

    pytester.makeconftest((Path(__file__).parent.parent / "conftest.py").read_text())
    bad = tmp_path / "t.toml"
    bad.write_text('[[threshold]]\nkernel = "k"\ndtype = "float32"\ntile = 32\nbaseline = "cublas"\n')
    result = pytester.runpytest("--co", f"--gemm-thresholds={bad}")
    assert result.ret != 0
    assert "--gemm-thresholds:" in result.stderr.str() and "missing required field 'at_least'" in result.stderr.str()


def test_sizes_a_claim_applies_to():
    t = perf.Threshold("k", "float32", 32, "cublas", 0.1, min_size=2048, max_size=4096)
    assert [n for n in (1024, 2048, 4096, 8192) if t.applies(n)] == [2048, 4096]


# -- judging a claim: made-up rates through the real PerfSession and judge() ---------------

class FakeTimer:
    """Stands in for perf.GpuTimer: each instantiation runs at a rate from a table, its first
    launch's output is wrong for ids in ``wrong``, its last timed launch's for ids in ``wrong_last``."""

    def __init__(self, rates, cublas=None, wrong=(), wrong_last=()):
        self.rates, self.cublas_rates = rates, cublas or {}
        self.wrong, self.wrong_last = set(wrong), set(wrong_last)
        self.timing = perf.Timing(tiles=(16, 32))
        self.device = perf.Device("Made-up GPU", (9, 0), 132, 1.98e9, 60 * 2**20)
        self.launched = []

    def _measurement(self, label, size, tflops):
        seconds = 2 * size**3 / (tflops * 1e12)
        return perf.Measurement(label, size, (seconds,) * 5, flops=2 * size**3)

    def check(self, instance, size):
        if instance.id in self.wrong:
            return perf.Check(worst_ratio=7.5, nans=0, where=(33, 65))
        return perf.Check(worst_ratio=0.01, nans=0, where=(0, 0))

    def timed(self, instance, size, n_repeat):
        self.launched.append(instance.id)
        last = (perf.Check(worst_ratio=math.inf, nans=0, where=(40, 7)) if instance.id in self.wrong_last
                else perf.Check(worst_ratio=0.02, nans=0, where=(0, 0)))
        cublas = (self._measurement(f"cublas-{instance.dtype}", size, self.cublas_rates[instance.dtype])
                  if instance.dtype in self.cublas_rates else None)
        return perf.Timed(self._measurement(instance.id, size, self.rates[instance.id]), cublas,
                          None if cublas else f"cupy.matmul has no {instance.dtype}", last)

    def cublas(self, dtype, size, n_repeat):
        if dtype not in self.cublas_rates:
            raise TypeError(f"no {dtype} matmul")
        return self._measurement(f"cublas-{dtype}", size, self.cublas_rates[dtype])

    def copy(self, n_repeat):
        return perf.Measurement("copy", 2**30, (0.5e-3,) * 5, bytes_moved=2 * 2**30)


H200_RATES = {"matmul_tiled-float32-TILE32": 8.8, "matmul_tiled-float32-TILE16": 8.1,
              "matmul_naive-float32-TILE16": 5.3, "matmul_naive-float32-TILE32": 5.0,
              "slow_tiled-float32-TILE32": 2.4}


def _judge(threshold, rates=H200_RATES, cublas={"float32": 50.5}, wrong=(), wrong_last=()):
    timer = FakeTimer(rates, cublas, wrong, wrong_last)
    session = perf.PerfSession(timer, repeats=5)
    return perf.judge(session, threshold, 4096, catalog.load(catalog.BUILTIN)), timer


def test_a_kernel_above_its_bar_passes_and_below_it_fails():
    passing, _ = _judge(perf.Threshold("matmul_tiled", "float32", 32, "cublas", 0.14))
    assert passing.ok and passing.ratio == pytest.approx(8.8 / 50.5)
    failing, _ = _judge(perf.Threshold("slow_tiled", "float32", 32, "cublas", 0.14, measured="twin: 0.174"))
    assert not failing.ok
    message = failing.message()
    for part in ("slow_tiled-float32-TILE32 at N=4096 is below its threshold", "2.40 TFLOP/s",
                 "0.048 x cuBLAS float32 (TF32 off) (50.50 TFLOP/s)", "threshold >= 0.14",
                 "twin: 0.174", "card: Made-up GPU (cc 9.0, 132 SMs, 1.98 GHz"):
        assert part in message, (part, message)


def test_best_baseline_takes_the_fastest_timed_tile():
    evaluation, timer = _judge(perf.Threshold("matmul_tiled", "float32", 32, "matmul_naive", 1.25,
                                              baseline_tile="best"))
    assert evaluation.baseline_value == pytest.approx(5.3)
    assert evaluation.baseline_label == "matmul_naive-float32-TILE16 (best of TILE 16, 32)"
    assert sorted(timer.launched) == ["matmul_naive-float32-TILE16", "matmul_naive-float32-TILE32",
                                      "matmul_tiled-float32-TILE32"]
    # A faster naive kernel raises the bar: 8.8 / 8.0 = 1.1 < 1.25.
    faster = dict(H200_RATES, **{"matmul_naive-float32-TILE32": 8.0})
    slower, _ = _judge(perf.Threshold("matmul_tiled", "float32", 32, "matmul_naive", 1.25,
                                      baseline_tile="best"), rates=faster)
    assert not slower.ok and slower.ratio == pytest.approx(1.1)


def test_each_instantiation_is_timed_once_per_session():
    timer = FakeTimer(H200_RATES, {"float32": 50.5})
    session = perf.PerfSession(timer, repeats=5)
    specs = catalog.load(catalog.BUILTIN)
    for threshold in (perf.Threshold("matmul_tiled", "float32", 32, "cublas", 0.14),
                      perf.Threshold("matmul_tiled", "float32", 32, "fp32_peak", 0.10),
                      perf.Threshold("matmul_tiled", "float32", 32, "matmul_naive", 1.25, baseline_tile=16)):
        perf.judge(session, threshold, 4096, specs)
    assert timer.launched.count("matmul_tiled-float32-TILE32") == 1


def test_fp32_peak_baseline_uses_the_device_properties():
    evaluation, _ = _judge(perf.Threshold("matmul_tiled", "float32", 32, "fp32_peak", 0.10))
    assert evaluation.baseline_value == pytest.approx(66.9, abs=0.05)
    assert evaluation.ratio == pytest.approx(8.8 / 66.9, abs=1e-3)


def test_a_wrong_kernel_is_not_timed():
    with pytest.raises(perf.WrongOutput, match=r"7.5 x the forward error bound at C\[33, 65\] \(tile 1,2\)"):
        _judge(perf.Threshold("matmul_tiled", "float32", 32, "cublas", 0.14),
               wrong={"matmul_tiled-float32-TILE32"})


def test_a_missing_baseline_is_a_reason_not_a_pass():
    with pytest.raises(perf.Unjudgeable, match="no cuBLAS baseline for float32: cupy.matmul has no float32"):
        _judge(perf.Threshold("matmul_tiled", "float32", 32, "cublas", 0.14), cublas={})
    with pytest.raises(perf.Unjudgeable, match="baseline kernel 'mystery' is not in the catalog"):
        _judge(perf.Threshold("matmul_tiled", "float32", 32, "mystery", 1.0, baseline_tile="best"))
    with pytest.raises(perf.Unjudgeable, match="no instantiation at float32, TILE 64"):
        _judge(perf.Threshold("matmul_tiled", "float32", 32, "matmul_naive", 1.0, baseline_tile=64))


# -- the numbers behind the timing setup ------------------------------------------------------

@pytest.mark.parametrize("set_bytes, l2, expected", [
    (3 * 4096 * 4096 * 4, 60 * 2**20, 2),     # 192 MiB a set: any other set flushes 2 x L2
    (3 * 1024 * 1024 * 4, 60 * 2**20, 11),    # 12 MiB a set: 10 others hold 120 MiB = 2 x L2
    (3 * 2048 * 2048 * 2, 50 * 2**20, 6),     # 24 MiB a set: 4 others hold 96 MiB < 100, so 5
])
def test_enough_input_sets_rotate_to_defeat_l2(set_bytes, l2, expected):
    n = perf.n_input_sets(set_bytes, l2)
    assert n == expected
    assert (n - 1) * set_bytes >= 2 * l2          # what the rotation promises
    assert n == 2 or (n - 2) * set_bytes < 2 * l2  # and no more sets than needed


# -- inputs and the check of the output, with numpy standing in for CuPy --------------------

@pytest.mark.parametrize("name", list(dt.DTYPES))
def test_timing_inputs_are_the_problems_own_operands_exact_in_the_dtype(name):
    import numpy as np

    from gemmcheck.problems.problem import Problem

    sets = perf.InputSets(np, dt.get(name), 64, l2_bytes=64 * 64 * 8 * 4, seed=7)
    assert sets.sets == []                                          # drawn on the host; uploaded in a turn
    assert sets.upload() is sets and sets.upload().sets is sets.sets   # once
    assert len(sets.sets) == sets.n_sets + 1 and sets.n_sets >= 2 and sets.check_set == sets.n_sets
    for i, (A, B, C) in enumerate(sets.sets):
        want_A, want_B = Problem(64, 64, 64, name, "uniform", 7 + i).operands()
        assert np.array_equal(sets.to_float64(A), want_A) and np.array_equal(sets.to_float64(B), want_B)
        assert A.dtype == dt.get(name).storage and C.shape == (64, 64)
    assert not np.array_equal(sets.sets[0][0], sets.sets[1][0])     # sets differ
    sets.poison(1)
    assert np.all(sets.sets[1][2] == dt.get(name).poison_bits) and not np.any(sets.sets[0][2])


@pytest.mark.parametrize("name", list(dt.DTYPES))
def test_the_check_passes_a_correct_product_and_catches_a_wrong_or_unwritten_one(name):
    import numpy as np

    d = dt.get(name)
    sets = perf.InputSets(np, d, 48, l2_bytes=0, seed=3).upload()
    A, B, _ = sets.sets[0]
    ref, absprod = sets.reference(0)
    # A correct kernel in the dtype: accumulate in the accumulator type, round once.
    acc = dt.get(d.accumulator).numpy
    product = (sets.to_float64(A).astype(acc) @ sets.to_float64(B).astype(acc)).astype(np.float64)
    correct = dt.from_bits(dt.to_bits(product, d), d).astype(np.float64)
    ok = perf.check_output(np, correct, ref, absprod, d, 48)
    assert ok.ok and ok.nans == 0 and ok.worst_ratio <= 1.0

    wrong = correct.copy()
    wrong[17, 40] += 0.25 * np.abs(ref).max()         # one element off by a lot
    bad = perf.check_output(np, wrong, ref, absprod, d, 48)
    assert not bad.ok and bad.where == (17, 40) and bad.worst_ratio > 1

    unwritten = correct.copy()
    unwritten[5, 6] = np.nan
    missing = perf.check_output(np, unwritten, ref, absprod, d, 48)
    assert not missing.ok and missing.nans == 1 and missing.where == (5, 6)

    other = sets.reference(1)[0]                      # another set's answer: a replayed result
    assert not perf.check_output(np, correct, other, absprod, d, 48).ok


# -- the last timed launch and the roofline ------------------------------------------------------

def test_a_kernel_wrong_on_its_last_timed_launch_is_refused():
    with pytest.raises(perf.WrongOutput, match=r"correct on its first launch, wrong on its last timed "
                                                r"launch \(launch 5 of the timing loop\): worst .* inf x"):
        _judge(perf.Threshold("matmul_tiled", "float32", 32, "cublas", 0.14),
               wrong_last={"matmul_tiled-float32-TILE32"})
    passing, _ = _judge(perf.Threshold("matmul_tiled", "float32", 32, "cublas", 0.14))   # same, both right
    assert passing.ok


def test_a_time_faster_than_the_roofline_is_refused_as_impossible():
    # H200 float32: 132 SMs x 2048 FLOP/clock (TF32 tensor cores) x 1.98 GHz = 535.3 TFLOP/s at most.
    fast = dict(H200_RATES, **{"matmul_tiled-float32-TILE32": 5000.0})
    with pytest.raises(perf.ImpossibleTime, match="faster than the roofline allows: 5000.0 TFLOP/s exceeds "
                                                  "the device's peak 535.3 TFLOP/s"):
        _judge(perf.Threshold("matmul_tiled", "float32", 32, "cublas", 0.14), rates=fast)
    near = dict(H200_RATES, **{"matmul_tiled-float32-TILE32": 500.0})              # fast, but possible
    evaluation, _ = _judge(perf.Threshold("matmul_tiled", "float32", 32, "cublas", 0.14), rates=near)
    assert evaluation.ok


def test_the_cublas_baseline_is_the_series_sampled_with_the_kernel():
    timer = FakeTimer(H200_RATES, {"float32": 50.5})
    session = perf.PerfSession(timer, repeats=5)
    specs = catalog.load(catalog.BUILTIN)
    perf.judge(session, perf.Threshold("matmul_tiled", "float32", 32, "cublas", 0.14), 4096, specs)
    perf.judge(session, perf.Threshold("matmul_tiled", "float32", 16, "cublas", 0.13), 4096, specs)
    pooled = session.cublas("float32", 4096)
    assert len(pooled.times) == 10                 # both kernels' interleaved cuBLAS samples, pooled
    assert session.rows[("matmul_tiled-float32-TILE32", 4096)].cublas.tflops == pytest.approx(50.5)


# -- refusals: positive controls named in the thresholds file ------------------------------------

def test_the_builtin_refusals_name_declared_defective_kernels():
    refusals = perf.load_thresholds(perf.BUILTIN_THRESHOLDS).refusals
    specs = {s.name: s for s in catalog.load(catalog.BUILTIN)}
    assert refusals, "the thresholds file names no positive control for the timing checks"
    for r in refusals:
        assert specs[r.kernel].expect == "wrong_values" and r.tile in specs[r.kernel].tiles


@pytest.mark.parametrize("entry, message", [
    ({"dtype": "float32", "tile": 32}, "missing required field 'kernel'"),
    ({"kernel": "k", "dtype": "float8", "tile": 32}, "unknown dtype 'float8'"),
    ({"kernel": "k", "dtype": "float32", "tile": 0}, "'tile' must be a positive integer, got 0"),
    ({"kernel": "k", "dtype": "float32", "tile": 32, "speed": 1}, "unknown field(s) ['speed']"),
    ({"kernel": "k", "dtype": "float32", "tile": 32, "impossible_from": 0}, "'impossible_from' must be a positive"),
])
def test_a_bad_refusal_is_reported_with_its_cause(entry, message):
    with pytest.raises(perf.ThresholdError, match=re_escape(f"refuse #1: {message}")):
        perf.parse_thresholds({"refuse": [entry]})


def re_escape(text):
    import re
    return re.escape(text)


def test_a_refusal_asks_the_roofline_from_its_size_on():
    """On the H200 the builtin cheat, first launched by the performance suite at N = 1024 (an
    xdist worker that had not run it before), stored zeros in 10.9 us: 197 TFLOP/s, a time the
    roofline allows (float32's tensor cores: 535)."""
    (cheat,) = perf.load_thresholds(perf.BUILTIN_THRESHOLDS).refusals
    assert not cheat.roofline_refuses_at(1024) and cheat.roofline_refuses_at(2048)
    every = perf.parse_thresholds({"refuse": [{"kernel": "k", "dtype": "float32", "tile": 32}]}).refusals[0]
    assert every.roofline_refuses_at(1)


def test_selection_finds_refusals_only_for_selected_instances():
    from gemmcheck.contract.catalog import Instance
    from gemmcheck.perf import selection

    specs = {s.name: s for s in catalog.load(catalog.BUILTIN)}
    thresholds = perf.load_thresholds(perf.BUILTIN_THRESHOLDS)
    cheat = Instance(specs["cheat_skips_repeats"], "float32", 32)
    cases = selection.refusal_cases([cheat], thresholds, (2048, 4096))
    assert [(c.id, i.id) for c, i in cases] == [
        ("cheat_skips_repeats-float32-TILE32-N2048", cheat.id), ("cheat_skips_repeats-float32-TILE32-N4096", cheat.id)]
    assert selection.refusal_cases([], thresholds, (4096,)) == []
    assert cheat not in selection.timed_instances([cheat], thresholds)   # declared wrong: not a throughput row


def test_asking_for_ncu_without_ncu_on_path_stops_the_run(pytester, monkeypatch):
    from pathlib import Path

    monkeypatch.setenv("PATH", str(pytester.path))     # nothing named ncu there
    pytester.makeconftest((Path(__file__).parent.parent / "conftest.py").read_text())
    result = pytester.runpytest("--co", "--gemm-ncu")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--gemm-ncu needs ncu (Nsight Compute) on PATH; not found" in result.stderr.str()
    (pytester.path / "ncu").write_text("#!/bin/sh\n")
    (pytester.path / "ncu").chmod(0o755)
    assert pytester.runpytest("--co", "--gemm-ncu").ret == pytest.ExitCode.NO_TESTS_COLLECTED


def test_device_timing_is_a_phase_of_its_own(monkeypatch):
    # bench_suite's table showed the performance suite's sampling as "other tests".
    from gemmcheck import phases

    timer = FakeTimer(H200_RATES, {"float32": 50.5})
    slow = timer.timed
    monkeypatch.setattr(timer, "timed", lambda *a: (time.sleep(0.05), slow(*a))[1])
    session = perf.PerfSession(timer, repeats=5)
    instance = catalog.Instance({s.name: s for s in catalog.load(catalog.BUILTIN)}["matmul_tiled"], "float32", 32)
    phases.enable(True)
    try:
        phases.begin()
        perf.timed_rate(session, instance, 4096)
        spent = phases.take()
    finally:
        phases.enable(False)
    assert spent.get("timing", 0) >= 0.05 and "timing" in phases.PHASES
