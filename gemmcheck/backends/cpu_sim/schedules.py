"""cpu-sim's schedules: the orders a launch's threads and blocks may run in, by name."""

from __future__ import annotations

from gemmcheck.backends.cpu_sim import worker as wk

RACE_SCHEDULES = ("forward", "reverse", "shuffle-1", "shuffle-2", "lockstep")


def parse_schedule(name: str) -> tuple[int, int]:
    """(schedule code, seed) for a schedule name; ValueError names the known ones."""
    base, _, seed = name.partition("-")
    if base in wk.SCHEDULES and (base == "shuffle") == bool(seed) and (not seed or seed.isdigit()):
        return wk.SCHEDULES[base], int(seed or 0)
    raise ValueError(f"unknown schedule {name!r}; use forward, reverse, lockstep or shuffle-<seed>")
