"""A kernel without a tile parameter (a tutorial's naive SGEMM, a fixed 32 x 32 block) is never
labelled with a TILE: not in the performance table's best lines, a threshold, the verdict
table, the report's labels, a failure message or the heatmap. Its `tile` is only the edge test
shapes are drawn around (the shape generator's default); a tiled kernel keeps its labels."""

from pathlib import Path
from types import SimpleNamespace

import numpy as np

from gemmcheck import perf
from gemmcheck.contract import catalog
from gemmcheck.perf import selection, summary
from gemmcheck.verdict import Defect, Finding, Verdict

ROOT = Path(__file__).resolve().parent.parent
SPECS = {s.name: s for s in catalog.load(ROOT / "tests" / "data" / "perf_faults" / "catalog.toml")}
NAIVE = catalog.Instance(SPECS["sgemm_naive"], "float32")
TILED = catalog.Instance(SPECS["guarded"], "float32", 32)


def test_its_instantiation_names_no_tile():
    assert not NAIVE.spec.has_tile and NAIVE.tile == 32          # the default edge, not a TILE
    assert NAIVE.id == "sgemm_naive-float32" and NAIVE.variant == "" and NAIVE.declared_tile is None
    assert TILED.variant == "TILE32" and TILED.declared_tile == 32


def test_the_performance_tables_best_line_names_no_tile(monkeypatch):
    import sys

    from test_perf_gpu_path import Backend, Clock, FakeGpu

    gpu = FakeGpu()
    for name, module in gpu.module().items():
        monkeypatch.setitem(sys.modules, name, module)
    from gemmcheck.backends import device

    monkeypatch.setattr(device, "properties", lambda device_id=0: device.DeviceProperties(
        "Fake H200", (9, 0), 132, 1.98e9, 3 * 64 * 64 * 4))
    monkeypatch.setattr(device, "SmClock", Clock)
    session = perf.PerfSession(perf.GpuTimer(Backend(gpu, "honest"), perf.Timing(warmup=1)), repeats=6)
    session._copy = perf.Measurement("copy", 2**30, (0.5e-3,) * 5, bytes_moved=2 * 2**30)
    for inst in (NAIVE, TILED):
        perf.timed_rate(session, inst, 64)
    lines = summary.best_lines(session)
    assert [line.split(" TFLOP/s")[0].rsplit(" ", 1)[0] for line in lines] == [
        "best guarded float32 N=64: TILE32,", "best sgemm_naive float32 N=64:"], lines
    assert "TILE" not in next(line for line in lines if "sgemm_naive" in line)


def test_a_threshold_holds_it_with_neither_tile_nor_config_and_refuses_a_tile():
    parsed = perf.parse_thresholds({"timing": {"tiles": [16]}, "threshold": [
        {"kernel": "sgemm_naive", "dtype": "float32", "baseline": "cublas", "at_least": 0.05},
        {"kernel": "sgemm_naive", "dtype": "float32", "tile": 32, "baseline": "cublas", "at_least": 0.05},
        {"kernel": "guarded", "dtype": "float32", "tile": 16, "baseline": "sgemm_naive", "at_least": 1}]})
    bare, tiled, against = parsed.thresholds
    assert bare.subject == "sgemm_naive-float32" and bare.key == selection.instance_key(NAIVE)
    assert selection.claimed_instance(NAIVE.spec, bare) == NAIVE
    (problem,) = selection.unknown_instantiations(SPECS.values(), parsed)
    assert "sgemm_naive has no tile parameter; drop 'tile = 32'" in problem and tiled.id in problem
    # timed whatever TILEs the file times (not because the default edge, 32, happens to be one)
    assert NAIVE in selection.timed_instances([NAIVE, TILED], parsed)
    # a kernel baseline without a tile: its one instantiation, not "the best of TILE 32"
    assert selection.baseline_instances(NAIVE.spec, against, 64, parsed.timing.tiles) == [NAIVE]


def test_the_verdict_table_has_no_tile_for_it():
    from gemmcheck import report

    verdicts = [Verdict.for_instance(NAIVE, "M64xN64xK64", [Finding(Defect.WRONG_VALUES, "exact-bits", "x", 1)]),
                Verdict.for_instance(TILED, "M64xN64xK64", [])]
    assert verdicts[0].tile is None and verdicts[1].tile == 32
    rows = {r["instance"]: r for r in report.verdicts_document([NAIVE, TILED], verdicts)["instances"]}
    assert rows[NAIVE.id]["tile"] is None and rows[TILED.id]["tile"] == 32
    assert any(NAIVE.id in line for line in report.verdict_table(list(rows.values())))   # sorts with None


def test_the_reports_labels_and_parameters_have_no_tile_for_it(monkeypatch):
    from gemmcheck.pytest_plugin import report_plugin
    from gemmcheck.report import labels

    def item(inst):
        state = SimpleNamespace(recording=True, ran_instances=False, verdicts_seen=0)
        return SimpleNamespace(nodeid=f"suites/correctness/test_exact_results.py::test_x[{inst.id}]", name="test_x",
                               originalname="test_x", callspec=SimpleNamespace(params={"reference": inst}),
                               config=SimpleNamespace(stash={report_plugin.STATE: state}),
                               stash={}, iter_markers=lambda name: [], add_marker=lambda marker: None)
    tags = {inst.id: [v for k, v in labels.labels_for(item(inst)) if k == "tag"] for inst in (NAIVE, TILED)}
    assert "TILE32" in tags[TILED.id] and not any(t.startswith("TILE") for t in tags[NAIVE.id])
    for inst, has_tile in ((NAIVE, False), (TILED, True)):
        seen = {}
        monkeypatch.setattr(report_plugin.report, "parameter", lambda name, value, **kw: seen.setdefault(name, value))
        monkeypatch.setattr(report_plugin.report, "start_test", lambda: None)
        monkeypatch.setattr(report_plugin, "_verdict_log", lambda config: None)
        monkeypatch.setattr(report_plugin, "_gemm", lambda config: None)
        report_plugin._start(item(inst))
        assert seen["dtype"] == "float32" and ("TILE" in seen) == has_tile, seen


def test_a_failure_message_and_the_heatmap_name_no_tile_for_it():
    from gemmcheck.judge import oracle
    from gemmcheck.problems.harness import run_once
    from gemmcheck.report import heatmap

    from fakes import RoleBackend, role_gemm

    def one_wrong(instance, values):   # C[0, 3] one off, in any argument order
        role_gemm(instance, values)
        values["C"][3] += 1

    messages = {}
    rng = np.random.default_rng(0)
    A, B = rng.integers(-3, 4, (40, 9)).astype(float), rng.integers(-3, 4, (9, 40)).astype(float)
    for inst in (NAIVE, TILED):
        run = run_once(RoleBackend({inst.spec.entry: one_wrong}), inst, A, B)
        judged = oracle.judge(run, A, B, exact=True)
        assert not judged.ok
        messages[inst.id] = "\n".join([judged.message(), judged.worst_table(), *(f.summary for f in judged.findings)])
        png = heatmap.heatmap_png(judged.error_map, inst.declared_tile, unwritten=run.unwritten, title=inst.id)
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
        csv = heatmap.worst_elements_csv(judged.error_map, run, n=1).splitlines()[1].split(",")
        assert csv[:4] == (["0", "3", "", ""] if inst is NAIVE else ["0", "3", "0", "0"])
    assert "(tile " not in messages[NAIVE.id] and "TILE" not in messages[NAIVE.id].replace(NAIVE.id, "")
    assert " tile " not in messages[NAIVE.id] and "(tile 0, 0)" in messages[TILED.id] and " tile " in messages[TILED.id]
