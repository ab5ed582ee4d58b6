"""When to stop timing, and which samples count: nvbench's rules, as pure logic.

- Series timed together (a kernel and cuBLAS on the same shape) are sampled in
  turn, one sample each per round, so clock or thermal drift hits both alike.
  A series whose median is known (below) takes no more samples while the other
  goes on: cuBLAS float16 samples spread 6 % on the H200 and need ~400 rounds,
  which made a 30 ms naive kernel's 20 samples 255 (8 s of a ci run).
- A sample taken while the SM clock was below ``min_clock_ratio`` x the
  reference clock (nvbench's throttle threshold, 75 %) is dropped and counted.
- Sampling stops when every series has its least samples (``min_samples``, the
  profile's perf_repeats; or nvbench's 10 once its kept samples add up to
  ``enough_seconds`` of device time: at N = 8192 a 0.1 s launch took 50 samples of
  two series, 15 s, for a mean known to 0.5 % after 10)
  and the number reported, the *median*, is known to ``max_noise`` (0.5 %): its
  standard error from the samples' interquartile range, over the median
  (``relative_error_of_median``): ``converged``. nvbench asks it of the
  mean (stdev / (mean sqrt(n))), which a few host stalls longer than the hold kernel
  (a sample at several times the others) keep unsettled for hundreds of samples: on an
  H100, cupy.matmul's float16 and bfloat16 samples spread 18-24 % (stdev / mean) and took
  3,000-3,800 samples each in one ci run, four measurements stopped at the sample cap,
  for medians that were the same to 0.2 % from run to run. The
  samples' own spread (stdev / mean, ``noise``) is a property of the kernel and
  the card, not of how long we look: on the H200 cuBLAS samples spread 2-14 %
  from launch to launch (measured), so a rule on it alone would run every
  measurement to its time cap; the suite judges that spread separately
  (``max_spread``); or when a series has taken ``max_samples`` samples
  (``sample cap``); or after ``max_seconds`` (``time cap``). A measurement
  that stopped at a cap says so, with its noise, and the suite judges it.

Nothing here touches a GPU: the samplers are callables (tests/test_perf_sampling.py
feeds made-up times and clocks).
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field
from typing import Callable

from gemmcheck.perf import roofline

CONVERGED, SAMPLE_CAP, TIME_CAP = "converged", "sample cap", "time cap"


@dataclass(frozen=True)
class Sample:
    """One timed launch: its device-event time, and the SM clock read right after it."""

    seconds: float
    clock_mhz: float | None = None
    set_index: int = 0          # which input set it ran on (the last one's output is checked)


def relative_noise(times) -> float:
    """Sample standard deviation / mean; inf with fewer than two samples."""
    times = list(times)
    if len(times) < 2:
        return math.inf
    mean = statistics.fmean(times)
    return statistics.stdev(times) / mean if mean > 0 else math.inf


# The median's standard error per unit of the samples' interquartile range: sqrt(pi / 2) x
# sigma / sqrt(n) for normal samples, with sigma estimated as IQR / 1.349; unmoved by up to a
# quarter of the samples stalled, as a stdev is not.
MEDIAN_ERROR_PER_IQR = math.sqrt(math.pi / 2) / 1.349


def relative_error_of_median(times) -> float:
    """How far the median, the number reported, is likely off, relative to it: its standard
    error from the interquartile range (MEDIAN_ERROR_PER_IQR x IQR / (median sqrt(n))); inf
    with fewer than two samples."""
    times = list(times)
    if len(times) < 2:
        return math.inf
    return MEDIAN_ERROR_PER_IQR * roofline.spread(times) / math.sqrt(len(times))


def throttled(sample: Sample, reference_mhz: float | None, min_ratio: float) -> bool:
    """The sample ran with the SM clock below min_ratio x the reference (unknown clocks pass)."""
    if sample.clock_mhz is None or not reference_mhz:
        return False
    return sample.clock_mhz < min_ratio * reference_mhz


@dataclass
class Series:
    """The samples of one thing timed (a kernel, cuBLAS, a copy)."""

    label: str
    kept: list[Sample] = field(default_factory=list)
    dropped: list[Sample] = field(default_factory=list)   # throttled
    last: Sample | None = None                            # the last sample taken, kept or not

    @property
    def taken(self) -> int:
        return len(self.kept) + len(self.dropped)

    @property
    def times(self) -> tuple[float, ...]:
        return tuple(s.seconds for s in self.kept)

    @property
    def noise(self) -> float:
        return relative_noise(self.times)


NVBENCH_MIN_SAMPLES = 10   # nvbench's --min-samples: the least any series takes


@dataclass(frozen=True)
class StoppingRule:
    max_noise: float = 0.005
    min_samples: int = 10
    max_samples: int = 1000
    max_seconds: float = 10.0
    enough_seconds: float = math.inf   # device time after which NVBENCH_MIN_SAMPLES suffice

    def __post_init__(self) -> None:
        if not (self.max_noise > 0 and self.max_seconds > 0 and self.enough_seconds > 0
                and 2 <= self.min_samples <= self.max_samples):
            raise ValueError(f"StoppingRule: need max_noise > 0, max_seconds > 0, enough_seconds > 0 "
                             f"and 2 <= min_samples <= max_samples; got {self}")

    def least_samples(self, series: Series) -> int:
        """min_samples, or fewer (down to nvbench's 10) once the kept samples add up to
        enough_seconds of device time: long launches need fewer to know their mean."""
        if sum(series.times) >= self.enough_seconds:
            return min(self.min_samples, NVBENCH_MIN_SAMPLES)
        return self.min_samples

    def settled(self, series: Series) -> bool:
        """The series has its least samples and its median is known to max_noise."""
        return (len(series.kept) >= self.least_samples(series)
                and relative_error_of_median(series.times) <= self.max_noise)

    def stop_reason(self, series: list[Series], settled: list[bool], elapsed_s: float) -> str | None:
        """Why sampling should stop now, or None to take another round (`settled`: each
        series' settled(), computed once per round by the caller)."""
        if all(settled):
            return CONVERGED
        if any(s.taken >= self.max_samples for s in series):
            return SAMPLE_CAP
        if elapsed_s >= self.max_seconds:
            return TIME_CAP
        return None


@dataclass
class Sampled:
    """What interleaved sampling gave: one Series per sampler, and why it stopped."""

    series: dict[str, Series]
    stop: str
    seconds: float


def sample_interleaved(samplers: dict[str, Callable[[], Sample]], rule: StoppingRule, *,
                       reference_mhz: float | None, min_clock_ratio: float,
                       clock: Callable[[], float] = time.monotonic) -> Sampled:
    """Take one sample from each sampler whose series has not settled, per round, in order,
    until the rule says stop."""
    if not samplers:
        raise ValueError("sample_interleaved: no samplers")
    series = {label: Series(label) for label in samplers}
    settled = dict.fromkeys(samplers, False)
    start = clock()
    while True:
        for label, take in samplers.items():
            if settled[label]:
                continue
            sample = take()
            if not (sample.seconds > 0 and math.isfinite(sample.seconds)):
                raise ValueError(f"{label}: a device time must be positive and finite, got {sample.seconds!r}")
            bucket = series[label].dropped if throttled(sample, reference_mhz, min_clock_ratio) else series[label].kept
            bucket.append(sample)
            series[label].last = sample
        elapsed = clock() - start
        settled = {label: rule.settled(s) for label, s in series.items()}
        reason = rule.stop_reason(list(series.values()), list(settled.values()), elapsed)
        if reason:
            return Sampled(series, reason, elapsed)
