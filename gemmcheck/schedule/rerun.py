"""The rest of a session in a fresh process, after the CUDA context was lost in this one.

A kernel that faults at a shape the isolated probe did not cover leaves a sticky CUDA error:
nothing more can launch in this process. The tests that would have launched later are
skipped here and run at the end of the session in one child pytest (same options, those
node ids, the lost kernel's tests left out). The child writes its verdicts and kill-matrix
rows as a pytest-xdist worker does (``<name>-gw-rerun<depth>.json`` beside the session's
files), which this session merges; its allure results land in the same directory. A child
that loses its context again does the same, up to MAX_DEPTH processes deep.

The child's test reports are this session's: it writes them serialized to a file
(ReportForwarder) and this session logs them as its own, as pytest-xdist's controller does its
workers', so each test counts once, where it ran. Not under pytest-xdist: a worker whose
context is lost ends and xdist replaces it (lost_context_plugin).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gemmcheck.containment.tools import REPORT_ATTRIBUTE, ToolFailure

RERUN_AS = "GEMMCHECK_RERUN_AS"      # set in a child: its name for the files it writes
MAX_DEPTH = 3
# Options the child must not take over: they would write over this session's files, clean
# its allure results, spread it over workers or deselect the node ids it is given.
DROPPED_WITH_VALUE = ("--junitxml", "--junit-xml", "--benchmark-json", "--benchmark-save", "--gemm-phases",
                      "--gemm-shard", "--gemm-shard-durations", "-n", "--numprocesses", "--dist")
DROPPED_FLAGS = ("--clean-alluredir", "--benchmark-autosave", "--lf", "--last-failed", "--ff",
                 "--failed-first", "--sw", "--stepwise")


def is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def runner_id(config: pytest.Config) -> str | None:
    """The name a process that is not the session's own writes its part of the files under:
    the pytest-xdist worker id, or this module's child's; None for the session itself."""
    worker = getattr(config, "workerinput", {}).get("workerid")
    return worker or os.environ.get(RERUN_AS) or None


def depth() -> int:
    name = os.environ.get(RERUN_AS, "")
    return int(name.removeprefix("gw-rerun")) if name.startswith("gw-rerun") else 0


def available(config: pytest.Config) -> bool:
    return not is_xdist_worker(config) and depth() < MAX_DEPTH


def child_args(config: pytest.Config, nodeids: list[str]) -> list[str]:
    """This session's command-line options (its test paths and the dropped options left out)
    and the node ids, relative to the directory pytest was started in."""
    positional = set(config.args)
    args, skip_value = [], False
    for arg in config.invocation_params.args:
        if skip_value:
            skip_value = False
            continue
        name = arg.split("=", 1)[0]
        if name in DROPPED_FLAGS or re.fullmatch(r"-n\w+", arg) or arg in positional:
            continue
        if name in DROPPED_WITH_VALUE:
            skip_value = "=" not in arg   # "--opt value": the value is the next argument
            continue
        args.append(arg)
    start, root = Path(config.invocation_params.dir), Path(config.rootpath)
    out = []
    for nodeid in nodeids:
        path, sep, rest = nodeid.partition("::")
        out.append(os.path.relpath(root / path, start) + sep + rest)
    return args + out


REPORTS_TO = "GEMMCHECK_RERUN_REPORTS"   # set in a child: the file its test reports go to


class RerunFailure(ToolFailure):
    """The fresh pytest process died (a signal, an internal error) before it ran its tests."""

    tool = "the fresh pytest process (gemmcheck.schedule.rerun)"
    todo = ("nothing is known of the kernels of these tests; read the process's log (named "
            "above), then run these tests again on their own")


def run(session: pytest.Session, nodeids: list[str]) -> int:
    """Run `nodeids` in a child pytest and report its tests here, as pytest-xdist's controller
    reports its workers': each report, serialized by the child (pytest_report_to_serializable),
    is logged in this session (pytest_runtest_logreport), so the summary, the junit XML, -x
    and the exit status count each test once, where it ran. The child's own terminal output
    goes to reports/rerun-<depth>.log (shown here when it reported nothing). A child that died
    (killed by a signal, or pytest's internal error) before it reported all of them is a
    failure of the suite's tool: the tests it did not report go to one more child, and those
    that one does not report either are errors here (RerunFailure), never dropped. Returns the
    last child's exit code."""
    code, finished = _child(session, nodeids)
    missing = [n for n in nodeids if n not in finished]
    if missing and _died(code):
        code, more = _child(session, missing)
        finished |= more
        left = [n for n in missing if n not in finished]
        if left and _died(code):
            _report_lost(session, left, RerunFailure(
                f"the process ran {len(nodeids) - len(left)} of its {len(nodeids)} test(s) and ended "
                f"({_exit_text(code)}), twice, before this one"))
    return code


def _died(code: int) -> bool:
    return code < 0 or code == pytest.ExitCode.INTERNAL_ERROR


def _exit_text(code: int) -> str:
    return f"killed by signal {-code}" if code < 0 else f"exit status {code}"


def _child(session: pytest.Session, nodeids: list[str]) -> tuple[int, set[str]]:
    """One child pytest over `nodeids`, its reports logged here; (its exit code, the node ids
    it finished)."""
    import json
    import tempfile

    config = session.config
    argv = [sys.executable, "-m", "pytest", *child_args(config, nodeids)]
    name = f"gw-rerun{depth() + 1}"
    log = Path(config.rootpath) / "reports" / f"rerun-{depth() + 1}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write("\n")   # after the progress dots
        reporter.write_sep("=", f"gemmcheck: {len(nodeids)} test(s) run in a fresh process (the CUDA "
                                f"context of this one was lost); its output: {log}")
    with tempfile.NamedTemporaryFile("r", prefix="gemmcheck-rerun-", suffix=".jsonl") as reports, \
            open(log, "w") as out:
        env = dict(os.environ, **{RERUN_AS: name, REPORTS_TO: reports.name})
        code = subprocess.run(argv, cwd=config.invocation_params.dir, env=env, stdout=out,
                              stderr=subprocess.STDOUT).returncode
        lines = reports.read().splitlines()
    seen, finished = 0, set()
    for line in lines:
        kind, data = json.loads(line)
        if kind == "logstart":
            config.hook.pytest_runtest_logstart(nodeid=data[0], location=tuple(data[1]))
        elif kind == "logfinish":
            config.hook.pytest_runtest_logfinish(nodeid=data[0], location=tuple(data[1]))
            finished.add(data[0])
        else:
            if isinstance(data.get("longrepr"), list):   # a skip's (path, line, reason): JSON made it a list
                data["longrepr"] = tuple(data["longrepr"])
            report = config.hook.pytest_report_from_serializable(config=config, data=data)
            config.hook.pytest_runtest_logreport(report=report)
            seen += 1
    if not seen and not _died(code) and code not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.testsfailed += 1   # it failed before reporting anything: say so, fail the run
        if reporter is not None:
            reporter.write_line(f"gemmcheck: the fresh process failed (exit {code}) before running "
                                f"a test; its output ({log}):")
            reporter.write_line(log.read_text()[-4000:])
    return code, finished


def _report_lost(session: pytest.Session, nodeids: list[str], failure: RerunFailure) -> None:
    """Each of `nodeids` as an error of its setup here: a test that never ran, with why."""
    hook = session.config.hook
    where = {item.nodeid: item.location for item in session.items}
    for nodeid in nodeids:
        location = where.get(nodeid, (nodeid.partition("::")[0], None, nodeid))
        hook.pytest_runtest_logstart(nodeid=nodeid, location=location)
        report = pytest.TestReport(nodeid, location, {}, "failed", str(failure), "setup")
        setattr(report, REPORT_ATTRIBUTE, str(failure).splitlines()[0])
        hook.pytest_runtest_logreport(report=report)
        hook.pytest_runtest_logfinish(nodeid=nodeid, location=location)


def not_reported_here(item: pytest.Item) -> None:
    """`item` runs in the child, which writes its allure result: allure-pytest's wrapper of this
    process's pytest_runtest_protocol has begun one for it, which it would close as "skipped"
    when the protocol returns. Dropped (AllureReporter.drop_test), it is written once, there."""
    listener = item.config.pluginmanager.get_plugin("allure_listener")
    if listener is None:
        return
    uuid = listener._cache.pop(item.nodeid)
    if uuid:
        listener.allure_logger.drop_test(uuid)


class ReportForwarder:
    """In a child of run(): every test report (and test start / finish), serialized, one JSON
    line each, to the file the session that started it reads."""

    def __init__(self, config: pytest.Config, path: str) -> None:
        self.config, self.file = config, open(path, "a", buffering=1)

    def _write(self, kind: str, data) -> None:
        import json

        self.file.write(json.dumps([kind, data]) + "\n")

    def pytest_runtest_logstart(self, nodeid, location) -> None:
        self._write("logstart", [nodeid, list(location)])

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self._write("report", self.config.hook.pytest_report_to_serializable(config=self.config, report=report))

    def pytest_runtest_logfinish(self, nodeid, location) -> None:
        self._write("logfinish", [nodeid, list(location)])


def forward_reports_if_asked(config: pytest.Config) -> None:
    """In a child of run() (build_plugin's pytest_configure): forward its reports."""
    path = os.environ.get(REPORTS_TO)
    if path and not is_xdist_worker(config):
        config.pluginmanager.register(ReportForwarder(config, path), "gemmcheck-rerun-forwarder")
        # its child, if it has one, writes to a file of its own: this one's replay reaches here
        os.environ.pop(REPORTS_TO)
