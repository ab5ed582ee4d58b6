"""Launch policies: named rules that turn a problem and a TILE into (grid, block).

Catalogs name a policy; nothing is ever eval'd. Grid and block are (x, y, z)
tuples in CUDA's order: x runs along the columns of C (N), y along its rows (M).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

Dim3 = tuple[int, int, int]


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Policy:
    name: str
    description: str
    _grid: Callable[[int, int, int, int], tuple[int, int]]

    def shape(self, M: int, N: int, K: int, tile: int) -> tuple[Dim3, Dim3]:
        gx, gy = self._grid(M, N, K, tile)
        return (gx, gy, 1), (tile, tile, 1)

    def threads_per_block(self, tile: int) -> int:
        return tile * tile


POLICIES: dict[str, Policy] = {
    p.name: p
    for p in (
        Policy("seed", "grid (N / TILE, N / TILE) rounded down, block (TILE, TILE): the seed's host code",
               lambda M, N, K, t: (N // t, N // t)),
        Policy("tile2d", "grid (ceil(N / TILE), ceil(M / TILE)), block (TILE, TILE)",
               lambda M, N, K, t: (ceil_div(N, t), ceil_div(M, t))),
        Policy("floor2d", "grid (N / TILE, M / TILE) rounded down, block (TILE, TILE)",
               lambda M, N, K, t: (N // t, M // t)),
        Policy("naive", "one thread per output: grid (ceil(N / TILE), ceil(M / TILE)), block (TILE, TILE);"
               " TILE is only the block edge",
               lambda M, N, K, t: (ceil_div(N, t), ceil_div(M, t))),
    )
}
