"""Classification: the root defect of one instantiation's findings, what it explains and what is left."""

from __future__ import annotations

from dataclasses import dataclass

from gemmcheck.verdict import defects
from gemmcheck.verdict import Defect, Finding
from gemmcheck.verdict.detectors import Detector


# From the defect registry (gemmcheck.verdict.defects): most specific first, what each root cause
# explains, and the classes plain detectors cannot establish on real hardware (a divergent
# barrier shows only as wrong values there; the CPU simulator's barrier tracking
# establishes it without the tool).
PRIORITY = defects.priority()
EXPLAINS = defects.explains()
# Nondeterminism is named by where it was seen. Shared memory only when racecheck or the
# simulator's tracking saw two threads conflict there; global memory only when the
# simulator's tracking saw two blocks write one address (a split-K kernel whose slice 0
# stores C while slice 1 atomicAdds into it differs between launches too, with no shared
# memory involved: on an H200 racecheck stayed silent). Launches that differ with nothing to
# localize them are a race of unknown place.
UNKNOWN_PLACE = (
    "a race of unknown place: launches on identical inputs gave different bits and no detector "
    "localized it (racecheck, or the simulator's shared-memory tracking, would name shared memory; "
    "the simulator's global-memory tracking would name two blocks ordering global stores and atomics)")
# The simulator's detectors that say where a race is (the element and the two blocks, the
# shared address and the two threads, the barrier and its block, the warp-synchronous call and
# its lanes): what gemmcheck.judge.hazards.locating asks the simulator for when hardware shows a
# race of unknown place.
PLACES_A_RACE = frozenset({Detector.GLOBAL_TRACKING, Detector.SHARED_TRACKING, Detector.BARRIER_TRACKING,
                           Detector.WARP_TRACKING})
NEEDS_A_TOOL = defects.needs_a_tool()
# Classes nothing on hardware establishes (a global-memory race): there only the classes they
# explain show, and the kill matrix says what would establish the declared one.
NEEDS_THE_SIMULATOR = defects.needs_the_simulator()
# Classes hardware and its tools may not show at all (undefined behaviour the GPU gets right):
# there a row that shows nothing says what would establish it, never a pass.
UNSEEN_ON_HARDWARE = defects.unseen_on_hardware()


@dataclass(frozen=True)
class Diagnosis:
    """The root cause of everything found for one instantiation."""

    defect: Defect | None            # None: nothing found
    basis: str                       # "observed" or "" (nothing found): a class is named only where seen
    established_by: tuple[str, ...]  # detectors whose findings establish `defect`
    explains: tuple[Defect, ...]     # other classes found that the root cause accounts for
    also: tuple[Defect, ...]         # classes found that it does not: independent defects
    explanation: str
    placed_by: str = ""              # who placed a race hardware showed without a place ("" : not placed)
    place: str = ""                  # where it placed it (element and blocks, address and threads)

    @property
    def unknown_place(self) -> bool:
        """Whether this is a race of unknown place: launches differ and nothing said where.
        The one definition: the label, the kill matrix and the race locator ask it."""
        return self.defect == Defect.NONDETERMINISM

    @property
    def label(self) -> str:
        if self.defect is None:
            return "none"
        if self.unknown_place:
            return f"{self.defect.value} (race of unknown place)"
        if self.placed_by:
            return f"{self.defect.value} (placed by {self.placed_by}: {self.place})"
        return self.defect.value

    def to_json(self) -> dict:
        return {"defect": self.defect.value if self.defect else None, "basis": self.basis,
                "established_by": [str(d) for d in self.established_by],
                "explains": [d.value for d in self.explains], "also": [d.value for d in self.also],
                "explanation": self.explanation, "placed_by": self.placed_by, "place": self.place}


def classify(findings) -> Diagnosis:
    """The most specific root cause among `findings`, what it explains, and what is left over."""
    findings = list(findings)
    by_defect: dict[Defect, list[Finding]] = {}
    for f in findings:
        by_defect.setdefault(Defect(f.defect), []).append(f)
    if not by_defect:
        return Diagnosis(None, "", (), (), (), "no detector found anything")
    present = set(by_defect)
    root = next(d for d in PRIORITY if d in present)
    basis = "observed"
    explained = EXPLAINS.get(root, frozenset()) & (present - {root})
    # A class explained by another leftover class is not independent either.
    leftover = [d for d in PRIORITY if d in present and d != root and d not in explained]
    also = tuple(d for d in leftover
                 if not any(d in EXPLAINS.get(other, ()) for other in leftover if other != d))
    by = tuple(sorted({f.detector for f in by_defect[root]}))
    # A root whose findings all come from the race locator: where it was placed, and by whom.
    placed = by_defect[root][0].details.get("placed_by", "") if all(
        f.details.get("placed_by") for f in by_defect[root]) else ""
    place = by_defect[root][0].details.get("place", "") if placed else ""
    lines = [f"{root.value} ({basis}, by {', '.join(by)}"
             f"{f'; placed by {placed}' if placed else ''}): {by_defect[root][0].summary}"]
    if root == Defect.NONDETERMINISM:
        lines.append(UNKNOWN_PLACE)
    for d in sorted(explained, key=PRIORITY.index):
        lines.append(f"explains {d.value}: {by_defect[d][0].summary}")
    for d in also:
        lines.append(f"also {d.value}, not explained by {root.value}: {by_defect[d][0].summary}")
    return Diagnosis(root, basis, by, tuple(sorted(explained, key=PRIORITY.index)), also,
                     "\n".join(lines), placed, place)


def caught_as(findings, declared: Defect) -> bool:
    """Whether `findings` classify to `declared` (the kill matrix's criterion)."""
    return classify(findings).defect == declared
