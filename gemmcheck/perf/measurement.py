"""What a measurement holds (times, clocks, how sampling stopped, how caches were kept cold),
and the output check that says whether a timed kernel computed the right thing."""

from __future__ import annotations

from dataclasses import dataclass

from gemmcheck.perf import roofline
from gemmcheck.perf import sampling


@dataclass(frozen=True)
class Measurement:
    """Device-event times of one thing (a kernel instantiation, cuBLAS, a copy) at one size."""

    label: str                      # instance id, "cublas-float32", "copy"
    size: int                       # N of an N x N x N problem (bytes for a copy)
    times: tuple[float, ...]        # seconds, one per kept timed launch
    flops: float = 0.0              # per launch (0 for a copy)
    bytes_moved: float = 0.0        # per launch, for a copy
    n_sets: int = 1                 # input sets rotated through (cold caches)
    clocks_mhz: tuple[float, ...] = ()   # SM clock after each kept sample (empty: unknown)
    dropped: int = 0                # samples dropped as throttled
    reference_mhz: float | None = None   # the clock samples were held to
    stop: str = ""                  # why sampling stopped (sampling.CONVERGED, ...)

    @classmethod
    def from_series(cls, series: sampling.Series, size: int, stop: str, *, flops: float = 0.0,
                    bytes_moved: float = 0.0, n_sets: int = 1, reference_mhz: float | None = None,
                    label: str | None = None) -> "Measurement":
        if not series.kept:
            raise ValueError(f"{series.label}: every one of {series.taken} samples ran below the clock "
                             f"threshold ({reference_mhz} MHz reference); the card is throttling")
        clocks = tuple(s.clock_mhz for s in series.kept if s.clock_mhz is not None)
        return cls(label or series.label, size, series.times, flops, bytes_moved, n_sets, clocks,
                   len(series.dropped), reference_mhz, stop)

    @property
    def median(self) -> float:
        return roofline.median(self.times)

    @property
    def spread(self) -> float:
        """Interquartile range / median."""
        return roofline.spread(self.times)

    @property
    def noise(self) -> float:
        """stdev / mean (perf.json's `noise`), which a few stalled samples inflate; the table shows `spread`."""
        return sampling.relative_noise(self.times)

    @property
    def tflops(self) -> float:
        return roofline.tflops(self.flops, self.median)

    @property
    def bandwidth_tbs(self) -> float:
        return self.bytes_moved / self.median / 1e12

    @property
    def clock_mhz(self) -> float | None:
        """The median SM clock over the kept samples, None when NVML gave none."""
        return roofline.median(self.clocks_mhz) if self.clocks_mhz else None

    def cold_caches(self) -> str:
        return f"rotating {self.n_sets} input sets" if self.n_sets > 1 else "one input set (warm)"


@dataclass
class Check:
    """One output compared with the float64 reference."""

    worst_ratio: float      # max |C - C_ref| / bound; <= 1 passes
    nans: int
    where: tuple[int, int] | None

    @property
    def ok(self) -> bool:
        return self.nans == 0 and self.worst_ratio <= 1.0


def check_output(xp, got, ref, absprod, dtype, K: int, epilogue_values=None) -> Check:
    """Compare a kernel's output (as float64) with the float64 reference, on any array module.
    `dtype`: the kernel's DType, or its operand types (an OperandTypes) for a mixed kernel.
    `ref`: A B; with a fused epilogue (the types'), its inputs `epilogue_values` (by role) are
    applied to it here.

    The bound is the correctness oracle's (gemmcheck.judge.oracle.Bound: forward error
    of the accumulation, the output rounding, and the float64 reference's own
    error; epilogue_bound for an epilogue), defined there only; a NaN anywhere counts as an
    unbounded error.
    """
    from gemmcheck.contract import operand_types
    from gemmcheck.judge.oracle import Bound
    from gemmcheck.judge.oracle.bound import reference_and_bound

    b = Bound.for_dtype(dtype, K)
    ref, bound = reference_and_bound(b, operand_types.coerce(dtype).epilogue, epilogue_values, ref, absprod, xp)
    nan = xp.isnan(got)
    ratio = xp.where(nan, xp.inf, xp.abs(got - ref) / bound).ravel()
    worst = int(xp.argmax(ratio))
    return Check(float(ratio[worst]), int(xp.count_nonzero(nan)), divmod(worst, got.shape[1]))
