"""Profiles: how hard a run looks. `dev` is quick, `ci` is the nightly-safe
default for CI, `nightly` searches long and at large sizes.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Profile:
    name: str
    max_examples: int           # hypothesis examples per property test
    max_dim: int                # largest M, N or K hypothesis draws
    race_sizes: tuple[int, ...]  # square sizes for race stress (races show at >= 1024)
    race_repeats: int           # launches compared per race-stress size
    perf_sizes: tuple[int, ...]  # square sizes timed by the performance suite
    perf_repeats: int           # timed launches per measurement (median taken)
    # Correctness suite. Property tests run at TILE >= property_min_tile only: smaller
    # TILEs (blocks of 1, 4, 16 threads) run the same edge logic and get every
    # TILE-derived fixed shape instead; that keeps the ci run under two minutes.
    correctness_examples: int = 25   # hypothesis examples per property test and instantiation
    property_min_tile: int = 8       # smallest TILE the property tests search
    determinism_repeats: int = 3     # launches compared bit for bit


PROFILES = {
    p.name: p
    for p in (
        Profile("dev", max_examples=20, max_dim=160, race_sizes=(1024,), race_repeats=3,
                perf_sizes=(2048,), perf_repeats=10,
                correctness_examples=10, property_min_tile=16, determinism_repeats=3),
        Profile("ci", max_examples=50, max_dim=300, race_sizes=(1024,), race_repeats=5,
                perf_sizes=(4096,), perf_repeats=20,
                correctness_examples=25, property_min_tile=8, determinism_repeats=3),
        Profile("nightly", max_examples=1000, max_dim=4160, race_sizes=(1024, 2048), race_repeats=10,
                perf_sizes=(1024, 2048, 4096, 8192), perf_repeats=50,
                correctness_examples=100, property_min_tile=1, determinism_repeats=10),
    )
}
