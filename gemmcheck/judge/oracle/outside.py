"""What a launch changed outside its output: a guard band or the padding between lines (an
out-of-bounds write), elements of A or B (input mutation).

One finding each, from the counts a Run carries (gemmcheck.problems.harness: Run.guard_damage,
Run.inputs_changed). The oracle's judgement of one run (judge) and the hazard detectors over a
problem's launches (their worst counts) say it the same way: a store past C's last row lands
in the guard band only, where no value check looks.
"""

from __future__ import annotations

from gemmcheck.verdict import Defect, Finding
from gemmcheck.verdict.detectors import Detector


def out_of_bounds_write(guard_damage: dict[str, int]) -> list[Finding]:
    """OUT_OF_BOUNDS_WRITE when a guard band (or padding) of A, B or C changed."""
    return _counted(Defect.OUT_OF_BOUNDS_WRITE, Detector.GUARD_BANDS, "guard_damage", guard_damage,
                    "the kernel wrote outside its output: ", "{n} in {name}'s guards{place}")


def input_mutation(inputs_changed: dict[str, int]) -> list[Finding]:
    """INPUT_MUTATION when elements of A or B changed."""
    return _counted(Defect.INPUT_MUTATION, Detector.INPUT_CHECK, "inputs_changed", inputs_changed,
                    "the launch changed its inputs: ", "{n} elements of {name}")


def _counted(defect: Defect, detector: Detector, key: str, counts: dict[str, int], head: str,
             each: str) -> list[Finding]:
    """One finding of `defect` when any buffer's count is nonzero: the counts in its details."""
    hit = {name: n for name, n in sorted(counts.items()) if n}
    if not hit:
        return []
    # a strided batch's gap is named "C, between batch 0 and batch 1" (harness.gap_name)
    text = ", ".join(each.format(n=n, name=name.split(", ")[0],
                                 place=" " + name.split(", ", 1)[1] if ", " in name else "")
                     for name, n in hit.items())
    return [Finding(defect, detector, head + text, sum(hit.values()), None, {key: hit})]


def outside_the_output(run) -> list[Finding]:
    """Both, for one run."""
    return out_of_bounds_write(getattr(run, "guard_damage", {})) + input_mutation(getattr(run, "inputs_changed", {}))
