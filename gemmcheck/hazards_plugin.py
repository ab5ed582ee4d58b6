"""pytest wiring of the hazards suite: options, the kill matrix fixture, its parametrization,
its terminal summary and reports/kill_matrix.json. Logic lives in gemmcheck.kill_matrix,
gemmcheck.hazards, gemmcheck.isolation and gemmcheck.sanitizer.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from gemmcheck import kill_matrix, sanitizer

MATRIX = pytest.StashKey[dict]()          # "rows", "settings", "seconds" once computed
MATRIX_JSON = Path("reports") / "kill_matrix.json"
# Fixtures this plugin parametrizes over catalog instantiations.
MATRIX_ROW = "matrix_row"                 # one per kill-matrix instantiation
EXPOSED_BROKEN = "exposed_broken"         # broken kernels for the correctness suite, as strict xfails
NOT_FOR_CORRECTNESS = ("crash", "hang", "too_slow")


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
                    default=10.0, help="an isolated launch that takes longer is a HANG (default: 10)")
    group.addoption("--gemm-isolate", choices=("risky", "all"), default="risky", metavar="risky|all",
                    help="which kernels the kill matrix launches in a child process: those declared "
                         "crash or hang, or all (default: risky)")


def simulated(config: pytest.Config) -> bool:
    """Whether kernels run on the CPU simulator in this session."""
    from gemmcheck import backends

    return backends.resolve(_gemm(config).backend_name) == "cpu-sim"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "simulator: uses what only the CPU simulator (cpu-sim) "
                                       "establishes; skipped with the reason on other backends")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if simulated(config):
        return
    skip = pytest.mark.skip(reason="cpu-sim only: this check reads what the CPU simulator establishes "
                                   "(thread schedules, shared-memory and barrier tracking, "
                                   "AddressSanitizer); run with --gemm-backend cpu-sim")
    for item in items:
        if item.get_closest_marker("simulator"):
            item.add_marker(skip)


def sanitizer_status(config: pytest.Config) -> tuple[str | None, str]:
    """(path of compute-sanitizer or None, why not)."""
    if simulated(config):
        return None, f"{kill_matrix.SANITIZER_NOT_APPLICABLE}: {kill_matrix.SANITIZER_ON_SIMULATOR}"
    if config.getoption("gemm_sanitizer") == "off":
        return None, "compute-sanitizer turned off by --gemm-sanitizer off"
    exe = sanitizer.executable()
    return exe, "" if exe else sanitizer.MISSING


def _gemm(config):
    from gemmcheck.session import gemm_config

    return gemm_config(config)


def matrix_instances(config: pytest.Config):
    gc = _gemm(config)
    return kill_matrix.select(gc.instances("any_kernel"), every=gc.profile.name == "nightly")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    keep = [m.args[0] for m in metafunc.definition.iter_markers("instances")]
    if MATRIX_ROW in metafunc.fixturenames:
        instances = [i for i in matrix_instances(metafunc.config) if all(p(i) for p in keep)]
        metafunc.parametrize(MATRIX_ROW, instances, ids=[i.id for i in instances], indirect=True)
    if EXPOSED_BROKEN in metafunc.fixturenames:
        instances = [i for i in matrix_instances(metafunc.config)
                     if not i.spec.is_reference and i.spec.expect not in NOT_FOR_CORRECTNESS
                     and all(p(i) for p in keep)]
        params = [pytest.param(i, id=i.id, marks=pytest.mark.xfail(
            strict=True, raises=(AssertionError, pytest.fail.Exception),
            reason=f"declared {i.spec.expect}: {i.spec.description or i.spec.name}"))
            for i in instances]
        metafunc.parametrize(EXPOSED_BROKEN, params)


@pytest.fixture(scope="session")
def sanitizer_exe(request) -> str:
    """compute-sanitizer's path; skips with the reason when it is absent or turned off."""
    exe, why = sanitizer_status(request.config)
    if exe is None:
        pytest.skip(why)
    return exe


@pytest.fixture(scope="session")
def kill_matrix_rows(request, backend) -> dict:
    """Every kill-matrix row, computed once per session: instance id -> kill_matrix.Row."""
    config = request.config
    if MATRIX not in config.stash:
        gc = _gemm(config)
        exe, why = sanitizer_status(config)
        settings = kill_matrix.Settings(
            race_sizes=gc.profile.race_sizes, race_repeats=gc.profile.race_repeats,
            backend_name=gc.backend_name, sanitizer_exe=exe, sanitizer_note=why,
            hang_timeout=config.getoption("gemm_hang_timeout"),
            isolate_all=config.getoption("gemm_isolate") == "all",
            log_dir=Path(config.rootpath) / "reports" / "sanitizer")
        import time

        started = time.monotonic()
        rows = kill_matrix.build(backend, matrix_instances(config), settings)
        config.stash[MATRIX] = {"rows": rows, "settings": settings,
                                "seconds": time.monotonic() - started}
    return {r.instance.id: r for r in config.stash[MATRIX]["rows"]}


@pytest.fixture
def matrix_row(request, kill_matrix_rows):
    """The kill-matrix row of the parametrized instantiation."""
    return kill_matrix_rows[request.param.id]


def pytest_sessionfinish(session: pytest.Session) -> None:
    matrix = session.config.stash.get(MATRIX, None)
    if not matrix:
        return
    path = Path(session.config.rootpath) / MATRIX_JSON
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = kill_matrix.document(matrix["rows"], matrix["settings"])
    doc["seconds"] = round(matrix["seconds"], 1)
    path.write_text(json.dumps(doc, indent=2))


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    matrix = config.stash.get(MATRIX, None)
    if not matrix:
        return
    settings, rows = matrix["settings"], matrix["rows"]
    on = kill_matrix.runs_on(rows, settings)
    terminalreporter.section(f"gemmcheck: kill matrix ({on})")
    for line in kill_matrix.table(rows):
        terminalreporter.write_line(line)
    if rows and all(r.plain.detectors == kill_matrix.SIMULATOR for r in rows):
        how = (f"simulator detectors on the small problems, schedules {', '.join(settings.schedules)}"
               f"{', AddressSanitizer' if settings.address_check else ''}; sanitizer column "
               f"{kill_matrix.SANITIZER_NOT_APPLICABLE} (compute-sanitizer needs a GPU)")
    else:
        tool = (f"compute-sanitizer {', '.join(settings.tools)}" if settings.sanitizer_exe
                else f"sanitizer column not run: {settings.sanitizer_note}")
        how = (f"race stress {'x'.join(map(str, settings.race_sizes))} x {settings.race_repeats} "
               f"launches; {tool}")
    terminalreporter.write_line(f"{len(rows)} rows in {matrix['seconds']:.1f} s on {on}; {how}; "
                                f"written to {MATRIX_JSON}")
