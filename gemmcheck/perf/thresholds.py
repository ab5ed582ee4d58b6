"""The performance thresholds file: how the suite times, and the claims it checks.

Every claim is a ratio of two rates measured in the same run on the same card,
never an absolute number (suites/performance/thresholds.toml says where each
number comes from).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from gemmcheck.contract import catalog
from gemmcheck.contract import dtypes as dt
from gemmcheck.contract import operand_types

BUILTIN_THRESHOLDS = Path(__file__).resolve().parents[2] / "suites" / "performance" / "thresholds.toml"

# Special baselines a threshold may name besides another kernel.
CUBLAS = "cublas"
FP32_PEAK = "fp32_peak"


class ThresholdError(ValueError):
    """The thresholds file is malformed; the message names the file, the entry and the fix."""


@dataclass(frozen=True)
class Timing:
    """How the suite times (nvbench's rules): which TILEs, warm-up, when to stop, what to drop.

    Sampling stops when the median of every series timed together is known to max_noise
    (sampling.relative_error_of_median), with at least the profile's perf_repeats samples
    (or nvbench's 10 once they add up to enough_seconds of device time),
    or at max_samples, or after max_seconds. A sample whose SM clock is below
    min_clock_ratio x the reference clock is dropped (counted in the table).
    """

    tiles: tuple[int, ...] = (16, 32)
    warmup: int = 3
    max_seconds: float = 10.0     # per measurement: stop sampling after this long (wall time)
    max_spread: float = 0.10      # interquartile range / median above this after the caps: too noisy
    max_noise: float = 0.005      # the stopping target: the median's relative standard error <= 0.5 %
    max_samples: int = 1000       # per series, dropped samples included
    min_clock_ratio: float = 0.75  # drop samples below this fraction of the reference SM clock
    enough_seconds: float = 0.5   # a series with this much device time needs only nvbench's 10 samples
                                  # (nvbench's --min-time default)
    batch: int = 8                # products in a strided-batched kernel's timed launch, groups in a grouped one's

    def products(self, instance) -> int:
        """How many products one timed launch of `instance` holds: `batch` for a kernel that
        takes a batch (strided, or arrays of pointers) or groups (group_offsets or group_counts:
        that many groups, as many N x N x N products' work), else 1."""
        return self.batch if instance.batched or instance.grouped else 1


@dataclass(frozen=True)
class Threshold:
    """kernel at dtype and TILE (or named config; neither for a kernel without compile-time
    parameters) must reach at_least x baseline, at sizes >= min_size.

    A ``target`` is a goal not reached yet: its miss is expected (reported as an xfail carrying
    the measured ratio) and its pass is a failure that asks for the entry to become a bar.
    """

    kernel: str
    dtype: str
    tile: int | None
    baseline: str                  # "cublas", "fp32_peak", or a kernel name
    at_least: float
    baseline_tile: int | str | None = None  # for a kernel baseline: a TILE, or "best" of those timed
    min_size: int = 1
    max_size: int | None = None
    measured: str = ""             # provenance: what was measured where, for reviewers
    config: str | None = None      # a named catalog config instead of a TILE (several may share one)
    target: bool = False

    @property
    def key(self) -> tuple[str, str, int | str]:
        """(kernel, dtype, config name or TILE): the instantiation it holds (selection.instance_key)."""
        return (self.kernel, self.dtype, self.config if self.config is not None else self.tile)

    @property
    def subject(self) -> str:
        """The instantiation in words, as its test id: ``matmul_tiled-float32-TILE32``,
        ``sgemm-float32-128x128x8``, ``sgemm_naive-float32``."""
        return _subject(self.kernel, self.dtype, self.config, self.tile)

    @property
    def id(self) -> str:
        base = self.baseline
        if self.baseline_tile is not None:
            base += f"-TILE{self.baseline_tile}" if isinstance(self.baseline_tile, int) else "-best"
        return f"{self.subject}-vs-{base}" + ("-target" if self.target else "")

    def applies(self, size: int) -> bool:
        return size >= self.min_size and (self.max_size is None or size <= self.max_size)


@dataclass(frozen=True)
class Thresholds:
    timing: Timing
    thresholds: tuple[Threshold, ...]
    path: Path | None = None
    refusals: tuple["Refusal", ...] = ()


@dataclass(frozen=True)
class Refusal:
    """A positive control: kernel at dtype and TILE must be refused by the timing checks
    (wrong output on its last timed launch, or a time the roofline does not allow)."""

    kernel: str
    dtype: str
    tile: int | None      # None: a kernel without a tile parameter
    why: str = ""
    impossible_from: int | None = None   # N from which a timed run must also be refused by the
                                         # roofline (None: at every N)

    @property
    def id(self) -> str:
        return _subject(self.kernel, self.dtype, None, self.tile)

    def roofline_refuses_at(self, size: int) -> bool:
        """Whether a timed run at N = size must be refused by the roofline too: a launch that
        skips the work still takes the time of a launch, which is within the roofline of a small
        problem (the builtin cheat stored 1024^2 zeros in 10.9 us on the H200: 197 TFLOP/s,
        under the 535 of float32's tensor cores)."""
        return self.impossible_from is None or size >= self.impossible_from


def _subject(kernel: str, dtype: str, config: str | None, tile: int | None) -> str:
    """An instantiation as its test id names it: its config, its TILE, or (neither) nothing more."""
    which = config if config is not None else f"TILE{tile}" if tile is not None else ""
    return f"{kernel}-{dtype}" + (f"-{which}" if which else "")


_TIMING_FIELDS = {"tiles", "warmup", "max_seconds", "max_spread", "max_noise", "max_samples",
                  "min_clock_ratio", "enough_seconds", "batch"}
_THRESHOLD_FIELDS = {"kernel", "dtype", "tile", "config", "baseline", "baseline_tile", "at_least",
                     "min_size", "max_size", "measured", "target"}


def load_thresholds(path: str | Path) -> Thresholds:
    path = Path(path)
    return parse_thresholds(catalog.read_toml(path, ThresholdError, "thresholds"), path)


def parse_thresholds(data: dict, path: str | Path = "<thresholds>") -> Thresholds:
    """Validate a parsed thresholds file; raise ThresholdError with a one-line cause."""
    unknown = set(data) - {"timing", "threshold", "refuse"}
    if unknown:
        raise ThresholdError(f"{path}: unknown top-level keys {sorted(unknown)}; "
                             "a thresholds file holds [timing], [[threshold]] and [[refuse]] tables")
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
    refusals = data.get("refuse", [])
    if not isinstance(refusals, list):
        raise ThresholdError(f"{path}: 'refuse' must be an array of tables ([[refuse]])")
    return Thresholds(timing, parsed, Path(path) if not isinstance(path, Path) else path,
                      tuple(_refusal(path, i, e) for i, e in enumerate(refusals)))


_REFUSAL_FIELDS = {"kernel", "dtype", "tile", "why", "impossible_from"}


def _refusal(path, index: int, entry) -> Refusal:
    label = f"refuse #{index + 1}"
    if not isinstance(entry, dict):
        raise ThresholdError(f"{path}: {label}: must be a table")
    unknown = set(entry) - _REFUSAL_FIELDS
    if unknown:
        raise ThresholdError(f"{path}: {label}: unknown field(s) {sorted(unknown)}; known: {sorted(_REFUSAL_FIELDS)}")
    for key in ("kernel", "dtype"):
        if key not in entry:
            raise ThresholdError(f"{path}: {label}: missing required field '{key}'")
    if not isinstance(entry["kernel"], str) or not isinstance(entry.get("why", ""), str):
        raise ThresholdError(f"{path}: {label}: 'kernel' and 'why' must be strings")
    if entry["dtype"] not in dt.DTYPES:
        raise ThresholdError(f"{path}: {label}: unknown dtype {entry['dtype']!r}; known: {', '.join(dt.DTYPES)}")
    if "tile" in entry and (type(entry["tile"]) is not int or entry["tile"] < 1):
        raise ThresholdError(f"{path}: {label}: 'tile' must be a positive integer, got {entry['tile']!r} "
                             "(leave it out for a kernel without a tile parameter)")
    since = entry.get("impossible_from")
    if since is not None and (type(since) is not int or since < 1):
        raise ThresholdError(f"{path}: {label}: 'impossible_from' must be a positive integer N, got {since!r}")
    return Refusal(entry["kernel"], entry["dtype"], entry.get("tile"), entry.get("why", ""), since)


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
    numbers = {}
    for key in ("max_spread", "max_noise", "enough_seconds"):
        value = table.get(key, getattr(default, key))
        if not _positive_number(value):
            raise ThresholdError(f"{path}: [timing]: '{key}' must be a positive number, got {value!r}")
        numbers[key] = float(value)
    ratio = table.get("min_clock_ratio", default.min_clock_ratio)
    if not (_positive_number(ratio) and ratio <= 1):
        raise ThresholdError(f"{path}: [timing]: 'min_clock_ratio' must be a number in (0, 1], got {ratio!r}")
    max_samples = table.get("max_samples", default.max_samples)
    if type(max_samples) is not int or max_samples < 2:
        raise ThresholdError(f"{path}: [timing]: 'max_samples' must be an integer >= 2, got {max_samples!r}")
    batch = table.get("batch", default.batch)
    if type(batch) is not int or batch < 2:
        raise ThresholdError(f"{path}: [timing]: 'batch' must be an integer >= 2 (a strided batch of one product "
                             f"is not a batch), got {batch!r}")
    return Timing(tuple(tiles), warmup, float(max_seconds), numbers["max_spread"], numbers["max_noise"],
                  max_samples, float(ratio), numbers["enough_seconds"], batch)


def _positive_number(value) -> bool:
    return type(value) in (int, float) and math.isfinite(value) and value > 0


def _threshold(path, index: int, entry) -> Threshold:
    if not isinstance(entry, dict):
        raise ThresholdError(f"{path}: threshold #{index + 1}: must be a table")
    label = f"threshold #{index + 1}"
    if all(isinstance(entry.get(k), (str, int)) for k in ("kernel", "dtype", "baseline")):
        which = _subject(entry["kernel"], entry["dtype"], entry.get("config"), entry.get("tile"))
        label += f" ({which} vs {entry['baseline']})"

    def fail(message: str):
        raise ThresholdError(f"{path}: {label}: {message}")

    unknown = set(entry) - _THRESHOLD_FIELDS
    if unknown:
        fail(f"unknown field(s) {sorted(unknown)}; known: {sorted(_THRESHOLD_FIELDS)}")
    for key in ("kernel", "dtype", "baseline", "at_least"):
        if key not in entry:
            fail(f"missing required field '{key}'")
    if "tile" in entry and "config" in entry:
        fail("name the instantiation by one of 'tile' (a TILE) or 'config' (a catalog config name, "
             "for kernels whose configs share a tile value), not both; neither for a kernel without "
             "compile-time parameters")
    for key in ("kernel", "dtype", "baseline", "measured", "config"):
        if key in entry and not isinstance(entry[key], str):
            fail(f"'{key}' must be a string, got {entry[key]!r}")
    if operand_types.combination(entry["dtype"]) is None:   # one type, or a type per operand ("e4m3e4m3bf16")
        fail(f"unknown dtype {entry['dtype']!r}; known: {', '.join(dt.DTYPES)}, or a combination such as "
             "'e4m3e4m3bf16'")
    if "tile" in entry and (type(entry["tile"]) is not int or entry["tile"] < 1):
        fail(f"'tile' must be a positive integer, got {entry['tile']!r}")
    target = entry.get("target", False)
    if type(target) is not bool:
        fail(f"'target' must be true or false, got {target!r}")
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
        if baseline == entry["kernel"] and baseline_tile == entry.get("tile"):
            fail("a kernel cannot be its own baseline; name another kernel or TILE")
    for key in ("min_size", "max_size"):
        value = entry.get(key)
        if value is not None and (type(value) is not int or value < 1):
            fail(f"'{key}' must be a positive integer, got {value!r}")
    min_size, max_size = entry.get("min_size", 1), entry.get("max_size")
    if max_size is not None and max_size < min_size:
        fail(f"'max_size' {max_size} is below 'min_size' {min_size}; no size would apply")
    return Threshold(entry["kernel"], entry["dtype"], entry.get("tile"), baseline, float(entry["at_least"]),
                     baseline_tile, min_size, max_size, entry.get("measured", ""), entry.get("config"), target)

