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


PROFILES = {
    p.name: p
    for p in (
        Profile("dev", max_examples=20, max_dim=160, race_sizes=(1024,), race_repeats=3,
                perf_sizes=(2048,), perf_repeats=10),
        Profile("ci", max_examples=50, max_dim=300, race_sizes=(1024,), race_repeats=5,
                perf_sizes=(4096,), perf_repeats=20),
        Profile("nightly", max_examples=1000, max_dim=4160, race_sizes=(1024, 2048), race_repeats=10,
                perf_sizes=(1024, 2048, 4096, 8192), perf_repeats=50),
    )
}
