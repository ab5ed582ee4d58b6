"""The hazard detectors that read the CPU simulator's reports, on the real kernels of the
builtin catalog run on cpu-sim (no GPU needed): each fires on the broken kernel that has
its defect and stays silent on the references."""

from pathlib import Path

import pytest

from gemmcheck.contract import catalog
from gemmcheck.judge import hazards
from gemmcheck.problems.harness import run_once
from gemmcheck.judge.oracle import judge
from gemmcheck.verdict import Defect

cpu_sim = pytest.importorskip("gemmcheck.backends.cpu_sim")

# The simulator's own fixture: one backend per module, preparing the builds a session uses.
from test_cpu_sim import sim  # noqa: E402,F401

BUILTIN = {s.name: s for s in catalog.load(catalog.BUILTIN)}
REFERENCES = [name for name, s in BUILTIN.items() if s.is_reference]


def kernel(name, tile=16):
    spec = BUILTIN[name]
    return catalog.Instance(spec, "float32" if "float32" in spec.dtypes else spec.dtypes[0], tile)


def problem(inst, purpose="ragged edges"):
    return dict(hazards.exposing_problems(inst, race_sizes=()))[purpose]


def observe(sim, inst, purpose="ragged edges", **kw):
    return hazards.observe_simulated(sim, inst, problem(inst, purpose), purpose=purpose, **kw)


def by_detector(findings, detector):
    return [f for f in findings if f.detector == detector]


# -- shared-memory races -------------------------------------------------------------------

@pytest.mark.parametrize("name, direction", [("broken_no_sync_after_load", "RAW"),
                                             ("broken_no_sync_after_dot", "WAR")])
def test_shared_tracking_observes_a_missing_barrier_with_its_lockstep_direction(sim, name, direction):
    found = hazards.check_shared_conflicts(observe(sim, kernel(name)))
    assert [f.defect for f in found] == [Defect.SHARED_MEMORY_RACE]
    lockstep = found[0].details["lockstep"]
    other = {"RAW": "WAR", "WAR": "RAW"}[direction]
    # After the load: a thread reads a tile element before its writer's barrier (RAW only);
    # after the dot product: the next load overwrites what others still read (WAR only).
    assert lockstep[direction] > 0 and lockstep[other] == 0 and lockstep["WAW"] == 0, lockstep
    assert f"{direction} {lockstep[direction]}" in found[0].summary
    assert found[0].details["examples"], found[0].details


def test_a_missing_barrier_after_the_dot_makes_the_output_depend_on_the_schedule_at_small_sizes(sim):
    # On an H200 this race left 64^3 exact in 20 of 20 launches; here the schedule exposes it.
    obs = observe(sim, kernel("broken_no_sync_after_dot"), "tile-aligned")
    found = hazards.check_schedule_dependence(obs)
    assert [f.defect for f in found] == [Defect.NONDETERMINISM]
    assert found[0].details["exposing_schedule"] in hazards.SIMULATOR_SCHEDULES[1:]
    assert found[0].count > 0
    assert hazards.classify(hazards.detect(obs)).label == "shared_memory_race"


# -- global-memory races ---------------------------------------------------------------------

PUBLISHED = {s.name: s for s in catalog.load(catalog.BUILTIN.parent.parent / "examples" / "published"
                                             / "catalog.toml")}


def test_global_tracking_names_the_element_and_the_two_blocks_of_the_split_k_twin(sim):
    obs = observe(sim, kernel("broken_splitk_global_race"))
    found = hazards.check_global_races(obs)
    assert [f.defect for f in found] == [Defect.GLOBAL_MEMORY_RACE] and found[0].count > 0
    f = found[0]
    assert f.details["buffer"] == "C" and sorted(f.details["accesses"]) == ["atomic", "store"]
    # slice 0 and slice 1 of one tile: blockIdx.x 2j and 2j + 1, the same blockIdx.y
    (x0, y0, _), (x1, y1, _) = sorted(f.details["blocks"])
    assert x0 % 2 == 0 and x1 == x0 + 1 and y0 == y1, f.details
    assert f.where is not None and "global-memory race on C[" in f.summary
    diagnosis = hazards.classify(hazards.detect(obs))
    assert (diagnosis.defect, diagnosis.basis) == (Defect.GLOBAL_MEMORY_RACE, "observed")
    # the block order also shows in the output: the schedule that stores last loses the add
    assert Defect.NONDETERMINISM in diagnosis.explains, diagnosis.explanation


def test_global_tracking_is_silent_on_a_split_k_that_only_adds_atomically(sim):
    # split_k2 sums K's halves with atomicAdd (in shared memory) and stores each element once.
    inst = PUBLISHED["split_k2"].instances()[0]
    for purpose, p in hazards.exposing_problems(inst, race_sizes=())[:2]:
        obs = hazards.observe_simulated(sim, inst, p, purpose=purpose)
        assert obs.reports and hazards.check_global_races(obs) == [], obs.reports[0].summary()
        assert hazards.detect(obs) == []


def test_global_tracking_names_the_split_k_z_twin_and_is_silent_on_its_sibling_that_orders_its_slices(sim):
    found = hazards.check_global_races(observe(sim, kernel("broken_splitk_z_race", tile=8)))
    assert [f.defect for f in found] == [Defect.GLOBAL_MEMORY_RACE], found
    (x0, y0, z0), (x1, y1, z1) = found[0].details["blocks"]
    assert (x0, y0) == (x1, y1) and {z0, z1} == {0, 1}, found[0].details   # the two slices of one tile
    assert sorted(found[0].details["accesses"]) == ["atomic", "store"]
    sibling = observe(sim, kernel("matmul_splitk_in_block", tile=8))
    assert sibling.reports and hazards.detect(sibling) == [], sibling.reports[0].summary()


# -- warp masks --------------------------------------------------------------------------------

@pytest.mark.parametrize("name, call, line",
                         [("broken_half_mask_shuffle", "__shfl_sync", "const T total = __shfl_sync"),
                          ("broken_half_mask_syncwarp", "__syncwarp", "__syncwarp(0x0000ffffu)")])
def test_warp_tracking_names_the_call_its_line_and_the_lanes_outside_the_mask(sim, name, call, line):
    obs = observe(sim, kernel(name, tile=8))
    found = hazards.check_warp_masks(obs)
    assert [(f.defect, f.detector) for f in found] == [(Defect.INVALID_WARP_MASK, "warp-tracking")], found
    details = found[0].details
    source = (catalog.BUILTIN.parent / "warp_reduce.cu").read_text().splitlines()
    (number,) = [n for n, text in enumerate(source, 1) if line in text]
    assert (details["call"], details["line"], details["kind"]) == (call, f"warp_reduce.cu:{number}", "warp_mask")
    assert (details["lanes"], details["mask"]) == (list(range(16, 32)), 0x0000FFFF), details
    assert f"{call} at warp_reduce.cu:{number}" in found[0].summary and "lanes 16-31" in found[0].summary
    diagnosis = hazards.classify(hazards.detect(obs))
    assert (diagnosis.defect, diagnosis.basis) == (Defect.INVALID_WARP_MASK, "observed"), diagnosis.explanation


def test_warp_tracking_is_silent_on_the_warp_reduce_kernel_whose_masks_are_whole(sim):
    for purpose in ("ragged edges", "tile-aligned"):
        obs = observe(sim, kernel("matmul_warp_reduce", tile=8), purpose)
        assert obs.reports and hazards.detect(obs) == [], obs.reports[0].summary()


# -- a user's catalog: a split-K race and a half-mask shuffle that give the right values ---------

TRUST_DETECT = Path(__file__).parent / "data" / "trust_sim" / "catalog.toml"


@pytest.mark.parametrize("name", ["splitk_store_vs_atomic", "half_mask_shuffle"])
def test_a_users_kernels_with_defects_that_leave_right_values_are_named_as_declared(sim, name):
    # Both kernels are instantiated explicitly in their .cu (template __global__ void k<16>(...);).
    (spec,) = [s for s in catalog.load(TRUST_DETECT) if s.name == name]
    inst = spec.instances()[0]
    for purpose in ("ragged edges", "tile-aligned"):
        obs = observe(sim, inst, purpose)
        diagnosis = hazards.classify(hazards.detect(obs))
        assert diagnosis.defect == Defect(spec.expect), diagnosis.explanation
    place = diagnosis.explanation
    if spec.expect == "global_memory_race":   # block z = 0 stored, block z = 1 added: named in every order
        assert "block (0, 0, 0) stored to it and block (0, 0, 1) atomically updated it" in place, place
        for report in obs.reports:
            assert {g.schedule for g in report.global_conflicts} == set(hazards.SIMULATOR_SCHEDULES), report.summary()
    else:
        assert "__shfl_sync at split_k_and_shuffle.cu:" in place, place
        assert "lanes 16-31 called it with mask 0x0000ffff" in place, place


# -- divergent barriers ----------------------------------------------------------------------

def test_barrier_tracking_names_the_divergent_barrier_on_ragged_m(sim):
    obs = observe(sim, kernel("broken_divergent_barrier"))
    found = hazards.check_divergent_barriers(obs)
    assert [f.defect for f in found] == [Defect.DIVERGENT_BARRIER]
    assert "broken_tiled.cu:" in found[0].summary
    diagnosis = hazards.classify(hazards.detect(obs))
    assert (diagnosis.defect, diagnosis.basis) == (Defect.DIVERGENT_BARRIER, "observed")


def test_the_divergent_kernel_has_no_divergent_barrier_when_m_is_a_tile_multiple(sim):
    # The flaw is `if (row < M) __syncthreads();`: with M a multiple of TILE every thread reaches it.
    assert not hazards.check_divergent_barriers(observe(sim, kernel("broken_divergent_barrier"), "tile-aligned"))


# -- AddressSanitizer --------------------------------------------------------------------------

def test_addresssanitizer_reports_the_unguarded_loads_as_reads_past_an_operand(sim):
    found = hazards.check_address_sanitizer(observe(sim, kernel("broken_unguarded_loads"), address_check=True))
    assert [f.defect for f in found] == [Defect.OUT_OF_BOUNDS_READ]
    assert found[0].details["buffer"] in ("A", "B") and found[0].details["bytes_past"] >= 0
    assert "past the end of" in found[0].summary


def test_addresssanitizer_reports_the_unguarded_store_as_a_write_past_c(sim):
    found = hazards.check_address_sanitizer(observe(sim, kernel("broken_unguarded_store"), address_check=True))
    assert [f.defect for f in found] == [Defect.OUT_OF_BOUNDS_WRITE]
    assert found[0].details["buffer"] == "C"


# -- crash and hang: the worker process is the isolation --------------------------------------

def test_a_fault_is_a_crash_and_the_simulator_runs_the_next_kernel_correctly(sim):
    obs = observe(sim, kernel("broken_faults"), address_check=True)
    assert obs.failure is not None and obs.address is None   # no ASan launch after a crash
    assert [(f.defect, f.detector) for f in hazards.detect(obs)] == [(Defect.CRASH, "isolation")]
    assert "signal" in obs.failure.summary
    ref = kernel("matmul_tiled_guarded")
    p = problem(ref)
    A, B = p.operands()
    assert judge(run_once(sim, ref, A, B), A, B, exact=True, problem=p).ok


def test_a_stalled_launch_is_a_hang(sim):
    old, sim.hang_timeout_s = sim.hang_timeout_s, 1.0
    try:
        obs = observe(sim, kernel("broken_hangs"))
    finally:
        sim.hang_timeout_s = old
    assert [(f.defect, f.detector) for f in hazards.detect(obs)] == [(Defect.HANG, "isolation")]
    assert "no progress" in obs.failure.summary


# -- reads of shared memory nobody wrote ----------------------------------------------------------

SKIPS_PADDING = r"""
template <typename T, int TILE>
__global__ void skips_padding(const T* A, const T* B, T* C, int M, int N, int K) {
    __shared__ T As[TILE][TILE];
    __shared__ T Bs[TILE][TILE];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
    float acc = 0.0f;
    for (int p = 0; p < (K + TILE - 1) / TILE; ++p) {
        // The flaw: out-of-range tile elements are skipped instead of set to zero.
        if (row < M && p * TILE + tx < K) As[ty][tx] = A[row * K + p * TILE + tx];
        if (col < N && p * TILE + ty < K) Bs[ty][tx] = B[(p * TILE + ty) * N + col];
        __syncthreads();
        for (int k = 0; k < TILE; ++k) acc += (float)As[ty][k] * (float)Bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < N) C[row * N + col] = (T)acc;
}
"""


def test_reads_of_shared_memory_no_thread_wrote_are_reported(sim, tmp_path):
    (tmp_path / "skips.cu").write_text(SKIPS_PADDING)
    (tmp_path / "catalog.toml").write_text('''
[[kernel]]
name = "skips_padding"
source = "skips.cu"
entry = "skips_padding"
signature = "mnk"
policy = "tile2d"
tiles = [8]
dtypes = ["float32"]
expect = "out_of_bounds_read"
''')
    inst = catalog.load(tmp_path / "catalog.toml")[0].instances()[0]
    obs = observe(sim, inst)
    found = hazards.check_uninitialized_shared(obs)
    assert [f.defect for f in found] == [Defect.OUT_OF_BOUNDS_READ] and found[0].count > 0
    assert not hazards.check_shared_conflicts(obs)


# -- references ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", REFERENCES)
def test_every_simulator_detector_is_silent_on_references(sim, name):
    inst = kernel(name) if 16 in BUILTIN[name].tiles else BUILTIN[name].instances()[0]
    for purpose, p in hazards.exposing_problems(inst, race_sizes=()):
        obs = hazards.observe_simulated(sim, inst, p, purpose=purpose, address_check=True)
        assert obs.address is not None and obs.reports
        for detector in hazards.SIMULATOR_DETECTORS:
            assert detector(obs) == [], (detector.__name__, purpose, obs.reports[0].summary())
        assert hazards.detect(obs) == []


def test_simulator_only_claims_skip_on_a_backend_that_does_not_simulate_threads(monkeypatch):
    from types import SimpleNamespace

    from gemmcheck.pytest_plugin import hazards_plugin

    claim = SimpleNamespace(get_closest_marker=lambda name: name if name == "simulator" else None)
    plain = SimpleNamespace(get_closest_marker=lambda name: None)
    monkeypatch.setattr(hazards_plugin, "simulated", lambda config: False)   # a real GPU's backend
    assert "cpu-sim only" in hazards_plugin.pytest_gemm_skip_reason(None, claim)
    assert hazards_plugin.pytest_gemm_skip_reason(None, plain) is None
    monkeypatch.setattr(hazards_plugin, "simulated", lambda config: True)
    assert hazards_plugin.pytest_gemm_skip_reason(None, claim) is None


def test_the_simulator_marker_test_runs_on_cpu_sim_and_no_plugin_but_the_core_adds_skips(pytester, monkeypatch):
    # Skips come from one collection hook; a suite plugin adds reasons only through
    # pytest_gemm_skip_reason (gemmcheck.pytest_plugin.hookspecs).
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    for path in (root / "gemmcheck" / "pytest_plugin").glob("*_plugin.py"):
        hooks = {n.name for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.FunctionDef)}
        if "pytest_collection_modifyitems" in hooks:
            text = path.read_text()
            assert "mark.skip" not in text, f"{path.name} adds skip markers itself; return a pytest_gemm_skip_reason"
    pytester.makeconftest((root / "conftest.py").read_text())
    monkeypatch.setenv("PYTHONPATH", str(root))
    pytester.makepyfile(test_probe="import pytest\n@pytest.mark.simulator\ndef test_claim():\n    pass\n")
    result = pytester.runpytest("--gemm-backend=cpu-sim", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
