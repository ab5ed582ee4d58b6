"""Verdicts, not booleans: which defect a check saw, where, and by which detector.

Data flows one way: detectors (oracle, hazards) produce Findings; a Verdict
gathers them for one instantiation on one problem; the session's VerdictLog
keeps every verdict for the report (reports/verdicts.json) and the kill matrix.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from gemmcheck.verdict.defects import DEFECTS, Defect, DefectClass  # noqa: F401  (re-exported)
from gemmcheck.verdict.detectors import Detector


@dataclass(frozen=True)
class Finding:
    """One thing one detector saw."""

    defect: Defect
    detector: Detector                    # a name of gemmcheck.verdict.detectors.Detector (checked)
    summary: str                          # one line a reviewer can act on
    count: int = 0                        # elements, hazards or launches involved
    where: tuple[int, int] | None = None  # an element (i, j) of C, if the defect has one
    details: dict = field(default_factory=dict)  # detector-specific evidence (JSON-able)

    def __post_init__(self) -> None:
        # Names, not free strings: an unknown defect or detector raises with the known ones.
        object.__setattr__(self, "defect", Defect(self.defect))
        object.__setattr__(self, "detector", Detector(self.detector))


class HasFindings:
    """`.ok` and `.defects` of anything that carries a list of Findings."""

    findings: list[Finding]

    @property
    def ok(self) -> bool:
        return not self.findings

    @property
    def defects(self) -> set[Defect]:
        return {f.defect for f in self.findings}


@dataclass
class Verdict(HasFindings):
    """What the checks of one test found for one instantiation on one problem."""

    kernel: str
    instance: str                         # Instance.id: matmul_tiled-float32-TILE32
    name_expression: str                  # matmul_tiled<float, 32>
    dtype: str
    tile: int
    problem: str                          # "M33xN17xK65" or a description
    test: str = ""                        # the pytest node id that produced it
    findings: list[Finding] = field(default_factory=list)
    conventions: list[str] = field(default_factory=list)  # declared in the catalog, judged under
    notes: list[str] = field(default_factory=list)        # information, not failures

    def to_json(self) -> dict:
        data = asdict(self)
        for f in data["findings"]:
            f["defect"], f["detector"] = Defect(f["defect"]).value, Detector(f["detector"]).value
        return data

    @classmethod
    def for_instance(cls, instance, problem: str, findings=(), test: str = "", notes=()) -> "Verdict":
        conventions = getattr(instance.spec, "declared_conventions", lambda: ())()
        return cls(instance.spec.name, instance.id, instance.name_expression, instance.dtype,
                   getattr(instance, "declared_tile", instance.tile), problem, test, list(findings),
                   list(conventions), list(notes))


class VerdictLog:
    """Every verdict of a session, in order."""

    def __init__(self) -> None:
        self.verdicts: list[Verdict] = []

    def record(self, verdict: Verdict) -> Verdict:
        self.verdicts.append(verdict)
        return verdict
