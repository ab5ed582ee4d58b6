"""gemmcheck's pytest plugin: options, session state, parametrization, fixtures.

Only wiring lives here; logic lives in the modules it calls.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gemmcheck import backends, catalog, device, dtypes, profiles
from gemmcheck.catalog import Instance, KernelSpec
from gemmcheck.verdict import VerdictLog

# Each suite's own hooks (options, summaries, reports) live in its own plugin
# module; pytest registers these along with this one.
pytest_plugins = ("gemmcheck.hazards_plugin", "gemmcheck.perf_plugin", "gemmcheck.report_plugin", "gemmcheck.build_plugin", "gemmcheck.scope_plugin")

# Fixtures that parametrize over catalog instantiations, and which ones each gets.
INSTANCE_FIXTURES = {
    "reference": "kernels declared correct",
    "broken": "kernels declared to have a defect",
    "any_kernel": "every kernel in the catalog",
}


@dataclass
class GemmConfig:
    """Everything the options decided, kept in config.stash."""

    specs: list[KernelSpec]
    catalogs: list[Path]
    kernels: tuple[str, ...] | None
    tiles: tuple[int, ...] | None
    dtypes: tuple[str, ...] | None
    profile: profiles.Profile
    backend_name: str
    backend: backends.Backend | None = None
    backend_error: str | None = None
    resource_rows: list = field(default_factory=list)  # (Instance, Resources), from suites/compile
    verdicts: VerdictLog = field(default_factory=VerdictLog)

    def instances(self, which: str) -> list[Instance]:
        out = []
        for spec in self.specs:
            if self.kernels and spec.name not in self.kernels:
                continue
            if which == "reference" and not spec.is_reference:
                continue
            if which == "broken" and spec.is_reference:
                continue
            for inst in spec.instances():
                if self.tiles and inst.tile not in self.tiles:
                    continue
                if self.dtypes and inst.dtype not in self.dtypes:
                    continue
                out.append(inst)
        return out


GEMM_CONFIG = pytest.StashKey[GemmConfig]()


def gemm_config(config: pytest.Config) -> GemmConfig:
    return config.stash[GEMM_CONFIG]


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


def _dtypes(value: str) -> tuple[str, ...]:
    names = _csv(value)
    for name in names:
        if name not in dtypes.DTYPES:
            raise argparse.ArgumentTypeError(
                f"unknown dtype {name!r}; choose from {','.join(dtypes.DTYPES)}")
    return names


def _profile(value: str) -> str:
    if value not in profiles.PROFILES:
        raise argparse.ArgumentTypeError(
            f"unknown profile {value!r}; choose from {', '.join(profiles.PROFILES)}")
    return value


def _backend(value: str) -> str:
    if value not in backends.CHOICES:
        raise argparse.ArgumentTypeError(
            f"unknown backend {value!r}; choose from {', '.join(backends.CHOICES)}")
    return value


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gemmcheck", "gemmcheck: GEMM kernel conformance")
    group.addoption("--gemm-catalog", action="append", metavar="PATH", default=None,
                    help="kernel catalog TOML to test; repeat for several; 'builtin' names "
                         "gemmcheck's own (default: builtin)")
    group.addoption("--gemm-kernels", type=_csv, metavar="NAME,...", default=None,
                    help="only these catalog kernels (default: all)")
    group.addoption("--gemm-tiles", type=_tiles, metavar="TILE,...", default=None,
                    help="only these TILE sizes, e.g. 16,32 (default: every TILE a kernel declares)")
    group.addoption("--gemm-dtypes", type=_dtypes, metavar="DTYPE,...", default=None,
                    help=f"only these dtypes, from {','.join(dtypes.DTYPES)} (default: all)")
    group.addoption("--gemm-profile", type=_profile, metavar="NAME", default="dev",
                    help=f"sizes and example counts: {', '.join(profiles.PROFILES)} (default: dev)")
    group.addoption("--gemm-backend", type=_backend, metavar="NAME", default="auto",
                    help=f"where kernels run: {', '.join(backends.CHOICES)} "
                         "(default: auto, the GPU when there is one)")


def pytest_configure(config: pytest.Config) -> None:
    for marker, text in (
        ("gpu", "needs a CUDA device (skipped with the reason when there is none)"),
        ("slow", "takes more than a few seconds"),
        ("sanitizer", "runs compute-sanitizer in a child process"),
        ("perf", "device-timed performance measurement"),
        ("instances", "instances(predicate): keep only the catalog instantiations for which "
                      "predicate(instance) is true, e.g. the TILEs a fixed shape allows"),
    ):
        config.addinivalue_line("markers", f"{marker}: {text}")

    opt = config.option
    catalogs = [catalog.BUILTIN if c == "builtin" else Path(c) for c in (opt.gemm_catalog or ["builtin"])]
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
    ]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    gc = gemm_config(metafunc.config)
    keep = [m.args[0] for m in metafunc.definition.iter_markers("instances")]
    for fixture in INSTANCE_FIXTURES:
        if fixture in metafunc.fixturenames:
            instances = [i for i in gc.instances(fixture) if all(p(i) for p in keep)]
            metafunc.parametrize(fixture, instances, ids=[i.id for i in instances])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    ok, why = device.cuda_device()
    simulated = backends.resolve(gemm_config(config).backend_name) == "cpu-sim"
    if not ok:
        skip = pytest.mark.skip(reason=why)
    elif simulated:
        skip = pytest.mark.skip(reason="--gemm-backend cpu-sim: GPU and performance tests run only on "
                                       "the GPU backend (cupy)")
    else:
        skip = None
    for item in items:
        if skip and (item.get_closest_marker("gpu") or item.get_closest_marker("perf")):
            item.add_marker(skip)
        elif simulated:
            gpu_only = [p for p in getattr(getattr(item, "callspec", None), "params", {}).values()
                        if isinstance(p, Instance) and p.spec.gpu_only]
            if gpu_only:
                item.add_marker(pytest.mark.skip(
                    reason=f"{gpu_only[0].spec.name} is gpu_only in its catalog: it needs what the CPU "
                           "simulator does not model (cp.async, warp shuffles, tensor cores, dynamic "
                           "shared memory); run it with --gemm-backend cupy on a GPU"))


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
        except backends.BackendUnavailable as exc:
            gemm.backend_error = str(exc)
    if gemm.backend is None:
        pytest.skip(gemm.backend_error)
    return gemm.backend


@pytest.fixture
def profile(gemm: GemmConfig) -> profiles.Profile:
    return gemm.profile


@pytest.fixture(scope="session")
def verdicts(gemm: GemmConfig) -> VerdictLog:
    """The session's verdict log: checks record what they found here."""
    return gemm.verdicts


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    rows = gemm_config(config).resource_rows
    if not rows:
        return
    header = ("instantiation", "arch", "regs", "smem B", "stack B", "spill B", "barriers")
    ordered = sorted(rows, key=lambda row: (row[0].spec.name, row[0].dtype, row[0].tile))
    table = [header] + [
        (r.name_expression, r.arch, str(r.registers), str(r.shared_bytes), str(r.stack_frame),
         str(r.spills), str(r.barriers)) for _, r in ordered]
    widths = [max(len(row[c]) for row in table) for c in range(len(header))]
    terminalreporter.section("gemmcheck: compiled resources (ptxas -v)")
    for row in table:
        terminalreporter.write_line("  ".join(cell.ljust(w) for cell, w in zip(row, widths)))
