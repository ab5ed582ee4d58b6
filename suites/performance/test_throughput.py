"""How fast each kernel is, against what this card can do, measured in this run.

Every rate is the median of CUDA-event times (gemmcheck.perf); every claim is a
ratio to cuBLAS, to the FP32 peak or to another kernel measured in the same
run, read from suites/performance/thresholds.toml. The terminal summary prints
the table and writes reports/performance/ (summary.txt, perf.json, roofline.png).
"""

import pytest

from gemmcheck import perf, roofline
from gemmcheck.catalog import Instance
from gemmcheck.perf_plugin import attach_summary, perf_config, write_reports
from gemmcheck.verdict import Defect, Finding, Verdict

@pytest.mark.gpu
@pytest.mark.perf
def test_fp32_peak_is_known_for_this_card(perf_session):
    device = perf_session.device
    assert device.fp32_peak_tflops is not None, (
        f"{device.name}: compute capability {device.capability} has no FP32 lanes-per-SM entry in "
        "gemmcheck.roofline.FP32_LANES_PER_SM; add it from the CUDA Programming Guide's throughput table")


@pytest.mark.gpu
@pytest.mark.perf
def test_cublas_float32_runs_without_tf32(perf_session, perf_size, gemm):
    # A float32 cuBLAS above the FP32 FMA peak can only be TF32 tensor cores:
    # the comparison with SIMT kernels would then be unfair.
    if gemm.dtypes and "float32" not in gemm.dtypes:
        pytest.skip("float32 is not among --gemm-dtypes")
    peak = perf_session.device.fp32_peak_tflops
    if peak is None:
        pytest.skip("FP32 peak unknown for this card")
    cublas = perf_session.cublas("float32", perf_size)
    assert isinstance(cublas, perf.Measurement), cublas
    assert cublas.tflops <= 1.05 * peak, (
        f"cuBLAS float32 at N={perf_size} ran at {cublas.tflops:.1f} TFLOP/s, above the FP32 peak "
        f"{peak:.1f}: TF32 must be on ({perf.TF32}); card: {perf_session.device.describe()}")


@pytest.mark.gpu
@pytest.mark.perf
def test_throughput(perf_instance, perf_size, perf_session, perf_timing, record_benchmark):
    if not perf_instance.supports(perf_size, perf_size, perf_size):
        pytest.skip(f"{perf_instance.id} does not support N={perf_size}")
    rate = perf.timed_rate(perf_session, perf_instance, perf_size)
    measured = perf_session.rows[(perf_instance.id, perf_size)].measurement
    cublas = perf_session.cublas(perf_instance.dtype, perf_size)
    peak = perf_session.device.fp32_peak_tflops
    intensity = roofline.model_intensity(perf_instance.spec.policy, perf_instance.tile,
                                         perf_instance.spec.shared_tiles, perf_instance.dt.itemsize)
    extra = {"tflops": round(rate, 3), "N": perf_size, "dtype": perf_instance.dtype,
             "tile": perf_instance.tile,
             "spread": round(measured.spread, 4), "input_sets": measured.n_sets,
             "model_flop_per_byte": intensity, "device": perf_session.device.name}
    if isinstance(cublas, perf.Measurement):
        extra["cublas_tflops"] = round(cublas.tflops, 3)
        extra["ratio_to_cublas"] = round(rate / cublas.tflops, 4)
    if peak:
        extra["ratio_to_fp32_peak"] = round(rate / peak, 4)
    record_benchmark(measured, group=f"{perf_instance.dtype} N={perf_size}", **extra)
    assert measured.spread <= perf_timing.max_spread, (
        f"{perf_instance.id} at N={perf_size}: timings too noisy to judge: IQR / median = "
        f"{measured.spread:.3f} > {perf_timing.max_spread} over {len(measured.times)} launches "
        f"(median {measured.median * 1e3:.3f} ms); is something else using the GPU? "
        f"card: {perf_session.device.describe()}")


@pytest.mark.gpu
@pytest.mark.perf
def test_meets_threshold(perf_claim, perf_session, gemm):
    threshold, size = perf_claim
    try:
        evaluation = perf.judge(perf_session, threshold, size, gemm.specs)
    except perf.Unjudgeable as why:
        pytest.skip(str(why))
    assert evaluation.ok, evaluation.message()


@pytest.mark.gpu
@pytest.mark.perf
def test_too_slow_kernel_fails_its_threshold(perf_kill, perf_session, gemm, verdicts, request):
    # The kill: a kernel declared too_slow must be rejected by the same check that
    # passes the references. If it meets the bar, either it is not slow or the
    # check cannot tell, and this test fails.
    threshold, size = perf_kill
    try:
        evaluation = perf.judge(perf_session, threshold, size, gemm.specs)
    except perf.Unjudgeable as why:
        pytest.skip(str(why))
    spec = next(s for s in gemm.specs if s.name == threshold.kernel)
    instance = Instance(spec, threshold.dtype, threshold.tile)
    findings = [] if evaluation.ok else [Finding(Defect.TOO_SLOW, "throughput-threshold", evaluation.message(),
                                                 details={"ratio": evaluation.ratio,
                                                          "threshold": threshold.at_least,
                                                          "baseline": evaluation.baseline_label})]
    verdicts.record(Verdict.for_instance(instance, f"M{size}xN{size}xK{size}", findings, request.node.nodeid))
    assert not evaluation.ok, (
        f"{threshold.kernel} is declared too_slow but passed: {evaluation.message()}")


def test_every_too_slow_kernel_has_a_threshold(perf_too_slow, gemm, request):
    # Needs no GPU (so it carries no gpu or perf marker): a too_slow kernel
    # without a threshold could never be caught.
    thresholds = perf_config(request.config).thresholds.thresholds
    named = [t for t in thresholds if (t.kernel, t.dtype, t.tile) ==
             (perf_too_slow.spec.name, perf_too_slow.dtype, perf_too_slow.tile)]
    sizes = [s for s in gemm.profile.perf_sizes if any(t.applies(s) for t in named)]
    assert named and sizes, (
        f"{perf_too_slow.id} is declared too_slow but no threshold in the thresholds file holds it "
        f"at the profile's sizes {list(gemm.profile.perf_sizes)}; add a [[threshold]] it must fail")


@pytest.mark.gpu
@pytest.mark.perf
def test_roofline_and_table_are_reported(perf_session, request):
    # Last in the module: by now the session holds every measurement of this run.
    if not perf_session.rows:
        pytest.skip("nothing was perf_instance in this run")
    written = write_reports(request.config, perf_session)
    attach_summary(request.config, perf_session)
    png = [p for p in written if p.suffix == ".png"]
    assert png and png[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"no roofline PNG among {written}"
