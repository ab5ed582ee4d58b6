"""One session's measurements, and the judgements made on them: thresholds, refusals.

A kernel's rate counts only when its output was right on the first launch
*and* on its last timed launch, and its time is possible under the roofline
(gemmcheck.perf.roofline.impossible); otherwise ``timed_rate`` raises WrongOutput
or ImpossibleTime with the evidence.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from gemmcheck.backends import KernelHang, KernelLaunchError
from gemmcheck.containment.lost import status_of
from gemmcheck.perf import roofline
from gemmcheck.perf.gpu import by_cublas
from gemmcheck.contract import operand_types
from gemmcheck.contract.catalog import Instance
from gemmcheck.problems.harness import name_the_problem
from gemmcheck.backends.device import DeviceProperties
from gemmcheck.perf.measurement import Check, Measurement
from gemmcheck.perf.selection import baseline_instances, claimed_instance
from gemmcheck.perf.thresholds import CUBLAS, FP32_PEAK, Threshold
from gemmcheck.phases import phase


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
        what = "target" if t.target else "threshold"
        return (f"{t.subject} at N={self.size} {verdict} its {what}: "
                f"{self.value:.2f} TFLOP/s is {self.ratio:.3f} x {self.baseline_label} "
                f"({self.baseline_value:.2f} TFLOP/s); {what} >= {t.at_least:g} x "
                f"(thresholds file; {t.measured or 'no provenance recorded'}); card: {self.device}")

    def outcome(self) -> tuple[str, str]:
        """(pytest outcome, message): a bar passes or fails; a target not met is an expected
        failure ("xfail", with the measured ratio) and a target met fails, strict, so the
        entry is turned into a bar instead of staying a goal nobody checks."""
        if not self.threshold.target:
            return ("passed" if self.ok else "failed"), self.message()
        if not self.ok:
            return "xfail", f"target not met yet: {self.message()}"
        return "failed", (f"{self.message()}: the target is met; in the thresholds file drop "
                          f"'target = true' from {self.threshold.id} so it holds as a regression bar")


def evaluate(threshold: Threshold, size: int, value: float, baseline_value: float,
             baseline_label: str, device: str) -> Evaluation:
    return Evaluation(threshold, size, value, baseline_value, baseline_label, device)




@dataclass
class Row:
    """One kernel at one size: what was measured and what its checks said."""

    measurement: Measurement | None          # None: wrong on the first launch, not timed
    instance: Instance | None = None
    check: Check | None = None               # the first launch's output
    last: Check | None = None                # the last timed launch's output
    cublas: Measurement | None = None        # its ceiling (cuBLAS, or cuBLASLt's GEMM) sampled in turn with it
    impossible: str | None = None            # why the time is faster than the roofline allows
    dram_bytes: float | None = None          # measured by ncu (--gemm-ncu), one cold launch
    dram_note: str = ""                      # why there is no measured point
    failure: KernelLaunchError | None = None  # it crashed or hung here or in the sized probe: not timed

    @property
    def status(self) -> str:
        """"crash" or "hang" for a row whose launch did not finish; "" otherwise."""
        return "" if self.failure is None else status_of(self.failure)


@dataclass
class PerfSession:
    """What the perf suite measured in this run; measured lazily and once."""

    timer: object                  # gemmcheck.perf.gpu.GpuTimer, or a stand-in in tests
    repeats: int                   # the profile's perf_repeats: the least samples per series
    rows: dict[tuple[str, int], Row] = field(default_factory=dict)
    _cublas: dict[tuple[str, int], Measurement | str] = field(default_factory=dict)
    _copy: Measurement | None = None
    _library: dict[tuple, Measurement | str] = field(default_factory=dict)   # library_ceiling's
    ncu: str | None = None         # ncu's path when the measured roofline point is wanted (--gemm-ncu)
    # (Instance.id, N) -> what the sized probe found there (gemmcheck.containment's Lost: status,
    # message, problem): a row that crashed or hung in the isolated child, never launched here
    refused: dict = field(default_factory=dict)
    # kernel -> its dtypes this profile leaves untimed (selection.untimed_dtypes): the table says so
    untimed: dict = field(default_factory=dict)

    @property
    def device(self) -> DeviceProperties:
        return self.timer.device

    def measure(self, instance: Instance, size: int) -> Row:
        """The row of `instance` at N = size, measured once. A row that crashed or hung (in the
        sized probe, or here: the backend's KernelLaunchError) raises that, naming the
        instantiation and the problem, each time it is asked for."""
        key = (instance.id, size)
        if key not in self.rows:
            lost = self.refused.get(key)
            if lost is not None:
                self.rows[key] = Row(None, instance, failure=refusal(instance, lost))
            else:
                try:
                    self.rows[key] = self._measured(instance, size)
                except KernelLaunchError as exc:
                    exc.instance = instance   # a claim's test meets it with no instantiation of its own
                    self.rows[key] = Row(None, instance, failure=name_the_problem(exc, size, size, size))
                    raise
        row = self.rows[key]
        if row.failure is not None:
            raise again(row.failure)
        return row

    def _measured(self, instance: Instance, size: int) -> Row:
        check = self.timer.check(instance, size)
        if not check.ok:
            return Row(None, instance, check)
        with phase("timing"):   # sampling in turn with cuBLAS (its input sets: "inputs")
            timed = self.timer.timed(instance, size, self.repeats)
        self._pool_cublas(ceiling_key(instance), size, timed.cublas, timed.cublas_error)
        row = Row(timed.kernel, instance, check, timed.last, timed.cublas,
                  self._impossible(instance, size, timed.kernel))
        if self.ncu and row.last.ok and not row.impossible:
            row.dram_bytes, row.dram_note = self.timer.dram_bytes(instance, size, self.ncu)
        return row

    def _impossible(self, instance: Instance, size: int, m: Measurement) -> str | None:
        d, batch = self.device, self.timer.timing.products(instance)
        return roofline.impossible(
            m.median, flops=batch * roofline.gemm_flops(size, size, size), nbytes=min_bytes(instance, size, batch),
            peak_tflops=roofline.peak_tflops(d.sm_count, d.clock_hz, d.capability, instance.types.A.name),
            bandwidth_tbs=self.copy().bandwidth_tbs)

    def _pool_cublas(self, dtype: str, size: int, m: Measurement | None, error: str | None) -> None:
        """Every ceiling sample of a dtype (ceiling_key) and size, over all the kernels it was
        interleaved with."""
        key = (dtype, size)
        old = self._cublas.get(key)
        if m is None:
            if not isinstance(old, Measurement) and error:
                self._cublas[key] = error
            return
        if isinstance(old, Measurement):
            m = dataclasses.replace(old, times=old.times + m.times, clocks_mhz=old.clocks_mhz + m.clocks_mhz,
                                    dropped=old.dropped + m.dropped,
                                    stop=old.stop if old.stop == m.stop else f"{old.stop}, {m.stop}")
        self._cublas[key] = m

    def cublas(self, dtype_name: str, size: int) -> Measurement | str:
        """cuBLAS for this dtype and size, or why it could not be measured (a string)."""
        key = (dtype_name, size)
        if key not in self._cublas:
            try:
                with phase("timing"):
                    self._cublas[key] = self.timer.cublas(dtype_name, size, self.repeats)
            except Exception as exc:  # e.g. a CuPy without this dtype in matmul
                self._cublas[key] = f"cupy.matmul has no {dtype_name} here ({type(exc).__name__}: {exc})"
        return self._cublas[key]

    def ceiling(self, instance: Instance, size: int) -> Measurement | str:
        """`instance`'s ceiling at N = size: the series sampled in turn with it, else the pooled
        one of its dtype (one type: cuBLAS, timed alone if need be) or of its combination
        (cuBLASLt's GEMM); or why there is none (a string)."""
        row = self.rows.get((instance.id, size))
        if row is not None and row.cublas is not None:
            return row.cublas
        if by_cublas(instance):
            return self.cublas(instance.dtype, size)
        return self._cublas.get((ceiling_key(instance), size), f"{instance.id} was not timed at N={size}")

    def library_ceiling(self, types, M: int, N: int, K: int, batch: int = 1) -> Measurement | str:
        """The vendor library's GEMM for these operand types (an OperandTypes, a spelling such as
        ``"e4m3e4m3bf16 scale_A=tensor scale_B=tensor"``, or a dtype name) on M x N x K (`batch`
        of them), timed once per session: its Measurement, whose label names the GEMM timed
        (the nearest one the library has, when it lacks the combination), or why there is none
        (a string). What a kernel of those types at that shape is compared with."""
        key = (operand_types.coerce(types).spelling, M, N, K, batch)
        if key not in self._library:
            try:
                with phase("timing"):
                    self._library[key] = self.timer.library(types, M, N, K, self.repeats, batch=batch)
            except Exception as exc:   # library.NoAlgorithm, or nvmath-python not installed
                self._library[key] = f"no library ceiling for {key[0]}: {type(exc).__name__}: {exc}"
        return self._library[key]

    def copy(self) -> Measurement:
        if self._copy is None:
            with phase("timing"):
                self._copy = self.timer.copy(self.repeats)
        return self._copy

    def roof(self) -> roofline.Roof | None:
        peak = self.device.fp32_peak_tflops
        return roofline.Roof(peak, self.copy().bandwidth_tbs) if peak else None

    def cublas_measurements(self) -> dict[tuple[str, int], Measurement]:
        return {k: v for k, v in self._cublas.items() if isinstance(v, Measurement)}

    def cublas_missing(self) -> dict[tuple[str, int], str]:
        return {k: v for k, v in self._cublas.items() if isinstance(v, str)}


def ceiling_key(instance: Instance) -> str:
    """What a kernel's ceiling series is pooled under: its dtype (cuBLAS of it: one type, one
    product, no epilogue), or its operand types' full spelling (two fp8 kernels of one name with
    other scales have other library GEMMs; an epilogue is part of it), ``batched`` for a strided
    batch (the library's strided-batched GEMM), ``grouped contiguous`` or ``grouped masked`` for
    groups (that GEMM too, named as the ceiling of the same work)."""
    if by_cublas(instance):
        return instance.dtype
    kind = " batched" if instance.batched else f" grouped {instance.grouped}" if instance.grouped else ""
    return instance.types.spelling + kind


def min_bytes(instance: Instance, size: int, batch: int = 1) -> int:
    """The least an N x N x N launch of `instance` (`batch` products) moves: A, B and its
    output once, each in its own type, its scale factors, and a fused epilogue's bias and
    residual."""
    t = instance.types
    scales = sum(s.type.itemsize * math.prod(s.shape(size, size)) for s in t.scales)
    epilogue = (t.of("bias").itemsize * size if t.epilogue.bias else 0) + \
        (t.of("residual").itemsize * size * size if t.epilogue.residual else 0)
    return batch * roofline.operand_bytes(size, size, size, a=t.A.itemsize, b=t.B.itemsize, out=t.D.itemsize,
                                          scales=scales + epilogue)


def refusal(instance: Instance, lost) -> KernelLaunchError:
    """The error of a row the sized probe saw crash or hang (`lost`: status, message, problem):
    raised without a launch here, the context intact."""
    error = (KernelHang if lost.status == "hang" else KernelLaunchError)(f"{instance.id}: {lost.message}")
    error.instance, error.problem = instance, lost.problem
    return error


def again(exc: KernelLaunchError) -> KernelLaunchError:
    """A fresh `exc` (same class, message and attributes) to raise once more: raising the one
    stored would grow its traceback at each test that asks for its row."""
    out = type(exc)(*exc.args)
    out.__dict__.update(exc.__dict__)
    return out


class Unjudgeable(Exception):
    """A threshold cannot be checked in this run; the message says why (a skip reason)."""


class WrongOutput(AssertionError):
    """A timed kernel computed wrong values (first launch, or last timed launch): its speed means nothing."""


class ImpossibleTime(AssertionError):
    """A kernel's time is faster than the roofline allows: it skipped work or replayed a result."""


def _where(c: Check, instance: Instance) -> str:
    tile = instance.declared_tile
    at = f" (tile {c.where[0] // tile},{c.where[1] // tile})" if tile else ""
    return f"worst |C - C_ref| is {c.worst_ratio:.3g} x the forward error bound at C{list(c.where)}{at}, {c.nans} NaN"


def _read_of_c(session: PerfSession, instance: Instance, size: int, check: Check) -> str:
    """A first line naming reads_c_at_beta_zero when the first launch's NaN is C's poison read at
    beta = 0 (launched again with C finite, it is right), as the correctness suite's checks
    point at it; else ""."""
    from gemmcheck.judge import beta_zero

    if (not check.nans or instance.spec.reads_c_at_beta_zero or not beta_zero.takes_beta(instance)
            or not session.timer.check(instance, size, finite_C=True).ok):
        return ""
    return (f"reads_c_at_beta_zero: this failure is the read of C at beta = 0 that "
            f"{beta_zero.ESTABLISHED_BY} establishes for {instance.id}: with C finite instead of NaN "
            f"its first launch is right. Fix: {beta_zero.FIX}\n")


def timed_rate(session: PerfSession, instance: Instance, size: int) -> float:
    """The instantiation's TFLOP/s, measured once per session.

    WrongOutput when its output fails the check on the first launch or on the last
    timed one; ImpossibleTime when its time beats the roofline.
    """
    row = session.measure(instance, size)
    name = f"{instance.id} ({instance.name_expression}) at N={size}"
    if row.measurement is None:
        raise WrongOutput(_read_of_c(session, instance, size, row.check)
                          + f"{name}: output fails the check before timing: {_where(row.check, instance)}; "
                          "timing a wrong kernel means nothing (the correctness suite says more)")
    if row.last is not None and not row.last.ok:
        raise WrongOutput(
            f"{name}: correct on its first launch, wrong on its last timed launch "
            f"(launch {len(row.measurement.times) + row.measurement.dropped} of the timing loop): "
            f"{_where(row.last, instance)}; a kernel that keeps state between launches (a result "
            "cached in __device__ memory, work skipped on repeats) is not a correct kernel")
    if row.impossible:
        raise ImpossibleTime(f"{name}: median {row.measurement.median * 1e6:.1f} us: {row.impossible}")
    return row.measurement.tflops


def judge(session: PerfSession, threshold: Threshold, size: int, specs) -> Evaluation:
    """Measure (or reuse) what `threshold` compares and return the Evaluation.

    Raises Unjudgeable when the run cannot give the baseline (no cuBLAS for the
    dtype, unknown FP32 peak, baseline kernel absent or without a timed TILE).
    A cuBLAS baseline is the cuBLAS series sampled in turn with this kernel.
    """
    by_name = {s.name: s for s in specs}
    spec = by_name.get(threshold.kernel)
    if spec is None:
        raise Unjudgeable(f"kernel {threshold.kernel!r} is not in the catalog")
    try:
        instance = claimed_instance(spec, threshold)
    except ValueError as exc:
        raise Unjudgeable(str(exc)) from None
    value = timed_rate(session, instance, size)
    device = session.device.describe()
    if threshold.baseline == CUBLAS:
        cublas = session.rows[(instance.id, size)].cublas or session.cublas(threshold.dtype, size)
        if not isinstance(cublas, Measurement):
            raise Unjudgeable(f"no cuBLAS baseline for {threshold.dtype}: {cublas}")
        return evaluate(threshold, size, value, cublas.tflops, f"cuBLAS {threshold.dtype} (TF32 off)", device)
    if threshold.baseline == FP32_PEAK:
        peak = session.device.fp32_peak_tflops
        if peak is None:
            raise Unjudgeable(f"FP32 peak unknown: compute capability {session.device.capability} "
                              "has no entry in gemmcheck.perf.roofline.FP32_LANES_PER_SM")
        return evaluate(threshold, size, value, peak, "the FP32 FMA peak", device)
    base = by_name.get(threshold.baseline)
    if base is None:
        raise Unjudgeable(f"baseline kernel {threshold.baseline!r} is not in the catalog; "
                          "fix the thresholds file or add the kernel")
    timed_tiles = session.timer.timing.tiles
    candidates = baseline_instances(base, threshold, size, timed_tiles)
    if not candidates:
        which = (f", TILE {threshold.baseline_tile} (timed TILEs {list(timed_tiles)})" if base.has_tile else "")
        raise Unjudgeable(f"baseline {threshold.baseline} has no instantiation at {threshold.dtype}{which} "
                          f"for N={size}")
    rates = {}
    for inst in candidates:
        try:
            rates[inst] = timed_rate(session, inst, size)
        except KernelLaunchError as exc:
            if getattr(exc, "context_lost", False):
                raise   # nothing more can be judged in this process
            missing = exc   # a TILE that crashed or hung is no candidate; its own test says so
    if not rates:
        raise Unjudgeable(f"baseline {threshold.baseline} at N={size}: {status_of(missing)}: {missing}")
    best = max(rates, key=rates.get)
    label = best.id + (f" (best of TILE {', '.join(str(i.tile) for i in candidates)})"
                       if threshold.baseline_tile == "best" and base.has_tile else "")
    return evaluate(threshold, size, value, rates[best], label, device)

