"""Batched kernels (those that take `batch`: strided, or through arrays of pointers) are right
in every product of a launch.

Each product's operands come from a seed of their own, stored a guard band apart (stride =
the matrix's span plus the band; a pointer-array batch is given each product's address; an
operand the kernel takes no stride for, packed, as it finds each product itself), or
once with stride 0 (the same pointer) for a broadcast A or B; the products
are judged one by one, a finding naming its batch index, and a write into the gap between two
products is an out-of-bounds write naming both (gemmcheck.problems.harness). Every other claim
of the suite runs such a kernel at batch 1; these run one product, a few, and many small ones.
"""

import pytest
from hypothesis import given, settings

from gemmcheck.contract import launch
from gemmcheck.problems.harness import OperandVariant
from gemmcheck.problems.problem import BETA_SCALING, BROADCASTS, DEFAULT_SCALING, Problem
from gemmcheck.problems.strategies import batched_problems
from gemmcheck.pytest_plugin.scope_plugin import claimed_shape_or_skip

SEED = 5
BATCHES = (1, 2, 5)
MANY = 65            # many small products: more than one wave of blocks along z
RANDOM_KINDS = ("normal", "uniform", "wide")
MAX_SEARCHED_BATCH = 6


def takes_a_batch(instance) -> bool:
    return instance.batched


def scalings(instance) -> tuple:
    """(1, 0), and alpha 2 and beta -1 where the kernel takes them (OperandVariant.fitted)."""
    fitted = (OperandVariant("tight", *s).fitted(instance.spec) for s in (DEFAULT_SCALING, BETA_SCALING))
    return tuple(dict.fromkeys((v.alpha, v.beta) for v in fitted))


def _ragged(instance):
    t = instance.tile
    return claimed_shape_or_skip(instance, 2 * t + 1, t + 1, 4 * t + 1)


def broadcasts(instance) -> tuple[str, ...]:
    """"" (no operand shared), and each of A and B the kernel is given a stride or array for."""
    return ("", *(x for x in BROADCASTS if x and not launch.packed_in_batch(instance.spec.roles, x)))


# (batch, broadcast): one product, and a few with each operand strided or broadcast
LAYOUTS = [(1, "")] + [(b, shared) for b in BATCHES[1:] for shared in BROADCASTS]


@pytest.mark.instances.with_args(takes_a_batch)
@pytest.mark.parametrize("batch, broadcast", LAYOUTS,
                         ids=[f"batch{b}" + (f"-broadcast{s}" if s else "") for b, s in LAYOUTS])
def test_every_product_of_a_strided_batch_is_exact(check, reference, batch, broadcast):
    if broadcast not in broadcasts(reference):
        pytest.skip(f"does not apply: {reference.spec.name} takes no stride_{broadcast}: it finds each product's "
                    f"{broadcast} itself, so no {broadcast} is shared")
    for alpha, beta in scalings(reference):
        check(reference, Problem(*_ragged(reference), reference.types, "exact", SEED, alpha, beta,
                                 batch=batch, broadcast=broadcast))


@pytest.mark.instances.with_args(takes_a_batch)
def test_many_small_products_are_each_exact(check, reference):
    M, N, K = claimed_shape_or_skip(reference, 3, 5, 7)
    check(reference, Problem(M, N, K, reference.types, "exact", SEED, batch=MANY))


@pytest.mark.instances.with_args(takes_a_batch)
@pytest.mark.parametrize("values", RANDOM_KINDS)
def test_every_product_stays_within_the_forward_error_bound(check, reference, values):
    for alpha, beta in scalings(reference):
        judgement = check(reference, Problem(*_ragged(reference), reference.types, values, SEED, alpha, beta,
                                             batch=3))
        assert judgement.ratio <= 1


@pytest.mark.instances.with_args(takes_a_batch)
def test_strided_batches_are_right_on_any_supported_shape_and_count(check, searched, profile):
    @settings(max_examples=profile.correctness_examples)
    @given(problem=batched_problems(instance=searched, values=("exact", *RANDOM_KINDS),
                                    max_dim=profile.search_max_dim(searched), max_batch=MAX_SEARCHED_BATCH,
                                    scalings=scalings(searched), broadcasts=broadcasts(searched)))
    def right(problem):
        check(searched, problem, record=False)
    right()
