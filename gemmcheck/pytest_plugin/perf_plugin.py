"""pytest hooks and fixtures of the performance suite (suites/performance).

Wiring only: what to run comes from gemmcheck.perf.selection, measuring from
gemmcheck.perf, the table / JSON / PNG from gemmcheck.perf.summary.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest

from gemmcheck.backends import device
from gemmcheck import perf, phases, report
from gemmcheck.containment import probe
from gemmcheck.containment.lost import containment
from gemmcheck.contract.catalog import Instance
from gemmcheck.report import merge
from gemmcheck.perf import selection, summary, warm
from gemmcheck.schedule import gpu_turns, gpus, rerun, shared_work, units
from gemmcheck.pytest_plugin.session import gemm_config

# Fixtures the perf suite parametrizes, and what each gets.
TIMED = "perf_instance"    # a catalog instantiation to time: references and declared-too-slow kernels
SIZE = "perf_size"         # N of the N x N x N problem, from the profile's perf_sizes
# The largest of them, alone: a test that times no kernel of its own but needs the device timer
# (the card's FP32 peak, the roofline of what was timed) takes it, so that its id puts it in the
# performance units (pytest_gemm_work_unit), which run after a worker's other units. Without a
# parameter it was anyone's unit, taken first: on one H200 with -n 8 two workers held one from
# ~40 s to ~190 s of the nightly, waiting for their children and turns, their rows behind it.
LARGEST = "perf_largest_size"
CLAIM = "perf_claim"       # selection.Case(Threshold, N) for a kernel declared correct: it must meet it
KILL = "perf_kill"         # selection.Case(Threshold, N) for a kernel declared too_slow: it must fail it
SLOW = "perf_too_slow"     # each declared-too-slow instantiation (it must have a threshold)
REFUSE = "perf_refusal"    # (selection.Case(Refusal, N), Instance): a positive control to refuse


@dataclass
class PerfConfig:
    thresholds: perf.Thresholds
    reports: Path
    session: perf.PerfSession | None = None
    skip_reason: str | None = None
    ncu: str | None = None      # ncu's path with --gemm-ncu


PERF_CONFIG = pytest.StashKey[PerfConfig]()
STARTED = pytest.StashKey[float]()     # when the session started (its workers' report parts are newer)
PERF_UNITS = pytest.StashKey[dict]()   # a perf test's parameter id -> its unit of work (pytest_gemm_work_unit)
AHEAD = pytest.StashKey[warm.Ahead]()  # the run's compile-ahead of the suite's CuPy kernels


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gemmcheck")
    group.addoption("--gemm-thresholds", metavar="PATH", default=None,
                    help="performance thresholds TOML (default: gemmcheck's "
                         "suites/performance/thresholds.toml)")
    group.addoption("--gemm-perf-configs", choices=("named", "all"), metavar="named|all", default="named",
                    help="which named catalog configs the performance suite times: those a threshold "
                         "names, or all (a tuning sweep: the table's 'best' lines then say which config "
                         "of each kernel is fastest) (default: named)")
    group.addoption("--gemm-ncu", action="store_true", default=False,
                    help="also measure each timed kernel's DRAM bytes with Nsight Compute (ncu on PATH; "
                         "one extra profiled launch per kernel) for the roofline's measured point "
                         "(default: off)")


def pytest_configure(config: pytest.Config) -> None:
    path = config.option.gemm_thresholds or perf.BUILTIN_THRESHOLDS
    try:
        thresholds = perf.load_thresholds(path)
    except perf.ThresholdError as exc:
        raise pytest.UsageError(f"--gemm-thresholds: {exc}") from None
    ncu = device.tool("ncu") if config.option.gemm_ncu else None
    if config.option.gemm_ncu and ncu is None:
        raise pytest.UsageError("--gemm-ncu needs ncu (Nsight Compute) on PATH; not found. "
                                "Add it to PATH or drop the flag.")
    reports = Path(config.rootpath) / "reports"
    # A pytest-xdist worker (or a re-run child) writes its own reports in a folder of its own;
    # the session joins them (pytest_terminal_summary).
    part = rerun.runner_id(config)
    out = reports / "performance" if part is None else reports / "performance" / merge.PERF_PARTS / part
    config.stash[PERF_CONFIG] = PerfConfig(thresholds, out, ncu=ncu)
    # pytest-benchmark keeps saved runs in ./.benchmarks unless told otherwise; ours
    # belong under reports/. Its own configure runs after this one (trylast).
    if getattr(config.option, "benchmark_storage", None) == "file://./.benchmarks":
        config.option.benchmark_storage = f"file://{reports / 'benchmarks'}"


def perf_config(config: pytest.Config) -> PerfConfig:
    return config.stash[PERF_CONFIG]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    config, names = metafunc.config, metafunc.fixturenames
    if not {TIMED, SIZE, LARGEST, CLAIM, KILL, SLOW, REFUSE} & set(names):
        return
    gc, thresholds = gemm_config(config), perf_config(config).thresholds
    instances, sizes = gc.instances("any_kernel"), gc.profile.perf_sizes
    timed = timed_instances(config)
    if TIMED in names:
        keep = [m.args[0] for m in metafunc.definition.iter_markers("instances")]
        chosen = [i for i in timed if all(p(i) for p in keep)]
        metafunc.parametrize(TIMED, chosen, ids=[i.id for i in chosen])
    if SIZE in names:
        metafunc.parametrize(SIZE, sizes, ids=[f"N{s}" for s in sizes])
    if LARGEST in names:
        largest = [max(sizes)] if sizes else []
        metafunc.parametrize(LARGEST, largest, ids=[f"N{s}" for s in largest])
    for name, expect in ((CLAIM, "correct"), (KILL, "too_slow")):
        if name in names:
            cases = selection.threshold_cases(instances, thresholds, sizes, expect)
            metafunc.parametrize(name, cases, ids=[c.id for c in cases])
    if SLOW in names:
        slow = [i for i in timed if i.spec.expect == "too_slow"]
        metafunc.parametrize(SLOW, slow, ids=[i.id for i in slow])
    if REFUSE in names:
        cases = selection.refusal_cases(instances, thresholds, sizes)
        metafunc.parametrize(REFUSE, cases, ids=[c.id for c, _ in cases])


def every_dtype(gc) -> bool:
    """Whether every selected dtype of a kernel is timed: in the nightly, or when --gemm-dtypes
    names the dtypes wanted; else its lead dtype and those a claim names (selection.timed_instances)."""
    return gc.profile.perf_every_dtype or bool(gc.dtypes)


def timed_instances(config: pytest.Config) -> list:
    """The instantiations this run times (selection.timed_instances, with the run's options)."""
    gc = gemm_config(config)
    return selection.timed_instances(gc.instances("any_kernel"), perf_config(config).thresholds,
                                     config.option.gemm_perf_configs == "all", every_dtype(gc))


def untimed(config: pytest.Config) -> dict[str, tuple[str, ...]]:
    """{kernel: its dtypes this run leaves untimed}: the table's 'not timed' line."""
    gc = gemm_config(config)
    if every_dtype(gc):
        return {}
    return selection.untimed_dtypes(gc.instances("any_kernel"), perf_config(config).thresholds,
                                    config.option.gemm_perf_configs == "all")


def pytest_gemm_work_unit(config: pytest.Config, nodeid: str) -> str | None:
    """The performance tests of one dtype and size are one unit of work. A claim reads the
    measurements its throughput tests took: of its kernel, and of its baseline (another kernel
    at that dtype and size, the best of its TILEs). A shard or worker without them timed them
    again: at N = 8192 a too-slow kernel's claim against the naive kernel's best TILE took
    16.4 s of an H200 nightly shard, the kernel's own throughput test 8.4 s."""
    if PERF_UNITS not in config.stash:
        config.stash[PERF_UNITS] = perf_units(config)
    param = nodeid.rpartition("::")[2].partition("[")[2]
    return config.stash[PERF_UNITS].get(param[:-1]) if param.endswith("]") else None


def perf_units(config: pytest.Config) -> dict[str, str]:
    """{parameter id: "perf-<dtype>-N<size>" (deferred)} of every test the perf suite parametrizes with an
    instantiation, a claim or a size (the ids pytest_generate_tests gives them)."""
    gc, thresholds = gemm_config(config), perf_config(config).thresholds
    instances, sizes = gc.instances("any_kernel"), gc.profile.perf_sizes
    timed = timed_instances(config)

    def unit(dtype: str, size: int) -> str:   # after a worker's other units: timing waits for its children
        return units.deferred(f"perf-{dtype}-N{size}")

    by_id = {f"N{n}": unit("float32", n) for n in sizes}          # cuBLAS float32 alone (TF32 check)
    by_id.update({f"{i.id}-N{n}": unit(i.dtype, n) for i in timed for n in sizes})
    for expect in ("correct", "too_slow"):
        by_id.update({c.id: unit(c.claim.dtype, c.size)
                      for c in selection.threshold_cases(instances, thresholds, sizes, expect)})
    by_id.update({c.id: unit(c.claim.dtype, c.size) for c, _ in selection.refusal_cases(instances, thresholds, sizes)})
    return by_id


def pytest_gemm_sized_launches(config: pytest.Config, item: pytest.Item) -> list | None:
    """What a performance test launches here at N x N x N (the sized probe launches each once
    in an isolated child first): its instantiation at its size, or a claim's instantiation and
    baseline kernels, or a refusal's instantiation; with the products one timed launch of it
    holds (a strided batch's or groups', Timing.products), so the probe launches what is timed."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    if TIMED in params and SIZE in params:
        timed = params[TIMED]
        return [(timed, params[SIZE], perf_config(config).thresholds.timing.products(timed))]
    for name in (CLAIM, KILL):
        if name in params:
            case = params[name]
            return [(i, case.size) for i in selection.claim_instances(gemm_config(config).specs, case.claim,
                                                                       case.size, perf_config(config).thresholds)]
    if REFUSE in params:
        case, instance = params[REFUSE]
        return [(instance, case.size)]
    return None


@pytest.hookimpl(trylast=True)   # a missing device (the core plugin's reason) says more
def pytest_gemm_skip_reason(config: pytest.Config, item: pytest.Item) -> str | None:
    if item.get_closest_marker("perf") and not gpus.can_time(config):
        return ("device timing needs the GPU to itself; this pytest-xdist worker shares its GPU with "
                "another and was given no lock to take turns with it (gemmcheck's controller gives "
                "one). Run the performance suite without xdist (pytest suites/performance "
                "-p no:xdist) or with at most one worker per GPU (-n N, N <= the GPUs)")
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.pluginmanager.hasplugin("benchmark"):
        return
    for item in items:
        if "record_benchmark" in getattr(item, "fixturenames", ()):
            # pytest-benchmark reads its timer from this marker: the device clock.
            item.add_marker(pytest.mark.benchmark(timer=perf.DEVICE_CLOCK))


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start compiling the suite's CuPy kernels ahead (perf.warm), once per run, when this
    session times kernels on the GPU: the other suites run meanwhile."""
    config = session.config
    timed = [item for item in session.items
             if item.get_closest_marker("perf") and not item.get_closest_marker("skip")]
    if (not timed or config.option.collectonly or gemm_config(config).simulated
            or not gpus.can_time(config) or not device.cuda_device()[0]):
        return
    instances = [v for item in timed for v in _params(item) if isinstance(v, Instance)]
    turns = gpu_turns.turns(config)
    config.stash[AHEAD] = warm.Ahead(warm.kinds_of(instances), shared=shared_work.once(config),
                                     hold=(turns.children_started, turns.children_ended) if turns else None)


def _params(item: pytest.Item) -> list:
    """A test's parameter values, a pair's members too (REFUSE: (Case, Instance))."""
    values = getattr(getattr(item, "callspec", None), "params", {}).values()
    return [x for v in values for x in (v if isinstance(v, tuple) else (v,))]


def pytest_report_header(config: pytest.Config) -> list[str]:
    pc = perf_config(config)
    known = {s.name for s in gemm_config(config).specs}
    named = {t.kernel for t in pc.thresholds.thresholds} | {r.kernel for r in pc.thresholds.refusals}
    orphans = sorted(named - known)
    line = (f"gemmcheck perf: thresholds {pc.thresholds.path} ({len(pc.thresholds.thresholds)} claims, "
            f"{len(pc.thresholds.refusals)} refusals; timing TILEs "
            f"{', '.join(map(str, pc.thresholds.timing.tiles))}, and "
            + ("every named config" if config.option.gemm_perf_configs == "all"
               else f"{len(selection.named_configs(pc.thresholds))} named configs") + ")")
    if orphans:
        line += f"; naming kernels not in the catalog (not run): {', '.join(orphans)}"
    return [line]


@pytest.fixture
def perf_session(request: pytest.FixtureRequest) -> perf.PerfSession:
    """The session's device timer and everything it measured, once the children this session
    started ahead on the GPU (the kill matrix's tools and isolated rows) have ended: device
    timing never shares the card with them. A worker that shares its GPU samples in its turn
    (the timer's `turn`, timed_session); the rest of the test runs beside the other workers."""
    request.config.hook.pytest_gemm_before_device_timing(config=request.config)
    return request.getfixturevalue("timed_session")


@pytest.fixture(scope="session")
def timed_session(request: pytest.FixtureRequest, backend) -> perf.PerfSession:
    """The session's device timer (made once; skips off the GPU): use perf_session."""
    pc = perf_config(request.config)
    if pc.session is None and pc.skip_reason is None:
        if not backend.runs_on_cuda_device:
            pc.skip_reason = (f"performance is timed on a CUDA device; backend {backend.name!r} "
                              "does not time kernels")
        else:
            # Before anything is timed: what the sized probe found crashing or hanging at the
            # sizes timed here (its child no longer shares the card), refused row by row.
            refused = probe.sized_findings(containment(request.config))
            _compiled_ahead(request.config)
            timer = perf.GpuTimer(backend, pc.thresholds.timing, turn=lambda: gpu_turns.alone(request.config))
            pc.session = perf.PerfSession(timer, gemm_config(request.config).profile.perf_repeats, ncu=pc.ncu,
                                          refused=refused, untimed=untimed(request.config))
            pc.session.copy()   # the memory roof, measured first, on an idle card
            if (worker_turns := gpu_turns.turns(request.config)) is not None:
                worker_turns.timer_made = True
    if pc.session is None:
        pytest.skip(pc.skip_reason)
    return pc.session


def _compiled_ahead(config: pytest.Config) -> None:
    """Wait for the run's compile-ahead (a note when it did not finish: the tests compile
    what they need themselves); it never runs beside this process's timing."""
    ahead = config.stash.get(AHEAD, None)
    if ahead is None:
        return
    with phases.phase("compile"):
        why = ahead.wait(warm.TIMEOUT_S)
    if why:
        warnings.warn(f"gemmcheck: the performance suite's CuPy kernels were not compiled ahead ({why}); "
                      "each timed test compiles what it needs", RuntimeWarning, stacklevel=1)


@pytest.fixture
def perf_timing(request: pytest.FixtureRequest) -> perf.Timing:
    return perf_config(request.config).thresholds.timing


@pytest.fixture
def perf_thresholds(request: pytest.FixtureRequest) -> perf.Thresholds:
    return perf_config(request.config).thresholds


@pytest.fixture
def perf_reports(request: pytest.FixtureRequest):
    """write(session) -> paths: reports/performance/{summary.txt, perf.json, roofline.png},
    the table and the roofline also attached to the current test."""
    def write(session: perf.PerfSession) -> list[Path]:
        written = summary.write_reports(perf_config(request.config).reports, session)
        report.attach_text("performance summary", summary.table_text(session))
        png = [p for p in written if p.suffix == ".png"]
        if png:
            report.attach_png("roofline", png[0].read_bytes())
        return written
    return write


@pytest.fixture
def record_benchmark(request: pytest.FixtureRequest):
    """record(measurement, **extra_info): hand the device times to pytest-benchmark.

    Pedantic mode with the device clock: one round per timed launch, each advancing
    the clock by that launch's event time. Without pytest-benchmark (-p no:benchmark)
    or with it disabled (--benchmark-disable, xdist) nothing is recorded and the
    suite still measures, checks and prints its table.
    """
    fixture = None
    if request.config.pluginmanager.hasplugin("benchmark"):
        fixture = request.getfixturevalue("benchmark")

    def record(measurement: perf.Measurement, group: str, **extra_info) -> None:
        if fixture is None:
            return
        if not fixture.enabled:
            # Disabled (--benchmark-disable; xdist): nothing is recorded, but a call marks the
            # fixture used, or pytest-benchmark warns "not used at all" once per timed test.
            fixture.pedantic(lambda: None)
            return
        fixture.group = group
        fixture.extra_info.update(extra_info)
        clock = perf.DEVICE_CLOCK.replay(measurement.times)
        fixture.pedantic(clock.advance, rounds=clock.rounds, iterations=1, warmup_rounds=0)

    return record


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[STARTED] = time.time() - 1   # parts older than this are an earlier run's


def pytest_sessionfinish(session: pytest.Session) -> None:
    """A pytest-xdist worker (or a re-run child) writes what it timed (it prints no summary);
    the session joins the parts. A compile-ahead child still running is stopped."""
    if AHEAD in session.config.stash:
        session.config.stash[AHEAD].stop()
    pc = perf_config(session.config)
    if rerun.runner_id(session.config) is not None and pc.session is not None and pc.session.rows:
        summary.write_reports(pc.reports, pc.session)


SESSION_PART = "session"   # the part a session that also ran a fresh process writes its own rows to


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    pc = perf_config(config)
    if pc.session is None or not pc.session.rows:
        _join_parts(terminalreporter, config, pc)
        return
    if containment(config).deferred and rerun.runner_id(config) is None:
        # the rest ran in a fresh process after a lost CUDA context (schedule.rerun): its rows
        # are a part of their own; this session's join them, each table under its name
        summary.write_reports(pc.reports / merge.PERF_PARTS / SESSION_PART, pc.session)
        _join_parts(terminalreporter, config, pc)
        return
    terminalreporter.section("gemmcheck: performance (device-event time, same-run ceilings)")
    for line in summary.table_text(pc.session).splitlines():
        terminalreporter.write_line(line)
    for path in summary.write_reports(pc.reports, pc.session):
        terminalreporter.write_line(f"wrote {path}")


def _join_parts(terminalreporter, config: pytest.Config, pc: PerfConfig) -> None:
    """The session's summary of what its pytest-xdist workers timed, each worker's table under
    its name; one perf.json of them all."""
    if rerun.runner_id(config) is not None or STARTED not in config.stash:
        return
    try:
        written = merge.merge_perf_parts(pc.reports, config.stash[STARTED])
    except merge.MergeError as exc:
        terminalreporter.write_line(f"gemmcheck: performance parts not joined: {exc} "
                                    f"(each worker's are in {pc.reports / merge.PERF_PARTS})")
        return
    if not written:
        return
    terminalreporter.section("gemmcheck: performance (device-event time, same-run ceilings; per worker)")
    for line in written[0].read_text().splitlines():
        terminalreporter.write_line(line)
    for path in written:
        terminalreporter.write_line(f"wrote {path}")
