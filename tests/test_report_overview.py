"""The report's first screen, the kernel overview: one row per instantiation, failing first,
each root cause linked to the test that established it; the kill matrix, the performance table
and the environment; what changed since the previous run; and fixtures named for what they do.

The end-to-end tests run the suites on examples/bad/catalog.toml on the CPU simulator (a
correct kernel, one that does not compile, one that crashes, one that hangs) in a copy of the
suites, build the report, and open it in headless Chromium where it is installed."""

import base64
import json
import os
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace

import pytest

from gemmcheck import report
from gemmcheck.report import overview as ov, overview_history, overview_html

ROOT = Path(__file__).resolve().parent.parent
BAD = ROOT / "examples" / "bad" / "catalog.toml"
ALLURE_CLI = ROOT / "node_modules" / ".bin" / "allure"


def row(instance, verdict="correct", status="as_expected", causes=(), expect="correct", **extra):
    kernel = instance.split("-")[0]
    return {"kernel": kernel, "instance": instance, "name_expression": f"{kernel}<float, 8>", "dtype": "float32",
            "tile": 8, "expect": expect, "verdict": verdict, "causes": list(causes),
            "defects": {c["defect"]: c["checks"] for c in causes}, "checks": 3, "status": status, **extra}


def cause(defect, test, shape="M33xN17xK65", checks=1):
    return {"defect": defect, "shape": shape, "test": test, "checks": checks, "established": True}


def write_run(reports: Path, rows, *, generated="2026-12-01T03:00:00+00:00", started=None, results=()):
    """A reports/ directory as a run leaves it: verdicts.json and allure results."""
    (reports / "allure-results").mkdir(parents=True, exist_ok=True)
    run = {"profile": "ci", "backend": "auto", "catalogs": ["c.toml"], "exit_status": 1}
    if started:
        run["started"] = started
    (reports / "verdicts.json").write_text(json.dumps(
        {"schema_version": 1, "generated": generated, "run": run, "instances": rows, "verdicts": []}))
    for uuid, name, path in results:
        (reports / "allure-results" / f"{uuid}-result.json").write_text(json.dumps(
            {"uuid": uuid, "name": name, "titlePath": path, "status": "failed", "stop": 1}))
    (reports / "allure-results" / "environment.properties").write_text(report.properties_text(
        {"runs_on": "CPU simulator (g++ 12.2.0)", "gpu": "none (no CUDA device: none here)", "cupy": "14.2.0"}))
    return reports


class _Page(HTMLParser):
    """The overview's kernel rows: each row's text and its cause links."""

    def __init__(self):
        super().__init__()
        self.rows, self._row, self._in_table = [], None, False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table" and attrs.get("id") == "gco-kernels":
            self._in_table = True
        elif tag == "tr" and self._in_table and "data-instance" in attrs:
            self._row = {"instance": attrs["data-instance"], "status": attrs["data-status"], "text": "", "links": []}
            self.rows.append(self._row)
        elif tag == "a" and self._row is not None:
            self._row["links"].append(attrs.get("href"))

    def handle_endtag(self, tag):
        if tag == "table":
            self._in_table, self._row = False, None

    def handle_data(self, data):
        if self._row is not None:
            self._row["text"] += data + " "


def kernel_rows(page: str) -> list[dict]:
    parser = _Page()
    parser.feed(page)
    return parser.rows


# -- links into the report --------------------------------------------------------------------

def test_a_result_is_linked_by_the_md5_of_its_uuid_under_its_pytest_node_id(tmp_path):
    results = tmp_path / "r"
    results.mkdir()
    for uuid, name, path, stop in (
            ("u-1", "test_x[k-float32-TILE8]", ["suites", "correctness", "test_a.py"], 5),
            ("u-2", "test_y", ["suites", "hazards", "test_b.py", "TestGroup"], 5),
            ("u-3", "test_x[k-float32-TILE8]", ["suites", "correctness", "test_a.py"], 9)):   # ran again
        (results / f"{uuid}-result.json").write_text(json.dumps(
            {"uuid": uuid, "name": name, "titlePath": path, "stop": stop}))
    assert ov.report_ids(results) == {
        "suites/correctness/test_a.py::test_x[k-float32-TILE8]": "1b9562979bebef5404a6f8227caa8c32",
        "suites/hazards/test_b.py::TestGroup::test_y": "cdc67508f4285096a63458367f70e3cd"}
    assert ov.report_id("u-3") == "1b9562979bebef5404a6f8227caa8c32"


# -- rows -------------------------------------------------------------------------------------

def test_failing_rows_come_first_then_caught_variants_then_correct_then_unchecked(tmp_path):
    rows = [row("a-float32-TILE8"), row("b-float32-TILE8", "not_checked", "not_checked"),
            row("c-float32-TILE8", "defective", "as_expected", [cause("wrong_values", "t::c")], expect="wrong_values"),
            row("d-float32-TILE8", "defective", "unexpected", [cause("crash", "t::d")]),
            row("e-float32-TILE8", "defective", "symptoms_only", [cause("wrong_values", "t::e")],
                expect="shared_memory_race")]
    write_run(tmp_path, rows)
    overview = ov.collect(tmp_path / "allure-results", tmp_path)
    assert [r["instance"].split("-")[0] for r in overview.rows] == ["d", "e", "c", "a", "b"]


def test_the_rate_shown_is_the_one_at_the_largest_N_and_a_refused_one_is_none():
    perf = {"kernels": {
        "k-float32-TILE32-N1024": {"tflops": 10.0}, "k-float32-TILE32-N4096": {"tflops": 20.0},
        "w-float32-TILE32-N4096": {"first_check_ratio": 9.0},                       # wrong: not timed
        "x-float32-TILE32-N4096": {"tflops": 99.0, "impossible": True},              # beats the roofline
        "y-float32-TILE32-N4096": {"tflops": 5.0, "last_check_ratio": 3.0, "last_check_nans": 0}}}
    assert ov.best_tflops(perf) == {"k-float32-TILE32": {"tflops": 20.0, "n": 4096}}


def test_a_kill_matrix_or_perf_summary_older_than_the_run_is_named_not_shown(tmp_path):
    write_run(tmp_path, [row("a-float32-TILE8")], started="2026-12-01T02:00:00+00:00")
    (tmp_path / "kill_matrix.json").write_text(json.dumps({"settings": {}, "rows": []}))
    (tmp_path / "performance").mkdir()
    (tmp_path / "performance" / "perf.json").write_text(json.dumps({"device": "H200", "kernels": {}}))
    old = _stamp("2026-11-30T02:00:00+00:00")
    os.utime(tmp_path / "kill_matrix.json", (old, old))
    overview = ov.collect(tmp_path / "allure-results", tmp_path)
    assert overview.matrix is None and overview.perf is not None      # perf.json is this run's
    assert overview.earlier == ["kill_matrix.json"]
    assert "kill_matrix.json left by an earlier run" in overview_html.matrix_section(overview)


def _stamp(iso):
    import datetime

    return datetime.datetime.fromisoformat(iso).timestamp()


# -- the page ---------------------------------------------------------------------------------

def test_the_page_names_each_verdict_and_links_each_cause_to_its_test(tmp_path):
    crash_test = "suites/correctness/test_blas_rules.py::test_K0[crashes-float32-TILE8]"
    write_run(tmp_path, [row("good-float32-TILE8"),
                         row("crashes-float32-TILE8", "defective", "unexpected", [cause("crash", crash_test, "launch")]),
                         row("racy-float32-TILE8", "defective", "as_expected",
                             [cause("shared_memory_race", "t::gone", checks=4)], expect="shared_memory_race")],
              results=[("u-crash", "test_K0[crashes-float32-TILE8]", ["suites", "correctness", "test_blas_rules.py"])])
    page = overview_html.render(ov.collect(tmp_path / "allure-results", tmp_path))
    rows = {r["instance"]: r for r in kernel_rows(page)}
    assert list(rows) == ["crashes-float32-TILE8", "racy-float32-TILE8", "good-float32-TILE8"]
    assert rows["crashes-float32-TILE8"]["links"] == [f"#{ov.report_id('u-crash')}"]
    assert "crash at launch" in " ".join(rows["crashes-float32-TILE8"]["text"].split())
    assert "not as declared" in rows["crashes-float32-TILE8"]["text"]
    # a cause whose test has no result here is named, not linked
    assert rows["racy-float32-TILE8"]["links"] == [] and "explains 4 checks" in rows["racy-float32-TILE8"]["text"]
    assert "correct" in rows["good-float32-TILE8"]["text"]
    assert "1 correct, 2 defective" in page and "1 not as the catalog declares" in page
    assert "CPU simulator (g++ 12.2.0)" in page and "CuPy" in page
    assert "not measured in this run" in page and "no kill matrix in this run" in page


def test_the_page_shows_the_kill_matrix_and_the_performance_table_with_the_roofline(tmp_path):
    write_run(tmp_path, [row("k-float32-TILE32")])
    (tmp_path / "kill_matrix.json").write_text(json.dumps({"settings": {"detectors": "hardware", "backend": "cupy",
                                                                        "sanitizer": "/usr/bin/compute-sanitizer"},
        "rows": [{"instance": "k-float32-TILE32", "declared": "correct", "plain": {"label": "none"},
                  "with_sanitizer": {"label": "none"}, "status": "pass", "why": "no finding", "seconds": 2.0}]}))
    perf = tmp_path / "performance"
    perf.mkdir()
    (perf / "perf.json").write_text(json.dumps({"device": "NVIDIA H200", "cublas": {"float32-N4096": {"tflops": 40.0}},
                                                "kernels": {"k-float32-TILE32-N4096": {"tflops": 20.0, "noise": 0.5,
                                                                                          "spread": 0.0123}}}))
    (perf / "summary.txt").write_text("kernel  N  TFLOP/s\n")
    png = b"\x89PNG\r\n\x1a\n-roofline-"
    (perf / "roofline.png").write_bytes(png)
    page = overview_html.render(ov.collect(tmp_path / "allure-results", tmp_path))
    assert "<th>plain detectors</th><th>with sanitizer</th>" in page
    assert "20.00" in page and "50.0" in page                       # TFLOP/s and % of cuBLAS
    assert "<th>spread</th>" in page and "1.23%" in page and "50.00%" not in page   # IQR / median, not stdev / mean
    assert base64.b64encode(png).decode() in page
    assert "20.00 N=4096" in " ".join(kernel_rows(page)[0]["text"].split())   # the rate in the kernel's row


def test_a_merged_run_keeps_every_parts_roofline_where_the_overview_finds_it(tmp_path):
    from gemmcheck.report import merge

    parts = [tmp_path / f"shard-{n}" for n in (1, 2, 3)]
    for n in (1, 3):
        (parts[n - 1] / "performance").mkdir(parents=True)
        (parts[n - 1] / "performance" / "roofline.png").write_bytes(b"png %d" % n)
    merge.copy_rooflines(parts, tmp_path / "merged")
    assert [png for _, png in ov.rooflines(tmp_path / "merged" / "performance")] == [b"png 1", b"png 3"]
    merge.copy_rooflines(parts[:1], tmp_path / "one")
    assert (tmp_path / "one" / "performance" / "roofline.png").read_bytes() == b"png 1"


# -- trends -----------------------------------------------------------------------------------

def test_the_history_keeps_one_line_per_run_and_flags_what_changed(tmp_path):
    history = tmp_path / "overview-history.jsonl"

    def build(generated, verdict, causes, tflops):
        rows = [row("k-float32-TILE32", verdict, "as_expected" if verdict == "correct" else "unexpected",
                    [cause(d, "t::x") for d in causes], performance={"tflops": tflops, "n": 4096})]
        overview = SimpleNamespace(generated=generated, run={"profile": "nightly"}, rows=rows)
        return overview_history.record(history, overview_history.entry(overview)), rows[0]

    assert build("night-1", "correct", [], 20.0)[0] is None
    previous, now = build("night-2", "defective", ["wrong_values"], 18.0)
    assert previous["generated"] == "night-1"
    flags = overview_history.changes(overview_history.entry_row(now), previous["rows"]["k-float32-TILE32"])
    assert flags == ["verdict was correct", "TFLOP/s -10.0%"]
    # the same run built again is not a new run: still compared with the night before
    assert build("night-2", "defective", ["wrong_values"], 18.0)[0]["generated"] == "night-1"
    assert [json.loads(line)["generated"] for line in history.read_text().splitlines()] == ["night-1", "night-2"]
    same = overview_history.entry_row(now)
    assert overview_history.changes(same, dict(same, tflops=18.5)) == []   # within 5%: not flagged
    assert overview_history.changes(same, None) == ["new"]


def test_the_history_lives_beside_allures_and_is_named_after_it():
    assert overview_history.history_path(Path("reports/allure-history.jsonl")) == Path("reports/overview-history.jsonl")
    assert overview_history.history_path(Path("/h/nightly.jsonl")) == Path("/h/nightly-overview.jsonl")


def test_the_page_shows_the_previous_verdict_and_rate_beside_the_current(tmp_path):
    history = tmp_path / "overview-history.jsonl"
    write_run(tmp_path, [row("k-float32-TILE32")], generated="night-1")
    first = ov.collect(tmp_path / "allure-results", tmp_path)
    overview_history.record(history, overview_history.entry(first))
    write_run(tmp_path, [row("k-float32-TILE32", "defective", "unexpected", [cause("wrong_values", "t::x")])],
              generated="night-2")
    second = ov.collect(tmp_path / "allure-results", tmp_path)
    second.previous = overview_history.record(history, overview_history.entry(second))
    page = overview_html.render(second)
    assert "previous run (night-1)" in page
    assert "verdict was correct" in kernel_rows(page)[0]["text"]


# -- environment ------------------------------------------------------------------------------

def test_environment_properties_read_back_what_was_written():
    values = {"runs_on": "CPU simulator (g++ 12.2.0)", "g++": "g++ 12.2.0", "odd key": "a=b: c #d !e\nf\\g"}
    assert report.read_properties(report.properties_text(values)) == values


def test_the_environment_leads_with_what_ran_the_kernels_and_the_compilers():
    class Simulated:
        simulated = True

        def describe(self):
            return "cpu-sim (g++ 12.2.0)"

    gemm = SimpleNamespace(profile=SimpleNamespace(name="dev"), backend=Simulated(), backend_name="auto",
                           backend_error=None, catalogs=["examples/bad/catalog.toml"])
    env = report.environment(gemm)
    assert list(env)[0] == "runs_on" and env["runs_on"].startswith("CPU simulator (g++ ")
    assert {"nvrtc", "nvcc", "g++", "cupy", "profile", "catalog"} <= set(env)
    assert list(env).index("catalog") < list(env).index("numpy")


# -- Allure's categories group by kernel ----------------------------------------------------------

def test_a_test_of_a_whole_source_is_labelled_with_each_of_its_kernels():
    from gemmcheck.contract import catalog

    instances = tuple(i for spec in catalog.load(BAD) for i in spec.instances())
    item = SimpleNamespace(nodeid="suites/compile/test_builds.py::test_every_instantiation_of_the_source_builds[x.cu]",
                           name="test_every_instantiation_of_the_source_builds[x.cu]",
                           originalname="test_every_instantiation_of_the_source_builds",
                           callspec=SimpleNamespace(params={"kernel_source": instances[:2]}))
    kernels = [v for k, v in report.labels_for(item) if k == "kernel"]
    assert kernels == [i.spec.name for i in instances[:2]] and len(set(kernels)) == 2


# -- teardowns --------------------------------------------------------------------------------

TEARDOWNS = """
import pytest

@pytest.fixture
def plain():
    return 1

@pytest.fixture
def yielding():
    yield 2

@pytest.fixture
def with_lambda(request):
    request.addfinalizer(lambda: None)
    return 3

def close_the_file():
    pass

@pytest.fixture
def with_named(request):
    request.addfinalizer(close_the_file)
    return 4

def test_uses_them(plain, yielding, with_lambda, with_named):
    pass
"""


def fixture_names(results: Path) -> list[str]:
    """Every fixture's setup and teardown name, and every step's, in allure results."""
    names = []

    def steps(items):
        for step in items or []:
            names.append(step["name"])
            steps(step.get("steps"))

    for path in results.glob("*-container.json"):
        data = json.loads(path.read_text())
        for part in data.get("befores", []) + data.get("afters", []):
            names.append(part["name"])
            steps(part.get("steps"))
    for path in results.glob("*-result.json"):
        steps(json.loads(path.read_text()).get("steps"))
    return names


def test_teardowns_are_named_for_what_they_do(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))          # this tree's plugin in the child
    pytester.makeconftest((ROOT / "conftest.py").read_text())
    pytester.makepyfile(test_teardowns=TEARDOWNS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--alluredir={pytester.path / 'allure'}")
    result.assert_outcomes(passed=1)
    names = fixture_names(pytester.path / "allure")
    assert sorted(n for n in names if "teardown" in n or "::" in n) == [
        "with_lambda (teardown)", "with_named::close_the_file", "yielding (teardown)"], names
    assert {"plain", "yielding", "with_lambda", "with_named"} <= set(names)


# -- end to end, on the CPU simulator ------------------------------------------------------------

@pytest.fixture(scope="module")
def bad_run(tmp_path_factory):
    """The suites on examples/bad/catalog.toml on cpu-sim, in a copy of the suites so that every
    report file (kill_matrix.json too) lands in the copy's reports/."""
    root = tmp_path_factory.mktemp("bad-run")
    shutil.copytree(ROOT / "suites", root / "suites", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("conftest.py", "pytest.ini"):
        shutil.copy(ROOT / name, root / name)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "suites/",
                           "--gemm-backend=cpu-sim", "--gemm-hang-timeout=2", f"--gemm-catalog={BAD}"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    return root / "reports"


def test_a_run_on_the_simulator_records_no_lambda_in_any_fixture_or_step(bad_run):
    names = fixture_names(bad_run / "allure-results")
    assert "matrix_row" in names and "backend" in names          # fixtures are recorded at all
    assert [n for n in names if "<lambda>" in n or n.rpartition("::")[2].isdigit()] == []


def test_the_build_failure_of_a_source_is_filed_under_its_kernel(bad_run):
    for path in (bad_run / "allure-results").glob("*-result.json"):
        result = json.loads(path.read_text())
        if result["name"] == "test_every_instantiation_of_the_source_builds[does_not_compile.cu]":
            assert {"name": "kernel", "value": "does_not_compile"} in result["labels"]
            return
    pytest.fail("no result of the build test of does_not_compile.cu")


def needs_allure_cli():
    if not ALLURE_CLI.exists():
        pytest.skip("needs the Allure 3 CLI: run `npm ci` in the repository root; not installed")


@pytest.fixture(scope="module")
def bad_report(bad_run, tmp_path_factory):
    needs_allure_cli()
    out = tmp_path_factory.mktemp("bad-report")
    index = report.build_html(bad_run / "allure-results", out / "single", history=out / "history.jsonl",
                              single_file=True)
    return index, bad_run


def expected_rows(reports: Path) -> dict[str, dict]:
    return {r["instance"]: r for r in json.loads((reports / "verdicts.json").read_text())["instances"]}


def test_the_report_of_the_bad_catalog_opens_on_its_kernels_with_links_to_the_tests_that_showed_them(bad_report):
    index, reports = bad_report
    rows = {r["instance"]: r for r in kernel_rows(index.read_text())}
    expected = expected_rows(reports)
    assert list(rows)[-1] == "good-float32-TILE8" and set(rows) == set(expected)
    ids = ov.report_ids(reports / "allure-results")
    for instance, defect in (("does_not_compile", "compile_error"), ("crashes", "crash"), ("hangs", "hang")):
        shown, want = rows[f"{instance}-float32-TILE8"], expected[f"{instance}-float32-TILE8"]
        assert defect in shown["text"] and shown["status"] == "unexpected", shown
        assert shown["links"] == [f"#{ids[want['causes'][0]['test']]}"], shown
    assert "none" in rows["good-float32-TILE8"]["text"] and rows["good-float32-TILE8"]["links"] == []
    assert (index.parent.parent / "history-overview.jsonl").is_file()   # beside history.jsonl


@pytest.fixture
def browser():
    """Skips, before the suites run, where there is no browser to open the report in."""
    if shutil.which(os.environ.get("CHROMIUM", "chromium")) is None:
        pytest.skip("needs chromium on PATH (apt-get install -y chromium); not found")
    if shutil.which("node") is None:
        pytest.skip("needs node on PATH; not found")


def test_in_a_browser_the_overview_is_the_first_screen_and_each_cause_opens_its_test(browser, bad_report, tmp_path):
    index, reports = bad_report
    out = tmp_path / "record.json"
    proc = subprocess.run(["node", "--experimental-websocket", str(ROOT / "scripts" / "overview_in_browser.mjs"),
                           str(index.parent), str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = json.loads(out.read_text())
    assert record["opened"]["panelShown"] and record["opened"]["coversViewport"], record["opened"]
    assert not record["opened"]["openerShown"]
    expected = expected_rows(reports)
    shown = {r["instance"]: r for r in record["rows"]}
    assert set(shown) == set(expected)
    for instance, want in expected.items():
        words = " ".join(shown[instance]["text"].split())
        assert want["verdict"] in words, (instance, words)
        assert [c["text"] for c in shown[instance]["causes"]] == [c["defect"] for c in want["causes"]]
    # each link opens the test that established the cause (Allure shows the test's name)
    opened = {link["href"]: link for link in record["links"]}
    for instance, want in expected.items():
        for c, link in zip(want["causes"], shown[instance]["causes"]):
            page = opened[link["href"]]
            assert not page["panelShown"] and page["openerShown"], page
            assert c["test"].rpartition("::")[2] in page["app"], (c["test"], page["app"][:400])
    assert not record["allTests"]["panelShown"] and "correctness" in record["allTests"]["app"]
    assert record["reopened"]["panelShown"]
