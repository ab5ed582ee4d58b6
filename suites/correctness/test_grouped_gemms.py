"""Grouped kernels (a mixture-of-experts layer: those that take group_offsets or group_counts)
are right in every group of a launch.

Each group's rows of A and C come from a seed of their own, its B is the group's K x N block;
groups are judged one by one, a finding naming its group. Contiguous groups follow one another
(an offsets array), masked ones sit in slots of M rows whose rows past the group's count hold the
guard pattern: a kernel that reads or writes them is caught there (gemmcheck.problems.harness).
Every other claim of the suite runs such a kernel as one group holding every row; these run
ragged groups, empty ones and groups of one row, and many small groups.
"""

import pytest
from hypothesis import given, settings

from gemmcheck.judge.hazards.problems import exposing_groups
from gemmcheck.problems.problem import Problem
from gemmcheck.problems.strategies import grouped_problems
from gemmcheck.pytest_plugin.scope_plugin import claimed_shape_or_skip

SEED = 7
RANDOM_KINDS = ("normal", "uniform", "wide")
MANY = 40           # groups of 0 to 3 rows: more groups than rows in some
MAX_SEARCHED_GROUPS = 6


def takes_groups(instance) -> bool:
    return bool(instance.grouped)


def _problem(instance, values, groups=None, M=None):
    t = instance.tile
    M0, N, K = claimed_shape_or_skip(instance, M or 2 * t + 1, t + 1, 4 * t + 1)
    groups = groups or exposing_groups(M0)
    masked = instance.grouped == "masked"
    M = max(M0, *groups) if masked else sum(groups)   # masked: slots of M rows, every group's tail masked
    return Problem(M, N, K, instance.types, values, SEED, groups=groups, masked=masked)


@pytest.mark.instances.with_args(takes_groups)
@pytest.mark.parametrize("groups", [None, (1,), (0, 5), (3, 0, 0, 1, 9)],
                         ids=["ragged-empty-one", "one-row", "empty-first", "empties-between"])
def test_every_group_is_exact(check, reference, groups):
    check(reference, _problem(reference, "exact", groups))


@pytest.mark.instances.with_args(takes_groups)
def test_many_small_groups_are_each_exact(check, reference):
    check(reference, _problem(reference, "exact", tuple(g % 4 for g in range(MANY))))


@pytest.mark.instances.with_args(takes_groups)
@pytest.mark.parametrize("values", RANDOM_KINDS)
def test_every_group_stays_within_the_forward_error_bound(check, reference, values):
    assert check(reference, _problem(reference, values)).ratio <= 1


@pytest.mark.instances.with_args(takes_groups)
def test_groups_are_right_on_any_supported_shape_and_sizes(check, searched, profile):
    @settings(max_examples=profile.correctness_examples)
    @given(problem=grouped_problems(instance=searched, values=("exact", *RANDOM_KINDS),
                                    max_dim=profile.search_max_dim(searched), max_groups=MAX_SEARCHED_GROUPS,
                                    masked=searched.grouped == "masked"))
    def right(problem):
        check(searched, problem, record=False)
    right()
