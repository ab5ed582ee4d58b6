"""pytest hooks and fixtures of the performance suite (suites/performance).

Wiring only: measuring lives in gemmcheck.perf, the arithmetic and the plot
in gemmcheck.roofline.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from gemmcheck import perf, report, roofline
from gemmcheck.catalog import Instance

# Fixtures the perf suite parametrizes, and what each gets.
TIMED = "perf_instance"    # a catalog instantiation to time: references and declared-too-slow kernels
SIZE = "perf_size"         # N of the N x N x N problem, from the profile's perf_sizes
CLAIM = "perf_claim"       # (Threshold, N) for a kernel declared correct: it must meet it
KILL = "perf_kill"        # (Threshold, N) for a kernel declared too_slow: it must fail it
SLOW = "perf_too_slow"    # each declared-too-slow instantiation (it must have a threshold)


@dataclass
class PerfConfig:
    thresholds: perf.Thresholds
    reports: Path
    session: perf.PerfSession | None = None
    skip_reason: str | None = None


PERF_CONFIG = pytest.StashKey[PerfConfig]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gemmcheck")
    group.addoption("--gemm-thresholds", metavar="PATH", default=None,
                    help="performance thresholds TOML (default: gemmcheck's "
                         "suites/performance/thresholds.toml)")


def pytest_configure(config: pytest.Config) -> None:
    path = config.option.gemm_thresholds or perf.BUILTIN_THRESHOLDS
    try:
        thresholds = perf.load_thresholds(path)
    except perf.ThresholdError as exc:
        raise pytest.UsageError(f"--gemm-thresholds: {exc}") from None
    reports = Path(config.rootpath) / "reports"
    config.stash[PERF_CONFIG] = PerfConfig(thresholds, reports / "performance")
    # pytest-benchmark keeps saved runs in ./.benchmarks unless told otherwise; ours
    # belong under reports/. Its own configure runs after this one (trylast).
    if getattr(config.option, "benchmark_storage", None) == "file://./.benchmarks":
        config.option.benchmark_storage = f"file://{reports / 'benchmarks'}"


def perf_config(config: pytest.Config) -> PerfConfig:
    return config.stash[PERF_CONFIG]


def _gemm(config):
    from gemmcheck.session import gemm_config
    return gemm_config(config)


def timed_instances(config: pytest.Config) -> list[Instance]:
    """References and declared-too-slow kernels at the TILEs the thresholds file times."""
    tiles = perf_config(config).thresholds.timing.tiles
    return [i for i in _gemm(config).instances("any_kernel")
            if i.spec.expect in ("correct", "too_slow") and i.tile in tiles]


def _cases(config: pytest.Config, expect: str):
    gc = _gemm(config)
    by_key = {(i.spec.name, i.dtype, i.tile): i for i in timed_instances(config)}
    cases = []
    for t in perf_config(config).thresholds.thresholds:
        inst = by_key.get((t.kernel, t.dtype, t.tile))
        if inst is None or inst.spec.expect != expect:
            continue
        for size in gc.profile.perf_sizes:
            if t.applies(size) and inst.supports(size, size, size):
                cases.append(pytest.param((t, size), id=f"{t.id}-N{size}"))
    return cases


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    config = metafunc.config
    names = metafunc.fixturenames
    if TIMED in names:
        keep = [m.args[0] for m in metafunc.definition.iter_markers("instances")]
        instances = [i for i in timed_instances(config) if all(p(i) for p in keep)]
        metafunc.parametrize(TIMED, instances, ids=[i.id for i in instances])
    if SIZE in names:
        sizes = _gemm(config).profile.perf_sizes
        metafunc.parametrize(SIZE, sizes, ids=[f"N{s}" for s in sizes])
    if CLAIM in names:
        metafunc.parametrize(CLAIM, _cases(config, "correct"))
    if KILL in names:
        metafunc.parametrize(KILL, _cases(config, "too_slow"))
    if SLOW in names:
        slow = [i for i in timed_instances(config) if i.spec.expect == "too_slow"]
        metafunc.parametrize(SLOW, slow, ids=[i.id for i in slow])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    workers = perf.xdist_workers()
    benchmark_on = config.pluginmanager.hasplugin("benchmark")
    for item in items:
        if workers > 1 and item.get_closest_marker("perf"):
            item.add_marker(pytest.mark.skip(reason=(
                f"device timing needs the GPU to itself; pytest-xdist runs {workers} workers at once. "
                "Run the performance suite without xdist: pytest suites/performance -p no:xdist")))
        elif benchmark_on and "record_benchmark" in getattr(item, "fixturenames", ()):
            # pytest-benchmark reads its timer from this marker: the device clock.
            item.add_marker(pytest.mark.benchmark(timer=perf.DEVICE_CLOCK))


def pytest_report_header(config: pytest.Config) -> list[str]:
    pc = perf_config(config)
    known = {s.name for s in _gemm(config).specs}
    orphans = sorted({t.kernel for t in pc.thresholds.thresholds if t.kernel not in known})
    line = (f"gemmcheck perf: thresholds {pc.thresholds.path} ({len(pc.thresholds.thresholds)} claims; "
            f"timing TILEs {', '.join(map(str, pc.thresholds.timing.tiles))})")
    if orphans:
        line += f"; naming kernels not in the catalog (not run): {', '.join(orphans)}"
    return [line]


@pytest.fixture(scope="session")
def perf_session(request: pytest.FixtureRequest, backend) -> perf.PerfSession:
    """The session's device timer and everything it measured; skips off the GPU."""
    pc = perf_config(request.config)
    if pc.session is None and pc.skip_reason is None:
        if backend.name != "cupy":
            pc.skip_reason = (f"performance is timed on a CUDA device; backend {backend.name!r} "
                              "does not time kernels")
        else:
            timer = perf.GpuTimer(backend, pc.thresholds.timing)
            pc.session = perf.PerfSession(timer, _gemm(request.config).profile.perf_repeats)
            pc.session.copy()   # the memory roof, measured first, on an idle card
    if pc.session is None:
        pytest.skip(pc.skip_reason)
    return pc.session


@pytest.fixture
def perf_timing(request: pytest.FixtureRequest) -> perf.Timing:
    return perf_config(request.config).thresholds.timing


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
        if fixture is None or not fixture.enabled:
            return
        fixture.group = group
        fixture.extra_info.update(extra_info)
        clock = perf.DEVICE_CLOCK.replay(measurement.times)
        fixture.pedantic(clock.advance, rounds=clock.rounds, iterations=1, warmup_rounds=0)

    return record


# -- the summary ------------------------------------------------------------------------------

def summary_rows(session: perf.PerfSession) -> tuple[list[tuple[str, ...]], list[str]]:
    """(table rows with a header first, footer lines) for what was measured."""
    header = ("kernel", "N", "TFLOP/s", "spread", "% cuBLAS", "% FP32 peak",
              "model FLOP/B", "model roof", "bound", "% of roof")
    rows = [header]
    device = session.device
    peak = device.fp32_peak_tflops
    roof = session.roof()
    for (label, size), row in sorted(session.rows.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        inst, m = row.instance, row.measurement
        if m is None:
            rows.append((label, str(size), "wrong", "-", "-", "-", "-", "-", "-",
                         f"check {row.check.worst_ratio:.3g} x bound, {row.check.nans} NaN"))
            continue
        cublas = session.cublas(inst.dtype, size)
        pct_cublas = (f"{100 * m.tflops / cublas.tflops:.1f}" if isinstance(cublas, perf.Measurement)
                      else "n/a")
        intensity = roofline.model_intensity(inst.spec.policy, inst.tile, inst.spec.shared_tiles,
                                             inst.dt.itemsize)
        if roof:
            attainable = roof.attainable(intensity)
            roof_cells = (f"{attainable:.1f}", roof.bound(intensity), f"{100 * m.tflops / attainable:.1f}")
        else:
            roof_cells = ("-", "-", "-")
        rows.append((label, str(size), f"{m.tflops:.2f}", f"{100 * m.spread:.1f}%", pct_cublas,
                     f"{100 * m.tflops / peak:.1f}" if peak else "n/a", f"{intensity:g}", *roof_cells))
    for (dtype, size), m in sorted(session.cublas_measurements().items(), key=lambda kv: (kv[0][1], kv[0][0])):
        rows.append((f"cuBLAS {dtype}", str(size), f"{m.tflops:.2f}", f"{100 * m.spread:.1f}%", "100.0",
                     f"{100 * m.tflops / peak:.1f}" if peak else "n/a", "-", "-", "-", "-"))
    footer = [f"device: {device.describe()}"]
    if session._copy is not None:
        footer.append(f"device copy bandwidth: {session._copy.bandwidth_tbs:.2f} TB/s (read + write, "
                      f"{session._copy.size / 2**20:.0f} MiB buffer)")
    if roof:
        footer.append(f"ridge point {roof.ridge:.1f} FLOP/B: left of it a kernel's model roof is "
                      "bandwidth x intensity, right of it the FP32 peak")
    footer.append(f"TF32: {perf.TF32}")
    footer.append("times: CUDA events, median of the profile's repeats; spread = IQR / median")
    for (dtype, size), why in sorted(session._cublas.items()):
        if isinstance(why, str):
            footer.append(f"cuBLAS {dtype} N={size}: not measured: {why}")
    return rows, footer


def format_table(rows) -> list[str]:
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    return ["  ".join(cell.rjust(w) if c and cell[:1].isdigit() else cell.ljust(w)
                      for c, (cell, w) in enumerate(zip(row, widths))).rstrip() for row in rows]


def roofline_png(session: perf.PerfSession) -> bytes | None:
    points = []
    for (label, size), row in sorted(session.rows.items()):
        if row.measurement is None:
            continue
        inst = row.instance
        intensity = roofline.model_intensity(inst.spec.policy, inst.tile, inst.spec.shared_tiles,
                                             inst.dt.itemsize)
        points.append(roofline.Point(f"{label} N{size}", intensity, row.measurement.tflops))
    if not points:
        return None
    ceilings = {f"cuBLAS {d} N{s}": m.tflops for (d, s), m in session.cublas_measurements().items()}
    roof = session.roof()
    return roofline.plot(points, peak_tflops=session.device.fp32_peak_tflops,
                         bandwidth_tbs=roof.bandwidth_tbs if roof else None, ceilings=ceilings,
                         title=f"roofline: {session.device.name}")


def write_reports(config: pytest.Config, session: perf.PerfSession) -> list[Path]:
    """reports/performance/{summary.txt, perf.json, roofline.png}; returns what was written."""
    out = perf_config(config).reports
    out.mkdir(parents=True, exist_ok=True)
    rows, footer = summary_rows(session)
    written = []
    (out / "summary.txt").write_text("\n".join(format_table(rows) + [""] + footer) + "\n")
    written.append(out / "summary.txt")
    data = {
        "device": session.device.describe(),
        "tf32": perf.TF32,
        "copy_tbs": session._copy.bandwidth_tbs if session._copy else None,
        "cublas": {f"{d}-N{s}": {"tflops": m.tflops, "median_s": m.median, "spread": m.spread}
                   for (d, s), m in session.cublas_measurements().items()},
        "kernels": {f"{label}-N{size}": ({"tflops": r.measurement.tflops, "median_s": r.measurement.median,
                                          "spread": r.measurement.spread, "n_sets": r.measurement.n_sets,
                                          "repeats": len(r.measurement.times)}
                                         if r.measurement else {"check_ratio": r.check.worst_ratio})
                    for (label, size), r in session.rows.items()},
    }
    (out / "perf.json").write_text(json.dumps(data, indent=2) + "\n")
    written.append(out / "perf.json")
    png = roofline_png(session)
    if png:
        (out / "roofline.png").write_bytes(png)
        written.append(out / "roofline.png")
    return written


def attach_summary(config: pytest.Config, session: perf.PerfSession) -> None:
    """Attach the table and the roofline to the current test's report."""
    rows, footer = summary_rows(session)
    report.attach_text("performance summary", "\n".join(format_table(rows) + [""] + footer))
    png = roofline_png(session)
    if png:
        report.attach_png("roofline", png)


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    session = perf_config(config).session
    if session is None or not session.rows:
        return
    rows, footer = summary_rows(session)
    terminalreporter.section("gemmcheck: performance (device-event time, same-run ceilings)")
    for line in format_table(rows) + footer:
        terminalreporter.write_line(line)
    for path in write_reports(config, session):
        terminalreporter.write_line(f"wrote {path}")
