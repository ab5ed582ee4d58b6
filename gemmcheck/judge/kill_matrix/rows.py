"""A row of the matrix: its two columns (what each set of detectors found, with what the race
locator placed) and its outcome against what the kernel declares."""

from __future__ import annotations

from dataclasses import dataclass, field

from gemmcheck.judge import hazards
from gemmcheck.contract.catalog import Instance
from gemmcheck.verdict.detectors import Detector
from gemmcheck.verdict import Defect, Finding, Verdict


HARDWARE, SIMULATOR = "hardware", "simulator"   # the detector sets a first column can hold
COLUMN_TITLES = {HARDWARE: "plain detectors", SIMULATOR: "simulator detectors"}
SANITIZER_NOT_APPLICABLE = "not applicable on cpu-sim"
SANITIZER_ON_SIMULATOR = ("compute-sanitizer needs a GPU; on cpu-sim the simulator's shared-memory, "
                          "global-memory and barrier tracking and AddressSanitizer stand in for it (first column)")


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
    # hardware: what the race locator did for a race of unknown place (hazards.locate_race);
    # its placing findings are among `findings`. None: it did not run.
    placement: "hazards.Placement | None" = None

    @property
    def hardware_findings(self) -> list[Finding]:
        """The findings of the column's own detectors: all of them but what the locator placed."""
        return [f for f in self.findings if not f.details.get("placed_by")]

    @property
    def placed(self) -> bool:
        """Whether the root cause on hardware was placed by the simulator (the locator)."""
        return self.detectors == HARDWARE and bool(self.diagnosis.placed_by)

    @property
    def shows_only_hardware(self) -> bool:
        """Whether the column holds what hardware alone shows: a class that needs a tool or
        the simulator cannot be established in it."""
        return self.detectors == HARDWARE and not self.placed

    @property
    def diagnosis(self) -> hazards.Diagnosis:
        return hazards.classify(self.findings)

    def label(self) -> str:
        if self.not_applicable:
            return self.not_applicable
        return self.diagnosis.label if self.ran else "not run"

    def found(self, *, detector: Detector | str | None = None,
              defect: Defect | str | None = None) -> list[Finding]:
        """The findings of one detector and/or of one class. An unknown detector or defect name
        raises (naming the known ones): a misspelled name must not match nothing and pass."""
        detector = None if detector is None else Detector(detector)
        defect = None if defect is None else Defect(defect)
        return [f for f in self.findings if (detector is None or f.detector == detector)
                and (defect is None or f.defect == defect)]

    @property
    def unfinished(self) -> Finding | None:
        """The COMPILE_ERROR / CRASH / HANG finding when the column's launches did not finish."""
        return unfinished(self.findings)

    def to_json(self) -> dict:
        return {"ran": self.ran, "detectors": self.detectors, "applicable": not self.not_applicable,
                "note": self.note, "diagnosis": self.diagnosis.to_json(),
                "label": self.label(),
                "findings": [{"defect": f.defect.value, "detector": f.detector.value,
                              "summary": f.summary, "count": f.count} for f in self.findings],
                "unrecognized": self.unrecognized, "errors": self.errors,
                "placed_by_simulator": self.placement.to_json() if self.placement is not None else None}


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

    def verdict(self, test: str) -> Verdict | None:
        """What the row establishes of its kernel, for the verdict table: the findings of its
        fullest column; None where nothing here could show the declared defect and nothing was
        seen (needs-tool with no finding: a warp mask on a GPU) or nothing was launched, never a
        clean verdict from detectors that could not have seen it."""
        status, _ = self.outcome()
        column = self.sanitizer if self.sanitizer.ran else self.plain
        if status == "not-checked" or (status == "needs-tool" and not column.findings):
            return None
        return Verdict.for_instance(self.instance, "kill matrix: " + "; ".join(self.problems), column.findings, test)

    def outcome(self) -> tuple[str, str]:
        """("pass" | "fail" | "needs-tool" | "error" | "not-checked", why). "error": a tool of the
        suite could not run (twice): no verdict on the kernel, an error of the suite.
        "not-checked": the kernel claims none of the row's problems, so nothing was launched."""
        declared, plain, tool = self.declared, self.plain, self.sanitizer
        if not self.problems and not plain.findings:
            return "not-checked", (f"none of the kill matrix's problems is among the shapes it claims "
                                   f"({self.instance.spec.describe_shapes()})")
        if tool.ran and tool.errors:
            return "error", "compute-sanitizer could not run: " + "\n".join(tool.errors)
        if declared is None:
            found = plain.findings + (tool.findings if tool.ran else [])
            if found or tool.unrecognized:
                return "fail", (f"reference kernel, but: {hazards.classify(found).explanation}{self._not_placed()}"
                                + "".join(f"\nunrecognized sanitizer report: {u}" for u in tool.unrecognized))
            return "pass", "no finding" + (" with or without compute-sanitizer" if tool.ran else "")
        if not plain.findings and not (tool.ran and tool.findings):
            if declared in hazards.UNSEEN_ON_HARDWARE and plain.shows_only_hardware:
                tools = f" ({tool.note})" if tool.note else ""
                return "needs-tool", (f"nothing on hardware showed it{' with compute-sanitizer' if tool.ran else ''}"
                                      f"{tools}: {declared.value} may leave no trace there (the GPU happens to "
                                      f"give the right values); establishing it needs "
                                      f"{hazards.UNSEEN_ON_HARDWARE[declared]}")
            return "fail", f"declared {declared.value}, but no detector found anything"
        if declared in hazards.NEEDS_THE_SIMULATOR and plain.shows_only_hardware:
            return self._unseen_on_hardware(declared)
        problems = []
        if declared in hazards.NEEDS_A_TOOL and plain.shows_only_hardware:
            pass  # caught (above) is all the plain column can show
        elif plain.diagnosis.defect != declared:
            problems.append(f"plain detectors classify it as {plain.label()}, declared "
                            f"{declared.value}:\n{plain.diagnosis.explanation}")
        if tool.ran and tool.diagnosis.defect != declared:
            problems.append(f"with compute-sanitizer it classifies as {tool.label()}, declared "
                            f"{declared.value}:\n{tool.diagnosis.explanation}")
        if problems:
            return "fail", "\n".join(problems)
        if not tool.ran and declared in hazards.NEEDS_A_TOOL and plain.shows_only_hardware:
            return "needs-tool", (f"caught by the plain detectors as {plain.label()}; establishing "
                                  f"{declared.value} needs {hazards.NEEDS_A_TOOL[declared]} "
                                  f"({tool.note}){self._not_placed()}")
        best = tool if tool.ran else plain
        return "pass", f"caught as {declared.value}: {best.diagnosis.explanation}"

    def _not_placed(self) -> str:
        """Why the race locator placed nothing, when it ran ("" when it did not run)."""
        placement = self.plain.placement
        return f"\n{placement.why}" if placement is not None and not placement.placed else ""

    def _unseen_on_hardware(self, declared: Defect) -> tuple[str, str]:
        """The outcome on hardware for a class nothing there establishes (a global-memory
        race) and the simulator did not place: each column that found something must show what
        the class explains there (nondeterminism, wrong values), else it is a mismatch; caught
        so, the row is "needs-tool", naming what would establish it and why the race locator
        did not (the kernel cannot be simulated, or the simulator did not reproduce it), never
        a pass."""
        shows = hazards.EXPLAINS.get(declared, frozenset())
        columns = [("plain detectors", self.plain)] if self.plain.findings else []
        columns += [("with compute-sanitizer", self.sanitizer)] if self.sanitizer.ran else []
        problems = [f"{name}: classified as {column.label()}, which {declared.value} does not account for "
                    f"(on hardware it shows as {' or '.join(sorted(d.value for d in shows))}):\n"
                    f"{column.diagnosis.explanation}"
                    for name, column in columns if column.diagnosis.defect not in shows]
        if problems:
            return "fail", f"declared {declared.value}, but " + "\n".join(problems)
        seen = ", ".join(f"{name} as {column.label()}" for name, column in columns)
        if self.plain.placement is None:
            located = ("; the race locator asks the simulator only where hardware shows a race of unknown "
                       "place (launches that differ)")
        else:
            located = self._not_placed()
        return "needs-tool", (f"caught by the {seen}: what {declared.value} shows on hardware, where no "
                              f"detector localizes it (racecheck sees shared memory only); establishing "
                              f"{declared.value} needs {hazards.NEEDS_THE_SIMULATOR[declared]}{located}")

    def to_json(self) -> dict:
        status, why = self.outcome()
        return {"instance": self.instance.id, "kernel": self.instance.spec.name,
                "name_expression": self.instance.name_expression,
                "catalog": str(self.instance.spec.catalog),
                "declared": self.declared.value if self.declared else "correct",
                "plain": self.plain.to_json(), "with_sanitizer": self.sanitizer.to_json(),
                "problems": self.problems, "status": status, "why": why,
                "seconds": round(self.seconds, 2)}


def unfinished(findings) -> Finding | None:
    """The finding that says the row's launches did not finish (COMPILE_ERROR, HANG, CRASH from
    a build, a child or the simulator's worker), if there is one: then nothing else about
    the kernel was checked."""
    detectors = (Detector.ISOLATION, Detector.COMPILER)
    return next((f for f in findings if f.detector in detectors and f.defect in hazards.UNFINISHED.values()),
                None)


def _merge(findings: list[Finding]) -> list[Finding]:
    """One finding per (defect, detector) over all problems: the one with the largest count."""
    best: dict = {}
    for f in findings:
        key = (Defect(f.defect), f.detector)
        if key not in best or f.count > best[key].count:
            best[key] = f
    return list(best.values())
