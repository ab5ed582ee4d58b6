"""The race locator: where hardware shows a race of unknown place, the CPU simulator is asked
to place it.

On a GPU, launches on identical inputs that give different bits say that something raced,
not where: racecheck sees shared memory only, and nothing on hardware sees two blocks order
global stores and atomics. The simulator tracks every thread's shared accesses, every
block's global writes and every barrier, so running the instantiation there on the small
exposing problems (the simulator column's own path: observe_small_problems_simulated)
either places the race (the element and the two blocks, the shared address and the two
threads, or the divergent barrier) or does not reproduce it. A class is named only where it
is seen: the simulator seeing the race is seeing it; without it nothing is inferred, and
the hardware's "race of unknown place" stands, saying why.

It costs seconds a row (a g++ build of the kernel's source, cached, and a few small
launches under the simulator's schedules) and runs only for rows whose hardware diagnosis
is a race of unknown place.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field

from gemmcheck import backends
from gemmcheck.contract.catalog import Instance
from gemmcheck.verdict import Finding
from gemmcheck.judge.hazards.classification import PLACES_A_RACE
from gemmcheck.judge.hazards.detection import detect
from gemmcheck.judge.hazards.observing import SIMULATOR_SCHEDULES, observe_small_problems_simulated

PLACED_BY = "the CPU simulator"   # who places a race: Diagnosis.placed_by, the kill matrix's label


@dataclass
class Placement:
    """What the locator did for one instantiation: the findings that place its race, or why
    there are none (the simulator cannot run it, its run did not finish, or it saw no race)."""

    simulated: bool                      # the simulator ran the instantiation
    findings: list[Finding] = field(default_factory=list)   # the placing findings, marked placed_by
    why: str = ""                        # what it placed, or why it placed nothing
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def placed(self) -> bool:
        return bool(self.findings)

    def to_json(self) -> dict:
        return {"simulated": self.simulated, "placed": self.placed, "why": self.why,
                "problems": self.problems, "seconds": round(self.seconds, 2),
                "findings": [{"defect": f.defect.value, "detector": f.detector.value, "summary": f.summary,
                              "count": f.count, "place": f.details.get("place", "")} for f in self.findings]}


_SIMULATORS: dict = {}   # hang timeout -> this process's CpuSimBackend, or why it cannot run here


def cpu_simulator(hang_timeout_s: float):
    """This process's CPU simulator for placing races, made on first use and kept (its worker
    is built once; it runs beside the GPU backend: no CUDA, a worker process of its own).
    Raises BackendUnavailable, the same each time, where it cannot run here."""
    if hang_timeout_s not in _SIMULATORS:
        try:
            _SIMULATORS[hang_timeout_s] = backends.create("cpu-sim", hang_timeout_s=hang_timeout_s)
        except backends.BackendUnavailable as exc:
            _SIMULATORS[hang_timeout_s] = exc
    made = _SIMULATORS[hang_timeout_s]
    if isinstance(made, Exception):
        raise made
    return made


def locate_race(instance: Instance, simulator=None, *, schedules=SIMULATOR_SCHEDULES,
                hang_timeout_s: float = backends.DEFAULT_HANG_TIMEOUT_S) -> Placement:
    """Ask the CPU simulator where `instance` races: its small exposing problems under
    `schedules` (no AddressSanitizer: it places no race). `simulator`: a backend that
    simulates threads; by default this process's (cpu_simulator)."""
    t0 = time.monotonic()
    spec = instance.spec
    if spec.gpu_only:
        return Placement(False, why=f"{spec.name} is gpu_only in its catalog: the CPU simulator does not run it")
    if not spec.simulated(instance.config):
        return Placement(False, why=f"{instance.id} is not among its catalog's sim_configs: the CPU simulator "
                                    "does not run it")
    try:
        simulator = cpu_simulator(hang_timeout_s) if simulator is None else simulator
    except backends.BackendUnavailable as exc:
        return Placement(False, why=f"the CPU simulator cannot run here: {exc}")
    error = simulator.build_error(instance)
    if error is not None:
        what = "does not model what it uses" if isinstance(error, backends.NotSupported) else "could not build it"
        return Placement(False, why=f"the CPU simulator {what}: {_headline(error)}", seconds=time.monotonic() - t0)
    observations = observe_small_problems_simulated(simulator, instance, schedules=schedules,
                                                    address_check=False)
    problems = [f"{obs.purpose}: {obs.problem.id}" for obs in observations]
    on = "; ".join(problems)
    placing, stopped = {}, None
    for obs in observations:
        found = detect(obs)
        stopped = stopped or obs.failure
        for f in found:
            if f.detector in PLACES_A_RACE and f.detector not in placing:   # the smallest problem that shows it
                placing[f.detector] = Finding(
                    f.defect, f.detector, f"placed by {PLACED_BY} on {obs.purpose} {obs.problem.id}: {f.summary}",
                    f.count, f.where, {**f.details, "placed_by": PLACED_BY, "problem": obs.problem.id})
    seconds = time.monotonic() - t0
    if placing:
        shown = "; ".join(f"{f.defect.value} at {f.details.get('place') or 'a place it did not name'}"
                          for f in placing.values())
        return Placement(True, list(placing.values()), f"placed by {PLACED_BY} ({on}; {seconds:.1f} s): {shown}",
                         problems, seconds)
    if stopped is not None:
        return Placement(True, [], f"{PLACED_BY} did not place it: its run did not finish "
                                   f"({stopped.defect.value}: {stopped.summary.splitlines()[0]})", problems, seconds)
    return Placement(True, [], f"{PLACED_BY} did not reproduce it: no two threads or blocks raced and no barrier "
                               f"diverged on {on} under schedules {', '.join(schedules)} ({seconds:.1f} s)",
                     problems, seconds)


def with_place(finding: Finding, placement: Placement) -> Finding:
    """`finding` (a race of unknown place) with the locator's word on it: where the simulator
    placed the race, or why it placed nothing, at the end of its summary; the placement in its
    details. For a check that reports one finding (the correctness suite's determinism claim)."""
    return dataclasses.replace(finding, summary=f"{finding.summary}; {placement.why}",
                               details={**finding.details, "placement": placement.to_json()})


def _headline(error: Exception) -> str:
    """An error's first line, and its compiler's first error line when that is not it."""
    lines = str(error).strip().splitlines() or [type(error).__name__]
    first_error = next((line.strip() for line in lines[1:] if "error" in line), "")
    return f"{lines[0]} {first_error}".strip()
