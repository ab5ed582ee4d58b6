"""The ladder catalog as a named catalog on the CPU simulator: `sim_configs` picks the configs
the simulator runs, is validated with the cause, and the others skip there with the reason."""

import tomllib
from pathlib import Path

import pytest

from gemmcheck.contract import catalog

LADDER = {s.name: s for s in catalog.load(catalog.LADDER)}
ENTRIES = {e["name"]: e for e in tomllib.loads(catalog.LADDER.read_text())["kernel"]}


def _catalog(tmp_path, **changes) -> Path:
    entry = {**ENTRIES["ladder_2d_blocktiling"], **changes}
    entry["source"] = str(catalog.LADDER.parent / entry["source"])
    lines = ["[[kernel]]"]
    for key, value in entry.items():
        if key == "configs":
            value = "[" + ", ".join("{ " + ", ".join(f"{k} = {v!r}".replace("'", '"') for k, v in c.items())
                                    + " }" for c in value) + "]"
        else:
            value = repr(value).replace("'", '"')
        lines.append(f"{key} = {value}")
    path = tmp_path / "catalog.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_sim_configs_pick_the_configs_the_simulator_runs():
    spec = LADDER["ladder_warptiled_occ"]
    assert spec.simulated("128x256x16-w64x64-4x4-1buf-pad") and not spec.simulated("128x256x16-w64x64-4x4")
    assert all(LADDER[n].simulated(c) for n in ("ladder_broken_double_buffer_no_barrier",)
               for c, _ in LADDER[n].assignments())   # no sim_configs: every config
    assert not LADDER["ladder_wmma"].simulated("64x64x32-w32x32")   # gpu_only


def test_every_cuda_core_rung_and_twin_runs_some_config_on_the_simulator():
    for spec in LADDER.values():
        if not spec.gpu_only:
            assert any(spec.simulated(name) for name, _ in spec.assignments()), spec.name


def test_the_simulator_runs_the_config_the_thresholds_time():
    from gemmcheck import perf

    for t in perf.load_thresholds(perf.BUILTIN_THRESHOLDS).thresholds:
        spec = LADDER.get(t.kernel)
        if spec is not None and not spec.gpu_only:
            assert spec.simulated(t.config), f"{t.id}: add {t.config!r} to sim_configs of {spec.name}"


@pytest.mark.parametrize("value, says", [
    (["32x32x8-4x4", "nope"], "'sim_configs' must list names from 'configs'"),
    ([], "'sim_configs' must list names from 'configs'"),
    ("32x32x8-4x4", "'sim_configs' must list names from 'configs'"),
])
def test_a_bad_sim_configs_names_the_field_and_the_configs(tmp_path, value, says):
    path = _catalog(tmp_path, sim_configs=value)
    with pytest.raises(catalog.CatalogError, match=says) as caught:
        catalog.load(path)
    assert "kernel 'ladder_2d_blocktiling'" in str(caught.value) and "64x64x8-8x4" in str(caught.value)


def test_a_good_sim_configs_loads(tmp_path):
    [spec] = catalog.load(_catalog(tmp_path, sim_configs=["64x64x8-8x4"]))
    assert spec.sim_configs == ("64x64x8-8x4",) and not spec.simulated("32x32x8-4x4")


PROBE = """
def test_probe(any_kernel):
    pass
"""


def test_on_the_simulator_a_config_outside_sim_configs_skips_with_the_reason(pytester):
    pytester.makeconftest((Path(__file__).parent.parent / "conftest.py").read_text())
    pytester.makepyfile(test_probe=PROBE)
    result = pytester.runpytest("-q", "-rs", "--gemm-catalog=ladder", "--gemm-backend", "cpu-sim",
                                "--gemm-kernels", "ladder_warptiled", "-p", "no:cacheprovider")
    configs = [n for n, _ in LADDER["ladder_warptiled"].assignments()]
    result.assert_outcomes(passed=2, skipped=len(configs) - 2)
    assert "not among its catalog's sim_configs (64x64x8-w32x32, 128x256x16-w64x64)" in result.stdout.str()
