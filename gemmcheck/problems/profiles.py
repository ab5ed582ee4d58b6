"""Profiles: how hard a run looks. `dev` is quick, `ci` is the nightly-safe
default for CI, `nightly` searches long and at large sizes.

Where the budget goes: bugs in tiled kernels live at tile edges (ragged M, N, K
near multiples of TILE, a K tail, a last partial block), which small shapes reach as
well as huge ones, at a fraction of the cost. So hypothesis searches many small and
ragged shapes (max_dim: a few dozen tiles at most), and the large-shape claims are a
few fixed problems per instantiation (large_shapes), each checked once. The nightly
target (15 min on one H200 for the builtin catalog) and what was measured against it
are in docs/scale.md ("Budgets") and docs/benchmarks.md.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Profile:
    name: str
    max_examples: int           # hypothesis examples per property test
    max_dim: int                # largest M, N or K hypothesis draws (small and ragged: see above)
    race_sizes: tuple[int, ...]  # square sizes for race stress (races show at >= 1024)
    race_repeats: int           # launches compared per race-stress size
    perf_sizes: tuple[int, ...]  # square sizes timed by the performance suite
    perf_repeats: int           # least timed launches per measurement (median taken); the noise
                                # rule may ask more. ci takes nvbench's 10: its 20 were ~10 s of
                                # a 90 s run on the H200, for a median already known to 0.5 %
    # Correctness suite. Property tests run at TILE >= property_min_tile only: smaller
    # TILEs (blocks of 1, 4, 16 threads) run the same edge logic and get every
    # TILE-derived fixed shape instead; that keeps the ci run under two minutes.
    correctness_examples: int = 25   # hypothesis examples per property test and instantiation
    property_min_tile: int = 8       # smallest TILE the property tests search
    determinism_repeats: int = 3     # launches compared bit for bit
    # Fixed large problems (M, N, K), each checked once per instantiation that supports
    # it: ragged on every side (one past, one short of a power of two) and a long K.
    large_shapes: tuple[tuple[int, int, int], ...] = ()
    # ... at TILE >= large_min_tile only: a TILE-1 or TILE-2 kernel launches millions of
    # one- or four-thread blocks at 4096^2 (seconds each) to exercise the edge logic the
    # small searched shapes already cover at those TILEs.
    large_min_tile: int = 16
    # The kill matrix: every instantiation of every kernel (True), or one representative
    # row per kernel (False). A row costs ~3-5 s on an H200 (ci: 16 rows in 43 s; nightly's 195
    # rows are most of its time: docs/benchmarks.md).
    matrix_every: bool = False
    # The performance suite: every dtype of each kernel (True), or its lead dtype and those a
    # claim names (False). ci's 24 float64, float16 and bfloat16 SIMT measurements at 4096^3,
    # which no claim names, were 8 s of its 11 s of sampling on an H200 (docs/benchmarks.md).
    perf_every_dtype: bool = False

    def search_max_dim(self, instance) -> int:
        """max_dim for searching `instance`: a kernel that takes only multiples of a TILE
        larger than max_dim (a 256 x 128 block tile) is searched up to two such multiples,
        not refused: no shape it takes lies in [1, max_dim]."""
        if instance.spec.sizes is not None:   # the one shape it computes
            return max(self.max_dim, *instance.spec.sizes)
        if instance.spec.shapes == "any":
            return self.max_dim
        return max(self.max_dim, 2 * instance.tile)


PROFILES = {
    p.name: p
    for p in (
        Profile("dev", max_examples=20, max_dim=160, race_sizes=(1024,), race_repeats=3,
                perf_sizes=(2048,), perf_repeats=10,
                correctness_examples=10, property_min_tile=16, determinism_repeats=3),
        Profile("ci", max_examples=50, max_dim=300, race_sizes=(1024,), race_repeats=5,
                perf_sizes=(4096,), perf_repeats=10,
                correctness_examples=25, property_min_tile=8, determinism_repeats=3,
                large_shapes=((1025, 1023, 1031),)),
        # Nightly used to draw M, N, K up to 4160 in every example: one run of three
        # kernels reached 17% in 400 s, the oracle's float64 product dominating. Its
        # search now stays within 20 tiles of 32; the large sizes are fixed cases.
        Profile("nightly", max_examples=1000, max_dim=640, race_sizes=(1024, 2048), race_repeats=10,
                perf_sizes=(1024, 2048, 4096, 8192), perf_repeats=50,
                correctness_examples=100, property_min_tile=1, determinism_repeats=10,
                large_shapes=((1025, 1023, 1031), (4097, 4095, 4160)), matrix_every=True,
                perf_every_dtype=True),
    )
}
