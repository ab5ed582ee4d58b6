"""A kernel writes every element of C, nothing outside C, and leaves A and B as they were.

C is poisoned with a payloaded NaN before the launch and every operand sits
between guard bands (gemmcheck.problems.harness): a poisoned element was never
written, a changed guard is an out-of-bounds write, a changed input element
is input mutation. Shapes are ragged where the kernel claims them, so the
edge tiles (where guards are forgotten) are exercised. The findings are the
hazard detectors' own (gemmcheck.judge.hazards), on this one launch.
"""

import pytest

from gemmcheck.judge import hazards
from gemmcheck.problems.harness import run_once
from gemmcheck.problems.problem import Problem
from gemmcheck.pytest_plugin.scope_plugin import claimed_shape_or_skip

SEED = 3


@pytest.fixture
def watched(backend, reference) -> hazards.Observation:
    """One launch on a ragged (or, for square-only kernels, aligned) exact problem."""
    t = reference.tile
    problem = Problem(*claimed_shape_or_skip(reference, 2 * t + 1, 3 * t - 1 if t > 1 else 2, t + 3),
                      reference.types, "exact", SEED)
    A, B = problem.operands()
    return hazards.Observation(reference, problem, "memory effects", [run_once(backend, reference, A, B)])


def _conclude(conclude, obs: hazards.Observation, detector) -> None:
    __tracebackhide__ = True
    conclude(obs.instance, obs.problem, next(iter(detector(obs)), None))


def test_every_output_element_is_written(watched, conclude):
    _conclude(conclude, watched, hazards.check_unwritten)


def test_nothing_is_written_outside_C(watched, conclude):
    _conclude(conclude, watched, hazards.check_out_of_bounds_write)


def test_A_and_B_are_unchanged(watched, conclude):
    _conclude(conclude, watched, hazards.check_input_mutation)
