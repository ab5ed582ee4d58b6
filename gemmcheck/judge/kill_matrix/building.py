"""Building rows: each on its own (build_row), all of them (build), and a row's sanitizer column."""

from __future__ import annotations

import time

from gemmcheck.judge import hazards, sanitizer
from gemmcheck.contract.catalog import Instance
from gemmcheck.verdict import Defect
from gemmcheck.judge.kill_matrix.selection import ISOLATED
from gemmcheck.judge.kill_matrix.rows import (HARDWARE, SANITIZER_NOT_APPLICABLE, SANITIZER_ON_SIMULATOR,
                                              SIMULATOR, Column, Row, _merge, unfinished)
from gemmcheck.judge.kill_matrix.settings import Settings
from gemmcheck.judge.kill_matrix.observing import (isolated_observations, plain_observations,
                                                   simulator_observations, small_problems)
from gemmcheck.judge.kill_matrix.row_children import RowChildren


def build_row(backend, instance: Instance, settings: Settings,
              children: "RowChildren | None" = None) -> Row:
    """One row of the matrix, on its own: whatever happens to this instantiation (it does not
    build, crashes, hangs) is this row's verdict and touches no other row.

    On a backend that simulates threads (cpu-sim) the first column holds the simulator
    detectors and the sanitizer column does not apply; elsewhere the plain detectors (in a
    child for kernels declared crash or hang, or all with `isolate_all`), with what the race
    locator placed when they show a race of unknown place (locate), then the sanitizer column
    when the tool is there (it holds the plain findings, placed ones too). `children`: a pool the rows share, which may have started
    this row's children (its tools; its plain observation when declared crash or hang) ahead."""
    t0 = time.monotonic()
    if hazards.simulates_threads(backend):
        observations = simulator_observations(backend, instance, settings)
        detectors = SIMULATOR
        tool = Column(ran=False, note=SANITIZER_ON_SIMULATOR, detectors=SIMULATOR,
                      not_applicable=SANITIZER_NOT_APPLICABLE)
    else:
        detectors = HARDWARE
        if instance.spec.expect in ISOLATED and children is not None:
            observations = children.isolated(instance)
        elif settings.isolate_all or instance.spec.expect in ISOLATED:
            observations = isolated_observations([instance], settings)[instance.id]
        else:
            observations = plain_observations(backend, instance, settings)
        tool = Column(ran=False, note=settings.sanitizer_note)
    findings = _merge([f for obs in observations for f in hazards.detect(obs)])
    placement = None
    if detectors == HARDWARE and hazards.classify(findings).unknown_place:
        placement = locate(instance, settings)
        findings += placement.findings
    row = Row(instance, Column(findings, detectors=detectors, placement=placement), tool,
              [f"{obs.purpose}: {obs.problem.id}" for obs in observations])
    if detectors == HARDWARE and settings.sanitizer_exe:
        row.sanitizer = sanitizer_column(row, settings, children)
    row.seconds = time.monotonic() - t0
    return row


def locate(instance: Instance, settings: Settings) -> hazards.Placement:
    """The race locator (hazards.locate_race) for a row whose hardware diagnosis is a race of
    unknown place: this process's CPU simulator, under the matrix's schedules and hang timeout."""
    return hazards.locate_race(instance, schedules=settings.schedules, hang_timeout_s=settings.hang_timeout)


def build(backend, instances, settings: Settings) -> list[Row]:
    """Every row of the matrix, each built on its own (build_row); every row's children (its
    tools, in batches; the plain observation of a kernel declared crash or hang) start at once,
    side by side in small pools."""
    if hazards.simulates_threads(backend):
        return [build_row(backend, inst, settings) for inst in instances]
    children = RowChildren(settings)
    try:
        children.submit_rows(instances)
        return [build_row(backend, inst, settings, children) for inst in instances]
    finally:
        children.close()


def sanitizer_column(row: Row, settings: Settings, runs: RowChildren | None = None) -> Column:
    """The plain findings of `row` plus compute-sanitizer's: every tool of `settings.tools` on
    the small problems, side by side (`runs`, shared by many rows, or a pool of this row's
    own), each tool's raw log written to `settings.log_dir`."""
    instance = row.instance
    stopped = unfinished(row.plain.findings)
    if stopped is not None and stopped.defect in (Defect.HANG, Defect.COMPILE_ERROR):
        return Column(list(row.plain.findings),
                      note=f"tools not run: the kernel {'hangs' if stopped.defect == Defect.HANG else 'does not build'}")
    if not small_problems(instance, settings):
        return Column(list(row.plain.findings), note="tools not run: no small problem fits the kernel")
    own = runs is None
    runs = RowChildren(settings) if own else runs
    try:
        results = runs.results(instance)
    finally:
        if own:
            runs.close()
    found, unrecognized, errors = [], [], []
    for tool, result, error in results:
        if error:
            errors.append(error)
            continue
        if settings.log_dir is not None:
            settings.log_dir.mkdir(parents=True, exist_ok=True)
            (settings.log_dir / f"{tool}-{instance.id}.log").write_text(result.log)
        found += result.findings(instance)
        unrecognized += [f"{tool}: {u}" for u in result.reports[instance.id].unrecognized]
        unrecognized += [f"{tool} (no kernel named): {text}" for text in result.unattributed]
    return Column(_merge(sanitizer.judged(row.plain.findings + found)),
                  note=f"{', '.join(settings.tools)} on {', '.join(hazards.SMALL_PURPOSES)}",
                  unrecognized=unrecognized, errors=errors)
