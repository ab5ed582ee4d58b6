"""pytest wiring of the hazards suite: options, the kill matrix row fixture, its
parametrization, its terminal summary and reports/kill_matrix.json. Logic lives in
gemmcheck.judge.kill_matrix, gemmcheck.judge.hazards, gemmcheck.judge.isolation and gemmcheck.judge.sanitizer.

Each kill-matrix row is built by the first test that asks for it (matrix_row) and kept for
the other tests of that row in this process: no fixture computes all rows, a row that
cannot build or run is that row's verdict, and rows spread over pytest-xdist workers
(a row's tests are one unit of work for --gemm-shard and -n: pytest_gemm_work_unit). Each worker writes the rows it
built; the controller merges them into one table and one reports/kill_matrix.json.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from gemmcheck import backends, report
from gemmcheck.containment.tools import ToolFailure
from gemmcheck.verdict import defects
from gemmcheck.judge import kill_matrix, sanitizer
from gemmcheck.schedule import cores, gpu_turns, rerun, shared_work, units
from gemmcheck.pytest_plugin.session import gemm_config
from gemmcheck.contract.catalog import Instance

ROWS = pytest.StashKey[dict]()            # instance id -> kill_matrix.Row built in this process
REPORTED = pytest.StashKey[dict]()        # instance id -> node id of the test that reported it unfinished
SETTINGS = pytest.StashKey[object]()      # kill_matrix.Settings, decided once
SESSION_STARTED = pytest.StashKey[float]()   # wall clock, to tell this run's worker files
MATRIX_DOC = pytest.StashKey[dict]()      # the merged kill_matrix.json document, for the summary
ROW_CHILDREN = pytest.StashKey[object]()  # kill_matrix.RowChildren shared by the rows
MATRIX_JSON = Path("reports") / "kill_matrix.json"
# Fixtures this plugin parametrizes over catalog instantiations.
MATRIX_ROW = "matrix_row"                 # one per kill-matrix instantiation
EXPOSED_BROKEN = "exposed_broken"         # broken kernels for the correctness suite, as strict xfails
NOT_FOR_CORRECTNESS = defects.not_for_correctness()  # left to the hazards and performance suites


def _seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds; e.g. 10") from None
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"{value!r}: the hang timeout must be > 0 seconds")
    return seconds


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gemmcheck")
    group.addoption("--gemm-sanitizer", choices=("auto", "off"), default="auto", metavar="auto|off",
                    help="run compute-sanitizer (racecheck, synccheck, memcheck, initcheck) in the "
                         "hazards suite when it is on PATH; off skips it (default: auto)")
    group.addoption("--gemm-hang-timeout", type=_seconds, metavar="SECONDS",
                    default=backends.DEFAULT_HANG_TIMEOUT_S,
                    help="a launch that takes longer is a HANG: in an isolated child, in the CPU "
                         "simulator's worker, or in this process on the GPU (default: 10)")
    group.addoption("--gemm-isolate", choices=("risky", "all"), default="risky", metavar="risky|all",
                    help="which kernels the kill matrix launches in a child process: those declared "
                         "crash or hang, or all (default: risky)")


def simulated(config: pytest.Config) -> bool:
    """Whether this session's backend simulates threads (schedules and a report per launch:
    the CPU simulator), asked by capability, not by name."""
    from gemmcheck.judge import hazards

    return hazards.simulates_threads(backends.backend_class(gemm_config(config).backend_name))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "simulator: uses what only the CPU simulator (cpu-sim) "
                                       "establishes; skipped with the reason on other backends")
    if not config.pluginmanager.hasplugin("xdist"):  # kill-matrix rows carry it either way
        config.addinivalue_line("markers", "xdist_group(name): pytest-xdist's loadgroup grouping")
    config.stash[ROWS], config.stash[REPORTED] = {}, {}


def pytest_gemm_skip_reason(config: pytest.Config, item: pytest.Item) -> str | None:
    if item.get_closest_marker("simulator") and not simulated(config):
        return ("cpu-sim only: this check reads what the CPU simulator establishes "
                "(thread and block schedules, shared-memory, global-memory and barrier tracking, "
                "AddressSanitizer); run with --gemm-backend cpu-sim")
    return None


def sanitizer_status(config: pytest.Config) -> tuple[str | None, str]:
    """(path of compute-sanitizer or None, why not)."""
    if simulated(config):
        return None, f"{kill_matrix.SANITIZER_NOT_APPLICABLE}: {kill_matrix.SANITIZER_ON_SIMULATOR}"
    if config.getoption("gemm_sanitizer") == "off":
        return None, "compute-sanitizer turned off by --gemm-sanitizer off"
    exe = sanitizer.executable()
    return exe, "" if exe else sanitizer.MISSING


def matrix_instances(config: pytest.Config):
    gc = gemm_config(config)
    return kill_matrix.select(gc.instances("any_kernel"), every=gc.profile.matrix_every)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    keep = [m.args[0] for m in metafunc.definition.iter_markers("instances")]
    if MATRIX_ROW in metafunc.fixturenames:
        instances = [i for i in matrix_instances(metafunc.config) if all(p(i) for p in keep)]
        metafunc.parametrize(MATRIX_ROW, [pytest.param(i, id=i.id, marks=pytest.mark.xdist_group(i.id))
                                          for i in instances], indirect=True)
    if EXPOSED_BROKEN in metafunc.fixturenames:
        instances = [i for i in matrix_instances(metafunc.config)
                     if not i.spec.is_reference and i.spec.expect not in NOT_FOR_CORRECTNESS
                     and all(p(i) for p in keep)]
        params = [pytest.param(i, id=i.id, marks=pytest.mark.xfail(
            strict=True, raises=(AssertionError, pytest.fail.Exception),
            reason=f"declared {i.spec.expect}: {i.spec.description or i.spec.name}"))
            for i in instances]
        metafunc.parametrize(EXPOSED_BROKEN, params)


# -- a row's tests as one unit of work (shards, pytest-xdist workers) --------------------------

ROW_IDS = pytest.StashKey[frozenset]()    # the kill-matrix rows' instantiation ids


def row_of(nodeid: str, rows: frozenset) -> str | None:
    """The kill-matrix row a test belongs to: its parameter id, when that is a row's
    instantiation id (matrix_row's ids are), else None."""
    name = nodeid.rpartition("::")[2]
    param = name.partition("[")[2]
    return param[:-1] if param.endswith("]") and param[:-1] in rows else None


def pytest_gemm_work_unit(config: pytest.Config, nodeid: str) -> str | None:
    """A row's instantiation is one unit: its claims and its other tests (whose ids carry it
    too), so the process that builds the row runs all of them. Dealt one by one, each shard
    or worker that got a test of a row built the row again (an H200 pair ran a nightly
    shard with -n 2 no faster than one GPU; a row is built by ~6 tests of the nightly)."""
    if ROW_IDS not in config.stash:
        config.stash[ROW_IDS] = frozenset(i.id for i in matrix_instances(config))
    return row_of(nodeid, config.stash[ROW_IDS])


@pytest.fixture(scope="session")
def sanitizer_exe(request) -> str:
    """compute-sanitizer's path; skips with the reason when it is absent or turned off."""
    exe, why = sanitizer_status(request.config)
    if exe is None:
        pytest.skip(why)
    return exe


def matrix_settings(config: pytest.Config) -> kill_matrix.Settings:
    """The kill matrix's settings, decided once from the options and the profile."""
    if SETTINGS not in config.stash:
        gc = gemm_config(config)
        exe, why = sanitizer_status(config)
        config.stash[SETTINGS] = kill_matrix.Settings(
            race_sizes=gc.profile.race_sizes, race_repeats=gc.profile.race_repeats,
            backend_name=gc.backend_name, sanitizer_exe=exe, sanitizer_note=why,
            hang_timeout=config.getoption("gemm_hang_timeout"),
            isolate_all=config.getoption("gemm_isolate") == "all",
            log_dir=Path(config.rootpath) / "reports" / "sanitizer")
    return config.stash[SETTINGS]


@pytest.fixture
def matrix_row(request, backend) -> kill_matrix.Row:
    """The kill-matrix row of the parametrized instantiation, built by the first test of the
    row in this process and kept for the others."""
    config, instance = request.config, request.param
    rows = config.stash[ROWS]
    if instance.id not in rows:
        rows[instance.id] = kill_matrix.build_row(backend, instance, matrix_settings(config),
                                                  row_children(config, request.session.items, backend))
    row = rows[instance.id]
    if row.sanitizer.errors and getattr(request.node, "originalname", "") == "test_kill_matrix":
        # A tool of the suite that failed twice (kill_matrix.RowChildren._tool_run) says nothing
        # of the kernel: an error of the suite (pytest "error", allure "broken"), not its fail.
        raise SuiteToolError(f"{instance.id}: could not run (tried twice), no verdict on the kernel: "
                             + "\n".join(row.sanitizer.errors))
    return row


class SuiteToolError(ToolFailure):
    """compute-sanitizer, a tool of the suite, failed (not the kernel under test)."""

    tool = "compute-sanitizer"


def row_children(config: pytest.Config, items, backend) -> kill_matrix.RowChildren | None:
    """The session's pool of the rows' children (compute-sanitizer runs, the plain observation
    of kernels declared crash or hang); None on a backend that simulates threads. Made at the
    first test that launches kernels here (after the probe: pytest_gemm_backend_made below), it
    starts the children of every row this session will build at once (in a pytest-xdist
    worker those planned for it, units.planned), so they run side by side with the suites
    before the hazards suite waits for them; another row's start when it is built."""
    from gemmcheck.judge import hazards

    if ROW_CHILDREN in config.stash:
        return config.stash[ROW_CHILDREN]
    config.stash[ROW_CHILDREN] = None
    if not hazards.simulates_threads(backend):
        children = config.stash[ROW_CHILDREN] = kill_matrix.RowChildren(
            matrix_settings(config), turns=gpu_turns.turns(config),
            cores=cores.of_this_process(getattr(config, "workerinput", {})),
            shared=shared_work.once(config))
        # one the probe saw crash or hang is not run under the tools
        children.submit_rows([inst for inst in rows_ahead(config, items) if not backends.refused(inst.id)])
    return config.stash[ROW_CHILDREN]


@pytest.hookimpl(trylast=True)   # after build_plugin's probe, whose refusals it reads
def pytest_gemm_backend_made(session: pytest.Session, backend) -> None:
    """Start the rows' children as soon as the backend is made, not at the hazards suite's
    first row."""
    row_children(session.config, session.items, backend)


def pytest_gemm_before_device_timing(config: pytest.Config) -> None:
    """Before device timing: every child this session started has ended (the performance
    suite's samples never share the GPU with them)."""
    children = config.stash.get(ROW_CHILDREN, None)
    if children is not None:
        children.wait()


def rows_ahead(config: pytest.Config, items: list[pytest.Item]) -> list[Instance]:
    """The rows this process will build, in collection order: every row of the session's
    tests, or in a pytest-xdist worker those planned for it (units.planned)."""
    params = (getattr(getattr(item, "callspec", None), "params", {}).get(MATRIX_ROW) for item in items)
    # (an empty parameter set gives pytest's NOTSET, not an instantiation)
    ahead = {p.id: p for p in params if isinstance(p, Instance)}
    worker = getattr(config, "workerinput", None)
    if worker is not None:
        plan = units.planned(config, [item.nodeid for item in items], worker["workercount"])
        mine = units.worker_index(worker["workerid"])
        ahead = {i: p for i, p in ahead.items() if plan.get(i) == mine}
    return list(ahead.values())


@pytest.fixture
def finished_row(matrix_row) -> kill_matrix.Row:
    """matrix_row, for claims that hold only of launches that finished ("references are
    clean"). A row whose launches crashed, hung or did not build fails the first such claim
    (recording the crash / hang / compile_error verdict) and skips the others, naming it
    (pytest_runtest_call below: a failure of the test, not an error of its setup). A claim
    about nothing checked never passes."""
    return matrix_row


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    row = getattr(item, "funcargs", {}).get("finished_row")
    if row is not None:
        _require_finished(row, item)


def _require_finished(row: kill_matrix.Row, item: pytest.Item) -> None:
    from gemmcheck.verdict import Verdict

    status, why = row.outcome()
    if status == "not-checked":   # nothing launched: a claim about its launches has nothing to hold of
        pytest.skip(f"not checked: {row.instance.id}: {why}")
    stopped = row.plain.unfinished
    if stopped is None:
        return
    reported = item.config.stash[REPORTED]
    instance = row.instance
    if instance.id not in reported:
        # The row's own test, when this session runs it, fails with the row's verdict: the
        # claims then skip naming it, so a bad kernel costs one failure, not two.
        row_test = _row_test(item.session, instance)
        if row_test is not None:
            reported[instance.id] = row_test
    if instance.id in reported:
        pytest.skip(f"not checked: {instance.id} {stopped.defect.value}; see {reported[instance.id]}")
    reported[instance.id] = item.nodeid
    gemm_config(item.config).verdicts.record(Verdict.for_instance(
        instance, "kill matrix: " + "; ".join(row.problems), [stopped], item.nodeid))
    pytest.fail(f"{stopped.defect.value}: {instance.id} ({instance.name_expression}): nothing about it "
                f"could be checked: {stopped.summary}", pytrace=False)


def _row_test(session: pytest.Session, instance: Instance) -> str | None:
    """The node id of test_kill_matrix's test of `instance` in this session, if any."""
    for item in session.items:
        if (getattr(item, "originalname", None) == "test_kill_matrix"
                and getattr(getattr(getattr(item, "callspec", None), "params", {}).get(MATRIX_ROW),
                            "id", None) == instance.id):
            return item.nodeid
    return None


def _document(config: pytest.Config) -> dict:
    rows = list(config.stash.get(ROWS, {}).values())
    if not rows:
        return {}
    return kill_matrix.document(rows, matrix_settings(config))


def _merged(session: pytest.Session) -> dict:
    """This process's rows plus those its parts wrote (their files, and an earlier interrupted
    run's, are removed)."""
    path = Path(session.config.rootpath) / MATRIX_JSON
    started = session.config.stash.get(SESSION_STARTED, 0.0)
    docs = [_document(session.config), *report.worker_parts(path, started, remove_stale=True)]
    order = [i.id for i in matrix_instances(session.config)]
    return kill_matrix.merge(docs, order)


def pytest_sessionstart(session: pytest.Session) -> None:
    import time

    session.config.stash[SESSION_STARTED] = time.time() - 1


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    children = config.stash.get(ROW_CHILDREN, None)
    if children is not None:
        # A worker that ended normally lets its running children finish: a worker still busy
        # may wait for them (kill_matrix.RowChildren.close).
        children.close(finish=rerun.is_xdist_worker(config) and not (
            session.shouldstop or session.shouldfail or session.exitstatus == pytest.ExitCode.INTERRUPTED))
    path = Path(config.rootpath) / MATRIX_JSON
    worker = rerun.runner_id(config)
    # pytest-xdist workers and a re-run child write their part; the session merges them (a
    # re-run child first merges the part of a child of its own).
    doc = _document(config) if rerun.is_xdist_worker(config) else _merged(session)
    if worker is not None:
        if doc:
            path.parent.mkdir(parents=True, exist_ok=True)
            report.worker_file(path, worker).write_text(json.dumps(doc, indent=2))
        return
    config.stash[MATRIX_DOC] = doc
    if doc:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc, indent=2))



def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    doc = config.stash.get(MATRIX_DOC, None)
    if not doc:
        return
    settings, rows = doc["settings"], doc["rows"]
    on = settings["backend"]
    terminalreporter.section(f"gemmcheck: kill matrix ({on})")
    for line in kill_matrix.table(rows):
        terminalreporter.write_line(line)
    if settings["detectors"] == kill_matrix.SIMULATOR:
        how = (f"simulator detectors on the small problems, schedules {', '.join(settings['schedules'])}"
               f"{', AddressSanitizer' if settings['address_check'] else ''}; sanitizer column "
               f"{kill_matrix.SANITIZER_NOT_APPLICABLE} (compute-sanitizer needs a GPU)")
    else:
        tool = (f"compute-sanitizer {', '.join(settings['tools'])}" if not settings["sanitizer"].startswith("not run")
                else f"sanitizer column {settings['sanitizer']}")
        how = (f"race stress {'x'.join(map(str, settings['race_sizes']))} x {settings['race_repeats']} "
               f"launches; {tool}")
    terminalreporter.write_line(f"{len(rows)} rows, {doc['seconds']:.1f} s of row time on {on}; {how}; "
                                f"written to {MATRIX_JSON}")
