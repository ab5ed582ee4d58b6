"""A row of the matrix: its two columns (what each set of detectors found) and its outcome
against what the kernel declares."""

from __future__ import annotations

from dataclasses import dataclass, field

from gemmcheck.judge import hazards
from gemmcheck.contract.catalog import Instance
from gemmcheck.verdict.detectors import Detector
from gemmcheck.verdict import Defect, Finding


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
        """("pass" | "fail" | "needs-tool" | "error", why). "error": a tool of the suite could
        not run (twice): no verdict on the kernel, an error of the suite."""
        declared, plain, tool = self.declared, self.plain, self.sanitizer
        if tool.ran and tool.errors:
            return "error", "compute-sanitizer could not run: " + "\n".join(tool.errors)
        if declared is None:
            found = plain.findings + (tool.findings if tool.ran else [])
            if found or tool.unrecognized:
                return "fail", (f"reference kernel, but: {hazards.classify(found).explanation}"
                                + "".join(f"\nunrecognized sanitizer report: {u}" for u in tool.unrecognized))
            return "pass", "no finding" + (" with or without compute-sanitizer" if tool.ran else "")
        if not plain.findings and not (tool.ran and tool.findings):
            return "fail", f"declared {declared.value}, but no detector found anything"
        if declared in hazards.NEEDS_THE_SIMULATOR and plain.detectors == HARDWARE:
            return self._unseen_on_hardware(declared)
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

    def _unseen_on_hardware(self, declared: Defect) -> tuple[str, str]:
        """The outcome on hardware for a class nothing there establishes (a global-memory
        race): each column that found something must show what the class explains there
        (nondeterminism, wrong values), else it is a mismatch; caught so, the row is
        "needs-tool", naming what would establish it, never a pass."""
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
        return "needs-tool", (f"caught by the {seen}: what {declared.value} shows on hardware, where no "
                              f"detector localizes it (racecheck sees shared memory only); establishing "
                              f"{declared.value} needs {hazards.NEEDS_THE_SIMULATOR[declared]}")

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
