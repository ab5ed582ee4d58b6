"""A kernel that crashes or hangs at the sizes the performance suite times costs its own row:
the sized probe launches each (instantiation, N) once in an isolated child first (on cpu-sim
here, with the real faulting kernel), the session refuses what crashed or hung there, and the
test that meets it fails once with the kernel's crash or hang, recorded as its verdict with the
problem; every other row is timed. The GPU run itself is at the end (marked gpu)."""

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gemmcheck.containment import probe
from gemmcheck.containment.lost import Lost
from gemmcheck.contract import catalog
from gemmcheck.pytest_plugin import build_plugin
from child_env import child_env

ROOT = Path(__file__).resolve().parent.parent
BAD = ROOT / "examples" / "bad" / "catalog.toml"
FAULTS_AT_SHAPES = ROOT / "tests" / "data" / "faults_at_shapes" / "catalog.toml"
PERF_FAULTS = ROOT / "tests" / "data" / "perf_faults" / "catalog.toml"


def test_the_sized_probe_loses_the_first_size_that_crashes_or_hangs_and_every_larger_one():
    """On cpu-sim, with the real kernels: faults_at_large_m is right at N 32 and faults from
    block row 48 on (N 64); the bad catalog's kernel that hangs, at its first size. The good
    kernel keeps every size."""
    specs = {s.name: s for path in (FAULTS_AT_SHAPES, BAD) for s in catalog.load(path)}
    good, faulting = (catalog.Instance(specs[n], "float32", 16) for n in ("good", "faults_at_large_m"))
    hangs = catalog.Instance(specs["hangs"], "float32", 8)
    launches = {good: {32, 64}, faulting: {80, 32, 64}, hangs: {8, 16}}
    steps = probe.sized_probe_steps(launches)
    assert [s.M for s in steps] == sorted(s.M for s in steps) and all(s.plain and s.M == s.N == s.K for s in steps)
    lost = probe.probe_sizes(launches, "cpu-sim", timeout=3.0)
    assert {k: v.status for k, v in lost.items()} == {
        (faulting.id, 64): "crash", (faulting.id, 80): "crash", (hangs.id, 8): "hang", (hangs.id, 16): "hang"}, lost
    crash, larger = lost[(faulting.id, 64)], lost[(faulting.id, 80)]
    assert crash.message.startswith("in the isolated probe on M64xN64xK64: ") and crash.problem == "M64xN64xK64"
    assert larger.message.startswith("not launched at N=80: at N=64, in the isolated probe on M64xN64xK64: ")
    assert larger.problem == "M64xN64xK64"
    assert "no progress for 3.0 s" in lost[(hangs.id, 8)].message   # the child's own timeout


def test_the_sized_probe_launches_a_kernel_with_a_type_per_operand_a_separate_d_and_scales():
    """The probe's plain launch gives a kernel its operands in their own types, its separate D
    and its scale factors (before, it asked the instance for one dtype, and every mixed-type
    kernel of the performance suite errored on an H200 instead of being timed)."""
    specs = {s.name: s for s in catalog.load(ROOT / "kernels" / "catalog.toml")}
    halves = catalog.Instance(specs["mixed_f16_f32"], "f16f16f32", 16)
    fp8 = catalog.Instance(specs["mixed_fp8_tensor_scaled"], "e4m3e4m3bf16", 16)
    assert probe.probe_sizes({halves: {32}, fp8: {32}}, "cpu-sim", timeout=10.0) == {}


def test_the_sized_probe_launches_batches_groups_and_epilogues_as_the_performance_suite_times_them():
    """A strided batch's products, a grouped kernel's ragged groups (contiguous and masked, with
    their table) and a fused epilogue's bias and residual: the probe launches what the timed
    launch holds (before, it skipped epilogue and grouped kernels, whose timed launches then ran
    unprobed in the timing process, and launched a batched kernel as one product)."""
    from gemmcheck.perf.inputs import ragged_groups

    specs = {s.name: s for path in ("batched", "grouped", "epilogue")
             for s in catalog.load(ROOT / "examples" / path / "catalog.toml")}
    batched, arrays, grouped, masked, epilogue = (next(iter(specs[n].instances())) for n in (
        "gemm_strided_batched", "gemm_batched", "moe_grouped_gemm", "moe_masked_gemm", "gemm_bias_gelu_tanh_residual"))
    launches = {batched: {32: 8}, arrays: {32: 8}, grouped: {32: 8}, masked: {32: 8}, epilogue: {32: 1}}
    steps = {s.kernel: s for s in probe.sized_probe_steps(launches)}
    assert steps["gemm_strided_batched"].batch == 8 and steps["gemm_strided_batched"].M == 32
    assert steps["gemm_batched"].batch == 8   # its arrays of pointers into the 8 products: plain_pointer_arrays
    assert steps["moe_grouped_gemm"].groups == ragged_groups(32, 8) and steps["moe_grouped_gemm"].M == 8 * 32
    assert steps["moe_masked_gemm"].masked and steps["moe_masked_gemm"].M == max(ragged_groups(32, 8))
    assert probe.probe_sizes(launches, "cpu-sim", timeout=20.0) == {}


THRESHOLDS = """
[timing]
tiles = [16, 32]

[[threshold]]
kernel = "faults_at_large_m"
dtype = "float32"
tile = 16
baseline = "good"
at_least = 0.5
"""

TIMED_SESSION = """
from gemmcheck.containment import probe
from gemmcheck.containment.lost import containment

# As the suite's own tests: the backend is reached through perf_session, by getfixturevalue,
# so it is not among the tests' fixture names.
def test_throughput(perf_instance, perf_size, request):
    request.getfixturevalue("backend")
    found = probe.sized_findings(containment(request.config))
    assert set(found) == {("faults_at_large_m-float32-TILE16", 2048)}

def test_meets_threshold(perf_claim, request):
    request.getfixturevalue("backend")
"""


def test_the_sized_probe_is_given_every_row_and_claim_the_session_times_and_runs_beside_the_first(
        pytester, monkeypatch):
    """What the performance tests launch at their sizes (their instantiation, a claim's and its
    baseline's: pytest_gemm_sized_launches) is probed once, beside the small probe; what it
    found reaches the session before its first timing (sized_findings)."""
    monkeypatch.setattr(build_plugin, "_needs_probe", lambda config: True)
    seen = {}

    def small(instances, backend_name, timeout, stop=None):
        seen["small"] = time.monotonic()
        time.sleep(1)
        return {}

    def sized(launches, backend_name, timeout, stop=None):
        seen["sized"] = time.monotonic()
        seen["launches"] = sorted((i.id, sorted(n)) for i, n in launches.items())
        return {("faults_at_large_m-float32-TILE16", 2048): Lost("crash", "in the isolated probe on M2048xN2048xK2048: "
                                                                           "stand-in", problem="M2048xN2048xK2048")}
    monkeypatch.setattr(probe, "probe_instances", small)
    monkeypatch.setattr(probe, "probe_sizes", sized)
    (pytester.path / "thresholds.toml").write_text(THRESHOLDS)
    pytester.makeconftest((ROOT / "conftest.py").read_text())
    pytester.makepyfile(test_timed=TIMED_SESSION)
    result = pytester.runpytest("-q", "-p", "no:cacheprovider", "--gemm-backend=cpu-sim", "--gemm-profile=dev",
                                f"--gemm-catalog={FAULTS_AT_SHAPES}", "--gemm-thresholds=thresholds.toml",
                                f"--gemm-verdicts={pytester.path / 'v.json'}")
    result.assert_outcomes(passed=4)
    assert seen["launches"] == [(f"{name}-float32-TILE16", [2048])
                                for name in ("faults_at_large_m", "good", "vector_loads_odd_k")]
    assert abs(seen["sized"] - seen["small"]) < 0.9   # side by side, not one after the other (1 s)


CLAIMS = """
import pytest
from gemmcheck.backends import KernelLaunchError
from gemmcheck.pytest_plugin.session import gemm_config

@pytest.mark.parametrize("n", [1, 2])
def test_claim(request, n):
    inst = next(i for i in gemm_config(request.config).instances("any_kernel") if i.spec.name == "good")
    error = KernelLaunchError(f"{inst.id}: in the isolated probe on M64xN64xK64: cudaErrorIllegalAddress (stand-in)")
    error.instance, error.problem = inst, "M64xN64xK64"
    raise error
"""


def test_a_test_without_an_instantiation_that_meets_one_crashing_fails_once_with_its_verdict(pytester):
    """A performance claim is parametrized with a threshold, not an instantiation: the launch
    error names the one it timed (its `instance`). The first such test fails with that
    instantiation's crash (one verdict, on the problem that showed it); the next skips naming it."""
    pytester.makeconftest((ROOT / "conftest.py").read_text())
    pytester.makepyfile(test_claims=CLAIMS)
    result = pytester.runpytest("-q", "-rsf", "-p", "no:cacheprovider", "--gemm-backend=cpu-sim",
                                f"--gemm-catalog={BAD}", f"--gemm-verdicts={pytester.path / 'v.json'}")
    result.assert_outcomes(failed=1, skipped=1)
    out = result.stdout.str()
    assert ("crash: good-float32-TILE8 (good<float, 8>): in the isolated probe on M64xN64xK64: "
            "cudaErrorIllegalAddress (stand-in)") in out
    assert "not run: crash; see test_claims.py::test_claim[1]" in out
    doc = json.loads((pytester.path / "v.json").read_text())
    (verdict,) = [v for v in doc["verdicts"] if v["instance"] == "good-float32-TILE8"]
    assert verdict["problem"] == "M64xN64xK64" and verdict["test"] == "test_claims.py::test_claim[1]"
    assert {r["instance"]: r["defects"] for r in doc["instances"]}["good-float32-TILE8"] == {"crash": 1}


def test_the_perf_suite_asks_the_sized_probe_for_its_rows_and_claims(monkeypatch):
    from types import SimpleNamespace

    from gemmcheck.perf import selection, thresholds
    from gemmcheck.pytest_plugin import perf_plugin

    specs = catalog.load(FAULTS_AT_SHAPES)
    by_name = {s.name: s for s in specs}
    good8, good16, faulting = (catalog.Instance(by_name[n], "float32", t)
                               for n, t in (("good", 8), ("good", 16), ("faults_at_large_m", 16)))
    parsed = thresholds.parse_thresholds({"timing": {"tiles": [8, 16]}, "threshold": [
        {"kernel": "faults_at_large_m", "dtype": "float32", "tile": 16, "baseline": "good", "at_least": 0.5}]})
    config = SimpleNamespace(stash={perf_plugin.PERF_CONFIG: perf_plugin.PerfConfig(parsed, Path("."))})
    monkeypatch.setattr(perf_plugin, "gemm_config", lambda config: SimpleNamespace(specs=specs))

    def item(**params):
        return SimpleNamespace(callspec=SimpleNamespace(params=params))
    asked = perf_plugin.pytest_gemm_sized_launches
    assert asked(config, item(perf_instance=good16, perf_size=4096)) == [(good16, 4096, 1)]   # one product a launch
    claim = selection.Case(parsed.thresholds[0], 2048)   # the kernel, and its baseline's timed TILEs
    assert asked(config, item(perf_claim=claim)) == [(faulting, 2048), (good8, 2048), (good16, 2048)]
    assert asked(config, item(n=1)) is None


# -- on the GPU: the whole performance suite over a catalog with a kernel that faults at 4096^3 --

FAULTING = "faults_from_4096-float32-TILE16"


@pytest.mark.gpu
@pytest.mark.parametrize("probe", ["on", "off"])
@pytest.mark.parametrize("workers", [(), ("-n", "8")], ids=["serial", "xdist"])
def test_a_kernel_that_faults_at_the_timed_size_costs_its_row_and_every_other_row_is_timed(tmp_path, workers,
                                                                                         probe):
    """tests/data/perf_faults: faults_from_4096 is right at every small size (the isolated
    probe passes it) and faults at 4096^3, the ci profile's size. With the probe on, the sized
    probe meets it in its child; off, its check launch here loses the context and the rest
    runs in a fresh process (a fresh worker under -n). Either way its throughput test fails
    once with its crash at that size (one verdict), every other kernel is timed, and nothing
    is printed about a lost context or at exit."""
    from gemmcheck.backends import device

    found, why = device.cuda_device()
    if not found:
        pytest.skip(f"needs a CUDA device; {why}")
    env = child_env()
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rsf", "suites/performance",
                             f"--gemm-catalog={PERF_FAULTS}", "--gemm-profile=ci", f"--gemm-probe={probe}", *workers,
                             f"--gemm-verdicts={tmp_path / 'v.json'}", f"--alluredir={tmp_path / 'allure'}"],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    out = result.stdout + result.stderr
    failed = [line.split()[1] for line in result.stdout.splitlines() if line.startswith("FAILED ")]
    assert failed == [f"suites/performance/test_throughput.py::test_throughput[{FAULTING}-N4096]"], out[-4000:]
    said = (f"in the isolated probe on M4096xN4096xK4096: " if probe == "on"
            else f"launch of faults_from_4096<float, 16> with grid (256, 256, 1) block (16, 16, 1) failed: ")
    assert f"crash: {FAULTING} (faults_from_4096<float, 16>): {said}" in out, out[-4000:]
    assert "cudaErrorIllegalAddress" in out
    for gone in ("context was lost", "Error in sys.excepthook", "Exception ignored", "crashed while running"):
        assert gone not in out, out[-4000:]
    doc = json.loads((tmp_path / "v.json").read_text())
    rows = {r["instance"]: r for r in doc["instances"]}
    assert rows[FAULTING]["defects"] == {"crash": 1}, rows[FAULTING]
    (crash,) = [v for v in doc["verdicts"] if v["instance"] == FAULTING and v["findings"]]
    assert crash["problem"] == "M4096xN4096xK4096"
    timed = json.loads((ROOT / "reports" / "performance" / "perf.json").read_text())["kernels"]
    for other in ("guarded-float32-TILE16", "guarded-float32-TILE32", "sgemm_naive-float32"):
        assert timed[f"{other}-N4096"]["tflops"] > 0, timed
    assert timed[f"{FAULTING}-N4096"]["status"] == "crash"
    assert "best sgemm_naive float32 N=4096: TILE" not in out    # no tile: never labelled with one
