"""The reference ladder in the performance suite, without a GPU: named catalogs, thresholds that
name a config, which instantiations are timed, target semantics, the table's best config and
model intensity, and rung 7's > 48 KB dynamic shared memory through the perf launch path."""

import copy
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from types import SimpleNamespace

import pytest

from gemmcheck import perf
from gemmcheck.contract import catalog
from gemmcheck.perf import roofline
from gemmcheck.backends.cupy_backend import CupyBackend
from gemmcheck.perf import selection, summary
from child_env import child_env

THRESHOLDS = tomllib.loads(perf.BUILTIN_THRESHOLDS.read_text())
LADDER = {s.name: s for s in catalog.load(catalog.LADDER)}
BUILTIN = {s.name: s for s in catalog.load(catalog.BUILTIN)}
ROOT = Path(__file__).resolve().parent.parent


def _thresholds(*entries, tiles=(16, 32)):
    return perf.parse_thresholds({"timing": {"tiles": list(tiles)}, "threshold": list(entries)})


def _bar(kernel="ladder_warptiled_occ", config="128x256x16-w64x64-4x4-1buf-pad", **extra):
    return {"kernel": kernel, "dtype": "float32", "config": config, "baseline": "cublas",
            "at_least": 0.5, **extra}


# -- named catalogs ----------------------------------------------------------------------------

@pytest.mark.parametrize("names, expected", [
    (["builtin"], [catalog.BUILTIN]),
    (["ladder"], [catalog.LADDER]),
    (["all"], [catalog.BUILTIN, catalog.LADDER]),
    (["builtin", "all"], [catalog.BUILTIN, catalog.LADDER]),   # a catalog named twice loads once
    (["my/catalog.toml"], [Path("my/catalog.toml")]),
])
def test_catalog_names_resolve_to_files_and_anything_else_is_a_path(names, expected):
    assert catalog.resolve(names) == expected


def test_the_ladder_catalog_loads_alongside_the_builtin_one():
    specs = catalog.load_all(catalog.resolve(["all"]))
    assert {s.name for s in specs} == set(BUILTIN) | set(LADDER) and len(LADDER) == 23


# -- thresholds naming a config ----------------------------------------------------------------

def test_a_threshold_names_a_config_and_its_id_says_which():
    t = _thresholds(_bar(), _bar(at_least=0.9, target=True)).thresholds
    assert t[0].key == ("ladder_warptiled_occ", "float32", "128x256x16-w64x64-4x4-1buf-pad")
    assert t[0].id == "ladder_warptiled_occ-float32-128x256x16-w64x64-4x4-1buf-pad-vs-cublas"
    assert t[1].id == t[0].id + "-target" and t[1].target and not t[0].target


@pytest.mark.parametrize("entry, message", [
    ({**_bar(), "tile": 128}, "by one of 'tile' (a TILE) or 'config'"),
    (_bar(config=128), "'config' must be a string, got 128"),
    (_bar(target="yes"), "'target' must be true or false, got 'yes'"),
])
def test_a_bad_config_or_target_field_fails_with_the_cause(entry, message):
    with pytest.raises(perf.ThresholdError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _thresholds(entry)


def test_a_threshold_that_names_neither_tile_nor_config_holds_only_a_kernel_without_either():
    neither = _thresholds({k: v for k, v in _bar().items() if k != "config"})
    (problem,) = selection.unknown_instantiations(LADDER.values(), neither)
    assert "ladder_warptiled_occ has a tile parameter (BM:" in problem and "name one with 'tile'" in problem


def test_an_unknown_config_is_named_with_the_kernels_configs():
    bad = _thresholds(_bar(config="128x256x16-typo"), _bar(kernel="ladder_wmma", config="64x64x32-w32x32"))
    problems = selection.unknown_instantiations(LADDER.values(), bad)
    assert len(problems) == 2
    assert "no config '128x256x16-typo'" in problems[0] and "128x256x16-w64x64-4x4-1buf-pad" in problems[0]
    assert "declares dtypes ['float16', 'bfloat16'], not float32" in problems[1]
    good = _thresholds(_bar(), _bar(kernel="ladder_wmma", config="64x64x32-w32x32", dtype="float16"))
    assert selection.unknown_instantiations(LADDER.values(), good) == []


def test_the_thresholds_file_holds_every_rung_on_a_config_it_declares():
    thresholds = perf.load_thresholds(perf.BUILTIN_THRESHOLDS)
    held = {t.kernel for t in thresholds.thresholds if t.config is not None}
    references = {n for n, s in LADDER.items() if s.is_reference}
    assert held == references, f"rungs without a bar: {sorted(references - held)}"
    assert selection.unknown_instantiations(LADDER.values(), thresholds) == []


def test_the_ladder_targets_are_held_at_their_bars():
    thresholds = perf.load_thresholds(perf.BUILTIN_THRESHOLDS).thresholds
    float32 = [t for t in thresholds if t.kernel == "ladder_warptiled_occ"]
    float16 = [t for t in thresholds if t.kernel == "ladder_wgmma" and t.dtype == "float16"]
    # Both met (float32 0.928, float16 0.866 in the perf suite on an H200): plain bars at the
    # targets themselves, so losing either fails.
    assert [(t.at_least, t.target, t.baseline, t.min_size) for t in float32] == [(0.90, False, "cublas", 4096)]
    assert [(t.at_least, t.target, t.baseline, t.min_size) for t in float16] == [(0.70, False, "cublas", 4096)]


# -- which instantiations are timed ------------------------------------------------------------

def _instances(specs):
    return [i for s in specs for i in s.instances()]


def test_configs_sharing_a_tile_are_told_apart_and_only_named_ones_are_timed():
    spec = LADDER["ladder_warptiled_occ"]
    at_128 = [i for i in spec.instances() if i.tile == 128]
    assert len(at_128) > 10   # BM = 128 alone cannot say which config a threshold means
    thresholds = _thresholds(_bar(), _bar(config="128x256x8-w64x64-4x4"))
    timed = selection.timed_instances(_instances([spec, BUILTIN["matmul_tiled"]]), thresholds)
    ladder = [i.config for i in timed if i.spec is spec]
    assert ladder == ["128x256x8-w64x64-4x4", "128x256x16-w64x64-4x4-1buf-pad"]
    # TILE kernels still at the timed TILEs, and only there
    assert sorted(i.tile for i in timed if i.spec.name == "matmul_tiled" and i.dtype == "float32") == [16, 32]


def _timed_ids(instances, thresholds, **kw):
    return sorted(i.id for i in selection.timed_instances(instances, thresholds, **kw))


def test_without_every_dtype_a_kernel_is_timed_at_its_lead_dtype_and_where_a_claim_names_it():
    tiled, naive = BUILTIN["matmul_tiled"], BUILTIN["matmul_naive"]
    assert tiled.dtypes[0] == "float32" and "bfloat16" in tiled.dtypes
    both = _instances([tiled, naive])
    every = _timed_ids(both, _thresholds())
    assert {i.split("-")[1] for i in every} == set(tiled.dtypes)   # the nightly: every dtype
    assert _timed_ids(both, _thresholds(), every_dtype=False) == sorted(
        f"{k}-float32-TILE{t}" for k in ("matmul_naive", "matmul_tiled") for t in (16, 32))
    # a claim at bfloat16 of matmul_tiled against matmul_naive times both at bfloat16 as well
    claim = {"kernel": "matmul_tiled", "dtype": "bfloat16", "tile": 32, "baseline": "matmul_naive",
             "baseline_tile": "best", "at_least": 1.0}
    claimed = _timed_ids(both, _thresholds(claim), every_dtype=False)
    assert {i for i in claimed if "bfloat16" in i} == {
        f"{k}-bfloat16-TILE{t}" for k in ("matmul_naive", "matmul_tiled") for t in (16, 32)}
    assert {i.split("-")[1] for i in claimed} == {"float32", "bfloat16"}


def test_the_lead_dtype_is_the_first_the_run_selected():
    tiled = BUILTIN["matmul_tiled"]
    no_float32 = [i for i in tiled.instances() if i.dtype in ("bfloat16", "float64")]
    timed = _timed_ids(no_float32, _thresholds(), every_dtype=False)
    assert timed == ["matmul_tiled-float64-TILE16", "matmul_tiled-float64-TILE32"]   # the catalog's order


def _collected_throughput_dtypes(tmp_path, *args) -> set[str]:
    # (its allure results in tmp_path: the repository's would be cleaned under a parallel run's feet)
    out = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--collect-only",
                          f"--rootdir={ROOT}", f"--alluredir={tmp_path / 'allure'}",
                          str(ROOT / "suites" / "performance" / "test_throughput.py"), *args],
                         cwd=ROOT, env=child_env(), capture_output=True, text=True, timeout=300)
    ids = re.findall(r"::test_throughput\[(matmul_tiled-[^\]]+)\]", out.stdout)
    assert ids, out.stdout[-2000:] + out.stderr[-2000:]
    return {i.split("-")[1] for i in ids}


def test_the_nightly_and_named_dtypes_time_every_dtype_and_ci_its_lead_ones(tmp_path):
    assert _collected_throughput_dtypes(tmp_path, "--gemm-profile", "ci") == {"float32"}
    assert _collected_throughput_dtypes(tmp_path, "--gemm-profile", "nightly") == {
        "float32", "float64", "float16", "bfloat16"}
    # --gemm-dtypes says which are wanted: each is timed, in ci too
    assert _collected_throughput_dtypes(tmp_path, "--gemm-profile", "ci", "--gemm-dtypes", "float16,bfloat16") == {
        "float16", "bfloat16"}


@pytest.mark.parametrize("args, expected", [
    (("--gemm-profile", "ci"), ("float64", "float16", "bfloat16")),
    (("--gemm-profile", "nightly"), None),
    (("--gemm-profile", "ci", "--gemm-dtypes", "float16,bfloat16"), None),
])
def test_the_run_knows_which_dtypes_its_table_leaves_untimed(pytester, args, expected):
    from gemmcheck.pytest_plugin import perf_plugin
    config = pytester.parseconfigure(*args)
    assert perf_plugin.untimed(config).get("matmul_tiled") == expected


def test_a_ladder_config_with_a_timed_tile_value_is_not_timed_unless_named():
    spec = LADDER["ladder_1d_blocktiling"]   # config 32x32x8-tm4 has BM = 32, a timed TILE value
    assert selection.timed_instances(spec.instances(), _thresholds()) == []


def test_a_sweep_times_every_config_of_every_reference_and_no_broken_twin():
    ladder = _instances(LADDER.values())
    timed = selection.timed_instances(ladder, _thresholds(), every_config=True)
    assert set(timed) == {i for i in ladder if i.spec.is_reference} and len(timed) > 40


def test_a_claim_runs_on_the_config_it_names_with_that_configs_parameters():
    spec = LADDER["ladder_warptiled_occ"]
    [t] = _thresholds(_bar()).thresholds
    inst = selection.claimed_instance(spec, t)
    assert inst.config == t.config and selection.instance_key(inst) == t.key
    assert (inst.params["BN"], inst.params["BK"], inst.params["BUFS"], inst.params["APAD"]) == (256, 16, 1, 4)
    cases = selection.threshold_cases(spec.instances(), _thresholds(_bar(min_size=4096)), [2048, 4096], "correct")
    assert [c.id for c in cases] == [f"{t.id}-N4096"]


def test_a_builtin_tile_threshold_keeps_selecting_its_tile():
    entry = copy.deepcopy(THRESHOLDS["threshold"][0])   # matmul_tiled float32 TILE32 vs cuBLAS
    [t] = _thresholds(entry).thresholds
    inst = selection.claimed_instance(BUILTIN[t.kernel], t)
    assert (inst.tile, inst.config, t.key) == (32, None, ("matmul_tiled", "float32", 32))


# -- targets: a miss is an expected failure with its ratio; a pass fails (strict) --------------

def _evaluation(ratio, target):
    [t] = _thresholds(_bar(at_least=0.7, target=target)).thresholds
    return perf.evaluate(t, 4096, 100.0 * ratio, 100.0, "cuBLAS float32 (TF32 off)", "H200")


@pytest.mark.parametrize("ratio, target, outcome, says", [
    (0.80, False, "passed", "meets its threshold"),
    (0.39, False, "failed", "is below its threshold: 39.00 TFLOP/s is 0.390 x"),
    (0.39, True, "xfail", "target not met yet: ladder_warptiled_occ-float32-128x256x16-w64x64-4x4-1buf-pad "
                          "at N=4096 is below its target: 39.00 TFLOP/s is 0.390 x"),
    (0.80, True, "failed", "drop 'target = true'"),
])
def test_target_semantics(ratio, target, outcome, says):
    got, message = _evaluation(ratio, target).outcome()
    assert got == outcome and says in message, message


# -- the table and the roofline ----------------------------------------------------------------

def test_model_intensity_of_a_block_tile_reduces_to_the_seeds_for_a_square_tile():
    occ = selection.claimed_instance(LADDER["ladder_warptiled_occ"], _thresholds(_bar()).thresholds[0])
    assert summary.model_intensity(occ) == pytest.approx(2 * 128 * 256 / (384 * 4))   # 42.7 FLOP/B
    assert roofline.block_tile_intensity(32, 32, 4) == roofline.model_intensity("tile2d", 32, 2, 4) == 8
    tiled = catalog.Instance(BUILTIN["matmul_tiled"], "float32", 32)
    assert summary.model_intensity(tiled) == 8


def _row(instance, tflops, ok=True, impossible=None):
    m = perf.Measurement(instance.id, 4096, (2 * 4096**3 / (tflops * 1e12),) * 3, flops=2 * 4096**3)
    check = perf.Check(0.1 if ok else 9.0, 0, (0, 0))
    return perf.Row(m, instance, check, check, None, impossible)


def test_the_table_names_each_kernels_best_config_among_those_whose_rate_counts():
    spec = LADDER["ladder_warptiled_occ"]
    a, b, c = (selection.claimed_instance(spec, t) for t in _thresholds(
        _bar(), _bar(config="128x256x8-w64x64-4x4"), _bar(config="128x128x8-w64x32-2blk")).thresholds)
    cublas = perf.Measurement("cublas", 4096, (2 * 4096**3 / 51.2e12,) * 3, flops=2 * 4096**3)
    session = SimpleNamespace(rows={(a.id, 4096): _row(a, 47.6), (b.id, 4096): _row(b, 46.0),
                                    (c.id, 4096): _row(c, 90.0, ok=False)},   # wrong last launch: no rate
                              cublas_measurements=lambda: {("float32", 4096): cublas})
    assert summary.best_lines(session) == [
        "best ladder_warptiled_occ float32 N=4096: 128x256x16-w64x64-4x4-1buf-pad, 47.60 TFLOP/s, "
        "93.0% of cuBLAS float32"]


# -- rung 7: > 48 KB of dynamic shared memory through the perf launch path ---------------------

def test_rung_7_launches_from_the_perf_timer_with_its_dynamic_shared_memory_opted_in(monkeypatch):
    from cupy_backends.cuda.api import driver
    spec = LADDER["ladder_wmma_async"]
    instance = next(i for i in spec.instances() if i.config == "128x128x32-w64x32-s3" and i.dtype == "float16")
    calls = []

    class Kernel:
        max_dynamic_shared_size_bytes, ptr = 0, 0xC0DE

        def __call__(self, grid, block, args, shared_mem=0):
            calls.append((grid, block, args, shared_mem))

    fake = Kernel()
    monkeypatch.setattr(driver, "funcSetAttribute", lambda f, attribute, value: setattr(
        fake, "max_dynamic_shared_size_bytes", value) if (f, attribute) == (fake.ptr, 8) else None)
    backend = object.__new__(CupyBackend)   # no device: the launch logic only
    device = SimpleNamespace(attributes={"MaxSharedMemoryPerBlockOptin": 232448})
    backend._cupy = SimpleNamespace(cuda=SimpleNamespace(Device=lambda: device))
    backend.arch = "sm_90"
    backend._failed, backend._kernels = {}, {backend._key(instance): fake}
    timer = object.__new__(perf.GpuTimer)
    timer.backend, timer._scalars = backend, {}
    sets = SimpleNamespace(sets=[("A", "B", "C")], output="C", scales=[], batch=1, epilogue=[], groups=(),
                           M=4096)   # one input set: its buffers' names
    timer._launch(instance, 4096, sets, 0)
    shared = 3 * (128 * (32 + 8) + 32 * (128 + 8)) * 2   # STAGES * (BM (BK + 8) + BK (BN + 8)) * 2 bytes
    assert shared > 48 * 1024
    [(grid, block, args, shared_mem)] = calls
    assert (grid, block, shared_mem, fake.max_dynamic_shared_size_bytes) == ((32, 32, 1), (256, 1, 1), shared, shared)
    assert (args[0], args[1], args[2], args[4], args[5], args[7]) == (4096, 4096, 4096, "A", "B", "C")
