"""pytest hooks of the report: allure on by default, labels and parameters per test,
evidence on failure, environment / categories / executor files, the verdict summary.

Logic lives in gemmcheck.report; this module only wires it to pytest.
"""

from __future__ import annotations

import datetime
import functools
import time
from pathlib import Path

import pytest

from gemmcheck import backends, report
from gemmcheck.contract import catalog
from gemmcheck.schedule import rerun

DEFAULT_RESULTS = Path("reports") / "allure-results"
DEFAULT_VERDICTS = Path("reports") / "verdicts.json"
INSTANCE_PARAMS = report.INSTANCE_PARAMS


class _State:
    """Per-session report state, kept in config.stash."""

    def __init__(self, recording: bool, verdicts_path: Path):
        self.recording = recording
        self.verdicts_path = verdicts_path
        self.results_dir: Path | None = None
        self.verdicts_seen = 0
        self.ran_instances = False
        self.summary: list[dict] = []


STATE = pytest.StashKey[_State]()
STARTED = pytest.StashKey[float]()   # when the session started: older worker files are stale
LABELLED = pytest.StashKey[bool]()   # an item's allure labels are on it (_label)
# The gemmcheck option group's options as declared (pytest Arguments: dest, default, names), for
# the reproduce command: the live list of the latest parser, so options the other plugins add
# after this one are in it (every session of a process declares the same ones).
_DECLARED: list = []


def pytest_addoption(parser: pytest.Parser) -> None:
    global _DECLARED
    group = parser.getgroup("gemmcheck")
    group.addoption("--gemm-verdicts", metavar="PATH", default=None,
                    help=f"where the verdict summary is written (default: {DEFAULT_VERDICTS} "
                         "under the rootdir)")
    _DECLARED = group.options


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    # Runs before allure-pytest's pytest_configure, which reads --alluredir.
    has_allure = config.pluginmanager.hasplugin("allure_pytest") and report.installed()
    nested = report.nested_in_recording_session()
    opt = config.option
    if has_allure and not nested and getattr(opt, "allure_report_dir", None) is None:
        opt.allure_report_dir = str(config.rootpath / DEFAULT_RESULTS)
        # One run, one report (trends live in the HTML history); under pytest-xdist only the
        # controller cleans, or the workers would delete each other's results (and a re-run
        # child, rerun.py, the results of the session that started it).
        opt.clean_alluredir = rerun.runner_id(config) is None
    verdicts = Path(opt.gemm_verdicts) if opt.gemm_verdicts else config.rootpath / DEFAULT_VERDICTS
    _refuse_unwritable(config, verdicts)
    recording = bool(has_allure and not nested and getattr(opt, "allure_report_dir", None))
    state = _State(recording, verdicts)
    if recording:
        state.results_dir = Path(opt.allure_report_dir).resolve()
    config.stash[STATE] = state
    report.start_session(recording)
    report.start_reruns(functools.partial(_rerun_command, config))


def _rerun_command(config: pytest.Config, nodeid: str) -> str:
    """report.rerun_command for this session: its catalogs, backend and profile (as the core
    plugin resolved them) and every other option that changes what a test does."""
    gemm = _gemm(config)
    if gemm is None:
        return report.rerun_command_line(nodeid, [], root=config.rootpath, cwd=config.invocation_params.dir)
    options = report.rerun_options(
        _DECLARED, lambda dest: config.getoption(dest, None), catalogs=gemm.catalogs,
        catalog_names={name: paths[0] for name, paths in catalog.NAMED.items() if len(paths) == 1},
        backend=backends.resolve(gemm.backend_name), profile=gemm.profile.name, root=config.rootpath)
    return report.rerun_command_line(nodeid, options, root=config.rootpath, cwd=config.invocation_params.dir)


def _refuse_unwritable(config: pytest.Config, verdicts: Path) -> None:
    """A report path the run cannot write is a usage error now, not a traceback after every test."""
    why = report.unwritable_file(verdicts)
    if why:
        raise pytest.UsageError(f"--gemm-verdicts {verdicts}: cannot write there ({why}); "
                                "give a writable path")
    alluredir = getattr(config.option, "allure_report_dir", None)
    why = report.unwritable_dir(Path(alluredir)) if alluredir else None
    if why:
        raise pytest.UsageError(f"--alluredir {alluredir}: cannot write there ({why}); "
                                "give a writable directory")


def pytest_unconfigure(config: pytest.Config) -> None:
    if STATE in config.stash:
        report.end_session()
        report.end_reruns()


# allure-pytest's options that select tests by label at collection
ALLURE_SELECTION = ("allure_epics", "allure_features", "allure_stories", "allure_ids", "allure_severities",
                    "allure_labels")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # tryfirst: before allure-pytest selects by label (--allure-features correctness works).
    # Without such a selection each test is labelled when it runs (_start; allure-pytest reads
    # the labels at teardown): labelling 4,300 tests here took 0.4 s of every xdist worker's start.
    state = config.stash[STATE]
    if state.recording and any(getattr(config.option, name, None) for name in ALLURE_SELECTION):
        for item in items:
            _label(item)


def _label(item: pytest.Item) -> None:
    """Mark `item` with its allure labels (report.labels_for), once."""
    if item.stash.get(LABELLED, False):
        return
    item.stash[LABELLED] = True
    have = {m.kwargs.get("label_type") for m in item.iter_markers("allure_label")}
    for name, value in report.labels_for(item):
        if name in have and name in ("severity", "feature", "story", "epic"):
            continue   # the test's own @allure.* decorator wins
        item.add_marker(pytest.mark.allure_label(value, label_type=name))


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_setup(item: pytest.Item):
    # Before any other setup: a skip mark (no GPU) ends setup early, and the parameters
    # should be on the skipped test too.
    _start(item)
    yield


def _start(item: pytest.Item) -> None:
    report.start_test()
    state = item.config.stash[STATE]
    found = report.instance_of(item)
    if found:
        state.ran_instances = True
    state.verdicts_seen = len(_verdict_log(item.config).verdicts) if _verdict_log(item.config) else 0
    if not state.recording:
        return
    _label(item)
    if not found:
        return
    fixture, inst = found
    # Replace the Instance's repr (long, and holding a local path) with its id; keep it out of
    # the history id, which the readable parameters below carry.
    report.parameter(fixture, inst.id)
    gemm = _gemm(item.config)
    for name, value, in_history in (("kernel", inst.spec.name, True),
                                    ("instantiation", inst.name_expression, True),
                                    ("dtype", inst.dtype, True), ("TILE", inst.declared_tile, True),
                                    ("profile", gemm.profile.name if gemm else "", False)):
        if value is not None:   # (a kernel without a tile has no TILE)
            report.parameter(name, value, in_history=in_history)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_fixture_setup(fixturedef, request):
    # Outside allure-pytest's own wrapper: its teardowns are recorded by then.
    yield
    state = request.config.stash.get(STATE, None)
    if state is not None and state.recording:
        report.name_teardowns(fixturedef)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    rep = outcome.get_result()
    state = item.config.stash[STATE]
    if rep.when != "call":
        return
    log = _verdict_log(item.config)
    new = log.verdicts[state.verdicts_seen:] if log else []
    for verdict in new:
        if not verdict.test:
            verdict.test = item.nodeid
    if not state.recording:
        return
    defects = sorted({f.defect.value for v in new for f in v.findings})
    if defects:
        report.label("defect", *defects)
    if rep.failed and "[XPASS(strict)]" in str(rep.longrepr):
        report.label("kill", "missed")   # a broken variant no check caught
    if not (rep.failed or hasattr(rep, "wasxfail")):
        return
    notes = getattr(call.excinfo.value, "__notes__", []) if call.excinfo else []
    sections = [text for _, text in rep.sections]   # hypothesis prints the example to stdout
    repro = report.hypothesis_reproduction("\n".join([*notes, rep.longreprtext, *sections]))
    if repro:
        report.attach_hypothesis_reproduction(repro)
    report.attach_text("reproduce", report.rerun_command(item.nodeid) + "\n")
    found = report.instance_of(item)
    if found:
        if not any(n.startswith("kernel source") for n in report.attached_names()):
            report.attach_instance_evidence(found[1])


def _gemm(config: pytest.Config):
    from gemmcheck.pytest_plugin import session

    return config.stash.get(session.GEMM_CONFIG, None)


def _verdict_log(config: pytest.Config):
    gemm = _gemm(config)
    return gemm.verdicts if gemm else None


def pytest_sessionfinish(session: pytest.Session, exitstatus) -> None:
    config = session.config
    state = config.stash.get(STATE, None)
    gemm = _gemm(config)
    if state is None or gemm is None:
        return
    if state.recording and state.results_dir is not None:
        report.write_result_metadata(state.results_dir, gemm)
    worker = rerun.runner_id(config)
    verdicts = gemm.verdicts.verdicts
    if not rerun.is_xdist_worker(config):   # the workers' parts, and a re-run child's
        verdicts = [*verdicts, *report.read_worker_verdicts(state.verdicts_path, session.config.stash[STARTED])]
    if verdicts or state.ran_instances:
        info = report.run_info(gemm, exitstatus)
        # the overview tells this run's kill_matrix.json and performance/ from an earlier run's
        info["started"] = _iso(session.config.stash[STARTED])
        document = report.verdicts_document(gemm.instances("any_kernel"), verdicts, run_info=info,
                                            skips=gemm.skips)
        if worker is not None:   # pytest-xdist or a re-run child: the session merges the files
            report.write_verdicts(report.worker_file(state.verdicts_path, worker), document)
            return
        report.write_verdicts(state.verdicts_path, document)
        state.summary = document["instances"]
        if state.recording:
            report.attach_session_text("verdict summary",
                                       "\n".join(report.verdict_table(document["instances"])) + "\n")


def _iso(timestamp: float) -> str:
    return datetime.datetime.fromtimestamp(timestamp, datetime.timezone.utc).isoformat(timespec="seconds")


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[STARTED] = time.time() - 1


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    state = config.stash.get(STATE, None)
    rows = state.summary if state is not None else None
    if not rows:
        return
    terminalreporter.section("gemmcheck: verdicts")
    for line in report.summary_lines(rows):
        terminalreporter.write_line(line)
    terminalreporter.write_line(f"verdicts: {state.verdicts_path}")
    if state.results_dir is not None:
        terminalreporter.write_line(f"allure results: {state.results_dir} "
                                    "(HTML: scripts/build_report.sh)")
