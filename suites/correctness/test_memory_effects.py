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


def test_nothing_is_written_outside_C(watched_run, reference, conclude):
    problem, run = watched_run
    damaged = {name: n for name, n in run.guard_damage.items() if n}
    finding = None
    if damaged:
        finding = Finding(Defect.OUT_OF_BOUNDS_WRITE, "guard-bands",
                          f"guard elements changed around {', '.join(f'{k}: {v}' for k, v in damaged.items())}",
                          sum(damaged.values()), details={"guard_damage": run.guard_damage})
    conclude(reference, problem, finding)


def test_A_and_B_are_unchanged(watched_run, reference, conclude):
    problem, run = watched_run
    changed = {name: n for name, n in run.inputs_changed.items() if n}
    finding = None
    if changed:
        finding = Finding(Defect.INPUT_MUTATION, "input-compare",
                          f"input elements changed: {', '.join(f'{k}: {v}' for k, v in changed.items())}",
                          sum(changed.values()), details={"inputs_changed": run.inputs_changed})
    conclude(reference, problem, finding)
