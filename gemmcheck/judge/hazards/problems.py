"""The problems hazards are looked for on: each instantiation's exposing problems and their purposes."""

from __future__ import annotations

import dataclasses

from gemmcheck.contract.catalog import Instance
from gemmcheck.problems.harness import OperandVariant
from gemmcheck.problems.problem import BETA_SCALING, DEFAULT_SCALING, Problem, claimed_roundings


# Blocks of 1 or 4 threads (TILE 1, 2) run latency-bound at the larger race sizes: on the
# H200 a nightly kill-matrix row (race sizes 1024 and 2048, 10 repeats) took 12-16 s at TILE 1
# and 5-8 s at TILE 2, against 2-3 s from TILE 4 up. At the first size such a kernel already
# runs hundreds of thousands of blocks side by side, which is what a race stress is for.
ALL_RACE_SIZES_MIN_TILE = 4


def no_race_stress(instance: Instance) -> str | None:
    """Why `instance` has no race-stress size on hardware (its sizes are compiled in: the one
    shape it computes is where racecheck and the simulator look for its races), or None."""
    if instance.spec.sizes is None:
        return None
    return f"{instance.id} computes {instance.spec.describe_shapes()}: no race-stress size on hardware"


def exposing_problems(instance: Instance, race_sizes=(1024,)) -> list[tuple[str, Problem]]:
    """(purpose, problem) pairs hazards are looked for on, derived from the instantiation's TILE.

    - ragged edges (2T+1, T+1, 4T+1): a partial tile in M, N and K, where
      bounds flaws and a barrier inside `if (row < M)` show;
    - tile-aligned 4T cube: no edges (a kernel may be right only here);
    - large ragged (R - T/2 - 1 cubed): many blocks share each edge row;
    - race stress R cubed (R from the profile, 1024 and up): where missing
      barriers show on real hardware (a WAR race stayed exact at 64^3 on an H200);
    - K = 0 (2T+1 x T+1, or 2T x 2T): BLAS gives C = beta C0, zeros written everywhere
      at beta = 0; a kernel that returns early at K = 0 leaves C unwritten;
    - a kernel whose sizes are compiled in (``sizes``): that one shape instead of all these;
    - alpha and beta: the first problem again at alpha 2 and beta -1, each where the kernel
      takes it (a kernel that drops alpha or beta is right at 1 and 0);
    - scale blocks, for a kernel with block scale factors (1 x 128, 128 x 128): two blocks and
      one more along K and N, so a scale read at the wrong block (or axis) changes the result
      (the other shapes stay inside one block).
    Inputs are exact integers (problems.Problem values="exact"): any summation
    order gives the same bits, so a difference between launches is a defect.
    A ragged shape the instantiation does not claim moves to the nearest claimed one that
    is still ragged in M or N; other shapes it does not claim are left out. A TILE below
    ALL_RACE_SIZES_MIN_TILE gets the first race size only (see there).
    A strided-batched kernel (one that takes `batch`) gets each problem as EXPOSING_BATCH
    products: a stride, or a batch index, wrong shows only past the first product. A grouped
    kernel gets M's rows as ragged groups, one empty and one of a single row (exposing_groups).
    """
    T = instance.tile
    if T < ALL_RACE_SIZES_MIN_TILE:
        race_sizes = tuple(race_sizes)[:1]
    shapes = [("ragged edges", 2 * T + 1, T + 1, 4 * T + 1), ("tile-aligned", 4 * T, 4 * T, 4 * T)]
    shapes += [("large ragged", R - T // 2 - 1, R - T // 2 - 1, R - T // 2 - 1) for R in race_sizes]
    shapes += [("race stress", R, R, R) for R in race_sizes]
    shapes += _scale_blocks(instance)
    # K = 0 (BLAS: C = beta C0, zeros at beta = 0), ragged where claimed, else whole tiles.
    shapes += [(K_ZERO, 2 * T + 1, T + 1, 0), (K_ZERO, 2 * T, 2 * T, 0)]
    if instance.spec.sizes is not None:   # it computes one shape: every hazard is looked for there
        shapes = [(COMPILED_SIZES, *instance.spec.sizes)]
    seen, out = set(), []
    for purpose, M, N, K in shapes:
        if purpose in RAGGED and not instance.supports(M, N, K):
            M, N, K = _ragged_as_claimed(instance, M, N, K)
        if ((M, N, K) in seen or min(M, N) < 1 or (K < 1 and purpose != K_ZERO)
                or (purpose == K_ZERO and any(p == K_ZERO for p, _ in out))
                or not instance.supports(M, N, K)):
            continue
        seen.add((M, N, K))
        out.append((purpose, Problem(M, N, K, instance.types, "exact", seed=len(out) + 1,
                                     batch=EXPOSING_BATCH if instance.batched else 1,
                                     groups=exposing_groups(M) if instance.grouped else (),
                                     masked=instance.grouped == "masked")))
    # the first problem again at alpha 2 and beta -1, where the kernel takes them: a kernel that
    # drops alpha or beta gives the right values at (1, 0); last, so the others keep their seeds
    scaled = OperandVariant("tight", *BETA_SCALING).fitted(instance.spec)
    first = next((p for purpose, p in out if purpose != K_ZERO), None)
    if (scaled.alpha, scaled.beta) != DEFAULT_SCALING and first is not None:
        out.append((SCALED, dataclasses.replace(first, seed=len(out) + 1, alpha=scaled.alpha, beta=scaled.beta)))
    return out


def _scale_blocks(instance: Instance) -> list[tuple[str, int, int, int]]:
    """The "scale blocks" shape of a kernel with block scale factors: 2 blocks + 1 along each
    dimension a block spans (K for A's 1 x 128, K and N for B's 128 x 128), ragged elsewhere."""
    T, extents = instance.tile, {"M": 1, "N": 1, "K": 1}
    for scale in instance.types.scales:
        dims = ("M", "K") if scale.operand == "A" else ("K", "N")
        for dim, b in zip(dims, scale.block):
            extents[dim] = max(extents[dim], b)
    if all(b <= 1 for b in extents.values()):
        return []
    ragged = {"M": 2 * T + 1, "N": T + 1, "K": 4 * T + 1}
    M, N, K = (2 * b + 1 if b > 1 else ragged[d] for d, b in extents.items())
    return [(SCALE_BLOCKS, M, N, K)]


def _ragged_as_claimed(instance: Instance, M: int, N: int, K: int) -> tuple[int, int, int]:
    """A ragged shape the kernel does not claim as it is, moved to the nearest one it does that
    is still ragged in M or N (K rounded up to a multiple of 8, say, for a kernel that claims
    K % 8 == 0): its edge blocks are where bounds flaws show. (0, 0, 0) if there is none."""
    T = instance.tile
    claimed = [((m != M) + (n != N), m * n * k, (m, n, k)) for m, n, k in claimed_roundings(instance, M, N, K)
               if m % T or n % T]
    return min(claimed)[2] if claimed else (0, 0, 0)


def exposing_groups(M: int) -> tuple[int, ...]:
    """M rows as four groups: ragged, empty, one row and the rest (fewer where M is small). The
    same counts fit a masked kernel's slots of M rows, the first one full."""
    if M < 3:
        return (M, 0)
    rest = M // 3
    return (M - 1 - rest, 0, 1, rest)


RAGGED = ("ragged edges", "large ragged")
EXPOSING_BATCH = 3   # products of a batched kernel's exposing problems: a first, a middle and a last
SCALE_BLOCKS = "scale blocks"
SCALED = "alpha and beta"   # the first problem at alpha 2, beta -1 (where the kernel takes them)
COMPILED_SIZES = "compiled sizes"   # the one shape of a kernel whose sizes are compiled in
SMALL_PURPOSES = ("ragged edges", "tile-aligned", COMPILED_SIZES)  # cheap enough for compute-sanitizer
K_ZERO = "K = 0"


def is_race_stress(purpose: str) -> bool:
    return purpose == "race stress"
