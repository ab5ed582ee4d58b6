"""gemmcheck's pytest plugin: options, session state, parametrization, fixtures.

Only wiring lives here; logic lives in the modules it calls. The session object
(GemmConfig) lives in gemmcheck.pytest_plugin.session, which every suite plugin imports: no plugin
imports another.
"""

from __future__ import annotations

import argparse
import json
import re
from typing import Callable
from pathlib import Path

import pytest

from gemmcheck import arrays, backends, report
from gemmcheck.compile import choice, nvcc_tool, resources
from gemmcheck.compile.compiler import nvrtc_version
from gemmcheck.contract import catalog, dtypes, operand_types
from gemmcheck.backends import device
from gemmcheck.schedule import cores, gpu_turns, gpus, rerun, shard, shared_work, units
from gemmcheck import phases, watchdog
from gemmcheck.problems import profiles
from gemmcheck.schedule.runstats import (HYPOTHESIS_PROPERTY, INSTANCES_PROPERTY, KERNEL_CHECK, PHASES_PROPERTY,
                                         RunStats)
from gemmcheck.pytest_plugin.session import (GEMM_CONFIG, INSTANCE_FIXTURES, GemmConfig,  # noqa: F401
                                              gemm_config, instances_of, runs_kernels)

# Each suite's own hooks (options, summaries, reports) live in its own plugin
# module; pytest registers these along with this one.
pytest_plugins = ("gemmcheck.pytest_plugin.hazards_plugin", "gemmcheck.pytest_plugin.perf_plugin", "gemmcheck.pytest_plugin.report_plugin", "gemmcheck.pytest_plugin.build_plugin", "gemmcheck.pytest_plugin.scope_plugin", "gemmcheck.pytest_plugin.turns_plugin", "gemmcheck.pytest_plugin.once_plugin", "gemmcheck.pytest_plugin.lost_context_plugin", "gemmcheck.pytest_plugin.tool_failure_plugin", "gemmcheck.pytest_plugin.simulator_plugin")

DURATIONS_JSON = Path("reports") / "durations.json"
NOTHING_CHECKED = pytest.StashKey[str]()
COMPILER_BEFORE = pytest.StashKey[str]()   # the process's compiler choice before this session's
NOT_GENERATED = pytest.StashKey[int]()   # how many tests the selection gave nothing to run on
# pytest's reason for a test parametrized with an empty list (a claim about broken kernels in a
# catalog that declares none): such a test is deselected instead (_drop_empty_parametrizations)
EMPTY_PARAMETER_SET = re.compile(r"^got empty parameter set for \(")
CHILDREN_OUTPUT = "gemm_children"   # a pytest-xdist worker's child processes (phases.children)


# -- option converters: each quotes the bad value and says what would do ----------------

def _csv(value: str) -> tuple[str, ...]:
    items = tuple(v.strip() for v in value.split(",") if v.strip())
    if not items:
        raise argparse.ArgumentTypeError(f"{value!r} is empty; give a comma-separated list")
    return items


def _tiles(value: str) -> tuple[int, ...]:
    try:
        tiles = tuple(int(v) for v in _csv(value))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a list of integers; e.g. --gemm-tiles 16,32") from None
    if any(t < 1 for t in tiles):
        raise argparse.ArgumentTypeError(f"{value!r}: every TILE must be >= 1")
    return tiles


def _one_of(kind: str, choices) -> Callable[[str], str]:
    """An option converter that accepts one of `choices` and names them all when it refuses."""
    def convert(value: str) -> str:
        if value not in choices:
            raise argparse.ArgumentTypeError(f"unknown {kind} {value!r}; choose from {', '.join(choices)}")
        return value
    return convert


def _dtype(value: str) -> str:
    """A dtype name or a combination of operand types (gemmcheck.contract.operand_types)."""
    if operand_types.combination(value) is None:
        raise argparse.ArgumentTypeError(f"unknown dtype {value!r}; choose from {', '.join(dtypes.DTYPES)}, "
                                         "tf32, or a combination such as f16f16f32")
    return value


_profile = _one_of("profile", profiles.PROFILES)
_backend = _one_of("backend", backends.CHOICES)
_compiler = _one_of("compiler", choice.CHOICES)


def _dtypes(value: str) -> tuple[str, ...]:
    return tuple(_dtype(name) for name in _csv(value))


def _file_path(value: str) -> Path:
    if not value.strip() or Path(value).is_dir():
        raise argparse.ArgumentTypeError(f"{value!r} is not a file path; give one, e.g. reports/durations.json")
    return Path(value)


def durations_path(config: pytest.Config) -> Path:
    """Where the run writes its tests' durations: --gemm-durations, else beside the verdict
    summary (--gemm-verdicts), else reports/durations.json under the rootdir."""
    verdicts = config.getoption("gemm_verdicts", None)
    return (config.getoption("gemm_durations", None) or
            (Path(verdicts).parent / DURATIONS_JSON.name if verdicts else config.rootpath / DURATIONS_JSON))


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gemmcheck", "gemmcheck: GEMM kernel conformance")
    group.addoption("--gemm-catalog", action="append", metavar="PATH", default=None,
                    help="kernel catalog TOML to test; repeat for several; the names 'builtin' (gemmcheck's "
                         "own), 'ladder' (the reference ladder) and 'all' (both) need no path "
                         "(default: builtin)")
    group.addoption("--gemm-kernels", type=_csv, metavar="NAME,...", default=None,
                    help="only these catalog kernels (default: all)")
    group.addoption("--gemm-tiles", type=_tiles, metavar="TILE,...", default=None,
                    help="only these TILE sizes, e.g. 16,32 (default: every TILE a kernel declares)")
    group.addoption("--gemm-dtypes", type=_dtypes, metavar="DTYPE,...", default=None,
                    help=f"only these dtypes, from {','.join(dtypes.DTYPES)} or combinations of operand types "
                         "such as f16f16f32 (default: all)")
    group.addoption("--gemm-profile", type=_profile, metavar="NAME", default="dev",
                    help=f"sizes and example counts: {', '.join(profiles.PROFILES)} (default: dev)")
    group.addoption("--gemm-backend", type=_backend, metavar="NAME", default="auto",
                    help=f"where kernels run: {', '.join(backends.CHOICES)} "
                         "(default: auto, the GPU when there is one)")
    group.addoption("--gemm-compiler", type=_compiler, metavar="auto|nvcc|nvrtc", default="auto",
                    help="the device compiler of catalog sources an entry does not pin: nvcc (the source as its "
                         "author's build compiles it) or NVRTC (its device part; no host compiler needed) "
                         "(default: auto, nvcc where it is installed, else NVRTC)")
    group.addoption("--gemm-oracle", choices=("gpu", "host"), default="gpu",
                    help=f"where large problems ({arrays.describe_threshold()}) are judged when kernels run "
                         "on the GPU: gpu (default; the same judgement, in milliseconds) or host (numpy)")
    group.addoption("--gemm-gpus", type=gpus.parse_option, metavar="N|ORDINAL,...", default=None,
                    help="GPUs a pytest-xdist run spreads over: a count (2) or ordinals (0,1); -n auto "
                         "starts one worker per GPU (default: every GPU). With several, the first GPU's "
                         "workers time the performance suite while the others run the rest")
    group.addoption("--gemm-shard", type=shard.parse, metavar="I/N", default=None,
                    help="run only the I-th of N deterministic parts of the selected tests, for N "
                         "hosts; merge their reports with python -m gemmcheck.report.merge (default: all)")
    group.addoption("--gemm-shard-durations", metavar="PATH", default=None,
                    help=f"balance --gemm-shard by the test durations an earlier run wrote "
                         f"(--gemm-durations; default: every test counts the same)")
    group.addoption("--gemm-durations", type=_file_path, metavar="PATH", default=None,
                    help="where each test's duration is written, for a later --gemm-shard-durations "
                         f"(default: durations.json beside the verdict summary, {DURATIONS_JSON})")
    group.addoption("--gemm-phases", metavar="PATH", default=None,
                    help="time each test's phases (compile, inputs, launch, oracle, detectors, "
                         "children) and write them to PATH as JSON; scripts/bench_suite.py reads it "
                         "(default: off)")


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from gemmcheck.pytest_plugin import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    # A pytest-xdist worker takes its GPU before anything initializes CUDA, and its share of
    # the cores for numpy's thread pools.
    gpus.pin(getattr(config, "workerinput", {}))
    cores.limit(getattr(config, "workerinput", {}))
    for marker, text in (
        ("gpu", "needs a CUDA device (skipped with the reason when there is none)"),
        ("slow", "takes more than a few seconds"),
        ("sanitizer", "runs compute-sanitizer in a child process"),
        ("perf", "device-timed performance measurement"),
        ("instances", "instances(predicate): keep only the catalog instantiations for which "
                      "predicate(instance) is true, e.g. the TILEs a fixed shape allows"),
        ("nvrtc", "compiles only, with nvcc or NVRTC (no device, no simulator): runs for gpu_only kernels "
                  "under --gemm-backend cpu-sim too"),
        ("with_simulator", "runs its instantiations on the CPU simulator too, beside the GPU: skipped "
                           "with the reason for a kernel the simulator does not run (gpu_only)"),
    ):
        config.addinivalue_line("markers", f"{marker}: {text}")

    opt = config.option
    if opt.gemm_compiler == "nvcc" and nvcc_tool.find() is None:
        raise pytest.UsageError(f"--gemm-compiler nvcc: {nvcc_tool.why_missing()}; or use --gemm-compiler auto")
    config.stash[COMPILER_BEFORE] = choice.requested()
    choice.request(opt.gemm_compiler)   # kept in the environment: workers and children build alike
    if opt.gemm_durations:
        why = report.unwritable_file(opt.gemm_durations)
        if why:
            raise pytest.UsageError(f"--gemm-durations {opt.gemm_durations}: cannot write there ({why}); "
                                    "give a writable path")
    catalogs = catalog.resolve(opt.gemm_catalog or ["builtin"])
    try:
        specs = catalog.load_all(catalogs)
    except catalog.CatalogError as exc:
        raise pytest.UsageError(f"--gemm-catalog: {exc}") from None
    if opt.gemm_kernels:
        known = {s.name for s in specs}
        unknown = [k for k in opt.gemm_kernels if k not in known]
        if unknown:
            raise pytest.UsageError(f"--gemm-kernels: no kernel named {', '.join(map(repr, unknown))} "
                                    f"in the catalog; it has: {', '.join(sorted(known))}")
    if opt.gemm_tiles:
        declared = {t for s in specs for t in s.tiles}
        if not declared & set(opt.gemm_tiles):
            raise pytest.UsageError(f"--gemm-tiles {','.join(map(str, opt.gemm_tiles))}: no kernel "
                                    f"declares these; declared TILEs: {sorted(declared)}")
    config.stash[GEMM_CONFIG] = GemmConfig(
        specs=specs, catalogs=catalogs, kernels=opt.gemm_kernels, tiles=opt.gemm_tiles,
        dtypes=opt.gemm_dtypes, profile=profiles.PROFILES[opt.gemm_profile],
        backend_name=opt.gemm_backend)
    _load_hypothesis_profile(config)
    phases.enable(bool(opt.gemm_phases))
    watchdog.configure(config.rootpath / "reports" / "stalls")   # where a long wait's report goes
    config.pluginmanager.register(_Recorder(config), "gemmcheck-recorder")


def pytest_unconfigure(config: pytest.Config) -> None:
    if COMPILER_BEFORE in config.stash:   # a session run inside another (pytester) leaves the outer's choice
        choice.request(config.stash[COMPILER_BEFORE])


def _load_hypothesis_profile(config: pytest.Config) -> None:
    from hypothesis import HealthCheck, settings
    from hypothesis.database import DirectoryBasedExampleDatabase

    # One hypothesis profile per gemmcheck profile, named gemmcheck-<name> (hypothesis
    # has a built-in "ci" profile we must not replace). No deadline: a launch's first
    # call compiles. The database lives under reports/ so a nightly failure replays
    # first in the next run. An explicit --hypothesis-profile wins.
    database = DirectoryBasedExampleDatabase(str(Path(config.rootpath) / "reports" / "hypothesis"))
    for profile in profiles.PROFILES.values():
        settings.register_profile(
            f"gemmcheck-{profile.name}", max_examples=profile.max_examples, deadline=None,
            database=database, print_blob=True,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    if config.getoption("hypothesis_profile", None):
        return
    settings.load_profile(f"gemmcheck-{gemm_config(config).profile.name}")


def pytest_report_header(config: pytest.Config) -> list[str]:
    gc = gemm_config(config)
    ok, why = device.cuda_device()
    names = ", ".join(s.name for s in gc.specs)
    return [
        f"gemmcheck: profile {gc.profile.name}; catalog {', '.join(str(c) for c in gc.catalogs)}",
        f"gemmcheck: kernels {names}",
        f"gemmcheck: backend {gc.backend_name}; device: {why}; kernels run on "
        f"{backends.resolve(gc.backend_name)}",
        f"gemmcheck: device compiler {choice.requested()}: {_compilers()}",
    ]


def _compilers() -> str:
    found = nvcc_tool.find()
    nvcc = found.describe() if found else nvcc_tool.why_missing()
    return f"{nvcc}; NVRTC {nvrtc_version()}"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    gc = gemm_config(metafunc.config)
    keep = [m.args[0] for m in metafunc.definition.iter_markers("instances")]
    for fixture in INSTANCE_FIXTURES:
        if fixture in metafunc.fixturenames:
            instances = [i for i in gc.instances(fixture) if all(p(i) for p in keep)]
            metafunc.parametrize(fixture, instances, ids=[i.id for i in instances])


def pytest_gemm_skip_reason(config: pytest.Config, item: pytest.Item) -> str | None:
    """The core suite's skip reasons: no device for GPU / perf tests, gpu_only kernels on cpu-sim."""
    if item.get_closest_marker("gpu") or item.get_closest_marker("perf"):
        ok, why = device.cuda_device()
        if not ok:
            return why
        if gemm_config(config).simulated:
            return ("--gemm-backend cpu-sim: GPU and performance tests run only on the GPU "
                    "backend (cupy)")
        if item.get_closest_marker("with_simulator"):
            return _not_simulated(item)
    elif gemm_config(config).simulated and not item.get_closest_marker("nvrtc"):
        if why := _not_simulated(item):
            return why
        if why := _too_large_to_simulate(item):
            return why
        unsimulated = [p for p in instances_of(item) if not p.spec.simulated(p.config)]
        if unsimulated:
            return (f"{unsimulated[0].id}: not among its catalog's sim_configs "
                    f"({', '.join(unsimulated[0].spec.sim_configs)}): the CPU simulator runs a few "
                    "configs of this kernel; all of them run with --gemm-backend cupy on a GPU")
    return None


# The most work (M N K) the CPU simulator is given where a kernel's sizes are compiled in: a launch
# at 256^3 takes about a second there, each schedule as much again; 1024^3 takes minutes.
SIMULATED_COMPILED_WORK = 256 ** 3


def _too_large_to_simulate(item: pytest.Item) -> str | None:
    """Why the simulator does not run a kernel whose compiled sizes are too large for it (a
    course's #define N 1024): its one shape is all it computes, so its tests cannot shrink it."""
    large = [p for p in instances_of(item) if p.spec.sizes is not None
             and p.spec.sizes[0] * p.spec.sizes[1] * p.spec.sizes[2] > SIMULATED_COMPILED_WORK]
    if not large:
        return None
    return (f"{large[0].spec.name} computes {large[0].spec.describe_shapes()}, more than the CPU simulator runs in "
            f"reasonable time (M N K up to {round(SIMULATED_COMPILED_WORK ** (1 / 3))}^3); its compile checks run here, "
            "the rest with --gemm-backend cupy on a GPU")


def _not_simulated(item: pytest.Item) -> str | None:
    """Why the CPU simulator does not run the test's kernel (gpu_only), or None: its skip
    reason wherever the simulator would run it, a cpu-sim session or a test that compares it
    with the GPU. Never a crash of the kernel: it was not run."""
    gpu_only = [p for p in instances_of(item) if p.spec.gpu_only]
    return gpu_only[0].spec.simulator_skip_reason() if gpu_only else None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _drop_empty_parametrizations(config, items)
    # The one place skips are added: every suite plugin answers pytest_gemm_skip_reason.
    for item in items:
        reason = config.hook.pytest_gemm_skip_reason(config=config, item=item)
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))
        if runs_kernels(item):
            # a keyword, not a marker: it reaches the report (and the xdist controller)
            # without becoming an allure tag
            item.keywords[KERNEL_CHECK] = True
        if "backend" in getattr(item, "fixturenames", ()):
            # a test that launches its instantiations: its skip says why they were not checked
            item.user_properties.append((INSTANCES_PROPERTY, [i.id for i in instances_of(item)]))
    part = config.getoption("gemm_shard")
    if part is not None:
        # deselect the other shards' tests, keeping the collection order
        where = shard.assign([i.nodeid for i in items], part.count, units.recorded_durations(config),
                             lambda nodeid: units.work_unit(config, nodeid))
        dropped = [i for i in items if where[i.nodeid] != part.index]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = [i for i in items if where[i.nodeid] == part.index]


def _drop_empty_parametrizations(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A claim with nothing in the catalog to make it about (the kill matrix's rows of broken
    kernels in a catalog of correct ones) is not a test: pytest would skip it once per other
    parameter with "got empty parameter set"; it is deselected instead, counted for one line at
    the end."""
    kept, empty = [], []
    for item in items:
        reasons = (str(m.kwargs.get("reason", "")) for m in item.iter_markers("skip"))
        (empty if any(EMPTY_PARAMETER_SET.match(r) for r in reasons) else kept).append(item)
    if empty:
        config.hook.pytest_deselected(items=empty)
        items[:] = kept
        config.stash[NOT_GENERATED] = len(empty)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """-n (xdist's "load") deals tests one by one, so each worker that gets a test of a
    kill-matrix row builds that row again: deal units of work instead (units.make_scheduler).
    xdist's own loadgroup cannot do it on pytest >= 9.2: it rewrites node ids, which no
    longer takes (pytest-xdist#1386). An explicit other --dist is kept."""
    if config.getvalue("dist") != "load":
        return None
    return units.make_scheduler(config, log)


# -- pytest-xdist: one worker per GPU --------------------------------------------------------

@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """-n auto: one worker per GPU on the GPU backend (the CPU count otherwise)."""
    if gemm_config(config).simulated:
        return None
    return len(_run_gpus(config)) or None


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    config = node.config
    if gemm_config(config).simulated:
        return
    workerinput = node.workerinput
    count = int(workerinput.get("workercount") or config.getoption("numprocesses") or 1)
    run_gpus = _run_gpus(config)
    config.stash[gpus.RUN_GPU_COUNT] = len(run_gpus)
    workerinput.update(gpus.worker_input(run_gpus, units.worker_index(workerinput["workerid"]),
                                         count, lock_folder=lambda: gpu_turns.folder(config)))
    workerinput.update(shared_work.worker_input(config))


def _run_gpus(config: pytest.Config) -> tuple[int, ...]:
    try:
        return gpus.choose(config.getoption("gemm_gpus"), gpus.visible_count())
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None


# -- per-test phases, durations and whether any kernel test ran ------------------------------

class _Recorder:
    """Per-session hooks that feed gemmcheck.schedule.runstats (a plugin object per config, so
    nested pytester sessions keep their own)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.stats = RunStats()

    def pytest_collection_finish(self) -> None:
        self.stats.collected()

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids) -> None:
        self.stats.worker_collected(node.gateway.id)

    def pytest_runtest_logstart(self) -> None:
        phases.begin()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call):
        outcome = yield
        if call.when == "teardown" and phases.enabled():
            properties = outcome.get_result().user_properties
            properties.append((PHASES_PROPERTY, phases.take()))
            if _uses_hypothesis(item):
                properties.append((HYPOTHESIS_PROPERTY, True))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.stats.add(report)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus) -> None:
        config, stats = self.config, self.stats
        gemm_config(config).skips = stats.skips_by_instance   # for the verdict summary (report_plugin)
        if rerun.runner_id(config) is not None:
            if hasattr(config, "workeroutput") and phases.enabled():
                config.workeroutput[CHILDREN_OUTPUT] = phases.children()   # to the controller
            return   # pytest-xdist: the controller sees every report and writes the files; a
                     # re-run child (rerun.py) leaves them to the session that started it
        stats.add_children("main", phases.children())
        if stats.durations and not config.option.collectonly:
            _write_json(durations_path(config), stats.durations_document())
        if config.getoption("gemm_phases"):
            _write_json(Path(config.getoption("gemm_phases")), stats.phases_document())
        why = stats.nothing_checked(collect_only=config.option.collectonly, exitstatus=int(exitstatus),
                                    empty=config.stash.get(NOT_GENERATED, 0))
        if why:
            config.stash[NOTHING_CHECKED] = why
            session.exitstatus = pytest.ExitCode.NO_TESTS_COLLECTED

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error) -> None:
        """pytest-xdist: a worker's children, for the timeline."""
        self.stats.add_children(node.gateway.id, getattr(node, "workeroutput", {}).get(CHILDREN_OUTPUT, ()))


def _uses_hypothesis(item: pytest.Item) -> bool:
    """A @given test, or one that applies @given inside its body (the correctness suite's
    property tests do, to read the profile's example count)."""
    fn = getattr(item, "obj", None)
    code = getattr(fn, "__code__", None)
    return bool(getattr(fn, "is_hypothesis_test", False) or (code and "given" in code.co_names))


def _write_json(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    tmp.replace(path)


@pytest.fixture(scope="session")
def gemm(request: pytest.FixtureRequest) -> GemmConfig:
    """The session's gemmcheck configuration (catalog, filters, profile)."""
    return gemm_config(request.config)


@pytest.fixture(scope="session")
def backend(gemm: GemmConfig, request: pytest.FixtureRequest) -> backends.Backend:
    """Where kernels run; skips (with the reason) when the chosen backend cannot run here."""
    if gemm.backend is None and gemm.backend_error is None:
        try:
            gemm.backend = backends.create(gemm.backend_name,
                                           hang_timeout_s=request.config.getoption("gemm_hang_timeout"))
            gemm.backend.prepare(gemm.instances("any_kernel"))
            arrays.use_device(gemm.backend.runs_on_cuda_device and request.config.getoption("gemm_oracle") == "gpu")
        except backends.BackendUnavailable as exc:
            gemm.backend_error = str(exc)
        else:
            request.config.hook.pytest_gemm_backend_made(session=request.session, backend=gemm.backend)
    if gemm.backend is None:
        pytest.skip(gemm.backend_error)
    return gemm.backend


@pytest.fixture
def profile(gemm: GemmConfig) -> profiles.Profile:
    return gemm.profile


@pytest.fixture(scope="session")
def verdicts(gemm: GemmConfig):
    """The session's verdict log: checks record what they found here."""
    return gemm.verdicts


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    empty = config.stash.get(NOT_GENERATED, None)
    if empty and NOTHING_CHECKED not in config.stash:   # else that line says it
        terminalreporter.write_line(
            f"gemmcheck: {empty} deselected: claims the selected kernels give nothing to check "
            "(e.g. about broken kernels, in a catalog of correct ones)")
    why = config.stash.get(NOTHING_CHECKED, None)
    if why:
        terminalreporter.write_line(why + " (exit 5)", red=True, bold=True)
    rows = gemm_config(config).resource_rows
    if not rows:
        return
    ordered = sorted(rows, key=lambda row: (row[0].spec.name, row[0].dtype, row[0].tile))
    terminalreporter.section("gemmcheck: compiled resources (ptxas -v)")
    for line in resources.table(found for _, found in ordered) + resources.notes(ordered):
        terminalreporter.write_line(line)
