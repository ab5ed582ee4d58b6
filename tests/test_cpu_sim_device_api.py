"""The CPU simulator models the CUDA device API published GEMM kernels use: vector types
with CUDA's alignment (a misaligned float4 access is a crash, as on the GPU), atomics whose
order follows the schedule, the rounding and fast-math intrinsics, warp shuffles and votes
with a mask check, cooperative groups; and one kernel's unmodelled construct is that
kernel's skip reason, not a build failure of its neighbours.

Each construct gives the GPU's result on a small kernel with a known answer; each checked
misuse fires on a kernel that has it and stays silent on the correct twin.
Kernels: tests/cpu_sim_kernels/device_api.cu (catalog device_api.toml).
"""

from pathlib import Path

import numpy as np
import pytest

from gemmcheck.contract import catalog
from gemmcheck.problems.harness import run_once
from simulator import exact_inputs, simulator

cpu_sim = pytest.importorskip("gemmcheck.backends.cpu_sim")

HERE = Path(__file__).parent / "cpu_sim_kernels"
KERNELS = {s.name: s for s in catalog.load(HERE / "device_api.toml")}
SOURCE = (HERE / "device_api.cu").read_text().splitlines()


@pytest.fixture(scope="module")
def sim():
    with simulator(i for s in KERNELS.values() for i in s.instances()) as backend:
        yield backend


def kernel(name, dtype=None, tile=None):
    spec = KERNELS[name]
    return catalog.Instance(spec, dtype or spec.dtypes[0], tile or spec.tiles[0])


def line_of(marker):
    """The line of device_api.cu holding `marker` (a comment), as the reports name it."""
    (line,) = [n for n, text in enumerate(SOURCE, 1) if text.rstrip().endswith(f"// {marker}")]
    return line


def run_everywhere(sim, inst, A, B, **kw):
    """One launch under every race schedule; the run of the first (forward)."""
    with sim.using_schedules(cpu_sim.RACE_SCHEDULES):
        return run_once(sim, inst, A, B, **kw)


def assert_clean(report):
    assert not report.race and not report.divergent and report.outcome == "ok", report.summary()
    assert not report.bad_warp_calls, report.summary()
    assert report.uninitialized_shared_reads == 0, report.summary()


# -- vector types ------------------------------------------------------------------------------

# (sizeof, alignof) as CUDA's vector_types.h and cuda_fp16.h declare them.
CUDA_LAYOUT = [("float2", 8, 8), ("float3", 12, 4), ("float4", 16, 16), ("int2", 8, 8), ("int4", 16, 16),
               ("uint4", 16, 16), ("double2", 16, 16), ("char4", 4, 4), ("short2", 4, 4), ("half2", 4, 4),
               ("__half2", 4, 4), ("longlong2", 16, 16)]


def test_vector_types_have_cudas_sizes_and_alignments(sim):
    run = run_once(sim, kernel("vector_layout"), np.zeros((8, 1)), np.zeros((1, 8)))
    got = run.C.reshape(-1)
    want = [v for _, size, align in CUDA_LAYOUT for v in (size, align)]
    assert dict(zip([n for n, *_ in CUDA_LAYOUT], got[:len(want)].reshape(-1, 2).tolist())) == \
        {n: [s, a] for n, s, a in CUDA_LAYOUT}
    assert got[len(want)] == 654321   # make_float4 / make_int2 members in order; uint, ushort, ulong exist


def test_aligned_float4_loads_and_stores_give_the_exact_product(sim):
    A, B = exact_inputs(12, 32, 20)
    run = run_everywhere(sim, kernel("gemm_float4"), A, B)
    assert np.array_equal(run.C, A @ B)
    assert_clean(sim.last_launch_report)


def test_a_misaligned_float4_load_is_a_crash_naming_address_and_alignment(sim):
    A, B = exact_inputs(8, 16, 8)
    with pytest.raises(cpu_sim.SimulatedCrash) as crash:
        run_once(sim, kernel("gemm_float4_misaligned"), A, B)
    message = str(crash.value)
    assert "misaligned address" in message and "not a multiple of 16" in message
    assert "float4" in message and f"device_api.cu:{line_of('MISALIGNED')}" in message
    assert sim.last_launch_report.outcome == "crash"
    # The worker was replaced: the next launch runs.
    run = run_once(sim, kernel("gemm_float4"), A, B)
    assert np.array_equal(run.C, A @ B)


# -- warp shuffles and votes -------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_warp_shuffle_reduction_gives_the_exact_product(sim, dtype):
    A, B = exact_inputs(5, 6, 77)
    run = run_everywhere(sim, kernel("gemm_warp_reduce", dtype), A, B)
    assert np.array_equal(run.C, A @ B)
    assert_clean(sim.last_launch_report)


def expected_warp_probe():
    t = np.arange(64)
    lane, base = t % 32, 100 + (t // 32) * 32
    ballot = float(np.float32(0xAAAAAAAA))
    match = (0xF << (lane // 4 * 4)).astype(np.float32)
    return np.stack([
        base + (lane * 3) % 32,                               # __shfl_sync from lane 3t % 32
        base + np.where(lane % 8 >= 1, lane - 1, lane),       # __shfl_up_sync 1, width 8
        base + np.where(lane + 2 < 32, lane + 2, lane),       # __shfl_down_sync 2
        base + (lane ^ 5),                                    # __shfl_xor_sync 5
        np.full(64, ballot),                                  # __ballot_sync(t odd)
        (t < 32).astype(float),                               # __all_sync(t < 40): first warp only
        (t < 32).astype(float),                               # __any_sync(t == 7): first warp only
        np.full(64, float(np.float32(0xFFFFFFFF))),           # __activemask
        match,                                                # __match_any_sync(t / 4)
    ], axis=1).astype(np.float32)


def test_shuffles_and_votes_give_each_lane_the_gpus_value(sim):
    run = run_everywhere(sim, kernel("warp_probe"), np.zeros((64, 1)), np.zeros((1, 9)))
    assert np.array_equal(run.C.astype(np.float32), expected_warp_probe())
    assert_clean(sim.last_launch_report)


def lanes_input():
    """A holds 1..32 (lane l reads A[l]); C is 1 x 32."""
    return np.arange(1, 33, dtype=np.float64).reshape(1, 32), np.zeros((32, 32))


def test_a_full_mask_shuffle_that_half_the_warp_skips_is_reported(sim):
    run_everywhere(sim, kernel("warp_partial_mask_at_barrier"), *lanes_input())
    report = sim.last_launch_report
    missing = [d for d in report.divergences if d.what == "warp_missing_lanes"]
    assert report.bad_warp_calls and len(missing) == len(cpu_sim.RACE_SCHEDULES), report.summary()
    sites = {(s.file, s.line): s.threads for s in missing[0].sites}
    assert sites[("device_api.cu", line_of("PARTIAL AT BARRIER"))] == 16   # the lanes that came
    # the lanes the mask names that never came, and the call, as the report names them
    assert missing[0].lanes == tuple(range(16, 32)) and missing[0].call == "__shfl_down_sync"
    assert "its mask 0xffffffff names lanes 16-31, which never called it" in missing[0].describe()
    assert not report.divergent   # a warp-synchronous call, not a __syncthreads()


def test_a_shuffle_reading_lanes_that_exited_is_reported(sim):
    run_everywhere(sim, kernel("warp_partial_mask"), *lanes_input())
    report = sim.last_launch_report
    assert report.bad_warp_calls and {d.what for d in report.divergences} == {"warp_source"}, report.summary()
    assert report.divergences[0].sites[0].line == line_of("PARTIAL")
    assert report.divergences[0].lanes == (15,)   # lane 15 reads lane 16, which exited


def test_a_mask_naming_exactly_the_lanes_that_come_is_clean(sim):
    run = run_everywhere(sim, kernel("warp_exact_mask"), *lanes_input())
    lane = np.arange(32)
    want = np.where(lane < 15, lane + 2, lane + 1)   # lanes 0..14 get lane + 1's value; 15 keeps its own
    assert np.array_equal(run.C.reshape(-1), want)
    assert_clean(sim.last_launch_report)


def test_lanes_calling_with_a_mask_that_leaves_them_out_are_reported(sim):
    run_everywhere(sim, kernel("warp_mask_without_caller"), *lanes_input())
    report = sim.last_launch_report
    outside = [d for d in report.divergences if d.what == "warp_mask"]
    assert {d.schedule for d in outside} == set(cpu_sim.RACE_SCHEDULES), report.summary()
    # Per schedule the upper lanes, in one call or in several (as the schedule brought them).
    for schedule in cpu_sim.RACE_SCHEDULES:
        lanes = {lane for d in outside if d.schedule == schedule for lane in d.lanes}
        assert lanes == set(range(16, 32)), report.summary()
    assert all(d.mask == 0x0000FFFF for d in outside), report.summary()


def test_a_half_mask_shuffle_every_lane_calls_is_reported_in_every_schedule_though_its_values_are_right(sim):
    # __shfl_sync(0x0000ffff, v, lane) by all 32 lanes: the GPU returns each lane its own value,
    # and so does every schedule here; lanes 16..31 are outside the mask all the same.
    run = run_everywhere(sim, kernel("warp_half_mask_all_lanes"), *lanes_input())
    assert np.array_equal(run.C.reshape(-1), np.arange(1, 33))
    report = sim.last_launch_report
    assert not report.schedule_dependent, report.summary()
    outside = [d for d in report.divergences if d.what == "warp_mask"]
    assert {d.schedule for d in outside} == set(cpu_sim.RACE_SCHEDULES), report.summary()
    first = outside[0]
    assert (first.call, first.mask, first.lanes, first.warp) == ("__shfl_sync", 0x0000FFFF, tuple(range(16, 32)), 0)
    assert first.sites[0].line == line_of("HALF MASK")
    assert (f"invalid warp mask: __shfl_sync at device_api.cu:{line_of('HALF MASK')}, block (0, 0, 0), warp 0: "
            "lanes 16-31 called it with mask 0x0000ffff, which leaves them out") in first.describe()


def test_disjoint_groups_of_a_warp_may_call_with_their_own_masks(sim):
    run = run_everywhere(sim, kernel("warp_two_tiles"), *lanes_input())
    assert np.array_equal(run.C.reshape(-1), (np.arange(32) ^ 1) + 1)   # lane l gets lane l ^ 1's value
    assert_clean(sim.last_launch_report)


def test_lanes_whose_masks_overlap_but_differ_are_reported(sim):
    # Lanes 16..31 name the whole warp; lanes 0..15 call with their half only. Seen where the two
    # groups meet in one call (not under forward, where the lower half completes first).
    run_everywhere(sim, kernel("warp_masks_differ"), *lanes_input())
    report = sim.last_launch_report
    differ = [d for d in report.divergences if d.what == "warp_masks_differ"]
    assert differ and "reverse" in {d.schedule for d in differ}, report.summary()
    assert "called it with another mask than the lane that opened it" in differ[0].describe()


def expected_warp_reductions():
    t = np.arange(64)
    warp = t // 32
    all_lanes = float(np.float32(0xFFFFFFFF))
    return np.stack([
        np.full(64, all_lanes), np.ones(64),                                 # match_all(t / 32), pred
        np.zeros(64),                                                        # match_all(t) + pred: 0
        np.where(warp == 0, -784, 240),                                      # reduce_add(t - 40)
        np.where(warp == 0, -40 + 1000 * -9, -8 + 1000 * 23),               # int min + 1000 max
        np.where(warp == 0, 0 + 1000 * 31, 32 + 1000 * 63),                 # unsigned min + 1000 max
        np.full(64, all_lanes),                                              # and (1) + xor (0xfffffffe)
        np.full(64, all_lanes),                                              # or
    ], axis=1).astype(np.float32)


def test_warp_matches_and_reductions_give_each_lane_the_gpus_value(sim):
    run = run_everywhere(sim, kernel("warp_reductions"), np.zeros((64, 1)), np.zeros((1, 8)))
    assert np.array_equal(run.C.astype(np.float32), expected_warp_reductions())
    assert_clean(sim.last_launch_report)


# -- atomics -------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_shared_memory_atomics_give_the_exact_product_under_every_schedule(sim, dtype):
    A, B = exact_inputs(9, 10, 37)
    run = run_everywhere(sim, kernel("gemm_shared_atomic_splitk", dtype), A, B)
    assert np.array_equal(run.C, A @ B)
    assert_clean(sim.last_launch_report)   # atomics of different threads are no race


def test_float_atomics_whose_sum_depends_on_their_order_show_it_between_schedules(sim):
    rng = np.random.default_rng(3)
    A = rng.standard_normal((16, 64)) * 10.0 ** rng.integers(-6, 7, (16, 64))
    B = rng.standard_normal((64, 16))
    run_everywhere(sim, kernel("gemm_shared_atomic_splitk"), A, B)
    report = sim.last_launch_report
    assert report.schedule_dependent and report.exposing_schedule is not None, report.summary()
    assert not (report.raw or report.war or report.waw)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_global_atomics_across_blocks_give_the_exact_split_k_product(sim, dtype):
    A, B = exact_inputs(9, 10, 37)
    run = run_everywhere(sim, kernel("gemm_global_atomic_splitk", dtype), A, B, C0=np.zeros((9, 10)), beta=1)
    assert np.array_equal(run.C, A @ B)
    assert_clean(sim.last_launch_report)


def test_blocks_run_in_the_schedules_order(sim):
    run = run_everywhere(sim, kernel("block_order"), np.zeros((3, 1)), np.zeros((1, 3)))
    bits = run.C_bits.reshape(-1).view(np.uint32)
    # forward: blocks 1..8 in order; each found its predecessor's number, the last owns C[0]
    assert bits[0] == 8 and bits[2:9].tolist() == list(range(1, 8))
    report = sim.last_launch_report
    assert report.schedule_dependent and report.exposing_schedule == "reverse", report.summary()


def test_integer_atomics_give_their_defined_results(sim):
    run = run_everywhere(sim, kernel("integer_atomics"), np.zeros((1, 1)), np.zeros((1, 8)))
    t = np.arange(64)
    xor = 0
    for v in t:
        xor ^= int(v)
    want = [t.sum(), ((t * 7) % 64).max(), ((t * 7) % 64).min(), xor, 64 % 10, 1, 255]
    assert run.C.reshape(-1)[:7].tolist() == want
    assert_clean(sim.last_launch_report)


# -- intrinsics ----------------------------------------------------------------------------------

def test_intrinsics_give_the_gpus_values(sim):
    rng = np.random.default_rng(5)
    a = np.concatenate([rng.uniform(-2, 2, 60), [0.5, 1.5, -0.0, 0.25]]).astype(np.float32)
    b = np.concatenate([rng.uniform(0.5, 4, 60), [3.0, 2.0, 1.0, 0.125]]).astype(np.float32)
    run = run_once(sim, kernel("intrinsics"), a.astype(np.float64).reshape(64, 1),
                   b.astype(np.float64).reshape(1, 64))
    got = run.C.astype(np.float32).reshape(-1)[:640].reshape(64, 10)
    f64 = a.astype(np.float64) * b.astype(np.float64) + 1.0
    exact = {
        0: f64.astype(np.float32),                                # fma: one rounding
        1: a * b,
        2: a + b,
        4: np.clip(a, 0, 1),
        6: -a,
        7: a.astype(np.float16).astype(np.float32),               # round to nearest even
        8: np.rint(a * np.float32(10)).astype(np.float32),        # __float2int_rn: ties to even
    }
    for column, want in exact.items():
        assert np.array_equal(got[:, column], want), column
    approximate = {3: a / b, 5: 1 / np.sqrt(np.abs(b)), 9: np.exp(b * np.float32(0.01))}
    for column, want in approximate.items():   # the GPU's fast versions are within 2 ulp
        assert np.allclose(got[:, column], want, rtol=4e-7, atol=0), column


# -- cooperative groups --------------------------------------------------------------------------

@pytest.mark.parametrize("tile", [4, 8])
def test_block_sync_of_cooperative_groups_orders_the_tiles(sim, tile):
    A, B = exact_inputs(13, 11, 29)
    run = run_everywhere(sim, kernel("gemm_cg_tiled", tile=tile), A, B)
    assert np.array_equal(run.C, A @ B)
    assert_clean(sim.last_launch_report)


def test_a_tiled_partition_reduces_with_its_shuffles(sim):
    A, B = exact_inputs(4, 5, 70)
    run = run_everywhere(sim, kernel("gemm_cg_tile_reduce"), A, B)
    assert np.array_equal(run.C, A @ B)
    assert_clean(sim.last_launch_report)


# -- cuda::barrier and cuda::memcpy_async -----------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("tile", [4, 8])
def test_copies_paced_by_a_cuda_barrier_give_the_exact_product(sim, dtype, tile):
    A, B = exact_inputs(16, 24, 32)
    run = run_everywhere(sim, kernel("gemm_barrier_tiled", dtype, tile), A, B)
    assert np.array_equal(run.C, A @ B)
    assert_clean(sim.last_launch_report)


def test_reading_a_stage_before_its_barrier_completes_is_a_race(sim):
    A, B = exact_inputs(16, 24, 32)
    run_everywhere(sim, kernel("gemm_barrier_no_wait"), A, B)
    report = sim.last_launch_report
    assert report.race and report.raw > 0, report.summary()


# -- what it does not model: one reason per kernel, never a neighbour's failure -------------------

UNMODELLED = {s.name: s for s in catalog.load(HERE / "unmodelled.toml")}
UNMODELLED_SOURCE = (HERE / "unmodelled.cu").read_text().splitlines()


def unmodelled_line(marker):
    (line,) = [n for n, text in enumerate(UNMODELLED_SOURCE, 1) if text.rstrip().endswith(f"// {marker}")]
    return line


@pytest.mark.parametrize("name, construct, marker", [
    ("reads_laneid", "inline PTX assembly", "PTX"),
    ("pipelined", "__pipeline_memcpy_async", "PIPELINE"),
    ("cuda_pipeline", "cuda::pipeline", "CUDA PIPELINE"),
])
def test_an_unmodelled_construct_is_its_kernels_one_reason(sim, name, construct, marker):
    (inst,) = UNMODELLED[name].instances()
    sim.prepare([i for s in UNMODELLED.values() for i in s.instances()])
    error = sim.build_error(inst)
    assert isinstance(error, cpu_sim.NotModelled), error
    assert construct in error.construct and error.kernel == UNMODELLED[name].entry
    assert error.where == f"unmodelled.cu:{unmodelled_line(marker)}"
    assert str(error).startswith(f"cpu-sim does not model {error.construct} (used by kernel {error.kernel} "
                                 f"at {error.where})")
    with pytest.raises(cpu_sim.NotModelled):
        run_once(sim, inst, np.zeros((4, 4)), np.zeros((4, 4)))


def test_the_other_kernels_of_that_file_build_and_run(sim):
    (plain,) = UNMODELLED["plain"].instances()
    sim.prepare([i for s in UNMODELLED.values() for i in s.instances()])
    assert sim.build_error(plain) is None     # its file also includes cuBLAS's host header
    A, B = exact_inputs(6, 7, 5)
    assert np.array_equal(run_once(sim, plain, A, B).C, A @ B)


def test_a_gpu_only_kernel_is_left_out_of_its_files_build(sim):
    (plain,) = UNMODELLED["plain"].instances()
    (gpu_only,) = UNMODELLED["reads_laneid_gpu_only"].instances()
    # Built together, as a session would: the gpu_only kernel's PTX never reaches g++.
    module = cpu_sim.build.module(plain.spec.source, [plain], plain.defines)
    assert module.names == (plain.name_expression,)
    assert sim.build_error(gpu_only) is None
    with pytest.raises(cpu_sim.NotSimulated, match="gpu_only"):
        run_once(sim, gpu_only, np.zeros((4, 4)), np.zeros((4, 4)))


def test_leaving_kernels_out_keeps_the_ones_macros_declare():
    # broken_tiled.cu declares most kernels with FLAWED_KERNEL(name, flaw) lines (no semicolon)
    # right before a template kernel: leaving that kernel out must not take them along.
    text = (Path(__file__).parent.parent / "kernels" / "broken_tiled.cu").read_text()
    kept = cpu_sim.isolate.keep_kernels(text, {"broken_unguarded_loads"})
    assert "FLAWED_KERNEL(broken_unguarded_loads, UNGUARDED_LOADS)" in kept
    assert "__global__ void broken_faults" not in kept and "__global__ void broken_hangs" not in kept
    assert kept.count("\n") == text.count("\n")


def test_in_the_suites_an_unmodelled_kernel_skips_with_its_one_reason_and_its_file_still_builds(pytester):
    root = Path(__file__).parent.parent
    result = pytester.runpytest_subprocess(
        str(root / "suites" / "compile" / "test_builds.py"),
        str(root / "suites" / "correctness" / "test_exact_results.py"),
        "-p", "no:cacheprovider", "-rs", "-k", "unmodelled or pipelined or plain",
        "--gemm-catalog", str(HERE / "unmodelled.toml"), "--gemm-backend", "cpu-sim")
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0 and outcomes.get("error", 0) == 0, result.stdout.str()
    assert outcomes.get("passed", 0) >= 2      # the file's build test and plain's exact results
    result.stdout.fnmatch_lines(["SKIPPED * cpu-sim does not model __pipeline_memcpy_async "
                                 "(used by kernel pipelined at unmodelled.cu:*"])
