"""The kill matrix: for every catalog kernel, what it declares and what the detectors establish.

One row per instantiation, two columns:

- plain detectors: guarded launches on the device (values, poison, guard
  swap, guard bands, inputs, repeated launches), kernels declared crash or
  hang in an isolated child;
- with sanitizer: the plain findings plus compute-sanitizer's racecheck,
  synccheck, memcheck and initcheck (exact-size allocations, in children).

A row passes when a reference has no finding in any column, and a broken
kernel is caught and classified as its declared defect: by the plain column
where hardware alone can establish that class, by the sanitizer column
always. A class the plain detectors cannot establish (a divergent barrier
shows only as wrong values on hardware) needs the tool; without it that row
is reported as caught but not classified (a skip that says so), never as a
pass.

On the CPU simulator (cpu-sim) the first column is the *simulator
detectors*: the same value, poison, guard and input checks, plus what the
simulator establishes itself: shared-memory conflicts tracked per barrier
interval (an observed race, with the schedule whose output differs and the
lockstep direction as a detail), divergent barriers exactly, AddressSanitizer
on exact-size buffers (out-of-bounds read or write of A, B or C), and a
crash or stall of its worker process (CRASH / HANG: the worker is the
isolation). It runs the small problems only (races show at any size under
its schedules; 1024^3 takes minutes there). The sanitizer column does not
apply there: compute-sanitizer needs a GPU.

Which instantiations: one per kernel (float32 and TILE 16 where declared,
else the declared dtype and the TILE nearest 16) keeps the matrix to ~1 s
of device time per kernel; a defect in the kernel's logic shows in any of
its instantiations. The nightly profile runs every instantiation.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from gemmcheck import hazards, isolation, sanitizer
from gemmcheck.catalog import Instance
from gemmcheck.phases import timed
from gemmcheck.verdict import Defect, Finding

NOT_IN_MATRIX = {"too_slow": "judged by the performance suite"}
ISOLATED = ("crash", "hang")
PREFERRED_DTYPE, PREFERRED_TILE = "float32", 16
HARDWARE, SIMULATOR = "hardware", "simulator"   # the detector sets a first column can hold
COLUMN_TITLES = {HARDWARE: "plain detectors", SIMULATOR: "simulator detectors"}
SANITIZER_NOT_APPLICABLE = "not applicable on cpu-sim"
SANITIZER_ON_SIMULATOR = ("compute-sanitizer needs a GPU; on cpu-sim the simulator's shared-memory and "
                          "barrier tracking and AddressSanitizer stand in for it (first column)")


def in_matrix(instance: Instance) -> bool:
    return instance.spec.expect not in NOT_IN_MATRIX


def declares(expect: str):
    """A predicate for `@pytest.mark.instances.with_args(...)` (a named function given alone
    to a mark would be taken for the test it decorates): kernels that declare `expect`."""
    def predicate(instance: Instance) -> bool:
        return instance.spec.expect == expect
    predicate.__name__ = f"declares_{expect}"
    return predicate


def select(instances, *, every: bool = False) -> list[Instance]:
    """The instantiations the matrix runs: one per kernel, or all of them when `every`."""
    instances = [i for i in instances if in_matrix(i)]
    if every:
        return instances
    chosen: dict[str, Instance] = {}
    for inst in instances:
        best = chosen.get(inst.spec.name)
        if best is None or _rank(inst) < _rank(best):
            chosen[inst.spec.name] = inst
    return [i for i in instances if chosen.get(i.spec.name) is i]


def _rank(inst: Instance):
    return (inst.dtype != PREFERRED_DTYPE, abs(inst.tile - PREFERRED_TILE), inst.tile)


@dataclass
class Column:
    """What one set of detectors found for one row."""

    findings: list[Finding] = field(default_factory=list)
    ran: bool = True
    note: str = ""                       # why it did not run, or what it could not see
    unrecognized: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # a tool that could not run at all
    detectors: str = HARDWARE            # which detector set: HARDWARE or SIMULATOR
    not_applicable: str = ""             # set when the column cannot apply to this backend

    @property
    def diagnosis(self) -> hazards.Diagnosis:
        return hazards.classify(self.findings)

    def label(self) -> str:
        if self.not_applicable:
            return self.not_applicable
        return self.diagnosis.label if self.ran else "not run"

    def found(self, *, detector: str | None = None, defect: Defect | None = None) -> list[Finding]:
        """The findings of one detector and/or of one class."""
        return [f for f in self.findings if (detector is None or f.detector == detector)
                and (defect is None or Defect(f.defect) == defect)]

    def to_json(self) -> dict:
        return {"ran": self.ran, "detectors": self.detectors, "applicable": not self.not_applicable,
                "note": self.note, "diagnosis": self.diagnosis.to_json(),
                "findings": [{"defect": Defect(f.defect).value, "detector": f.detector,
                              "summary": f.summary, "count": f.count} for f in self.findings],
                "unrecognized": self.unrecognized, "errors": self.errors}


@dataclass
class Row:
    instance: Instance
    plain: Column
    sanitizer: Column
    problems: list[str]
    seconds: float = 0.0

    @property
    def declared(self) -> Defect | None:
        expect = self.instance.spec.expect
        return None if expect == "correct" else Defect(expect)

    def outcome(self) -> tuple[str, str]:
        """("pass" | "fail" | "needs-tool", why)."""
        declared, plain, tool = self.declared, self.plain, self.sanitizer
        if tool.ran and tool.errors:
            return "fail", "compute-sanitizer could not run: " + "\n".join(tool.errors)
        if declared is None:
            found = plain.findings + (tool.findings if tool.ran else [])
            if found or tool.unrecognized:
                return "fail", (f"reference kernel, but: {hazards.classify(found).explanation}"
                                + "".join(f"\nunrecognized sanitizer report: {u}" for u in tool.unrecognized))
            return "pass", "no finding" + (" with or without compute-sanitizer" if tool.ran else "")
        if not plain.findings and not (tool.ran and tool.findings):
            return "fail", f"declared {declared.value}, but no detector found anything"
        problems = []
        if declared in hazards.NEEDS_A_TOOL and plain.detectors == HARDWARE:
            pass  # caught (above) is all the plain column can show
        elif plain.diagnosis.defect != declared:
            problems.append(f"plain detectors classify it as {plain.label()}, declared "
                            f"{declared.value}:\n{plain.diagnosis.explanation}")
        if tool.ran and tool.diagnosis.defect != declared:
            problems.append(f"with compute-sanitizer it classifies as {tool.label()}, declared "
                            f"{declared.value}:\n{tool.diagnosis.explanation}")
        if problems:
            return "fail", "\n".join(problems)
        if not tool.ran and declared in hazards.NEEDS_A_TOOL and plain.detectors == HARDWARE:
            return "needs-tool", (f"caught by the plain detectors as {plain.label()}; establishing "
                                  f"{declared.value} needs {hazards.NEEDS_A_TOOL[declared]} "
                                  f"({tool.note})")
        best = tool if tool.ran else plain
        return "pass", f"caught as {declared.value}: {best.diagnosis.explanation}"

    def to_json(self) -> dict:
        status, why = self.outcome()
        return {"instance": self.instance.id, "kernel": self.instance.spec.name,
                "name_expression": self.instance.name_expression,
                "catalog": str(self.instance.spec.catalog),
                "declared": self.declared.value if self.declared else "correct",
                "plain": self.plain.to_json(), "with_sanitizer": self.sanitizer.to_json(),
                "problems": self.problems, "status": status, "why": why,
                "seconds": round(self.seconds, 2)}


@dataclass
class Settings:
    race_sizes: tuple[int, ...] = (1024,)
    race_repeats: int = 3
    backend_name: str = "auto"
    sanitizer_exe: str | None = None     # None: the sanitizer column is not run
    sanitizer_note: str = sanitizer.MISSING
    tools: tuple[str, ...] = sanitizer.TOOLS
    hang_timeout: float = isolation.STEP_TIMEOUT_S
    isolate_all: bool = False
    log_dir: object = None               # a Path: each tool's raw log is written there
    schedules: tuple[str, ...] = hazards.SIMULATOR_SCHEDULES  # cpu-sim: each launch runs under these
    address_check: bool = True           # cpu-sim: one AddressSanitizer launch per row


def plain_observations(backend, instance: Instance, settings: Settings) -> list[hazards.Observation]:
    """Observe one instantiation in this process on every exposing problem."""
    out = []
    for purpose, problem in hazards.exposing_problems(instance, settings.race_sizes):
        race = hazards.is_race_stress(purpose)
        out.append(hazards.observe(backend, instance, problem, purpose=purpose,
                                   repeats=settings.race_repeats if race else 2, control=not race))
    return out


@timed("isolation")
def isolated_observations(instances, settings: Settings) -> dict[str, list[hazards.Observation]]:
    """Observe instantiations in children: a fault is CRASH, a timeout HANG (one child per failure)."""
    steps, owner = [], {}
    for inst in instances:
        for purpose, problem in hazards.exposing_problems(inst, settings.race_sizes):
            race = hazards.is_race_stress(purpose)
            step = isolation.Step.of(len(steps), inst, problem, purpose=purpose,
                                     repeats=settings.race_repeats if race else 2, control=not race)
            steps.append(step)
            owner[step.id] = inst
    out: dict[str, list[hazards.Observation]] = {i.id: [] for i in instances}
    if not steps:
        return out
    outcomes, _ = isolation.run_steps(steps, backend=settings.backend_name,
                                      step_timeout=settings.hang_timeout)
    for step_id, outcome in sorted(outcomes.items()):
        if outcome.status != "not_run":
            out[owner[step_id].id].append(isolation.observation(outcome))
    return out


def simulator_observations(backend, instance: Instance, settings: Settings) -> list[hazards.Observation]:
    """Observe one instantiation on cpu-sim: the small exposing problems, every launch under
    `settings.schedules`, AddressSanitizer on the first (ragged) problem. After a crash or a
    hang the instantiation's other problems are not run (as in an isolated child)."""
    out = []
    for n, (purpose, problem) in enumerate(hazards.exposing_problems(instance, race_sizes=())):
        obs = hazards.observe_simulated(backend, instance, problem, purpose=purpose,
                                        schedules=settings.schedules,
                                        address_check=settings.address_check and n == 0)
        out.append(obs)
        if obs.failure is not None:
            break
    return out


def build_simulated(backend, instances, settings: Settings) -> list[Row]:
    """Every row on cpu-sim: the simulator detectors; the sanitizer column does not apply."""
    rows = []
    old_stall = backend.stall_timeout_s
    backend.stall_timeout_s = settings.hang_timeout
    try:
        for inst in instances:
            t0 = time.monotonic()
            observations = simulator_observations(backend, inst, settings)
            findings = [f for obs in observations for f in hazards.detect(obs)]
            tool = Column(ran=False, note=SANITIZER_ON_SIMULATOR, detectors=SIMULATOR,
                          not_applicable=SANITIZER_NOT_APPLICABLE)
            rows.append(Row(inst, Column(_merge(findings), detectors=SIMULATOR), tool,
                            [f"{obs.purpose}: {obs.problem.id}" for obs in observations],
                            time.monotonic() - t0))
    finally:
        backend.stall_timeout_s = old_stall
    return rows


def build(backend, instances, settings: Settings) -> list[Row]:
    """Every row of the matrix: plain column first, then (if available) the sanitizer column.
    On cpu-sim, the simulator detectors (build_simulated)."""
    if hazards.is_simulator(backend):
        return build_simulated(backend, instances, settings)
    rows: dict[str, Row] = {}
    isolated = [i for i in instances if settings.isolate_all or i.spec.expect in ISOLATED]
    started = time.monotonic()
    by_child = isolated_observations(isolated, settings)
    for inst in instances:
        t0 = time.monotonic()
        observations = by_child[inst.id] if inst.id in by_child else plain_observations(backend, inst, settings)
        findings = [f for obs in observations for f in hazards.detect(obs)]
        rows[inst.id] = Row(inst, Column(_merge(findings)), Column(ran=False, note=settings.sanitizer_note),
                            [f"{obs.purpose}: {obs.problem.id}" for obs in observations],
                            time.monotonic() - t0)
    if isolated:
        share = (time.monotonic() - started - sum(r.seconds for r in rows.values())) / len(isolated)
        for inst in isolated:
            rows[inst.id].seconds += max(share, 0.0)
    if settings.sanitizer_exe:
        _sanitizer_column(rows, instances, settings)
    return [rows[i.id] for i in instances]


def _sanitizer_column(rows: dict[str, Row], instances, settings: Settings) -> None:
    hung = {i.id for i in instances if rows[i.id].plain.diagnosis.defect == Defect.HANG}
    plan = [(i, [(p, q) for p, q in hazards.exposing_problems(i, settings.race_sizes)
                 if p in hazards.SMALL_PURPOSES])
            for i in instances if i.id not in hung]
    plan = [(i, probs) for i, probs in plan if probs]
    tool_findings: dict[str, list[Finding]] = {i.id: [] for i, _ in plan}
    unrecognized: dict[str, list[str]] = {i.id: [] for i, _ in plan}
    errors: list[str] = []
    for tool in settings.tools:
        t0 = time.monotonic()
        try:
            result = sanitizer.run(tool, plan, exe=settings.sanitizer_exe, backend=settings.backend_name)
        except isolation.IsolationError as exc:
            errors.append(f"{tool}: {exc}")
            continue
        share = (time.monotonic() - t0) / max(len(plan), 1)
        if settings.log_dir is not None:
            settings.log_dir.mkdir(parents=True, exist_ok=True)
            (settings.log_dir / f"{tool}.log").write_text(result.log)
        for inst, _ in plan:
            tool_findings[inst.id] += result.findings(inst)
            unrecognized[inst.id] += [f"{tool}: {u}" for u in result.reports[inst.id].unrecognized]
            rows[inst.id].seconds += share
        for text in result.unattributed:
            for inst, _ in plan:
                unrecognized[inst.id].append(f"{tool} (no kernel named): {text}")
    for inst in instances:
        row = rows[inst.id]
        if inst.id in hung:
            row.sanitizer = Column(list(row.plain.findings), note="tools not run: the kernel hangs")
            continue
        row.sanitizer = Column(_merge(row.plain.findings + tool_findings.get(inst.id, [])),
                               note=f"{', '.join(settings.tools)} on {', '.join(hazards.SMALL_PURPOSES)}",
                               unrecognized=unrecognized.get(inst.id, []), errors=list(errors))


def _merge(findings: list[Finding]) -> list[Finding]:
    """One finding per (defect, detector) over all problems: the one with the largest count."""
    best: dict = {}
    for f in findings:
        key = (Defect(f.defect), f.detector)
        if key not in best or f.count > best[key].count:
            best[key] = f
    return list(best.values())


def table(rows: list[Row]) -> list[str]:
    """The matrix as text: one line per row."""
    detectors = {r.plain.detectors for r in rows}
    first = COLUMN_TITLES[detectors.pop()] if len(detectors) == 1 else "first column"
    header = ("instantiation", "declared", first, "with sanitizer", "result", "s")
    lines = [header]
    for r in rows:
        status, _ = r.outcome()
        lines.append((r.instance.id, r.declared.value if r.declared else "correct",
                      r.plain.label(), r.sanitizer.label(), status, f"{r.seconds:.1f}"))
    widths = [max(len(line[c]) for line in lines) for c in range(len(header))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in lines]


def runs_on(rows: list[Row], settings: Settings) -> str:
    """The backend the rows ran on: the simulator for simulator rows, else the option resolved."""
    from gemmcheck import backends

    if rows and all(r.plain.detectors == SIMULATOR for r in rows):
        return "cpu-sim"
    return backends.resolve(settings.backend_name)


def document(rows: list[Row], settings: Settings) -> dict:
    simulated = bool(rows) and all(r.plain.detectors == SIMULATOR for r in rows)
    if simulated:
        tool = f"{SANITIZER_NOT_APPLICABLE}: {SANITIZER_ON_SIMULATOR}"
        sizes = {"race_sizes": [], "schedules": list(settings.schedules),
                 "address_check": settings.address_check}
    else:
        tool = settings.sanitizer_exe or f"not run: {settings.sanitizer_note}"
        sizes = {"race_sizes": list(settings.race_sizes), "race_repeats": settings.race_repeats}
    return {"schema": 1,
            "settings": {**sizes, "backend": runs_on(rows, settings), "backend_option": settings.backend_name,
                         "detectors": SIMULATOR if simulated else HARDWARE,
                         "sanitizer": tool, "tools": [] if simulated else list(settings.tools),
                         "hang_timeout_s": settings.hang_timeout},
            "rows": [r.to_json() for r in rows]}
