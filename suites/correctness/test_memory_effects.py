"""A kernel writes every element of C, nothing outside C, and leaves A and B as they were.

C is poisoned with a payloaded NaN before the launch and every operand sits
between guard bands (gemmcheck.harness): a poisoned element was never
written, a changed guard is an out-of-bounds write, a changed input element
is input mutation. Shapes are ragged where the kernel claims them, so the
edge tiles (where guards are forgotten) are exercised.
"""

import numpy as np
import pytest

from gemmcheck.harness import run_once
from gemmcheck.problems import Problem, claimed_shape
from gemmcheck.verdict import Defect, Finding

SEED = 3


@pytest.fixture
def watched_run(backend, reference):
    """One launch on a ragged (or, for square-only kernels, aligned) exact problem."""
    t = reference.tile
    problem = Problem(*claimed_shape(reference, 2 * t + 1, 3 * t - 1 if t > 1 else 2, t + 3),
                      reference.dtype, "exact", SEED)
    A, B = problem.operands()
    return problem, run_once(backend, reference, A, B)


def test_every_output_element_is_written(watched_run, reference, conclude):
    problem, run = watched_run
    finding = None
    if run.unwritten.any():
        bad = np.argwhere(run.unwritten)
        i, j = bad[0]
        finding = Finding(Defect.UNWRITTEN_OUTPUT, "poisoned-output",
                          f"{len(bad)} of {run.unwritten.size} elements still hold the poison bits; "
                          f"first C[{i}, {j}] (tile {i // reference.tile}, {j // reference.tile})",
                          len(bad), (int(i), int(j)))
    conclude(reference, problem, finding)


def counted(defect: Defect, detector: str, what: str, counts: dict[str, int]) -> Finding | None:
    """A finding if any buffer's count is nonzero: `what` per buffer, e.g. 'C: 3'."""
    nonzero = {name: n for name, n in counts.items() if n}
    if not nonzero:
        return None
    return Finding(defect, detector, f"{what}: {', '.join(f'{k}: {v}' for k, v in nonzero.items())}",
                   sum(nonzero.values()), details={detector: counts})


def test_nothing_is_written_outside_C(watched_run, reference, conclude):
    problem, run = watched_run
    conclude(reference, problem, counted(Defect.OUT_OF_BOUNDS_WRITE, "guard-bands",
                                         "guard elements changed around", run.guard_damage))


def test_A_and_B_are_unchanged(watched_run, reference, conclude):
    problem, run = watched_run
    conclude(reference, problem, counted(Defect.INPUT_MUTATION, "input-compare",
                                         "input elements changed", run.inputs_changed))
