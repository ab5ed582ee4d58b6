"""The pytest-benchmark clock adapter: benchmark stats from device-event times, not host time."""

from __future__ import annotations

import math


class DeviceClock:
    """A clock for pytest-benchmark that advances only by measured device time.

    pytest-benchmark times `target()` as timer() after minus timer() before. Give
    it this clock and `replay(times)` as the target in pedantic mode with
    rounds=len(times): each round advances the clock by the next device-event
    time, so the stats it stores are exactly the GPU times (host overhead, which
    its own calibration would measure, never enters).
    """

    __name__ = "gemmcheck_device_clock"

    def __init__(self) -> None:
        self.now = 0.0
        self._pending: list[float] = []

    def __call__(self) -> float:
        return self.now

    def replay(self, times) -> "DeviceClock":
        times = [float(t) for t in times]
        if not times or any(not (t > 0 and math.isfinite(t)) for t in times):
            raise ValueError(f"device times must be positive and finite, got {times!r}")
        self._pending = list(reversed(times))
        return self

    @property
    def rounds(self) -> int:
        return len(self._pending)

    def advance(self) -> None:
        """The pedantic target: one round's device time passes."""
        if not self._pending:
            raise RuntimeError("DeviceClock.advance called more often than there are recorded times")
        self.now += self._pending.pop()


DEVICE_CLOCK = DeviceClock()

