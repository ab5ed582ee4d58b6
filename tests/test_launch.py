"""Launch policies give the grid and block the seed and section 7.1 describe."""

import pytest

from gemmcheck.launch import POLICIES


@pytest.mark.parametrize("policy, M, N, K, tile, grid", [
    ("seed", 4, 4, 4, 2, (2, 2, 1)),          # the seed's N=4, TILE=2: 4 blocks
    ("seed", 1000, 1000, 1000, 32, (31, 31, 1)),  # floor: the last 8 rows/cols get no block
    ("tile2d", 1000, 1000, 1000, 32, (32, 32, 1)),
    ("tile2d", 33, 17, 65, 16, (2, 3, 1)),    # x runs over N (columns), y over M (rows)
    ("floor2d", 33, 17, 65, 16, (1, 2, 1)),
    ("naive", 33, 17, 65, 16, (2, 3, 1)),
])
def test_grid(policy, M, N, K, tile, grid):
    got_grid, block = POLICIES[policy].shape(M, N, K, tile)
    assert got_grid == grid
    assert block == (tile, tile, 1)


def test_threads_per_block_is_tile_squared():
    assert POLICIES["tile2d"].threads_per_block(32) == 1024
