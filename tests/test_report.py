"""The report: allure results a reviewer can act on, categories that sort failures by defect
class, the heatmap, reports/verdicts.json, and no trace of any of it when allure is absent."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import report_demo
from gemmcheck.contract import catalog
from gemmcheck import report
from gemmcheck.verdict import Defect, Finding, Verdict

SPECS = {s.name: s for s in catalog.load(catalog.BUILTIN)}


def run_demo(root: Path, *extra: str, env=None) -> subprocess.CompletedProcess:
    report_demo.write_suite(root)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "suites", *report_demo.args(), *extra],
                          cwd=root, capture_output=True, text=True, env=env, timeout=300)


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo")
    proc = run_demo(root)
    assert proc.returncode == 1, proc.stdout + proc.stderr   # the broken variants fail
    return root, proc


def results(root: Path) -> dict[str, dict]:
    out = {}
    for path in (root / "reports" / "allure-results").glob("*-result.json"):
        data = json.loads(path.read_text())
        out[data["name"]] = data
    return out


def labels(result: dict) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for label in result["labels"]:
        found.setdefault(label["name"], []).append(label["value"])
    return found


# -- allure results ---------------------------------------------------------------------------

def test_a_run_writes_well_formed_allure_results_by_default(demo):
    root, _ = demo
    assert report.validate_results(root / "reports" / "allure-results") == []
    assert len(results(root)) == 9


def test_a_broken_variant_carries_its_labels_parameters_and_evidence(demo):
    root, _ = demo
    result = results(root)["test_ragged_edges_are_exact[broken_floor_grid-float32-TILE8]"]
    found = labels(result)
    assert found["epic"] == ["gemmcheck"] and found["feature"] == ["correctness"]
    assert found["story"] == ["ragged edges are exact"]
    assert found["severity"] == ["normal"]
    assert {"float32", "TILE8", "broken variant"} <= set(found["tag"])
    assert found["kernel"] == ["broken_floor_grid"] and found["expect"] == ["unwritten_output"]
    assert found["defect"] == ["unwritten_output"]
    params = {p["name"]: p["value"] for p in result["parameters"]}
    assert params["instantiation"] == "matmul_tiled_guarded<float, 8>"   # the entry it runs
    assert (params["dtype"], params["TILE"], params["M"], params["N"], params["K"]) == \
        ("float32", "8", "37", "45", "29")
    assert result["statusDetails"]["message"].startswith("Failed: unwritten_output: ")
    files = {a["name"]: root / "reports" / "allure-results" / a["source"] for a in result["attachments"]}
    assert files["error / bound heatmap"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "tiled_guarded_body" in next(p for n, p in files.items() if n.startswith("kernel source")).read_text()
    worst = files["worst elements"].read_text().splitlines()
    assert worst[0].startswith("i,j,tile_i,tile_j") and worst[1].endswith("True")  # unwritten first
    reproduce = files["reproduce"].read_text()
    assert ("-m pytest 'suites/correctness/test_values.py::test_ragged_edges_are_exact"
            "[broken_floor_grid-float32-TILE8]' --gemm-catalog=") in reproduce
    assert "--gemm-profile=dev" in reproduce and "--gemm-backend=cpu-sim" in reproduce


def test_selecting_by_an_allure_label_selects_by_the_suites_labels(demo, tmp_path):
    # Labels are put on at collection only for such a selection; else each test as it runs.
    everything = {name: labels(r) for name, r in results(demo[0]).items()}
    correctness = {name for name, found in everything.items() if found["feature"] == ["correctness"]}
    assert correctness and len(correctness) < len(everything)   # the demo has tests of another feature
    proc = run_demo(tmp_path, "--allure-features", "correctness")
    found = {name: labels(r) for name, r in results(tmp_path).items()}
    assert set(found) == correctness, proc.stdout + proc.stderr
    ours = ("epic", "feature", "story", "severity", "kernel", "instantiation", "expect", "tag")
    for name, got in found.items():   # the same labels, once each, whenever they are put on
        assert {k: sorted(got.get(k, [])) for k in ours} == {k: sorted(everything[name].get(k, [])) for k in ours}, name


def test_a_reference_is_critical_and_passing_tests_carry_no_evidence(demo):
    root, _ = demo
    result = results(root)["test_ragged_edges_are_exact[matmul_tiled_guarded-float32-TILE8]"]
    assert result["status"] == "passed"
    assert labels(result)["severity"] == ["critical"] and "defect" not in labels(result)
    assert not result.get("attachments")


def test_a_hypothesis_failure_attaches_its_reproduction_once(demo):
    root, _ = demo
    result = results(root)["test_any_shape_is_exact[broken_floor_phases-float32-TILE8]"]
    names = [a["name"] for a in result["attachments"]]
    assert names.count("error / bound heatmap") == 1          # not one per shrinking step
    source = next(a["source"] for a in result["attachments"] if a["name"] == "hypothesis reproduction")
    text = (root / "reports" / "allure-results" / source).read_text()
    assert "test_any_shape_is_exact(" in text and "M=" in text and "@reproduce_failure(" in text


def test_environment_and_categories_are_written(demo):
    root, _ = demo
    where = root / "reports" / "allure-results"
    env = dict(line.split("=", 1) for line in (where / "environment.properties").read_text().splitlines())
    for key in ("gpu", "numpy", "cupy", "python", "hyp_profile", "profile", "backend", "sanitizer"):
        assert key in env
    names = [c["name"] for c in json.loads((where / "categories.json").read_text())]
    assert names == [c.name for c in report.CATEGORIES]


def test_every_failure_of_the_demo_lands_in_its_defect_category(demo):
    root, _ = demo
    got = {name: report.category_of(r.get("statusDetails", {}).get("message", ""), r["status"])
           for name, r in results(root).items() if r["status"] != "passed"}
    assert got == {
        "test_ragged_edges_are_exact[broken_floor_grid-float32-TILE8]": "Unwritten output",
        "test_any_shape_is_exact[broken_floor_grid-float32-TILE8]": "Unwritten output",
        "test_ragged_edges_are_exact[broken_floor_phases-float32-TILE8]": "Wrong values",
        "test_any_shape_is_exact[broken_floor_phases-float32-TILE8]": "Wrong values",
        "test_guard_bands_are_intact[broken_unguarded_store-float32-TILE8]": "Out-of-bounds access",
        "test_needs_a_gpu": "Environment problems",
    }


def test_the_validator_fires_on_a_missing_attachment_and_missing_labels(demo, tmp_path):
    root, _ = demo
    copy = tmp_path / "results"
    shutil.copytree(root / "reports" / "allure-results", copy)
    name = "test_ragged_edges_are_exact[broken_floor_grid-float32-TILE8]"
    path = next(p for p in copy.glob("*-result.json") if json.loads(p.read_text())["name"] == name)
    data = json.loads(path.read_text())
    (copy / data["attachments"][0]["source"]).unlink()
    data["labels"] = [lb for lb in data["labels"] if lb["name"] not in ("story", "kernel")]
    path.write_text(json.dumps(data))
    (copy / "categories.json").unlink()
    problems = report.validate_results(copy)
    assert len(problems) == 3
    assert any("attachment 'error / bound heatmap'" in p for p in problems)
    assert any("missing story, kernel" in p for p in problems)
    assert any("categories.json missing" in p for p in problems)


# -- verdicts ---------------------------------------------------------------------------------

def test_the_demo_writes_verdicts_json_and_a_terminal_table(demo):
    root, proc = demo
    doc = json.loads((root / "reports" / "verdicts.json").read_text())
    assert doc["schema_version"] == report.SCHEMA_VERSION == 1
    rows = {r["instance"]: r for r in doc["instances"]}
    assert rows["broken_floor_grid-float32-TILE8"]["defects"].keys() == {"unwritten_output"}
    assert rows["broken_unguarded_store-float32-TILE8"]["defects"] == {"out_of_bounds_write": 1}
    assert rows["matmul_tiled_guarded-float32-TILE8"]["verdict"] == "correct"
    assert all(r["status"] == "as_expected" for r in rows.values())
    assert all(v["test"].startswith("suites/") for v in doc["verdicts"])
    assert "gemmcheck: verdicts" in proc.stdout
    # one line per root cause: the defect, the shape that first showed it, the checks it accounts for
    line = next(l for l in proc.stdout.splitlines() if l.startswith("broken_unguarded_store-float32-TILE8 "))
    assert "out_of_bounds_write  out_of_bounds_write (M" in line and "): 1 check " in line, line
    assert rows["broken_unguarded_store-float32-TILE8"]["causes"][0]["defect"] == "out_of_bounds_write"


def inst(name, dtype="float32", tile=16):
    return catalog.Instance(SPECS[name], dtype, tile)


def test_verdict_rows_say_whether_each_instantiation_is_what_the_catalog_declares():
    ref, race, oob, idle = (inst("matmul_tiled_guarded"), inst("broken_no_barriers"),
                            inst("broken_unguarded_loads"), inst("broken_floor_grid"))
    idle_race, unwritten_race = inst("broken_no_sync_after_dot"), inst("broken_no_sync_after_load")
    wrong = Finding(Defect.WRONG_VALUES, "exact-bits", "x", 3, (1, 2), {"ratio": np.float64(7.5)})
    verdicts = [
        Verdict.for_instance(ref, "M4xN4xK4", []),
        Verdict.for_instance(ref, "M33xN17xK65", [wrong]),
        Verdict.for_instance(race, "M1024", [Finding(Defect.SHARED_MEMORY_RACE, "racecheck", "y", 9)]),
        Verdict.for_instance(race, "M1024", [Finding(Defect.SHARED_MEMORY_RACE, "racecheck", "y", 9), wrong]),
        Verdict.for_instance(oob, "M33", [wrong]),
        Verdict.for_instance(idle_race, "M33", [wrong]),
        Verdict.for_instance(unwritten_race, "M33", [Finding(Defect.UNWRITTEN_OUTPUT, "poison", "z", 4)]),
    ]
    doc = json.loads(json.dumps(report.verdicts_document([ref, race, oob, idle, idle_race, unwritten_race],
                                                         verdicts),
                                default=report.json_default))
    assert set(doc) == {"schema_version", "generated", "run", "instances", "verdicts"}
    rows = {r["instance"]: r for r in doc["instances"]}
    assert set(rows[ref.id]) == {"kernel", "instance", "name_expression", "dtype", "tile", "expect",
                                 "verdict", "causes", "defects", "conventions", "notes", "checks",
                                 "checks_failed", "status", "why_not_checked"}
    assert (rows[ref.id]["verdict"], rows[ref.id]["status"], rows[ref.id]["checks_failed"]) == \
        ("defective", "unexpected", 1)
    assert rows[race.id]["defects"] == {"shared_memory_race": 2, "wrong_values": 1}
    assert rows[race.id]["status"] == "as_expected"
    # caught only as what the declared class explains (no hazards suite in the run): consistent,
    # not established; a defect the declared class does not explain is unexpected
    assert rows[oob.id]["status"] == rows[idle_race.id]["status"] == "symptoms_only"
    assert rows[unwritten_race.id]["status"] == "unexpected"
    assert report.summary_lines(doc["instances"])[-1] == (
        f"5 instantiations checked, 2 not as the catalog declares: {ref.id}, {unwritten_race.id}; 2 showed "
        f"only symptoms of the declared defect, which the suite that names it (hazards) did not "
        f"establish in this run: {oob.id}, {idle_race.id}")
    assert (rows[idle.id]["verdict"], rows[idle.id]["checks"]) == ("not_checked", 0)
    assert doc["verdicts"][1]["findings"][0]["details"]["ratio"] == 7.5
    table = report.verdict_table(doc["instances"])
    assert table[0].split() == ["instantiation", "expect", "verdict", "checks", "status"]
    # the race accounts for both of its checks (the wrong values it explains among them): one line
    assert any("shared_memory_race (M1024): 2 checks" in line for line in table)
    assert rows[race.id]["causes"] == [{"defect": "shared_memory_race", "shape": "M1024", "test": "",
                                        "checks": 2, "established": True}]


def test_the_controller_merges_the_verdicts_xdist_workers_wrote(tmp_path):
    import time

    race = inst("broken_no_barriers")
    found = Verdict.for_instance(race, "M64", [Finding(Defect.SHARED_MEMORY_RACE, "racecheck", "y", 9, (1, 2))])
    path = tmp_path / "verdicts.json"
    for worker, verdicts in (("gw0", [found]), ("gw1", [Verdict.for_instance(race, "M4", [])])):
        report.write_verdicts(report.worker_file(path, worker), report.verdicts_document([race], verdicts))
    stale = tmp_path / "verdicts-gw7.json"
    report.write_verdicts(stale, report.verdicts_document([race], [found]))
    os.utime(stale, (time.time() - 3600, time.time() - 3600))
    merged = report.read_worker_verdicts(path, since=time.time() - 60)
    assert [v.problem for v in merged] == ["M64", "M4"] and merged[0].findings == found.findings
    assert not report.worker_file(path, "gw0").exists() and stale.exists()


# -- categories -------------------------------------------------------------------------------

@pytest.mark.parametrize("defect", list(Defect), ids=[d.value for d in Defect])
def test_a_message_with_a_defect_prefix_lands_in_that_defects_category(defect):
    want = next(c.name for c in report.CATEGORIES if defect in c.defects)
    message = report.defect_message(defect, "kernel-float32-TILE16: 3 of 16 elements")
    for shown in (message, f"Failed: {message}", f"AssertionError: {message}\nassert False",
                  f"XFAIL expected\n\nFailed: {message}"):
        assert report.category_of(shown) == want, shown
    # several defects: the first category in CATEGORIES' order wins
    assert report.category_of(f"Failed: crash, {defect.value}: both") == "Crash or hang"


def test_a_defect_word_outside_the_prefix_does_not_categorize():
    assert report.category_of("Failed: expected wrong_values to be caught, saw none") is None
    assert report.category_of("AssertionError: assert 3 == 4") is None
    assert report.category_of("Skipped: no CUDA device: cudaErrorNoDevice", "skipped") == "Environment problems"


def test_allure3_and_allure2_read_the_regexes_the_way_python_does():
    node = shutil.which("node")
    if node is None:
        pytest.skip("needs node on PATH; not found")
    cases = [("Failed: shared_memory_race: x", True), ("Failed: saw shared_memory_race here", False),
             ("AssertionError: divergent_barrier, hang: y\nmore", True)]
    regex = next(c for c in report.CATEGORIES if c.name == "Shared-memory race").message_regex()
    script = ("const [rx, cases] = JSON.parse(process.argv[1]);"
              "console.log(JSON.stringify(cases.map(([m]) => new RegExp(rx).test(m))));")
    out = subprocess.run([node, "-e", script, json.dumps([regex, cases])], capture_output=True, text=True)
    python = [bool(report.category_of(m) == "Shared-memory race") for m, _ in cases]
    assert json.loads(out.stdout) == python == [True, False, False]
    hang = next(c for c in report.CATEGORIES if c.name == "Crash or hang").message_regex()
    out = subprocess.run([node, "-e", script, json.dumps([hang, cases])], capture_output=True, text=True)
    assert json.loads(out.stdout) == [False, False, True]


def test_a_broken_variant_that_passed_is_a_detector_gap():
    assert report.category_of("[XPASS(strict)] declared shared_memory_race: no barriers") == \
        "Broken variant not caught"


def test_the_instantiation_is_found_under_any_parameter_name():
    from types import SimpleNamespace


    race = inst("broken_no_barriers")
    item = SimpleNamespace(callspec=SimpleNamespace(params={"size": 1024, "matrix_row": race}))
    assert report.instance_of(item) == ("matrix_row", race)
    assert report.instance_of(SimpleNamespace()) is None


def test_defect_message_refuses_a_defect_that_does_not_exist():
    with pytest.raises(ValueError):
        report.defect_message("segfault", "x")


# -- heatmap ----------------------------------------------------------------------------------

def colours(png: bytes) -> np.ndarray:
    import io

    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).reshape(-1, 3)


def count(pixels, rgb, tol=10):
    return int(np.count_nonzero(np.all(np.abs(pixels.astype(int) - rgb) <= tol, axis=1)))


def test_the_heatmap_shows_unwritten_and_nan_cells_in_their_own_colours():
    error_map = np.full((48, 40), 0.01)
    error_map[32:, 16:32] = np.inf                 # a tile the floor grid never launched
    error_map[5, 7] = np.inf                       # a NaN where none belongs
    error_map[10:12, 0:40] = 50.0                  # a row band over the bound
    unwritten = np.zeros_like(error_map, dtype=bool)
    unwritten[32:, 16:32] = True
    pixels = colours(report.heatmap_png(error_map, 16, unwritten=unwritten, title="t"))
    assert count(pixels, (0, 0, 0)) > 5000         # the unwritten tile, filled (legend swatch is small)
    assert count(pixels, (255, 0, 255)) > 40       # the one NaN cell (~ 13 x 10 px) and its legend swatch


def test_a_clean_map_has_neither_colour_and_a_big_map_keeps_one_bad_element_visible():
    clean = colours(report.heatmap_png(np.full((40, 40), 0.5), 8, title="clean"))
    assert count(clean, (255, 0, 255)) < 200       # only the legend swatch
    big = np.zeros((2048, 2048))
    big[1500, 33] = np.inf
    pixels = colours(report.heatmap_png(big, 32, title="big"))
    assert count(pixels, (255, 0, 255)) > count(clean, (255, 0, 255)) + 1


def test_the_heatmap_refuses_a_map_that_is_not_a_matrix():
    with pytest.raises(ValueError, match="2-D"):
        report.heatmap_png(np.zeros(5), 4)


# -- kernel source, environment, executor -----------------------------------------------------

def test_the_source_excerpt_follows_the_entry_into_its_body_and_marks_the_flaw():
    text, where = report.kernel_source_excerpt(SPECS["broken_floor_phases"].source, "broken_floor_phases")
    assert where.startswith("broken_tiled.cu:")
    assert "flawed_body" in text and "#define FLAWED_KERNEL" in text
    marked = [line for line in text.splitlines() if line.startswith(">>")]
    assert marked and all("FLOOR_PHASES" in line for line in marked)
    text, _ = report.kernel_source_excerpt(SPECS["matmul_tiled"].source, "matmul_tiled")
    assert "__global__ void matmul_tiled(" in text and "flawed_body" not in text


def test_executor_is_written_only_under_ci():
    assert report.executor({}) is None
    gh = report.executor({"GITHUB_ACTIONS": "true", "GITHUB_REPOSITORY": "o/r", "GITHUB_RUN_ID": "9",
                          "GITHUB_RUN_NUMBER": "12", "GITHUB_WORKFLOW": "nightly"})
    assert gh["buildUrl"] == "https://github.com/o/r/actions/runs/9" and gh["buildOrder"] == 12
    assert report.executor({"CI": "true"})["name"] == "CI"


def test_properties_escape_what_would_break_a_line():
    text = report.properties_text({"gpu name": "none (no CUDA device: x=1)\nsecond"})
    assert text == "gpu\\ name=none (no CUDA device\\: x\\=1)\\nsecond\n"


def test_labels_come_from_the_suite_directory_and_the_test_name():
    assert report.feature_of("suites/hazards/test_races.py::test_x[a]") == "hazards"
    assert report.feature_of("tests/test_report.py::test_x") == "harness"
    assert report.story_of("test_every_output_element_is_written") == "every output element is written"


def test_the_hypothesis_reproduction_is_cut_from_its_report():
    text = ("E   wrong_values: x\nFalsifying example: test_f(\n    M=3,\n)\n"
            "You can reproduce this example by temporarily adding @reproduce_failure('6.1', b'AAE=') "
            "as a decorator on your test case\nother\n")
    got = report.hypothesis_reproduction(text)
    assert "Falsifying example: test_f(\n    M=3,\n)" in got and "@reproduce_failure('6.1', b'AAE=')" in got
    got = report.hypothesis_reproduction("Failing test case: test_f(\n    x=11,\n)\nExplanation:")
    assert got == "Failing test case: test_f(\n    x=11,\n)"
    assert report.hypothesis_reproduction("AssertionError: plain") == ""


# -- without allure ---------------------------------------------------------------------------

def test_without_allure_the_run_is_the_same_and_writes_no_results(tmp_path):
    block = tmp_path / "block"
    block.mkdir()
    for module in ("allure", "allure_commons"):
        (block / f"{module}.py").write_text("raise ImportError('allure is not installed here')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(block), os.environ.get("PYTHONPATH", "")]))
    root = tmp_path / "demo"
    proc = run_demo(root, "-p", "no:allure_pytest", env=env)
    assert "6 failed" not in proc.stdout and "5 failed, 3 passed, 1 skipped" in proc.stdout, proc.stdout
    assert not (root / "reports" / "allure-results").exists()
    doc = json.loads((root / "reports" / "verdicts.json").read_text())
    assert {r["status"] for r in doc["instances"]} == {"as_expected"}


def test_attachments_are_no_ops_when_allure_is_not_recording(monkeypatch):
    from gemmcheck.report import attach

    monkeypatch.setattr(attach, "allure_commons", None)
    assert not report.active()
    report.attach_judgement(object(), object())        # would raise if it touched them
    report.attach_png("x", b"not a png")
    report.parameter("M", 3)


def test_a_session_inside_a_recording_one_records_nothing(pytester):
    if not report.active():
        pytest.skip("this session is not recording allure results (-p no:allure_pytest)")
    pytester.makepyfile(test_inner="""
        from gemmcheck import report
        def test_inner():
            assert not report.active()
    """)
    result = pytester.runpytest()
    result.assert_outcomes(passed=1)
    assert not (pytester.path / "reports" / "allure-results").exists()
    assert report.active()                              # the outer session records again


# -- HTML -------------------------------------------------------------------------------------

def test_the_html_build_is_offline_single_file_without_analytics_and_keeps_history(demo, tmp_path):
    if not (report.ROOT / "node_modules" / ".bin" / "allure").exists():
        pytest.skip("needs the Allure 3 CLI: run `npm ci` in the repository root; not installed")
    root, _ = demo
    history = tmp_path / "history.jsonl"
    index = report.build_html(root / "reports" / "allure-results", tmp_path / "single",
                              history=history, single_file=True)
    html = index.read_text()
    assert "googletagmanager" not in html and "gtag(" not in html
    assert html.count("<script") >= 2                  # the app itself is still there
    assert len(history.read_text().splitlines()) == 1


def test_strip_analytics_removes_exactly_the_tag():
    page = ('<body><div id="app"></div>\n    <script async src="https://www.googletagmanager.com/gtag/'
            'js?id=G-X"></script>\n    <script>\n window.dataLayer = []; function gtag(){}\n gtag("js");'
            '\n    </script>\n    <script>window.allure = {}</script></body>')
    assert report.strip_analytics(page) == ('<body><div id="app"></div>\n    <script>window.allure = {}'
                                            '</script></body>')


# -- report paths -------------------------------------------------------------------------------

@pytest.fixture
def probe_run(pytester):
    # The project's conftest loads the plugin when it is not installed (PYTHONPATH=.).
    pytester.makeconftest((Path(__file__).parent.parent / "conftest.py").read_text())
    pytester.makepyfile(test_probe="def test_probe():\n    pass\n")
    return pytester


@pytest.mark.parametrize("option, shown", [
    ("--gemm-verdicts=/proc/nope/verdicts.json", "--gemm-verdicts /proc/nope/verdicts.json: cannot write there"),
    ("--alluredir=/proc/nope", "--alluredir /proc/nope: cannot write there"),
])
def test_an_unwritable_report_path_is_a_usage_error_before_any_test_runs(probe_run, option, shown):
    result = probe_run.runpytest(option, "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.strip()]
    assert len(errors) == 1 and shown in errors[0], result.stderr.lines
    assert "test_probe" not in result.stdout.str() and "passed" not in result.stdout.str()


def test_a_writable_report_path_is_accepted(probe_run, tmp_path):
    verdicts = tmp_path / "deep" / "er" / "verdicts.json"
    result = probe_run.runpytest(f"--gemm-verdicts={verdicts}", f"--alluredir={tmp_path / 'results'}",
                                 "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str() + result.stderr.str()
    result.assert_outcomes(passed=1)


def test_the_terminal_summary_counts_what_is_not_as_declared():
    rows = [{"instance": "a-float32-TILE16", "kernel": "a", "dtype": "float32", "tile": 16, "expect": "correct",
             "verdict": "correct", "defects": {}, "checks": 3, "status": "as_expected"},
            {"instance": "b-float32-TILE16", "kernel": "b", "dtype": "float32", "tile": 16,
             "expect": "wrong_values", "verdict": "correct", "defects": {}, "checks": 2, "status": "unexpected"},
            {"instance": "c-float32-TILE16", "kernel": "c", "dtype": "float32", "tile": 16, "expect": "correct",
             "verdict": "not_checked", "defects": {}, "checks": 0, "status": "not_checked"}]
    lines = report.summary_lines(rows)
    assert len(lines) == 4 and lines[0].split() == ["instantiation", "expect", "verdict", "checks", "status"]
    assert lines[-1] == "2 instantiations checked, 1 not as the catalog declares: b-float32-TILE16"
    assert report.summary_lines(rows[2:]) == ["no instantiation was checked (1 selected); see the skip "
                                              "reasons above"]


def test_the_one_table_formatter_aligns_words_left_and_numbers_right():
    from gemmcheck.tables import format_table

    lines = format_table(("kernel", "N", "TFLOP/s", "note"),
                         [("matmul_naive-float32-TILE32", 4096, "6.15", ""),
                          ("cuBLAS float32", 4096, "50.50", "model exceeded")])
    assert lines == ["kernel                       N     TFLOP/s  note",
                     "matmul_naive-float32-TILE32  4096     6.15",
                     "cuBLAS float32               4096    50.50  model exceeded"]
    assert format_table(("a", "b"), [("1", "x")], align_numbers=False) == ["a  b", "1  x"]
    with pytest.raises(ValueError, match=r"table row 1 has 1 cells, the header 2"):
        format_table(("a", "b"), [("only",)])
