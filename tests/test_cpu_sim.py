"""The CPU simulator models CUDA's execution: barriers, shared memory per block, thread
and block indexing, half/bfloat16 conversions; it finds races, divergent barriers,
out-of-bounds accesses, crashes and hangs; reference kernels give the exact product.

Small probe kernels with answers known independently live in tests/cpu_sim_kernels.
"""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from gemmcheck import backends
from gemmcheck.contract import catalog
from gemmcheck.contract import dtypes as dt
from gemmcheck.backends import BackendUnavailable
from gemmcheck.problems.harness import run_once
from simulator import exact_inputs, simulator

cpu_sim = pytest.importorskip("gemmcheck.backends.cpu_sim")

PROBES = {s.name: s for s in catalog.load(Path(__file__).parent / "cpu_sim_kernels" / "catalog.toml")}
BUILTIN = {s.name: s for s in catalog.load(catalog.BUILTIN)}


@pytest.fixture(scope="module")
def sim():
    # The whole builtin catalog, as a session does: one build per source, shared with it.
    with simulator(i for s in [*PROBES.values(), *BUILTIN.values()] for i in s.instances()) as backend:
        yield backend


def probe(name, dtype=None, tile=None):
    spec = PROBES[name]
    return catalog.Instance(spec, dtype or spec.dtypes[0], tile or spec.tiles[0])


# -- thread and block indexing ---------------------------------------------------------

def test_every_thread_sees_its_own_block_and_thread_indices(sim):
    M, N = 10, 7  # ragged: grid (2, 3) of 4 x 4 blocks
    run = run_once(sim, probe("write_indices"), np.zeros((M, 1)), np.zeros((1, N)))
    rows, cols = np.indices((M, N))
    want = (rows // 4) * 1e6 + (cols // 4) * 1e4 + (rows % 4) * 100 + cols % 4
    assert np.array_equal(run.C[:M - 1], want[:M - 1])
    assert run.C[M - 1, 0] == 3 * 1e6 + 2 * 1e4 + 4 * 100 + 4  # gridDim (2, 3, 1), blockDim (4, 4, 1)
    assert run.unwritten[M - 1, 1:].all()


# -- barriers --------------------------------------------------------------------------

def rotate_inputs():
    # 2 x 2 blocks of 16 threads; element i of A is i + 1, so C is A shifted by one per block.
    A = np.arange(1, 65, dtype=np.float64).reshape(8, 8)
    blocks = A.reshape(-1, 16)
    want = np.roll(blocks, -1, axis=1).reshape(8, 8)
    return A, want


def test_a_kernel_that_needs_its_barrier_is_right_under_every_schedule(sim):
    A, want = rotate_inputs()
    with sim.using_schedules(cpu_sim.RACE_SCHEDULES):
        run = run_once(sim, probe("rotate_sync"), A, np.zeros((8, 8)))
    report = sim.last_launch_report
    assert np.array_equal(run.C, want)
    assert not report.race and not report.schedule_dependent, report.summary()
    assert report.uninitialized_shared_reads == 0


def test_without_the_barrier_a_schedule_exposes_the_race(sim):
    A, want = rotate_inputs()
    with sim.using_schedules(cpu_sim.RACE_SCHEDULES):
        run = run_once(sim, probe("rotate_nosync"), A, np.zeros((8, 8)))
    report = sim.last_launch_report
    assert report.race and report.raw > 0, report.summary()
    assert report.schedule_dependent and report.exposing_schedule in cpu_sim.RACE_SCHEDULES[1:]
    # In order, thread t reads thread t + 1's slot before that thread ran: not yet written.
    assert not np.array_equal(run.C, want)
    assert report.runs[0].counts["uninitialized"] > 0


def test_lockstep_gives_the_seed_directions_raw_after_load_war_after_dot(sim):
    A, B = exact_inputs(32, 32, 32)
    after_load = catalog.Instance(BUILTIN["broken_no_sync_after_load"], "float32", 8)
    after_dot = catalog.Instance(BUILTIN["broken_no_sync_after_dot"], "float32", 8)
    with sim.using_schedules(("lockstep",)):
        run_once(sim, after_load, A, B)
        load = sim.last_launch_report
        run_once(sim, after_dot, A, B)
        dot = sim.last_launch_report
    assert load.raw > 0 and load.war == 0 and load.waw == 0, load.summary()
    assert dot.war > 0 and dot.raw == 0 and dot.waw == 0, dot.summary()
    assert {c.kind for c in dot.conflicts} == {"WAR"}
    assert all("::As" in c.array or "::Bs" in c.array for c in dot.conflicts)


def test_reference_kernels_have_no_conflicts_and_one_result_under_every_schedule(sim):
    A, B = exact_inputs(33, 17, 65)
    inst = catalog.Instance(BUILTIN["matmul_tiled_guarded"], "float32", 8)
    with sim.using_schedules(cpu_sim.RACE_SCHEDULES):
        run_once(sim, inst, A, B)
    report = sim.last_launch_report
    assert [r.schedule for r in report.runs] == list(cpu_sim.RACE_SCHEDULES)
    assert not report.race and not report.divergent and report.uninitialized_shared_reads == 0, report.summary()


# -- shared memory ---------------------------------------------------------------------

def test_shared_memory_belongs_to_one_block(sim):
    run = run_once(sim, probe("shared_per_block"), np.zeros((8, 1)), np.zeros((1, 8)))
    blocks = 4  # 8 x 8 of 4 x 4 blocks
    flat = run.C_bits.reshape(-1)
    # Another block's 1, 2, 3 never shows through: every block first reads poison.
    assert all(flat[2 * b] == 0xFFFFFFFF for b in range(blocks)), flat[:2 * blocks]
    assert [float(v) for v in run.C.reshape(-1)[1:2 * blocks:2]] == [1.0, 2.0, 3.0, 4.0]
    assert sim.last_launch_report.uninitialized_shared_reads == blocks


# -- global memory ---------------------------------------------------------------------

def store_and_add(sim, name):
    """C (4 x 8: blocks (0, 0) and (1, 0) of 4 x 4) under every race schedule, and the report."""
    with sim.using_schedules(cpu_sim.RACE_SCHEDULES):
        run = run_once(sim, probe(name), np.zeros((4, 1)), np.zeros((1, 8)))
    return run, sim.last_launch_report


def test_a_store_and_an_atomic_of_two_blocks_on_one_address_is_a_global_race(sim):
    run, report = store_and_add(sim, "store_and_atomic_of_two_blocks")
    assert run.C[0, 0] == 2   # forward: block 0 stores, then block 1 adds; right in this order
    assert report.global_races > 0 and report.race, report.summary()
    # Seen in every schedule, whichever block came first, and only at C[0, 0].
    assert {g.schedule for g in report.global_conflicts} == set(cpu_sim.RACE_SCHEDULES)
    assert {g.element for g in report.global_conflicts} == {(0, 0)}
    assert all(g.buffer == "C" and g.byte_offset == 0 for g in report.global_conflicts)
    assert all({g.earlier_block, g.later_block} == {(0, 0, 0), (1, 0, 0)} for g in report.global_conflicts)
    forward = next(g for g in report.global_conflicts if g.schedule == "forward")
    assert (forward.earlier, forward.earlier_block, forward.later, forward.later_block) == (
        "store", (0, 0, 0), "atomic", (1, 0, 0))
    reverse = next(g for g in report.global_conflicts if g.schedule == "reverse")
    assert (reverse.earlier, reverse.later) == ("atomic", "store")
    assert "C[0, 0]: block (0, 0, 0) stored to it and block (1, 0, 0) atomically updated it" in forward.describe()
    # The block order decides the value: reverse stores last and loses the add.
    assert report.schedule_dependent and report.exposing_schedule == "reverse"


def test_a_store_and_an_atomic_of_one_block_is_no_global_race(sim):
    run, report = store_and_add(sim, "store_and_atomic_of_one_block")
    assert run.C.reshape(-1).tolist() == [2.0] + [float(i) for i in range(1, 32)]
    assert report.global_races == 0 and not report.global_conflicts and not report.race, report.summary()


def test_a_store_after_atomics_of_two_blocks_is_a_global_race_in_every_block_order(sim):
    # Blocks 0 and 1 add atomically, then block 1 stores: forward, block 1's own add is the
    # last atomic before its store, yet block 0's add is unordered with that store.
    with sim.using_schedules(cpu_sim.RACE_SCHEDULES):
        run_once(sim, probe("atomics_of_two_blocks_then_a_store"), np.zeros((4, 1)), np.zeros((1, 8)))
    report = sim.last_launch_report
    assert {g.schedule for g in report.global_conflicts} == set(cpu_sim.RACE_SCHEDULES), report.summary()
    assert {g.element for g in report.global_conflicts} == {(0, 0)}
    assert all({g.earlier_block, g.later_block} == {(0, 0, 0), (1, 0, 0)} for g in report.global_conflicts)
    forward = next(g for g in report.global_conflicts if g.schedule == "forward")
    assert (forward.earlier, forward.earlier_block, forward.later, forward.later_block) == (
        "atomic", (0, 0, 0), "store", (1, 0, 0))


def test_without_tracking_no_global_race_is_reported(sim):
    sim.track_shared = False
    try:
        _, report = store_and_add(sim, "store_and_atomic_of_two_blocks")
    finally:
        sim.track_shared = True
    assert report.global_races == 0 and report.schedule_dependent


# -- divergent barriers ----------------------------------------------------------------

def test_a_barrier_under_a_ragged_branch_is_divergent_at_the_two_barriers(sim):
    inst = catalog.Instance(BUILTIN["broken_divergent_barrier"], "float32", 8)
    run_once(sim, inst, *exact_inputs(13, 8, 8))
    report = sim.last_launch_report
    assert report.divergent, report.summary()
    first = report.divergences[0]
    assert first.block == (0, 1, 0) and len(first.sites) == 2
    assert {s.file for s in first.sites} == {"broken_tiled.cu"}
    assert sum(s.threads for s in first.sites) == 64


def test_the_same_kernel_on_a_tile_multiple_has_no_divergence(sim):
    inst = catalog.Instance(BUILTIN["broken_divergent_barrier"], "float32", 8)
    run_once(sim, inst, *exact_inputs(16, 8, 8))
    assert not sim.last_launch_report.divergent


def test_threads_that_exit_before_a_barrier_make_it_divergent(sim):
    run_once(sim, probe("early_exit_barrier"), np.zeros((4, 1)), np.zeros((1, 4)))
    (d,) = sim.last_launch_report.divergences
    assert d.exited == 4 and d.first_exited == (0, 0, 0)
    assert d.sites[0].threads == 12


# -- half and bfloat16 -----------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_conversions_match_numpy_bit_for_bit(sim, dtype):
    d = dt.get(dtype)
    bits = np.arange(1 << 16, dtype=np.uint16)
    values = bits.view(d.numpy).astype(np.float32)
    values[~np.isfinite(values)] = 1.0
    rng = np.random.default_rng(7)
    scale = rng.choice(np.array([0.5, 0.75, 1.0, 1.5, 3.0, 1 / 3, 1e-3, 1e3, 2 ** -20], dtype=np.float32),
                       size=values.size).astype(np.float32)
    A, B = values.reshape(256, 256), dt.from_bits(dt.to_bits(scale, d), d).astype(np.float32).reshape(256, 256)
    run = run_once(sim, probe("convert_product", dtype), A.astype(np.float64), B.astype(np.float64))
    with np.errstate(over="ignore"):  # products past the type's range round to inf, as they must
        want = (A.astype(np.float32) * B.astype(np.float32)).astype(d.numpy).view(d.storage)
    assert np.array_equal(run.C_bits, want), np.argwhere(run.C_bits != want)[:5]


# -- the reference kernels: the exact integer product ----------------------------------

REFERENCE_CASES = [   # one-type kernels (a type per operand: tests/test_mixed_types.py)
    catalog.Instance(spec, dtype, tile)
    for spec in BUILTIN.values() if spec.is_reference and not spec.gpu_only
    for dtype in spec.dtypes for tile in (4, 16) if tile in spec.tiles and spec.types[dtype].uniform
]


@pytest.mark.parametrize("inst", REFERENCE_CASES, ids=lambda i: i.id)
def test_reference_kernels_give_the_exact_integer_product(sim, inst):
    shape = (64, 64, 64) if inst.spec.signature == "square" else (33, 17, 65)
    M, N, K = shape
    A, B = exact_inputs(M, N, K)
    exact = A.astype(np.int64) @ B.astype(np.int64)
    run = run_once(sim, inst, A, B)
    want = dt.to_bits(exact.astype(np.float64), inst.dt)
    assert np.array_equal(run.C_bits, want)
    assert not any(run.guard_damage.values()) and not any(run.inputs_changed.values())


# -- capabilities -----------------------------------------------------------------------

CAPABILITIES = (backends.ExploresSchedules, backends.ReportsLaunches, backends.ChecksAddresses,
                backends.TracksShared)


def test_the_simulator_declares_its_extras_as_capabilities(sim):
    assert all(backends.offers(sim, c) for c in CAPABILITIES)
    assert all(backends.offers("cpu-sim", c) for c in CAPABILITIES)   # asked before building one


def test_other_backends_offer_none_of_them():
    from fakes import NumpyBackend

    assert not any(backends.offers(NumpyBackend({}), c) for c in CAPABILITIES)
    assert not any(backends.offers("cupy", c) for c in CAPABILITIES)


def test_the_hang_timeout_is_the_option_given_at_creation(sim):
    assert sim.hang_timeout_s == backends.DEFAULT_HANG_TIMEOUT_S
    other = backends.create("cpu-sim", hang_timeout_s=2.5)
    try:
        assert other.hang_timeout_s == 2.5
    finally:
        other.close()


# -- faults, hangs, out of bounds ------------------------------------------------------

def test_a_fault_is_a_crash_and_the_next_launch_runs(sim):
    A, B = exact_inputs(16, 16, 16)
    with pytest.raises(cpu_sim.SimulatedCrash, match="signal 11"):
        run_once(sim, catalog.Instance(BUILTIN["broken_faults"], "float32", 16), A, B)
    assert sim.last_launch_report.outcome == "crash"
    run = run_once(sim, catalog.Instance(BUILTIN["matmul_tiled_guarded"], "float32", 16), A, B)
    assert np.array_equal(run.C, A @ B)


def test_a_spinning_thread_is_a_hang_and_the_next_launch_runs(sim):
    A, B = exact_inputs(16, 16, 16)
    sim.hang_timeout_s = 1.0
    try:
        with pytest.raises(cpu_sim.SimulatedHang, match=r"block \(0, 0, 0\), thread \(0, 0, 0\)"):
            run_once(sim, catalog.Instance(BUILTIN["broken_hangs"], "float32", 16), A, B)
    finally:
        sim.hang_timeout_s = backends.DEFAULT_HANG_TIMEOUT_S
    run = run_once(sim, catalog.Instance(BUILTIN["matmul_tiled_guarded"], "float32", 16), A, B)
    assert np.array_equal(run.C, A @ B)


@pytest.mark.parametrize("name, access, buffers", [
    ("broken_unguarded_loads", "read", {"A", "B"}),
    ("broken_unguarded_store", "write", {"C"}),
])
def test_address_sanitizer_names_the_unguarded_access(sim, name, access, buffers):
    inst = catalog.Instance(BUILTIN[name], "float32", 8)
    report = sim.address_check(inst, *exact_inputs(13, 11, 9))
    assert report.errors, report.log[-2000:]
    err = report.errors[0]
    assert err.access == access and err.buffer in buffers, err
    assert BUILTIN[name].entry in err.frame or "flawed_body" in err.frame, err


def test_address_sanitizer_is_silent_on_the_guarded_kernel(sim):
    inst = catalog.Instance(BUILTIN["matmul_tiled_guarded"], "float32", 8)
    A, B = exact_inputs(13, 11, 9)
    report = sim.address_check(inst, A, B)
    assert report.ok, report.log[-2000:]
    assert np.array_equal(dt.from_bits(report.C_bits, inst.dt), A @ B)


# -- what it does not run, and its build cache ------------------------------------------

def test_gpu_only_kernels_are_refused_with_the_reason(sim):
    inst = catalog.Instance(replace(BUILTIN["matmul_tiled_guarded"], gpu_only=True), "float32", 16)
    with pytest.raises(cpu_sim.NotSimulated, match="gpu_only"):
        run_once(sim, inst, *exact_inputs(16, 16, 16))


def test_unknown_schedules_are_rejected_by_name(sim):
    with pytest.raises(ValueError, match="'backward'"):
        with sim.using_schedules(("forward", "backward")):
            pass


def test_builds_are_cached_by_source_and_options(tmp_path, monkeypatch):
    from gemmcheck.backends.cpu_sim import build

    try:
        build.compiler()
    except build.BuildError as exc:
        pytest.skip(str(exc))
    monkeypatch.setenv("GEMMCHECK_CACHE_DIR", str(tmp_path / "cache"))
    source = tmp_path / "k.cu"
    source.write_text((Path(__file__).parent / "cpu_sim_kernels" / "probes.cu").read_text())
    spec = replace(PROBES["rotate_sync"], source=source)
    first = build.module(source, [catalog.Instance(spec, "float32", 4)])
    again = build.module(source, [catalog.Instance(spec, "float32", 4)])
    assert first.build_seconds is not None and again.build_seconds is None
    assert again.path == first.path and str(first.path).startswith(str(tmp_path / "cache"))
    source.write_text(source.read_text() + "\n// changed\n")
    changed = build.module(source, [catalog.Instance(spec, "float32", 4)])
    assert changed.build_seconds is not None and changed.path != first.path


# -- wiring: the header, gpu_only and perf skips ----------------------------------------

GPU_ONLY_PROBE = """
import pytest

def test_runs(any_kernel):
    pass

@pytest.mark.perf
def test_timed():
    pass
"""


def test_gpu_only_and_perf_tests_skip_on_cpu_sim_with_the_reason(pytester):
    pytester.makeconftest((Path(__file__).parent.parent / "conftest.py").read_text())
    source = Path(__file__).parent / "cpu_sim_kernels" / "probes.cu"
    (pytester.path / "probes.cu").write_text(source.read_text())
    (pytester.path / "cat.toml").write_text(
        '[[kernel]]\nname = "needs_gpu"\nsource = "probes.cu"\nentry = "rotate_sync"\nsignature = "mnk"\n'
        'policy = "tile2d"\ntiles = [4]\ndtypes = ["float32"]\nexpect = "correct"\ngpu_only = true\n\n'
        '[[kernel]]\nname = "runs_anywhere"\nsource = "probes.cu"\nentry = "rotate_sync"\nsignature = "mnk"\n'
        'policy = "tile2d"\ntiles = [4]\ndtypes = ["float32"]\nexpect = "correct"\n')
    pytester.makepyfile(test_probe=GPU_ONLY_PROBE)
    result = pytester.runpytest("-rs", "--gemm-catalog", "cat.toml", "--gemm-backend", "cpu-sim")
    result.stdout.fnmatch_lines(["gemmcheck: backend cpu-sim; device: *; kernels run on cpu-sim",
                                 "*needs_gpu is gpu_only in its catalog*"])
    result.assert_outcomes(passed=1, skipped=2)
    from gemmcheck.backends import device

    ok, why = device.cuda_device()
    perf_reason = "--gemm-backend cpu-sim: GPU and performance tests run only" if ok else why
    result.stdout.fnmatch_lines([f"SKIPPED * {perf_reason}*"])



def test_a_gpu_test_that_runs_the_simulator_too_skips_a_kernel_the_simulator_does_not_run(monkeypatch):
    """A GPU test that runs each kernel on the simulator too (the backends' bit-for-bit
    comparison) skips a gpu_only kernel with its reason; the GPU alone still runs it."""
    import types as namespaces

    from gemmcheck.backends import device
    from gemmcheck.pytest_plugin import plugin
    from gemmcheck.pytest_plugin.session import GEMM_CONFIG

    monkeypatch.setattr(device, "cuda_device", lambda: (True, ""))
    config = namespaces.SimpleNamespace(stash={GEMM_CONFIG: namespaces.SimpleNamespace(simulated=False)})

    def item(inst, *markers):
        return namespaces.SimpleNamespace(callspec=namespaces.SimpleNamespace(params={"reference": inst}),
                                          get_closest_marker=lambda name: object() if name in markers else None)

    (linked,) = catalog.load(Path(__file__).parent.parent / "examples" / "multifile" / "catalog.toml")
    linked = catalog.Instance(linked, "float32", 16)
    plain = catalog.Instance(BUILTIN["matmul_tiled_guarded"], "float32", 16)
    assert linked.spec.gpu_only
    assert plugin.pytest_gemm_skip_reason(config, item(linked, "gpu", "with_simulator")) == \
        linked.spec.simulator_skip_reason()
    assert plugin.pytest_gemm_skip_reason(config, item(linked, "gpu")) is None
    assert plugin.pytest_gemm_skip_reason(config, item(plain, "gpu", "with_simulator")) is None
    from suites.correctness.test_backends_agree import test_gpu_and_cpu_simulator_give_identical_bits as compared

    assert "with_simulator" in {m.name for m in compared.pytestmark}

def test_a_source_that_does_not_build_raises_a_fresh_error_on_every_launch():
    from pathlib import Path

    spec = catalog.KernelSpec(name="does_not_compile", entry="does_not_compile", signature="mnk",
                              source=Path(__file__).parent / "cpu_sim_kernels" / "does_not_compile.cu",
                              policy="tile2d", tiles=(4,), dtypes=("float32",), expect="correct")
    inst = catalog.Instance(spec, "float32", 4)
    try:
        sim = cpu_sim.CpuSimBackend()
    except BackendUnavailable as exc:
        pytest.skip(str(exc))
    try:
        A, B = exact_inputs(5, 5, 5)
        errors = []
        for _ in range(2):
            with pytest.raises(backends.KernelCompileError, match="does_not_compile.cu") as caught:
                run_once(sim, inst, A, B)
            errors.append(caught.value)
        assert errors[0] is not errors[1]
        assert len(list(traceback_frames(errors[1]))) <= len(list(traceback_frames(errors[0])))
    finally:
        sim.close()


def traceback_frames(exc):
    tb = exc.__traceback__
    while tb is not None:
        yield tb
        tb = tb.tb_next


def test_where_kernels_run_is_declared_by_the_backend_not_read_off_its_name(monkeypatch):
    from gemmcheck.problems import profiles
    from gemmcheck.pytest_plugin.session import GemmConfig

    simulator, gpu = backends.backend_class("cpu-sim"), backends.backend_class("cupy")
    assert simulator.simulated and not simulator.runs_on_cuda_device
    assert gpu.runs_on_cuda_device and not gpu.simulated

    def session_on(name):
        return GemmConfig([], [], None, None, None, profiles.PROFILES["dev"], name)

    # The same classes under other names: the session goes by what each declares.
    monkeypatch.setitem(backends.REGISTRY, "elsewhere", backends.REGISTRY["cpu-sim"])
    monkeypatch.setitem(backends.REGISTRY, "also-a-gpu", backends.REGISTRY["cupy"])
    assert session_on("elsewhere").simulated and not session_on("also-a-gpu").simulated
