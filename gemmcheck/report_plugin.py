"""pytest hooks of the report: allure on by default, labels and parameters per test,
evidence on failure, environment / categories / executor files, the verdict summary.

Logic lives in gemmcheck.report; this module only wires it to pytest.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from gemmcheck import report
from gemmcheck.catalog import Instance

DEFAULT_RESULTS = Path("reports") / "allure-results"
DEFAULT_VERDICTS = Path("reports") / "verdicts.json"
INSTANCE_PARAMS = ("reference", "broken", "any_kernel")

# Suite directory -> allure feature; and how much a failure there matters.
FEATURES = {"compile": "compile", "correctness": "correctness", "hazards": "hazards",
            "performance": "performance"}
SEVERITY = {"correctness": "critical", "hazards": "critical", "compile": "normal",
            "performance": "minor", "harness": "minor"}
# Stories that read better than the test's name; any other test's story is its name in words.
STORIES = {
    "test_worked_example_bit_for_bit": "exact result: the seed's worked example",
    "test_partial_sums_after_the_first_phase": "exact result: the seed's worked example",
    "test_seed_matrix_is_the_exact_product": "exact result: the seed's worked example",
}


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


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gemmcheck")
    group.addoption("--gemm-verdicts", metavar="PATH", default=None,
                    help=f"where the verdict summary is written (default: {DEFAULT_VERDICTS} "
                         "under the rootdir)")


def _nested_in_recording_session() -> bool:
    """allure_commons' plugin manager is process-global: a session started inside another
    (pytester's in-process runs) must not write into the outer session's results."""
    if report.allure_commons is None:
        return False
    from allure_commons.logger import AllureFileLogger

    return any(isinstance(p, AllureFileLogger)
               for p in report.allure_commons.plugin_manager.get_plugins())


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    # Runs before allure-pytest's pytest_configure, which reads --alluredir.
    has_allure = config.pluginmanager.hasplugin("allure_pytest") and report.allure is not None
    nested = _nested_in_recording_session()
    opt = config.option
    if has_allure and not nested and getattr(opt, "allure_report_dir", None) is None:
        opt.allure_report_dir = str(config.rootpath / DEFAULT_RESULTS)
        # One run, one report (trends live in the HTML history); under pytest-xdist only the
        # controller cleans, or the workers would delete each other's results.
        opt.clean_alluredir = not hasattr(config, "workerinput")
    recording = bool(has_allure and not nested and getattr(opt, "allure_report_dir", None))
    verdicts = Path(opt.gemm_verdicts) if opt.gemm_verdicts else config.rootpath / DEFAULT_VERDICTS
    state = _State(recording, verdicts)
    if recording:
        state.results_dir = Path(opt.allure_report_dir).resolve()
    config.stash[STATE] = state
    report._recording.append(recording)


def pytest_unconfigure(config: pytest.Config) -> None:
    if STATE in config.stash and report._recording:
        report._recording.pop()


def _instance(item: pytest.Item) -> tuple[str, Instance] | None:
    """The catalog instantiation a test runs on: whichever parameter holds an Instance
    (reference, broken, any_kernel, and the hazards suite's own, direct or indirect)."""
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return None
    names = [n for n in INSTANCE_PARAMS if n in callspec.params]
    names += [n for n in callspec.params if n not in INSTANCE_PARAMS]
    for name in names:
        if isinstance(callspec.params[name], Instance):
            return name, callspec.params[name]
    return None


def feature_of(nodeid: str) -> str:
    parts = nodeid.split("::")[0].split("/")
    if "suites" in parts and parts.index("suites") + 1 < len(parts) - 1:
        suite = parts[parts.index("suites") + 1]
        return FEATURES.get(suite, suite)
    return "harness"


def story_of(function_name: str) -> str:
    if function_name in STORIES:
        return STORIES[function_name]
    return re.sub(r"^test_", "", function_name).replace("_", " ")


def labels_for(item: pytest.Item) -> list[tuple[str, str]]:
    """(label, value) pairs for one test: epic, feature, story, severity, tags, kernel."""
    feature = feature_of(item.nodeid)
    name = getattr(item, "originalname", item.name.split("[")[0])
    labels = [("epic", "gemmcheck"), ("feature", feature), ("story", story_of(name))]
    found = _instance(item)
    severity = SEVERITY.get(feature, "normal")
    if found:
        fixture, inst = found
        if fixture == "broken" or (fixture == "any_kernel" and not inst.spec.is_reference):
            severity = "normal"   # a broken variant is caught, or a detector has a gap
        labels += [("tag", inst.dtype), ("tag", f"TILE{inst.tile}"),
                   ("tag", "reference" if inst.spec.is_reference else "broken variant"),
                   ("kernel", inst.spec.name), ("instantiation", inst.id),
                   ("expect", inst.spec.expect)]
    labels.append(("severity", severity))
    return labels


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # tryfirst: before allure-pytest selects by label (--allure-features correctness works).
    state = config.stash[STATE]
    if not state.recording:
        return
    for item in items:
        have = {m.kwargs.get("label_type") for m in item.iter_markers("allure_label")}
        for name, value in labels_for(item):
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
    state = item.config.stash[STATE]
    found = _instance(item)
    if found:
        state.ran_instances = True
    state.verdicts_seen = len(_verdict_log(item.config).verdicts) if _verdict_log(item.config) else 0
    if not state.recording or not found:
        return
    fixture, inst = found
    # Replace the Instance's repr (long, and holding a local path) with its id; keep it out of
    # the history id, which the readable parameters below carry.
    report.parameter(fixture, inst.id)
    gemm = _gemm(item.config)
    for name, value, in_history in (("kernel", inst.spec.name, True),
                                    ("instantiation", inst.name_expression, True),
                                    ("dtype", inst.dtype, True), ("TILE", inst.tile, True),
                                    ("profile", gemm.profile.name if gemm else "", False)):
        report.parameter(name, value, in_history=in_history)


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
    repro = _hypothesis_reproduction("\n".join([*notes, rep.longreprtext, *sections]))
    if repro:
        report.attach_hypothesis_reproduction(repro)
    report.attach_text("reproduce", _reproduce_command(item))
    found = _instance(item)
    if found:
        names = {a.name for a in _current_attachments()}
        if not any(n.startswith("kernel source") for n in names):
            report.attach_instance_evidence(found[1])


def _current_attachments():
    try:
        listener = report.allure_commons.plugin_manager.get_plugin("allure_listener") or next(
            p for p in report.allure_commons.plugin_manager.get_plugins()
            if type(p).__name__ == "AllureListener")
        result = listener.allure_logger.get_test(None)
        return list(result.attachments) if result else []
    except Exception:
        return []


_REPRODUCE = re.compile(r"^(?:E\s+)?.*(@reproduce_failure\(.*?\)|@seed\(\d+\)|"
                        r"--hypothesis-seed=\d+).*$", re.M)


def _hypothesis_reproduction(text: str) -> str:
    """The falsifying example (up to its closing parenthesis) and the @reproduce_failure line
    from hypothesis's report."""
    lines = [re.sub(r"^E\s{1,3}", "", line) for line in text.splitlines()]
    parts: list[str] = []
    for k, line in enumerate(lines):
        if re.match(r"\s*(?:Falsifying (?:explicit )?example|Failing test case):", line):
            block, depth = [], 0
            for follow in lines[k:]:
                block.append(follow)
                depth += follow.count("(") - follow.count(")")
                if depth <= 0:
                    break
            parts.append("\n".join(block).strip())
    parts += [m.group(0).strip() for m in _REPRODUCE.finditer("\n".join(lines))]
    return "\n".join(dict.fromkeys(parts))


def _reproduce_command(item: pytest.Item) -> str:
    gemm = _gemm(item.config)
    cmd = ["pytest", item.nodeid]
    if gemm:
        cmd += ["--gemm-profile", gemm.profile.name, "--gemm-backend", gemm.backend_name]
        for catalog in gemm.catalogs:
            cmd += ["--gemm-catalog", "builtin" if catalog == _builtin() else str(catalog)]
    return (f"# from the repository root ({item.config.rootpath})\n" + shlex.join(cmd) + "\n")


def _builtin():
    from gemmcheck import catalog

    return catalog.BUILTIN


def _gemm(config: pytest.Config):
    from gemmcheck import session

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
    worker = getattr(config, "workerinput", {}).get("workerid")
    verdicts = gemm.verdicts.verdicts
    if worker is None and not verdicts:
        verdicts = _worker_verdicts(state.verdicts_path, session)
    if verdicts or state.ran_instances:
        from gemmcheck import device

        document = report.verdicts_document(
            gemm.instances("any_kernel"), verdicts,
            run_info={"profile": gemm.profile.name, "backend": gemm.backend_name,
                      "device": device.cuda_device()[1],
                      "catalogs": [str(c) for c in gemm.catalogs],
                      "exit_status": int(exitstatus)})
        if worker is not None:   # pytest-xdist: the controller merges the workers' files
            report.write_verdicts(_worker_file(state.verdicts_path, worker), document)
            return
        report.write_verdicts(state.verdicts_path, document)
        state.summary = document["instances"]
        if state.recording:
            report.allure.global_attach(
                "\n".join(report.verdict_table(document["instances"])) + "\n",
                name="verdict summary", attachment_type=report.AttachmentType.TEXT)


def _worker_file(path: Path, worker: str) -> Path:
    return path.with_name(f"{path.stem}-{worker}.json")


def _worker_verdicts(path: Path, session: pytest.Session) -> list:
    """The verdicts pytest-xdist workers wrote in this session (removing their files)."""
    import json
    import time

    from gemmcheck.verdict import Defect, Finding, Verdict

    started = getattr(session, "_gemm_report_started", time.time())
    out = []
    for part in sorted(path.parent.glob(f"{path.stem}-gw*.json")):
        if part.stat().st_mtime < started:
            continue
        for v in json.loads(part.read_text())["verdicts"]:
            findings = [Finding(**{**f, "defect": Defect(f["defect"]),
                                   "where": tuple(f["where"]) if f["where"] else None})
                        for f in v.pop("findings")]
            out.append(Verdict(**v, findings=findings))
        part.unlink()
    return out


def pytest_sessionstart(session: pytest.Session) -> None:
    import time

    session._gemm_report_started = time.time() - 1


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    state = config.stash.get(STATE, None)
    rows = state.summary if state is not None else None
    if not rows:
        return
    checked = [r for r in rows if r["status"] != "not_checked"]
    terminalreporter.section("gemmcheck: verdicts")
    if not checked:
        terminalreporter.write_line(f"no instantiation was checked ({len(rows)} selected); "
                                    "see the skip reasons above")
    else:
        for line in report.verdict_table(checked):
            terminalreporter.write_line(line)
        unexpected = [r["instance"] for r in checked if r["status"] == "unexpected"]
        terminalreporter.write_line(
            f"{len(checked)} instantiations checked, {len(unexpected)} not as the catalog declares"
            + (f": {', '.join(unexpected)}" if unexpected else ""))
    terminalreporter.write_line(f"verdicts: {state.verdicts_path}")
    if state.results_dir is not None:
        terminalreporter.write_line(f"allure results: {state.results_dir} "
                                    "(HTML: scripts/build_report.sh)")
