"""Hypothesis strategies for GEMM problems, favouring the shapes where tiled kernels break.

Dimensions come from a list of suspects derived from TILE (1, TILE-1, TILE,
TILE+1, k*TILE +- 1, primes) or anywhere in range; everything shrinks
toward small shapes and seed 0. Every argument is keyword-only and checked
up front; a bad one raises hypothesis.errors.InvalidArgument naming it and
its value.
"""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from dataclasses import replace

from gemmcheck.problems.problem import BROADCASTS, DEFAULT_SCALING, VALUE_KINDS, Problem

PRIMES = (2, 3, 5, 7, 11, 13, 17, 31, 37, 61, 67, 97, 127, 131, 257, 509, 521, 1021, 1031, 2039, 4093, 4099)
MAX_SEED = 2 ** 32 - 1


def _check_int(name: str, value, *, at_least: int = 1) -> None:
    if type(value) is not int or value < at_least:
        raise InvalidArgument(f"{name}={value!r} must be an integer >= {at_least}")


def _check_range(low_name: str, low, high_name: str, high) -> None:
    _check_int(low_name, low)
    _check_int(high_name, high)
    if low > high:
        raise InvalidArgument(f"{low_name}={low!r} must be <= {high_name}={high!r}")


def suspect_dimensions(tile: int, min_value: int, max_value: int) -> list[int]:
    """The dimensions worth trying first for a TILE, ascending, within [min_value, max_value]."""
    near = {1, 2, tile - 1, tile, tile + 1}
    for k in (2, 3, 4, 8, 16, 32, 64, 128):
        near |= {k * tile - 1, k * tile, k * tile + 1}
    near |= set(PRIMES)
    return sorted(v for v in near if min_value <= v <= max_value)


def dimensions(*, tile: int, min_value: int = 1, max_value: int) -> st.SearchStrategy[int]:
    """Return a strategy for one matrix dimension (M, N or K).

    tile: the kernel's TILE; suspects 1, TILE-1, TILE, TILE+1, k*TILE +- 1 and primes come first.
    min_value, max_value: the inclusive range.
    Shrinks toward the smallest suspect, then toward min_value.
    """
    _check_int("tile", tile)
    _check_range("min_value", min_value, "max_value", max_value)
    suspects = suspect_dimensions(tile, min_value, max_value)
    anywhere = st.integers(min_value, max_value)
    return st.one_of(st.sampled_from(suspects), anywhere) if suspects else anywhere


def ragged_shapes(*, tile: int, min_dim: int = 1, max_dim: int) -> st.SearchStrategy[tuple[int, int, int]]:
    """Return a strategy for (M, N, K) with each dimension independent: ragged, skinny
    (N = 1), wide (M = 1), K = 1, K < TILE and M != N != K all occur.

    tile: the kernel's TILE (see `dimensions`).
    min_dim, max_dim: the inclusive range of every dimension.
    Shrinks toward small shapes.
    """
    _check_int("tile", tile)
    _check_range("min_dim", min_dim, "max_dim", max_dim)
    dim = dimensions(tile=tile, min_value=min_dim, max_value=max_dim)
    return st.tuples(dim, dim, dim)


def supported_shapes(*, instance, min_dim: int = 1, max_dim: int) -> st.SearchStrategy[tuple[int, int, int]]:
    """Return a strategy for (M, N, K) that `instance` declares it supports.

    instance: a catalog Instance; its spec's `shapes` (any, tile-multiple,
    square-tile-multiple) decides the family, its TILE the suspects.
    min_dim, max_dim: the inclusive range of every dimension.
    Shrinks toward small shapes.
    """
    _check_range("min_dim", min_dim, "max_dim", max_dim)
    if instance.spec.sizes is not None:   # sizes compiled in: the one shape there is
        if not all(min_dim <= d <= max_dim for d in instance.spec.sizes):
            raise InvalidArgument(f"{instance.id} computes {instance.spec.describe_shapes()}, "
                                  f"outside [{min_dim}, {max_dim}]")
        return st.just(instance.spec.sizes)
    tile = instance.tile
    kind = instance.spec.shapes
    if kind == "any":
        shapes = ragged_shapes(tile=tile, min_dim=min_dim, max_dim=max_dim)
    else:
        low, high = -(-min_dim // tile), max_dim // tile
        if low > high:
            raise InvalidArgument(f"max_dim={max_dim!r}: {instance.id} supports only multiples of "
                                  f"TILE {tile} and none lies in [{min_dim}, {max_dim}]")
        multiple = st.integers(low, high).map(lambda n: n * tile)
        if kind == "square-tile-multiple":
            shapes = multiple.map(lambda n: (n, n, n))
        else:
            shapes = st.tuples(multiple, multiple, multiple)
    return shapes.filter(lambda s: instance.supports(*s))


def seeds() -> st.SearchStrategy[int]:
    """Return a strategy for input seeds; shrinks toward 0."""
    return st.integers(0, MAX_SEED)


def problems(*, instance, values=VALUE_KINDS, min_dim: int = 1, max_dim: int,
             scalings=(DEFAULT_SCALING,)) -> st.SearchStrategy[Problem]:
    """Return a strategy for Problems `instance` declares it supports.

    instance: a catalog Instance (its dtype, TILE and declared shapes).
    values: the value kinds to draw from (see gemmcheck.problems.problem.VALUE_KINDS).
    min_dim, max_dim: the inclusive range of every dimension.
    scalings: the (alpha, beta) pairs to draw from (integers for the exact kinds).
    Shrinks toward small shapes, the first value kind, the first scaling and seed 0.
    """
    if isinstance(values, str) or not values or any(v not in VALUE_KINDS for v in values):
        raise InvalidArgument(f"values={values!r} must be a non-empty sequence of {VALUE_KINDS}")
    if not scalings or any(len(s) != 2 or any(isinstance(x, bool) or not isinstance(x, (int, float))
                                              for x in s) for s in scalings):
        raise InvalidArgument(f"scalings={scalings!r} must be a non-empty sequence of (alpha, beta) pairs")
    return st.builds(
        lambda shape, kind, seed, scaling: Problem(*shape, instance.types, kind, seed, *scaling),
        supported_shapes(instance=instance, min_dim=min_dim, max_dim=max_dim),
        st.sampled_from(tuple(values)),
        seeds(),
        st.sampled_from(tuple(scalings)),
    )


def batched_problems(*, instance, values=VALUE_KINDS, min_dim: int = 1, max_dim: int, max_batch: int,
                     scalings=(DEFAULT_SCALING,), broadcasts=BROADCASTS) -> st.SearchStrategy[Problem]:
    """Return a strategy for strided-batched Problems `instance` declares it supports.

    instance, values, min_dim, max_dim, scalings: as for `problems`.
    max_batch: the largest product count (from 1).
    broadcasts: the operands shared by every product (stride 0) to draw from ("", "A", "B").
    Shrinks toward one product, no broadcast, and `problems`' small shapes.
    """
    _check_int("max_batch", max_batch)
    if isinstance(broadcasts, str) or not broadcasts or any(b not in BROADCASTS for b in broadcasts):
        raise InvalidArgument(f"broadcasts={broadcasts!r} must be a non-empty sequence of {BROADCASTS}")
    return st.builds(lambda problem, batch, broadcast: replace(problem, batch=batch, broadcast=broadcast),
                     problems(instance=instance, values=values, min_dim=min_dim, max_dim=max_dim,
                              scalings=scalings),
                     st.integers(1, max_batch), st.sampled_from(tuple(broadcasts)))


def grouped_problems(*, instance, values=VALUE_KINDS, min_dim: int = 1, max_dim: int, max_groups: int,
                     masked: bool = False) -> st.SearchStrategy[Problem]:
    """Return a strategy for grouped Problems (a mixture-of-experts layer's groups) `instance`
    declares it supports.

    instance, values, min_dim, max_dim: as for `problems` (M: the total rows, or a masked slot's).
    max_groups: the most groups (from 1); groups may be empty or of one row.
    masked: slots of M rows each holding a group's count (else contiguous rows summing to M).
    Shrinks toward one group holding every row and `problems`' small shapes.
    """
    _check_int("max_groups", max_groups)

    def grouped(problem, data_sizes):
        if masked:
            sizes = tuple(min(s, problem.M) for s in data_sizes)
        else:   # cut M's rows into len(data_sizes) groups at sorted points
            cuts = sorted(min(s, problem.M) for s in data_sizes[1:])
            edges = (0, *cuts, problem.M)
            sizes = tuple(b - a for a, b in zip(edges, edges[1:]))
        return replace(problem, groups=sizes, masked=masked)
    return st.builds(grouped, problems(instance=instance, values=tuple(v for v in values if v != "special"),
                                       min_dim=min_dim, max_dim=max_dim),
                     st.lists(st.integers(0, max_dim), min_size=1, max_size=max_groups))
