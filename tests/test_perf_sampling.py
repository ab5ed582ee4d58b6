"""Timing as careful as nvbench, on made-up samples (no GPU): the stopping rule by noise,
the clock filter, interleaving, and the table that shows them."""

import itertools
import math
import random

import pytest

from gemmcheck.contract import catalog
from gemmcheck import perf
from gemmcheck.perf import sampling, selection, summary
from gemmcheck.perf.sampling import Sample, StoppingRule


def sampler(times, clocks=None):
    """A sampler replaying ``times`` (cycled) with SM clocks ``clocks`` (cycled, or None)."""
    t = itertools.cycle(times)
    c = itertools.cycle(clocks) if clocks else itertools.repeat(None)
    return lambda: Sample(next(t), next(c))


class FakeClock:
    """Wall time that advances by ``step`` seconds every time it is read."""

    def __init__(self, step=0.0):
        self.now, self.step = 0.0, step

    def __call__(self):
        self.now += self.step
        return self.now


def run(samplers, rule, reference=None, ratio=0.75, step=0.0):
    return sampling.sample_interleaved(samplers, rule, reference_mhz=reference, min_clock_ratio=ratio,
                                       clock=FakeClock(step))


# -- the stopping rule ---------------------------------------------------------------------------

def test_quiet_samples_stop_at_the_minimum_count_as_converged():
    got = run({"k": sampler([1.000e-3, 1.001e-3, 0.999e-3])}, StoppingRule(min_samples=10))
    assert got.stop == sampling.CONVERGED and len(got.series["k"].kept) == 10
    assert got.series["k"].noise <= 0.005


def test_noisy_samples_keep_sampling_until_the_cap():
    noisy = [1e-3, 1.2e-3, 0.8e-3, 1.1e-3]          # stdev / mean ~ 16 %
    got = run({"k": sampler(noisy)}, StoppingRule(min_samples=10, max_samples=200))
    assert got.stop == sampling.SAMPLE_CAP and got.series["k"].taken == 200
    assert got.series["k"].noise > 0.1


def test_a_noisy_series_converges_once_its_median_is_known_to_half_a_percent():
    # Samples spread evenly 5 % either side of 1 ms: the median of n of them is known to
    # ~5 % / sqrt(n) (a uniform's), under 0.5 % from n ~ 90 on: not a fixed count.
    rng = random.Random(7)
    times = [1e-3 * rng.uniform(0.95, 1.05) for _ in range(1000)]
    it = iter(times)
    got = run({"k": lambda: Sample(next(it))}, StoppingRule(min_samples=10, max_samples=1000))
    n = len(got.series["k"].kept)
    assert got.stop == sampling.CONVERGED and 60 <= n <= 120
    assert sampling.relative_error_of_median(times[:n]) <= 0.005 < sampling.relative_error_of_median(times[:n - 1])
    assert got.series["k"].noise > 0.02      # the samples' own spread is reported as it is


def test_host_stalls_do_not_keep_a_known_median_sampling():
    # One sample in 25 at 4x (the host stalled longer than the hold kernel): stdev / mean
    # ~ 55 %, so the mean is known to 0.5 % only after ~12,000 samples; the median, the
    # number reported, is known at the profile's least count.
    times = [(4e-3 if i % 25 == 24 else 1e-3 * (1 + 0.001 * (i % 3 - 1))) for i in range(2000)]
    it = iter(times)
    got = run({"k": lambda: Sample(next(it))}, StoppingRule(min_samples=30, max_samples=1000))
    assert got.stop == sampling.CONVERGED and len(got.series["k"].kept) == 30
    assert got.series["k"].noise > 0.3


def test_the_median_s_error_is_the_normal_s_from_the_interquartile_range():
    # For normal samples sqrt(pi / 2) sigma / sqrt(n), sigma = IQR / 1.349.
    rng = random.Random(11)
    times = [rng.gauss(1.0, 0.02) for _ in range(4000)]
    assert sampling.relative_error_of_median(times) == pytest.approx(math.sqrt(math.pi / 2) * 0.02 / math.sqrt(4000),
                                                                     rel=0.1)
    assert sampling.relative_error_of_median([1.0, 1.0, 1.0]) == 0.0
    assert sampling.relative_error_of_median([1.0]) == math.inf


def test_long_launches_need_only_nvbench_s_ten_samples_once_they_add_up_to_enough_seconds():
    # The nightly asks 50 samples; a quiet 0.12 s launch knows its mean to 0.5 % after 10.
    rule = StoppingRule(min_samples=50, enough_seconds=1.0)
    got = run({"k": sampler([0.120, 0.121, 0.119])}, rule)
    assert got.stop == sampling.CONVERGED and len(got.series["k"].kept) == sampling.NVBENCH_MIN_SAMPLES
    # Short launches still take the profile's 50: ten of them are far from a second.
    got = run({"k": sampler([1.000e-3, 1.001e-3, 0.999e-3])}, rule)
    assert len(got.series["k"].kept) == 50
    # A noisy long launch is not let off its noise target, only the fixed count.
    rng = random.Random(3)
    noisy = [rng.uniform(0.08, 0.12) for _ in range(2000)]
    got = run({"k": sampler(noisy)}, StoppingRule(min_samples=50, max_samples=2000, enough_seconds=1.0))
    assert got.stop == sampling.CONVERGED
    assert sampling.relative_error_of_median(got.series["k"].times) <= 0.005
    assert len(got.series["k"].kept) > 50


def test_the_time_cap_stops_a_noisy_measurement():
    got = run({"k": sampler([1e-3, 2e-3])}, StoppingRule(min_samples=2, max_samples=10**6, max_seconds=5.0),
              step=0.5)
    assert got.stop == sampling.TIME_CAP and got.seconds >= 5.0 and got.series["k"].taken < 20


def test_every_series_must_be_quiet_before_sampling_stops():
    got = run({"cublas": sampler([1e-3]), "kernel": sampler([1e-3, 1.3e-3])},
              StoppingRule(min_samples=5, max_samples=50))
    assert got.stop == sampling.SAMPLE_CAP                     # the noisy kernel never settles
    assert got.series["kernel"].taken == 50 and got.series["cublas"].taken == 5


def test_the_rule_rejects_settings_that_cannot_work():
    for bad in (dict(max_noise=0), dict(min_samples=1), dict(min_samples=20, max_samples=10), dict(max_seconds=0),
                dict(enough_seconds=0)):
        with pytest.raises(ValueError, match="StoppingRule"):
            StoppingRule(**bad)


def test_relative_noise_is_stdev_over_mean():
    assert sampling.relative_noise([1.0, 3.0]) == pytest.approx(math.sqrt(2) / 2)
    assert sampling.relative_noise([2.0]) == math.inf


# -- interleaving ---------------------------------------------------------------------------------

def test_kernel_and_cublas_samples_alternate_so_drift_hits_both():
    order = []

    def taking(label):
        def take():
            order.append(label)
            return Sample(1e-3)
        return take

    run({"cublas": taking("cublas"), "kernel": taking("kernel")}, StoppingRule(min_samples=4))
    assert order == ["cublas", "kernel"] * 4


def test_a_series_whose_median_is_known_waits_while_the_noisy_one_goes_on():
    order = []

    def taking(label, times):
        t = itertools.cycle(times)

        def take():
            order.append(label)
            return Sample(next(t))
        return take

    got = run({"cublas": taking("cublas", [1e-3, 1.2e-3, 0.8e-3]), "kernel": taking("kernel", [30e-3])},
              StoppingRule(min_samples=4, max_noise=0.02))
    assert got.stop == sampling.CONVERGED
    assert order[:8] == ["cublas", "kernel"] * 4                 # in turn while both are unsettled
    assert len(got.series["kernel"].times) == 4                  # then the quiet one stops
    assert len(got.series["cublas"].times) > 10 and set(order[8:]) == {"cublas"}
    assert sampling.relative_error_of_median(got.series["cublas"].times) <= 0.02


def test_a_drift_shows_equally_in_both_series():
    # The card slows down by 1 % per round: both series see the same clocks.
    rounds = itertools.count()
    slow = {"v": 1.0}

    def kernel():
        slow["v"] = 1 + 0.01 * next(rounds)
        return Sample(2e-3 * slow["v"])

    got = run({"cublas": lambda: Sample(1e-3 * slow["v"]), "kernel": kernel}, StoppingRule(min_samples=5,
                                                                                           max_samples=40))
    ratios = [k / c for k, c in zip(got.series["kernel"].times[1:], got.series["cublas"].times[1:])]
    assert all(r == pytest.approx(2.0, rel=0.011) for r in ratios)


# -- the clock filter -----------------------------------------------------------------------------

def test_samples_below_75_percent_of_the_reference_clock_are_dropped_and_counted():
    # 1980 MHz reference: 1400 MHz is 71 % (dropped, and slow), 1500 MHz is 76 % (kept).
    times = [1e-3, 1.4e-3, 1e-3, 1e-3]
    clocks = [1980, 1400, 1500, 1980]
    got = run({"k": sampler(times, clocks)}, StoppingRule(min_samples=9), reference=1980)
    series = got.series["k"]
    assert got.stop == sampling.CONVERGED
    assert len(series.dropped) == 3 and all(s.clock_mhz == 1400 for s in series.dropped)
    assert 1.4e-3 not in series.times
    m = perf.Measurement.from_series(series, 4096, got.stop, flops=2 * 4096**3, reference_mhz=1980)
    assert m.dropped == 3 and m.clock_mhz == 1980 and len(m.times) == 9


def test_the_filter_keeps_a_throttled_half_from_the_median():
    # Every other sample at 1400 MHz and 1.4x the time: unfiltered, the median lies anywhere
    # between the two clocks' times and is never known; filtered, it is the full clock's.
    times, clocks = [1e-3, 1.4e-3], [1980, 1400]
    got = run({"k": sampler(times, clocks)}, StoppingRule(min_samples=9, max_samples=60), reference=None)
    assert got.stop == sampling.SAMPLE_CAP and not got.series["k"].dropped
    got = run({"k": sampler(times, clocks)}, StoppingRule(min_samples=9, max_samples=60), reference=1980)
    assert got.stop == sampling.CONVERGED and set(got.series["k"].times) == {1e-3}


def test_unknown_clocks_drop_nothing():
    assert not sampling.throttled(Sample(1e-3, None), 1980, 0.75)
    assert not sampling.throttled(Sample(1e-3, 100), None, 0.75)
    assert sampling.throttled(Sample(1e-3, 1484), 1980, 0.75)
    assert not sampling.throttled(Sample(1e-3, 1485), 1980, 0.75)


def test_a_card_that_throttles_every_sample_says_so():
    got = run({"k": sampler([1e-3], [500])}, StoppingRule(min_samples=2, max_samples=20), reference=1980)
    with pytest.raises(ValueError, match="every one of 20 samples ran below the clock threshold"):
        perf.Measurement.from_series(got.series["k"], 4096, got.stop, reference_mhz=1980)


def test_a_sample_without_a_positive_time_is_an_error():
    with pytest.raises(ValueError, match="k: a device time must be positive and finite, got 0.0"):
        run({"k": sampler([0.0])}, StoppingRule())


# -- the table shows clocks, spread, cold caches and an honest model roof ------------------------

def _session():
    class Clock:
        reference_mhz, why_not = 1980.0, None

    class Timer:
        timing = perf.Timing()
        device = perf.Device("Made-up GPU", (9, 0), 132, 1.98e9, 60 * 2**20)
        clock = Clock()

        def copy(self, n):
            return perf.Measurement("copy", 2**30, (0.5e-3,) * 5, bytes_moved=2 * 2**30)

    return perf.PerfSession(Timer(), repeats=5)


def _row(instance, tflops, size=4096, clocks=(1980.0,), dropped=0, last_ok=True, impossible=None):
    seconds = 2 * size**3 / (tflops * 1e12)
    m = perf.Measurement(instance.id, size, (seconds,) * 5, flops=2 * size**3, n_sets=2,
                         clocks_mhz=clocks * 5, dropped=dropped, reference_mhz=1980.0, stop=sampling.CONVERGED)
    cublas = perf.Measurement("cublas-float32", size, (2 * size**3 / 50.5e12,) * 5, flops=2 * size**3, n_sets=2,
                              clocks_mhz=clocks * 5, stop=sampling.CONVERGED)
    good = perf.Check(0.01, 0, (0, 0))
    last = good if last_ok else perf.Check(math.inf, 4096 * 4096, (0, 0))
    return perf.Row(m, instance, good, last, cublas, impossible)


def test_the_table_shows_the_spread_that_judges_not_the_stdev_a_few_stalls_inflate():
    # cuBLAS float16 on an H200 in ci: 80 samples, stdev / mean 126 % from a few host stalls,
    # its median known to 0.5 %; the table shows the interquartile range / median.
    specs = {s.name: s for s in catalog.load(catalog.BUILTIN)}
    tiled = catalog.Instance(specs["matmul_tiled"], "float32", 32)
    row = _row(tiled, 8.8)
    base = 2 * 4096**3 / 50.5e12
    stalled = tuple(base * (1 + 0.001 * (i % 5)) for i in range(76)) + (base * 30,) * 4
    row.cublas = perf.Measurement("cublas-float32", 4096, stalled, flops=2 * 4096**3, n_sets=2, stop=sampling.CONVERGED)
    session = _session()
    session.rows = {(tiled.id, 4096): row}
    session._pool_cublas("float32", 4096, row.cublas, None)
    header, rows, _ = summary.summary_rows(session)
    cublas_row = next(dict(zip(header, r)) for r in rows if r[0].startswith("cuBLAS"))
    assert row.cublas.noise > 1 and cublas_row["spread"] == f"{100 * row.cublas.spread:.2f}%" == "0.20%"
    assert summary.document(session)["cublas"]["float32-N4096"]["noise"] == pytest.approx(row.cublas.noise)


def test_the_table_names_the_dtypes_the_profile_left_untimed_for_the_kernels_it_shows():
    specs = {s.name: s for s in catalog.load(catalog.BUILTIN)}
    tiled = catalog.Instance(specs["matmul_tiled"], "float32", 32)
    instances = [i for name in ("matmul_tiled", "matmul_naive") for i in specs[name].instances()]
    untimed = selection.untimed_dtypes(instances, perf.load_thresholds(perf.BUILTIN_THRESHOLDS))
    assert untimed == {"matmul_tiled": ("float64", "float16", "bfloat16"),
                       "matmul_naive": ("float64", "float16", "bfloat16")}
    session = _session()
    session.rows = {(tiled.id, 4096): _row(tiled, 8.8)}
    assert not any(line.startswith("not timed") for line in summary.footer(session))   # the nightly: none
    session.untimed = untimed
    [line] = [line for line in summary.footer(session) if line.startswith("not timed")]
    assert line.endswith("--gemm-profile nightly times every one): matmul_tiled float64, float16, bfloat16")
    assert summary.document(session)["untimed_dtypes"]["matmul_naive"] == ["float64", "float16", "bfloat16"]


def test_summary_table_shows_the_timing_evidence_and_an_honest_model_roof():
    specs = {s.name: s for s in catalog.load(catalog.BUILTIN)}
    naive = catalog.Instance(specs["matmul_naive"], "float32", 32)
    tiled = catalog.Instance(specs["matmul_tiled"], "float32", 32)
    cheat = catalog.Instance(specs["cheat_skips_repeats"], "float32", 32)
    session = _session()
    session.rows = {(naive.id, 4096): _row(naive, 6.15, dropped=2),
                    (tiled.id, 4096): _row(tiled, 8.8),
                    (cheat.id, 4096): _row(cheat, 5000.0, last_ok=False, impossible="too fast")}
    session._pool_cublas("float32", 4096, session.rows[(tiled.id, 4096)].cublas, None)
    header, rows, foot = summary.summary_rows(session)
    by_kernel = {r[0]: dict(zip(header, r)) for r in rows}
    naive_row = by_kernel[naive.id]
    # The naive kernel is far above the seed's DRAM-only model roof: said in words, not as 570 %.
    assert naive_row["% of model roof"] == perf_roofline_exceeded()
    assert naive_row["SM MHz"] == "1980" and naive_row["samples"] == "5 (-2 throttled)"
    assert naive_row["cold caches"] == "rotating 2 input sets" and naive_row["stop"] == "converged"
    assert naive_row["% ceiling"] == "12.2" and naive_row["ceiling"] == "cuBLAS float32"
    assert naive_row["unit (peak TFLOP/s)"] == "FP32 SIMT 66.9" and naive_row["% unit peak"] == "9.2"
    assert naive_row["spread"] == "0.00%"
    assert by_kernel[cheat.id]["TFLOP/s"] == "refused"
    assert "wrong on last launch" in by_kernel[cheat.id]["% of model roof"]
    for r in rows:
        for column in ("% ceiling", "% unit peak", "% of model roof"):
            cell = dict(zip(header, r))[column]
            assert not (cell[:1].isdigit() and float(cell) > 100 and column == "% of model roof"), r
    text = "\n".join(foot)
    assert "DRAM-only intensity model (no cache reuse counted)" in text
    assert "below 75% of 1980 MHz are dropped as throttled" in text
    assert "until its median is known to 0.5%" in text and "last timed launch's output is checked" in text
    assert "spread = interquartile range / median (above 10%: too noisy to judge" in text
    png_points = summary.roofline_png(session)   # the refused kernel is not plotted as a real point
    assert png_points[:8] == b"\x89PNG\r\n\x1a\n"


def perf_roofline_exceeded():
    from gemmcheck.perf import roofline
    return roofline.MODEL_EXCEEDED


# -- the SM clock reader (NVML), with a stand-in for pynvml ---------------------------------------

def test_the_sm_clock_reader_prefers_the_default_applications_clock_and_falls_back_to_the_max(monkeypatch):
    import sys
    import types

    from gemmcheck.backends import device

    calls = {}

    def fake(default=None):
        m = types.ModuleType("pynvml")
        m.NVML_CLOCK_SM = 1
        m.nvmlInit = lambda: None
        m.nvmlDeviceGetHandleByPciBusId = lambda bus: calls.setdefault("bus", bus)
        m.nvmlDeviceGetHandleByIndex = lambda i: calls.setdefault("index", i)

        def default_clock(handle, kind):
            if default is None:
                raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")
            return default
        m.nvmlDeviceGetDefaultApplicationsClock = default_clock
        m.nvmlDeviceGetMaxClockInfo = lambda handle, kind: 1980
        m.nvmlDeviceGetClockInfo = lambda handle, kind: 1410
        return m

    monkeypatch.setitem(sys.modules, "pynvml", fake(default=1755))
    clock = device.SmClock(0, "0000:19:00.0")
    assert (clock.reference_mhz, clock.now_mhz(), clock.why_not, calls) == (1755.0, 1410.0, None,
                                                                          {"bus": "0000:19:00.0"})
    monkeypatch.setitem(sys.modules, "pynvml", fake(default=None))
    assert device.SmClock(3).reference_mhz == 1980.0 and calls["index"] == 3
    monkeypatch.setitem(sys.modules, "pynvml", None)     # not installed
    missing = device.SmClock(0)
    assert missing.now_mhz() is None and "nvidia-ml-py is not installed" in missing.why_not


# -- the measured roofline point (ncu), on ncu's CSV as it prints it -----------------------------

NCU_CSV = [
    "==PROF== Connected to process 4242 (/usr/bin/python3.11)",
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",'
    '"Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"',
    '"0","4242","python3.11","127.0.0.1","matmul_naive","1","7","(32, 32, 1)","(128, 128, 1)","0","9.0",'
    '"Command line profiler metrics","dram__bytes_read.sum","byte","1,073,741,824"',
    '"0","4242","python3.11","127.0.0.1","matmul_naive","1","7","(32, 32, 1)","(128, 128, 1)","0","9.0",'
    '"Command line profiler metrics","dram__bytes_write.sum","byte","67108864"',
]


def test_ncu_csv_gives_the_dram_bytes_read_plus_written():
    from gemmcheck.perf import ncu

    assert ncu.parse(NCU_CSV) == 1_073_741_824 + 67_108_864
    assert ncu.parse(NCU_CSV[:3]) is None          # the write counter missing: no point, not half of one
    assert ncu.parse(["==PROF== Disconnected"]) is None
    argv = ncu.command("/opt/ncu", "matmul_tiled")
    assert argv[0] == "/opt/ncu" and "base" in argv
    import re
    pattern = re.compile(argv[argv.index("--kernel-name") + 1].removeprefix("regex:"))
    assert pattern.match("matmul_tiled") and pattern.match("matmul_tiled<float, 32>")
    assert not pattern.match("matmul_tiled_guarded") and not pattern.match("matmul_tiled_guarded<float, 32>")


def test_without_ncu_there_is_no_measured_point_and_the_table_says_why(monkeypatch):
    from gemmcheck.backends import device
    from gemmcheck.perf import ncu

    monkeypatch.setattr(device, "tool", lambda name: None)
    spec = next(s for s in catalog.load(catalog.BUILTIN) if s.name == "matmul_naive")
    assert ncu.dram_bytes(catalog.Instance(spec, "float32", 32), 64) == (None, "ncu not found on PATH")


def test_the_measured_point_shows_in_the_table_next_to_the_model():
    specs = {s.name: s for s in catalog.load(catalog.BUILTIN)}
    naive = catalog.Instance(specs["matmul_naive"], "float32", 32)
    session = _session()
    session.ncu = "/opt/ncu"
    row = _row(naive, 6.15)
    row.dram_bytes = 2 * 4096**3 / 41.0                 # 41 FLOP per DRAM byte, measured
    session.rows = {(naive.id, 4096): row}
    header, rows, foot = summary.summary_rows(session)
    cells = dict(zip(header, rows[0]))
    assert cells["model FLOP/B"] == "0.25" and cells["DRAM FLOP/B (ncu)"] == "41.0"
    assert any("the measured point of the roofline" in line for line in foot)
    assert summary.roofline_png(session)[:8] == b"\x89PNG\r\n\x1a\n"


def test_one_host_stall_does_not_make_a_measurement_too_noisy_but_a_wide_spread_does():
    """The suite fails a measurement as too noisy on interquartile range / median (the
    spread of what the median reports). Seen on the H200: one 209 ms sample among 1000 of
    2.65 ms (stdev / mean 2.3); that must pass, a kernel whose times spread widely must not."""
    from gemmcheck.perf.thresholds import Timing
    from gemmcheck.perf.measurement import Measurement

    max_spread = Timing().max_spread
    stalled = [2.65e-3 * (1 + 0.001 * (i % 5)) for i in range(999)] + [0.209]
    wide = [1e-3 * (0.7 + 0.6 * (i % 10) / 9) for i in range(1000)]   # 0.7 .. 1.3 ms
    for times, too_noisy in ((stalled, False), (wide, True)):
        m = Measurement(label="k", size=2048, times=tuple(times))
        assert (m.spread > max_spread) is too_noisy, (m.spread, m.noise)
    assert Measurement(label="k", size=2048, times=tuple(stalled)).noise > 2   # the old rule's view
