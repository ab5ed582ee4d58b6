"""How fast each kernel is, against what this card can do, measured in this run.

Every rate is the median of CUDA-event times, sampled in turn with cuBLAS until
the noise is <= 0.5 % (gemmcheck.perf); a rate counts only when the output of
the first and of the last timed launch is right and the time is possible
under the roofline. Every claim is a ratio to cuBLAS, to the FP32 peak or to
another kernel measured in the same run, read from
suites/performance/thresholds.toml. The terminal summary prints the table and
writes reports/performance/ (summary.txt, perf.json, roofline.png).
"""

import pytest

from gemmcheck import perf
from gemmcheck.perf import library, selection, summary, units
from gemmcheck.verdict import Defect, Finding, Verdict

@pytest.mark.gpu
@pytest.mark.perf
def test_fp32_peak_is_known_for_this_card(perf_session, perf_largest_size):
    # (perf_largest_size: not used; it runs this test among the performance units, not first)
    device = perf_session.device
    assert device.fp32_peak_tflops is not None, (
        f"{device.name}: compute capability {device.capability} has no FP32 lanes-per-SM entry in "
        "gemmcheck.perf.roofline.FP32_LANES_PER_SM; add it from the CUDA Programming Guide's throughput table")


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
    row = perf_session.rows[(perf_instance.id, perf_size)]
    measured = row.measurement
    cublas = perf_session.ceiling(perf_instance, perf_size)   # sampled in turn with it
    unit = units.unit_of(perf_instance, perf_session.device)
    peak = unit.peak_tflops
    intensity = summary.model_intensity(perf_instance)
    extra = {"tflops": round(rate, 3), "N": perf_size, "dtype": perf_instance.dtype,
             "tile": perf_instance.declared_tile, "config": perf_instance.config,
             "spread": round(measured.spread, 4), "input_sets": measured.n_sets,
             "model_flop_per_byte": intensity, "device": perf_session.device.name,
             "products": perf_session.timer.timing.products(perf_instance)}
    if isinstance(cublas, perf.Measurement):
        extra["ceiling"] = cublas.label
        extra["cublas_tflops"] = round(cublas.tflops, 3)
        extra["ratio_to_cublas"] = round(rate / cublas.tflops, 4)
    extra["unit"] = unit.name
    if peak:
        extra["ratio_to_unit_peak"] = round(rate / peak, 4)
    if measured.clock_mhz is not None:
        extra["sm_clock_mhz"] = round(measured.clock_mhz)
    extra.update(noise=round(measured.noise, 5), stop=measured.stop, dropped_throttled=measured.dropped)
    record_benchmark(measured, group=f"{perf_instance.dtype} N={perf_size}", **extra)
    # Judged on the interquartile range, like the median it qualifies: one host stall longer
    # than the hold kernel (a 209 ms sample among 1000 of 2.65 ms, seen on the H200 while
    # another run loaded the host) inflates stdev / mean to 2.3 but leaves the median true.
    assert measured.spread <= perf_timing.max_spread, (
        f"{perf_instance.id} at N={perf_size}: timings too noisy to judge: interquartile range / "
        f"median = {measured.spread:.4f} > {perf_timing.max_spread} (stdev / mean {measured.noise:.4f}) "
        f"after {len(measured.times)} samples "
        f"({measured.stop}; median {measured.median * 1e3:.3f} ms); is something else using the GPU? "
        f"card: {perf_session.device.describe()}")


@pytest.mark.gpu
@pytest.mark.perf
@pytest.mark.instances.with_args(lambda i: not i.types.uniform)
def test_a_mixed_kernel_is_compared_with_the_library_gemm_of_its_combination(perf_instance, perf_size, perf_session):
    # A type per operand: the ceiling is cuBLASLt's GEMM of those types (or the nearest it has,
    # named), sampled in turn with the kernel; never cuBLAS of another type, never missing.
    if not perf_instance.supports(perf_size, perf_size, perf_size):
        pytest.skip(f"{perf_instance.id} does not support N={perf_size}")
    perf.timed_rate(perf_session, perf_instance, perf_size)
    ceiling = perf_session.ceiling(perf_instance, perf_size)
    assert isinstance(ceiling, perf.Measurement), (
        f"{perf_instance.id} ({perf_instance.types.describe()}) at N={perf_size} has no library ceiling: {ceiling}; "
        f"card: {perf_session.device.describe()}")
    assert ceiling.label.startswith("cuBLASLt "), ceiling.label


@pytest.mark.gpu
@pytest.mark.perf
@pytest.mark.instances.with_args(lambda i: i.batched or bool(i.grouped))
def test_a_batched_or_grouped_kernel_is_compared_with_the_library_strided_batched_gemm_of_its_work(
        perf_instance, perf_size, perf_session):
    # A strided batch of [timing] batch products (or as many ragged groups, the same work): the
    # ceiling is cuBLASLt's strided-batched GEMM of that count, sampled in turn with it, its
    # FLOPs the kernel's (2 N^3 per product); never one product's.
    if not perf_instance.supports(perf_size, perf_size, perf_size):
        pytest.skip(f"{perf_instance.id} does not support N={perf_size}")
    perf.timed_rate(perf_session, perf_instance, perf_size)
    products = perf_session.timer.timing.products(perf_instance)
    kernel = perf_session.rows[(perf_instance.id, perf_size)].measurement
    ceiling = perf_session.ceiling(perf_instance, perf_size)
    assert isinstance(ceiling, perf.Measurement), (
        f"{perf_instance.id} at N={perf_size} has no library ceiling: {ceiling}; card: {perf_session.device.describe()}")
    assert f"strided-batched x{products}" in ceiling.label, ceiling.label
    assert ceiling.flops == kernel.flops == products * 2 * perf_size**3, (ceiling.flops, kernel.flops)


@pytest.mark.gpu
@pytest.mark.perf
@pytest.mark.instances.with_args(lambda i: library.fuses(i.types.epilogue))
def test_an_epilogue_kernel_is_compared_with_the_library_fused_epilogue_nearest_its_own(
        perf_instance, perf_size, perf_session):
    # Timed with its bias, residual and output scale; the ceiling is cuBLASLt's GEMM with its
    # fused epilogue (BIAS, RELU_BIAS, GELU_BIAS), what it lacks named in the label.
    if not perf_instance.supports(perf_size, perf_size, perf_size):
        pytest.skip(f"{perf_instance.id} does not support N={perf_size}")
    perf.timed_rate(perf_session, perf_instance, perf_size)
    ceiling = perf_session.ceiling(perf_instance, perf_size)
    assert isinstance(ceiling, perf.Measurement), (
        f"{perf_instance.id} at N={perf_size} has no library ceiling: {ceiling}; card: {perf_session.device.describe()}")
    assert " epilogue=" in ceiling.label, (
        f"{perf_instance.id}: cuBLASLt ran no fused epilogue for {perf_instance.types.epilogue.describe()}: "
        f"{ceiling.label}; card: {perf_session.device.describe()}")


@pytest.mark.gpu
@pytest.mark.perf
def test_a_kernel_is_never_faster_than_the_peak_of_its_unit(perf_instance, perf_size, perf_session):
    # The unit's peak is a bound: a tensor-core kernel above its tensor-core peak (or a SIMT one
    # above the FP32 peak) means the unit was read wrong, from its code or the peak table.
    if not perf_instance.supports(perf_size, perf_size, perf_size):
        pytest.skip(f"{perf_instance.id} does not support N={perf_size}")
    rate = perf.timed_rate(perf_session, perf_instance, perf_size)
    unit = units.unit_of(perf_instance, perf_session.device)
    if unit.peak_tflops is None:
        pytest.skip(f"{perf_instance.id}: {unit.why}")
    assert rate <= 1.05 * unit.peak_tflops, (
        f"{perf_instance.id} at N={perf_size}: {rate:.1f} TFLOP/s is above the {unit.name} peak "
        f"{unit.peak_tflops:.1f} TFLOP/s ({unit.why}); card: {perf_session.device.describe()}")


@pytest.mark.gpu
@pytest.mark.perf
def test_meets_threshold(perf_claim, perf_session, gemm):
    threshold, size = perf_claim.claim, perf_claim.size
    try:
        evaluation = perf.judge(perf_session, threshold, size, gemm.specs)
    except perf.Unjudgeable as why:
        pytest.skip(str(why))
    outcome, message = evaluation.outcome()
    if outcome == "xfail":   # a target not reached yet: visible with its measured ratio, never loosened
        pytest.xfail(message)
    assert outcome == "passed", message


@pytest.mark.gpu
@pytest.mark.perf
def test_too_slow_kernel_fails_its_threshold(perf_kill, perf_session, gemm, verdicts, request):
    # The kill: a kernel declared too_slow must be rejected by the same check that
    # passes the references. If it meets the bar, either it is not slow or the
    # check cannot tell, and this test fails.
    threshold, size = perf_kill.claim, perf_kill.size
    try:
        evaluation = perf.judge(perf_session, threshold, size, gemm.specs)
    except perf.Unjudgeable as why:
        pytest.skip(str(why))
    spec = next(s for s in gemm.specs if s.name == threshold.kernel)
    instance = selection.claimed_instance(spec, threshold)
    findings = [] if evaluation.ok else [Finding(Defect.TOO_SLOW, "throughput-threshold", evaluation.message(),
                                                 details={"ratio": evaluation.ratio,
                                                          "threshold": threshold.at_least,
                                                          "baseline": evaluation.baseline_label})]
    verdicts.record(Verdict.for_instance(instance, f"M{size}xN{size}xK{size}", findings, request.node.nodeid))
    assert not evaluation.ok, (
        f"{threshold.kernel} is declared too_slow but passed: {evaluation.message()}")


def test_every_too_slow_kernel_has_a_threshold(perf_too_slow, gemm, perf_thresholds):
    # Needs no GPU (so it carries no gpu or perf marker): a too_slow kernel
    # without a threshold could never be caught.
    thresholds = perf_thresholds.thresholds
    named = [t for t in thresholds if t.key == selection.instance_key(perf_too_slow)]
    sizes = [s for s in gemm.profile.perf_sizes if any(t.applies(s) for t in named)]
    assert named and sizes, (
        f"{perf_too_slow.id} is declared too_slow but no threshold in the thresholds file holds it "
        f"at the profile's sizes {list(gemm.profile.perf_sizes)}; add a [[threshold]] it must fail")


@pytest.mark.gpu
@pytest.mark.perf
def test_a_kernel_that_replays_results_on_repeats_is_refused(perf_refusal, perf_session, verdicts, request):
    # The positive control of the timing checks: a kernel correct on its first launch
    # that skips its work on later ones (state in __device__ memory) must be refused by
    # the check of the last timed launch, and its time by the roofline.
    case, instance = perf_refusal
    with pytest.raises(perf.WrongOutput) as caught:
        perf.timed_rate(perf_session, instance, case.size)
    row = perf_session.rows[(instance.id, case.size)]
    verdicts.record(Verdict.for_instance(instance, f"M{case.size}xN{case.size}xK{case.size}", [
        Finding(Defect.WRONG_VALUES, "error-bound", str(caught.value),
                details={"launch": "first" if row.measurement is None else "last timed"})], request.node.nodeid))
    if row.measurement is not None:   # timed: its first launch was right, as a cheat's is
        # (first launched here; launched before in this process, its first check is already wrong)
        assert "wrong on its last timed launch" in str(caught.value), caught.value
        if not case.claim.roofline_refuses_at(case.size):
            return
        assert row.impossible, (
            f"{instance.id}: {row.measurement.tflops:.1f} TFLOP/s in {row.measurement.median * 1e6:.1f} us "
            "was not refused by the roofline check, though it skips the work")


def test_every_threshold_names_an_instantiation_the_catalog_declares(perf_thresholds, gemm):
    # Needs no GPU: a threshold naming a config or TILE the kernel lacks would silently never run.
    problems = selection.unknown_instantiations(gemm.specs, perf_thresholds)
    assert not problems, "; ".join(problems)


def test_every_refusal_names_a_kernel_declared_defective(perf_thresholds, gemm):
    # Needs no GPU: a positive control declared correct would make the refusal a false alarm.
    specs = {s.name: s for s in gemm.specs}
    for refusal in perf_thresholds.refusals:
        spec = specs.get(refusal.kernel)
        if spec is None:
            continue   # another catalog: the report header names the orphan
        assert spec.expect != "correct" and (refusal.dtype, refusal.tile) in (
            (d, t) for d in spec.dtypes for t in (spec.tiles if spec.has_tile else (None,))), (
            f"thresholds file: [[refuse]] {refusal.id}: the catalog declares {spec.name} "
            f"expect={spec.expect!r}, dtypes {list(spec.dtypes)}, tiles {list(spec.tiles)}; a refusal must "
            "name a declared-defective instantiation")


@pytest.mark.gpu
@pytest.mark.perf
def test_roofline_and_table_are_reported(perf_session, perf_reports, perf_largest_size):
    # Last in the module: by now the session holds every measurement of this run (under
    # pytest-xdist, of this worker's; perf_largest_size runs it among the performance units).
    if not perf_session.rows:
        pytest.skip("nothing was timed in this run")
    written = perf_reports(perf_session)
    png = [p for p in written if p.suffix == ".png"]
    assert png and png[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"no roofline PNG among {written}"
