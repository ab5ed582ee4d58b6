"""Timing on the device, and the ceilings to compare against, measured in the same run.

- Kernel time comes from CUDA events (cupyx.profiler.benchmark's GPU times):
  warm-up launches first, then many timed launches; the median is the result
  and the interquartile range / median its spread.
- Inputs rotate among enough sets (A, B, C each) that the sets not in use
  exceed twice the L2 cache, so no launch finds its operands cached by the one
  before. Values are random, of magnitude in [0.5, 1] with random signs: never
  zero, exactly representable in the kernel's dtype.
- Every kernel's output is checked once before timing, on plain device arrays
  (no guard bands: timing what users run), against a float64 cuBLAS product
  within the correctness oracle's forward error bound (`check_output`).
- Ceilings: cuBLAS (cupy.matmul) for the same dtype and shape, with TF32 off
  (see `TF32`); device-to-device copy bandwidth; the FP32 FMA peak from the
  device's SM count, clock and lanes per SM (gemmcheck.roofline).
- Thresholds are ratios to those ceilings or to another kernel measured in the
  same run, read from one reviewable TOML file (`load_thresholds`).

Kernels launch through the one launch path (gemmcheck.launch.plan, then the CuPy
backend's enqueue); nothing here names a kernel.
"""

from __future__ import annotations

import itertools
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from gemmcheck import dtypes as dt
from gemmcheck import catalog, roofline
from gemmcheck.catalog import Instance
from gemmcheck.launch import plan, tight_leading_dimensions

BUILTIN_THRESHOLDS = Path(__file__).resolve().parent.parent / "suites" / "performance" / "thresholds.toml"

TF32 = ("off: cuBLAS float32 runs with CuPy's COMPUTE_TYPE_DEFAULT (full FP32, no TF32 tensor cores), "
        "pinned for the ceiling measurement whatever CUPY_TF32 says")

# Special baselines a threshold may name besides another kernel.
CUBLAS = "cublas"
FP32_PEAK = "fp32_peak"


# -- thresholds: one reviewable file ----------------------------------------------------

class ThresholdError(ValueError):
    """The thresholds file is malformed; the message names the file, the entry and the fix."""


@dataclass(frozen=True)
class Timing:
    """How the suite times: which TILEs, how many untimed launches, limits."""

    tiles: tuple[int, ...] = (16, 32)
    warmup: int = 3
    max_seconds: float = 10.0     # per measurement; stops repeating after this much GPU time
    max_spread: float = 0.10      # IQR / median above this fails the measurement as noisy


@dataclass(frozen=True)
class Threshold:
    """kernel at dtype and TILE must reach at_least x baseline, at sizes >= min_size."""

    kernel: str
    dtype: str
    tile: int
    baseline: str                  # "cublas", "fp32_peak", or a kernel name
    at_least: float
    baseline_tile: int | str | None = None  # for a kernel baseline: a TILE, or "best" of those timed
    min_size: int = 1
    max_size: int | None = None
    measured: str = ""             # provenance: what was measured where, for reviewers

    @property
    def id(self) -> str:
        base = self.baseline
        if self.baseline_tile is not None:
            base += f"-TILE{self.baseline_tile}" if isinstance(self.baseline_tile, int) else "-best"
        return f"{self.kernel}-{self.dtype}-TILE{self.tile}-vs-{base}"

    def applies(self, size: int) -> bool:
        return size >= self.min_size and (self.max_size is None or size <= self.max_size)


@dataclass(frozen=True)
class Thresholds:
    timing: Timing
    thresholds: tuple[Threshold, ...]
    path: Path | None = None


_TIMING_FIELDS = {"tiles", "warmup", "max_seconds", "max_spread"}
_THRESHOLD_FIELDS = {"kernel", "dtype", "tile", "baseline", "baseline_tile", "at_least",
                     "min_size", "max_size", "measured"}


def load_thresholds(path: str | Path) -> Thresholds:
    path = Path(path)
    return parse_thresholds(catalog.read_toml(path, ThresholdError, "thresholds"), path)


def parse_thresholds(data: dict, path: str | Path = "<thresholds>") -> Thresholds:
    """Validate a parsed thresholds file; raise ThresholdError with a one-line cause."""
    unknown = set(data) - {"timing", "threshold"}
    if unknown:
        raise ThresholdError(f"{path}: unknown top-level keys {sorted(unknown)}; "
                             "a thresholds file holds [timing] and [[threshold]] tables")
    timing = _timing(path, data.get("timing", {}))
    entries = data.get("threshold", [])
    if not isinstance(entries, list):
        raise ThresholdError(f"{path}: 'threshold' must be an array of tables ([[threshold]])")
    parsed = tuple(_threshold(path, i, e) for i, e in enumerate(entries))
    seen = set()
    for t in parsed:
        key = (t.id, t.min_size, t.max_size)
        if key in seen:
            raise ThresholdError(f"{path}: threshold {t.id}: listed twice for the same sizes; keep one")
        seen.add(key)
    return Thresholds(timing, parsed, Path(path) if not isinstance(path, Path) else path)


def _timing(path, table) -> Timing:
    if not isinstance(table, dict):
        raise ThresholdError(f"{path}: [timing] must be a table")
    unknown = set(table) - _TIMING_FIELDS
    if unknown:
        raise ThresholdError(f"{path}: [timing]: unknown field(s) {sorted(unknown)}; known: {sorted(_TIMING_FIELDS)}")
    default = Timing()
    tiles = table.get("tiles", list(default.tiles))
    if not isinstance(tiles, list) or not tiles or not all(type(t) is int and t >= 1 for t in tiles):
        raise ThresholdError(f"{path}: [timing]: 'tiles' must be a non-empty list of positive integers, got {tiles!r}")
    warmup = table.get("warmup", default.warmup)
    if type(warmup) is not int or warmup < 1:
        raise ThresholdError(f"{path}: [timing]: 'warmup' must be an integer >= 1 (the first launch "
                             f"pays for module loading), got {warmup!r}")
    max_seconds = table.get("max_seconds", default.max_seconds)
    if not _positive_number(max_seconds):
        raise ThresholdError(f"{path}: [timing]: 'max_seconds' must be a positive number, got {max_seconds!r}")
    max_spread = table.get("max_spread", default.max_spread)
    if not _positive_number(max_spread):
        raise ThresholdError(f"{path}: [timing]: 'max_spread' must be a positive number, got {max_spread!r}")
    return Timing(tuple(tiles), warmup, float(max_seconds), float(max_spread))


def _positive_number(value) -> bool:
    return type(value) in (int, float) and math.isfinite(value) and value > 0


def _threshold(path, index: int, entry) -> Threshold:
    if not isinstance(entry, dict):
        raise ThresholdError(f"{path}: threshold #{index + 1}: must be a table")
    label = f"threshold #{index + 1}"
    if all(isinstance(entry.get(k), (str, int)) for k in ("kernel", "dtype", "tile", "baseline")):
        label += f" ({entry['kernel']}-{entry['dtype']}-TILE{entry['tile']} vs {entry['baseline']})"

    def fail(message: str):
        raise ThresholdError(f"{path}: {label}: {message}")

    unknown = set(entry) - _THRESHOLD_FIELDS
    if unknown:
        fail(f"unknown field(s) {sorted(unknown)}; known: {sorted(_THRESHOLD_FIELDS)}")
    for key in ("kernel", "dtype", "tile", "baseline", "at_least"):
        if key not in entry:
            fail(f"missing required field '{key}'")
    for key in ("kernel", "dtype", "baseline", "measured"):
        if key in entry and not isinstance(entry[key], str):
            fail(f"'{key}' must be a string, got {entry[key]!r}")
    if entry["dtype"] not in dt.DTYPES:
        fail(f"unknown dtype {entry['dtype']!r}; known: {', '.join(dt.DTYPES)}")
    if type(entry["tile"]) is not int or entry["tile"] < 1:
        fail(f"'tile' must be a positive integer, got {entry['tile']!r}")
    if not _positive_number(entry["at_least"]):
        fail(f"'at_least' must be a positive number (a ratio), got {entry['at_least']!r}")
    baseline = entry["baseline"]
    baseline_tile = entry.get("baseline_tile")
    if baseline in (CUBLAS, FP32_PEAK):
        if baseline_tile is not None:
            fail(f"'baseline_tile' is only for a kernel baseline, not {baseline!r}; remove it")
    else:
        if baseline_tile is None:
            baseline_tile = "best"
        if not (baseline_tile == "best" or (type(baseline_tile) is int and baseline_tile >= 1)):
            fail(f"'baseline_tile' must be a positive integer or \"best\", got {baseline_tile!r}")
        if baseline == entry["kernel"] and baseline_tile == entry["tile"]:
            fail("a kernel cannot be its own baseline; name another kernel or TILE")
    for key in ("min_size", "max_size"):
        value = entry.get(key)
        if value is not None and (type(value) is not int or value < 1):
            fail(f"'{key}' must be a positive integer, got {value!r}")
    min_size, max_size = entry.get("min_size", 1), entry.get("max_size")
    if max_size is not None and max_size < min_size:
        fail(f"'max_size' {max_size} is below 'min_size' {min_size}; no size would apply")
    return Threshold(entry["kernel"], entry["dtype"], entry["tile"], baseline, float(entry["at_least"]),
                     baseline_tile, min_size, max_size, entry.get("measured", ""))


# -- results ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Measurement:
    """Device-event times of one thing (a kernel instantiation, cuBLAS, a copy) at one size."""

    label: str                      # instance id, "cublas-float32", "copy"
    size: int                       # N of an N x N x N problem (bytes for a copy)
    times: tuple[float, ...]        # seconds, one per timed launch
    flops: float = 0.0              # per launch (0 for a copy)
    bytes_moved: float = 0.0        # per launch, for a copy
    n_sets: int = 1                 # input sets rotated through

    @property
    def median(self) -> float:
        return roofline.median(self.times)

    @property
    def spread(self) -> float:
        return roofline.spread(self.times)

    @property
    def tflops(self) -> float:
        return roofline.tflops(self.flops, self.median)

    @property
    def bandwidth_tbs(self) -> float:
        return self.bytes_moved / self.median / 1e12


@dataclass(frozen=True)
class Device:
    name: str
    capability: tuple[int, int]
    sm_count: int
    clock_hz: float                 # the SM clock the device reports (its boost clock)
    l2_bytes: int

    @property
    def fp32_peak_tflops(self) -> float | None:
        return roofline.fp32_peak_tflops(self.sm_count, self.clock_hz, self.capability)

    def describe(self) -> str:
        peak = self.fp32_peak_tflops
        lanes = roofline.FP32_LANES_PER_SM.get(self.capability)
        return (f"{self.name} (cc {self.capability[0]}.{self.capability[1]}, {self.sm_count} SMs, "
                f"{self.clock_hz / 1e9:.2f} GHz, L2 {self.l2_bytes / 2**20:.0f} MiB; FP32 peak "
                + (f"{peak:.1f} TFLOP/s = {self.sm_count} SMs x {lanes} lanes x 2 x clock)" if peak
                   else "unknown: no FP32 lanes entry for this compute capability)"))


@dataclass
class Evaluation:
    """A threshold checked against this run's measurements."""

    threshold: Threshold
    size: int
    value: float            # the kernel's TFLOP/s
    baseline_value: float   # the baseline's TFLOP/s
    baseline_label: str
    device: str

    @property
    def ratio(self) -> float:
        return roofline.ratio(self.value, self.baseline_value)

    @property
    def ok(self) -> bool:
        return self.ratio >= self.threshold.at_least

    def message(self) -> str:
        t = self.threshold
        verdict = "meets" if self.ok else "is below"
        return (f"{t.kernel}-{t.dtype}-TILE{t.tile} at N={self.size} {verdict} its threshold: "
                f"{self.value:.2f} TFLOP/s is {self.ratio:.3f} x {self.baseline_label} "
                f"({self.baseline_value:.2f} TFLOP/s); threshold >= {t.at_least:g} x "
                f"(thresholds file; {t.measured or 'no provenance recorded'}); card: {self.device}")


def evaluate(threshold: Threshold, size: int, value: float, baseline_value: float,
             baseline_label: str, device: str) -> Evaluation:
    return Evaluation(threshold, size, value, baseline_value, baseline_label, device)


# -- the pytest-benchmark clock adapter ----------------------------------------------------

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


# -- measuring on the GPU ---------------------------------------------------------------------

@dataclass
class Check:
    """The one correctness check before timing."""

    worst_ratio: float      # max |C - C_ref| / bound; <= 1 passes
    nans: int
    where: tuple[int, int] | None

    @property
    def ok(self) -> bool:
        return self.nans == 0 and self.worst_ratio <= 1.0


def check_output(xp, got, ref, absprod, dtype: dt.DType, K: int) -> Check:
    """Compare a kernel's output (as float64) with the float64 reference, on any array module.

    The bound is the correctness oracle's (gemmcheck.oracle.Bound: forward error
    of the accumulation, the output rounding, and the float64 reference's own
    error); a NaN anywhere counts as an unbounded error.
    """
    from gemmcheck.oracle import U64, Bound

    b = Bound.for_dtype(dtype, K)
    bound = (b.coefficient * absprod + b.u_out * xp.abs(ref) + b.eta_out) * (1 + 8 * U64)
    nan = xp.isnan(got)
    ratio = xp.where(nan, xp.inf, xp.abs(got - ref) / bound).ravel()
    worst = int(xp.argmax(ratio))
    return Check(float(ratio[worst]), int(xp.count_nonzero(nan)), divmod(worst, got.shape[1]))


class GpuTimer:
    """Measures kernels, cuBLAS and copies on the current CUDA device (CuPy)."""

    SEED = 20240605

    def __init__(self, backend, timing: Timing) -> None:
        import cupy

        self.cupy = cupy
        self.backend = backend
        self.timing = timing
        dev = cupy.cuda.Device()
        rt = cupy.cuda.runtime
        props = rt.getDeviceProperties(dev.id)
        name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
        self.device = Device(
            name=name, capability=(int(props["major"]), int(props["minor"])),
            sm_count=rt.deviceGetAttribute(rt.cudaDevAttrMultiProcessorCount, dev.id),
            clock_hz=rt.deviceGetAttribute(rt.cudaDevAttrClockRate, dev.id) * 1e3,  # kHz
            l2_bytes=rt.deviceGetAttribute(rt.cudaDevAttrL2CacheSize, dev.id))
        self._inputs: dict[tuple[str, int], "_InputSets"] = {}

    # Inputs ---------------------------------------------------------------------------------

    def inputs(self, dtype_name: str, size: int) -> "_InputSets":
        key = (dtype_name, size)
        if key not in self._inputs:
            self._inputs[key] = _InputSets(self.cupy, dt.get(dtype_name), size, self.device.l2_bytes,
                                           seed=self.SEED + 1000 * size + list(dt.DTYPES).index(dtype_name))
        return self._inputs[key]

    def release(self, keep=()) -> None:
        for key in list(self._inputs):
            if key not in keep:
                del self._inputs[key]
        self.cupy.get_default_memory_pool().free_all_blocks()

    # Timing -----------------------------------------------------------------------------------

    def _time(self, label: str, size: int, launch, n_repeat: int, flops=0.0, bytes_moved=0.0,
              n_sets=1) -> Measurement:
        from cupyx.profiler import benchmark

        result = benchmark(launch, n_repeat=n_repeat, n_warmup=self.timing.warmup,
                           max_duration=self.timing.max_seconds, name=label)
        times = tuple(float(t) for t in result.gpu_times[0])
        return Measurement(label, size, times, flops, bytes_moved, n_sets)

    def check(self, instance: Instance, size: int) -> Check:
        """Launch once on input set 0 and compare with float64 cuBLAS within the bound."""
        cp = self.cupy
        sets = self.inputs(instance.dtype, size)
        A, B, C = sets.sets[0]
        C.view(instance.dt.storage).fill(instance.dt.poison_bits)   # unwritten shows as NaN
        self._launch(instance, size, A, B, C)
        cp.cuda.Device().synchronize()
        ref, absprod = sets.reference()
        return check_output(cp, sets.to_float64(C), ref, absprod, instance.dt, size)

    def _launch(self, instance: Instance, size: int, A, B, C) -> None:
        values = {"A": A, "B": B, "C": C, "M": size, "N": size, "K": size,
                  **tight_leading_dimensions(instance.spec.layouts, size, size, size),
                  "alpha": 1, "beta": 0}
        self.backend.enqueue(instance, plan(instance, values))

    @staticmethod
    def _int(value: int):
        import numpy as np
        return np.int32(value)

    def kernel(self, instance: Instance, size: int, n_repeat: int) -> Measurement:
        sets = self.inputs(instance.dtype, size)
        cycle = itertools.cycle(sets.sets)

        def launch():
            A, B, C = next(cycle)
            self._launch(instance, size, A, B, C)

        return self._time(instance.id, size, launch, n_repeat,
                          flops=roofline.gemm_flops(size, size, size), n_sets=len(sets.sets))

    def cublas(self, dtype_name: str, size: int, n_repeat: int) -> Measurement:
        """cupy.matmul on the same dtype and shape, TF32 off (see TF32)."""
        from cupy._core import _routines_linalg as linalg

        import numpy as np

        sets = self.inputs(dtype_name, size)
        views = [tuple(sets.as_cupy_dtype(x) for x in s) for s in sets.sets]
        cycle = itertools.cycle(views)

        def launch():
            A, B, C = next(cycle)
            self.cupy.matmul(A, B, out=C)

        f32 = np.dtype(np.float32)
        previous = linalg.get_compute_type(f32)
        linalg.set_compute_type(f32, linalg.COMPUTE_TYPE_DEFAULT)
        try:
            return self._time(f"cublas-{dtype_name}", size, launch, n_repeat,
                              flops=roofline.gemm_flops(size, size, size), n_sets=len(views))
        finally:
            linalg.set_compute_type(f32, previous)

    def copy(self, n_repeat: int) -> Measurement:
        """Device-to-device copy of a buffer 16 x L2 (at least 256 MiB): read + write bytes / time."""
        cp = self.cupy
        nbytes = max(256 * 2**20, 16 * self.device.l2_bytes)
        src = cp.ones(nbytes // 4, dtype=cp.float32)
        dst = cp.empty_like(src)

        def launch():
            dst.data.copy_from_device_async(src.data, nbytes)

        try:
            return self._time("copy", nbytes, launch, n_repeat, bytes_moved=2 * nbytes)
        finally:
            del src, dst


class _InputSets:
    """Rotating (A, B, C) sets for one dtype and size on the device."""

    def __init__(self, cp, dtype: dt.DType, size: int, l2_bytes: int, seed: int) -> None:
        self.cp, self.dtype, self.size = cp, dtype, size
        set_bytes = 3 * size * size * dtype.itemsize
        self.n_sets = n_input_sets(set_bytes, l2_bytes)
        rng = cp.random.RandomState(seed)
        self.sets = []
        for _ in range(self.n_sets):
            A = self._random(rng)
            B = self._random(rng)
            C = cp.zeros((size, size), dtype=A.dtype)
            self.sets.append((A, B, C))
        self._reference = None

    def _random(self, rng):
        cp, n = self.cp, self.size
        u = rng.uniform(-1.0, 1.0, (n, n))
        values = cp.copysign(0.5 + 0.5 * cp.abs(u), u)   # |x| in [0.5, 1]; copysign(+0) is +0.5
        if self.dtype.name == "bfloat16":
            # Truncate float32 to its top 16 bits: stays in [0.5, 1] in magnitude, exact in bfloat16.
            return cp.right_shift(values.astype(cp.float32).view(cp.uint32), cp.uint32(16)).astype(cp.uint16)
        return values.astype(self.dtype.numpy)

    def to_float64(self, x):
        cp = self.cp
        if self.dtype.name == "bfloat16":
            return cp.left_shift(x.astype(cp.uint32), cp.uint32(16)).view(cp.float32).astype(cp.float64)
        return x.astype(cp.float64)

    def as_cupy_dtype(self, x):
        """The array as cupy.matmul should see it (bfloat16 bits viewed as bfloat16)."""
        if self.dtype.name == "bfloat16":
            return x.view(self.dtype.numpy)
        return x

    def reference(self):
        """(C_ref, |A||B|) for set 0, in float64 on the device; computed once."""
        if self._reference is None:
            A, B, _ = self.sets[0]
            a, b = self.to_float64(A), self.to_float64(B)
            self._reference = (a @ b, self.cp.abs(a) @ self.cp.abs(b))
        return self._reference


def n_input_sets(set_bytes: int, l2_bytes: int, *, factor: int = 2) -> int:
    """Sets to rotate so the others hold >= factor x L2 between two uses of one set."""
    if set_bytes <= 0 or l2_bytes < 0:
        raise ValueError(f"set_bytes must be positive and l2_bytes non-negative, got {set_bytes}, {l2_bytes}")
    return max(2, 1 + math.ceil(factor * l2_bytes / set_bytes))


# -- one session's measurements -------------------------------------------------------------------

@dataclass
class Row:
    """One line of the summary table."""

    measurement: Measurement
    instance: Instance | None = None
    check: Check | None = None


@dataclass
class PerfSession:
    """What the perf suite measured in this run; measured lazily and once."""

    timer: GpuTimer
    repeats: int
    rows: dict[tuple[str, int], Row] = field(default_factory=dict)
    _cublas: dict[tuple[str, int], Measurement | str] = field(default_factory=dict)
    _copy: Measurement | None = None

    @property
    def device(self) -> Device:
        return self.timer.device

    def measure(self, instance: Instance, size: int) -> Row:
        key = (instance.id, size)
        if key not in self.rows:
            check = self.timer.check(instance, size)
            measurement = self.timer.kernel(instance, size, self.repeats) if check.ok else None
            self.rows[key] = Row(measurement, instance, check)
        return self.rows[key]

    def cublas(self, dtype_name: str, size: int) -> Measurement | str:
        """cuBLAS for this dtype and size, or why it could not be measured (a string)."""
        key = (dtype_name, size)
        if key not in self._cublas:
            try:
                self._cublas[key] = self.timer.cublas(dtype_name, size, self.repeats)
            except Exception as exc:  # e.g. a CuPy without this dtype in matmul
                self._cublas[key] = f"cupy.matmul has no {dtype_name} here ({type(exc).__name__}: {exc})"
        return self._cublas[key]

    def copy(self) -> Measurement:
        if self._copy is None:
            self._copy = self.timer.copy(self.repeats)
        return self._copy

    def roof(self) -> roofline.Roof | None:
        peak = self.device.fp32_peak_tflops
        return roofline.Roof(peak, self.copy().bandwidth_tbs) if peak else None

    def cublas_measurements(self) -> dict[tuple[str, int], Measurement]:
        return {k: v for k, v in self._cublas.items() if isinstance(v, Measurement)}


class Unjudgeable(Exception):
    """A threshold cannot be checked in this run; the message says why (a skip reason)."""


class WrongOutput(AssertionError):
    """A kernel to be timed failed its correctness check; its speed means nothing."""


def timed_rate(session: PerfSession, instance: Instance, size: int) -> float:
    """The instantiation's TFLOP/s, measured once per session; WrongOutput if it computes wrong values."""
    row = session.measure(instance, size)
    if row.measurement is None:
        c = row.check
        raise WrongOutput(
            f"{instance.id} ({instance.name_expression}) at N={size}: output fails the check before "
            f"timing: worst |C - C_ref| is {c.worst_ratio:.3g} x the forward error bound at C{list(c.where)} "
            f"(tile {c.where[0] // instance.tile},{c.where[1] // instance.tile}), {c.nans} NaN; "
            "timing a wrong kernel means nothing (the correctness suite says more)")
    return row.measurement.tflops


def judge(session: PerfSession, threshold: Threshold, size: int, specs) -> Evaluation:
    """Measure (or reuse) what `threshold` compares and return the Evaluation.

    Raises Unjudgeable when the run cannot give the baseline (no cuBLAS for the
    dtype, unknown FP32 peak, baseline kernel absent or without a timed TILE).
    """
    by_name = {s.name: s for s in specs}
    spec = by_name.get(threshold.kernel)
    if spec is None:
        raise Unjudgeable(f"kernel {threshold.kernel!r} is not in the catalog")
    value = timed_rate(session, Instance(spec, threshold.dtype, threshold.tile), size)
    device = session.device.describe()
    if threshold.baseline == CUBLAS:
        cublas = session.cublas(threshold.dtype, size)
        if not isinstance(cublas, Measurement):
            raise Unjudgeable(f"no cuBLAS baseline for {threshold.dtype}: {cublas}")
        return evaluate(threshold, size, value, cublas.tflops, f"cuBLAS {threshold.dtype} (TF32 off)", device)
    if threshold.baseline == FP32_PEAK:
        peak = session.device.fp32_peak_tflops
        if peak is None:
            raise Unjudgeable(f"FP32 peak unknown: compute capability {session.device.capability} "
                              "has no entry in gemmcheck.roofline.FP32_LANES_PER_SM")
        return evaluate(threshold, size, value, peak, "the FP32 FMA peak", device)
    base = by_name.get(threshold.baseline)
    if base is None:
        raise Unjudgeable(f"baseline kernel {threshold.baseline!r} is not in the catalog; "
                          "fix the thresholds file or add the kernel")
    timed_tiles = session.timer.timing.tiles
    if threshold.baseline_tile == "best":
        tiles = [t for t in base.tiles if t in timed_tiles]
    else:
        tiles = [threshold.baseline_tile] if threshold.baseline_tile in base.tiles else []
    candidates = [Instance(base, threshold.dtype, t) for t in tiles
                  if threshold.dtype in base.dtypes and Instance(base, threshold.dtype, t).supports(size, size, size)]
    if not candidates:
        raise Unjudgeable(f"baseline {threshold.baseline} has no instantiation at {threshold.dtype}, "
                          f"TILE {threshold.baseline_tile} (timed TILEs {list(timed_tiles)}) for N={size}")
    rates = {inst: timed_rate(session, inst, size) for inst in candidates}
    best = max(rates, key=rates.get)
    label = best.id + (f" (best of TILE {', '.join(str(i.tile) for i in candidates)})"
                       if threshold.baseline_tile == "best" else "")
    return evaluate(threshold, size, value, rates[best], label, device)


def xdist_workers() -> int:
    """How many pytest-xdist workers share this machine (1 when xdist is not running)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return 1
    try:
        return int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "2"))
    except ValueError:
        return 2
