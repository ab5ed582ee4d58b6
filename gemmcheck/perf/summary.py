"""What the performance suite reports: the table, perf.json and the roofline PNG.

The roofline columns are honest about what they are: "model roof" is the
seed's DRAM-only intensity model (no cache reuse counted), which a kernel can
exceed; past it the table says so in words, never as a percentage over 100.
The bounds a kernel cannot exceed (the device peak for its dtype, the copy
bandwidth) are enforced as impossibility checks (gemmcheck.perf.roofline.impossible).

Each kernel is a share of two numbers of its own: its ceiling (cuBLAS of its dtype, or for a
type per operand cuBLASLt's GEMM of its combination, named in the "ceiling" column, the nearest
library GEMM where the library lacks it) and the peak of the unit it computes on (FP32 SIMT, or
the dense tensor-core peak of its input type: gemmcheck.perf.units), named in the "unit" column.
"""

from __future__ import annotations

import json
from pathlib import Path

from gemmcheck.contract import dtypes as dt
from gemmcheck.perf import library, roofline, units
from gemmcheck.perf.gpu import HOLD_NS, TF32
from gemmcheck.perf.measurement import Measurement
from gemmcheck.perf.sampling import CONVERGED
from gemmcheck.perf.session import PerfSession, Row, ceiling_key
from gemmcheck.tables import format_table

HEADER = ("kernel", "N", "TFLOP/s", "spread", "samples", "stop", "SM MHz", "cold caches", "% ceiling", "ceiling",
          "% unit peak", "unit (peak TFLOP/s)", "model FLOP/B", "model roof", "% of model roof", "DRAM FLOP/B (ncu)")


def model_intensity(instance) -> float:
    """The seed's DRAM-only intensity of an instantiation: from its BM x BN block tile when its
    parameters name both (the ladder's register-blocked kernels), else from its TILE and policy."""
    p = instance.params
    itemsize = input_itemsize(instance)
    if "BM" in p and "BN" in p:
        return roofline.block_tile_intensity(p["BM"], p["BN"], itemsize)
    return roofline.model_intensity(instance.spec.policy, instance.tile, instance.spec.shared_tiles, itemsize)


def input_itemsize(instance) -> float:
    """The bytes of an input element the model counts: A's and B's mean (one type: its size)."""
    t = instance.types
    return (t.A.itemsize + t.B.itemsize) / 2


def _intensity(row: Row) -> float:
    return model_intensity(row.instance)


def best_rows(session: PerfSession) -> dict[tuple[str, str, int], tuple[str, Row]]:
    """(kernel, dtype, N) -> (label, row) of its fastest instantiation whose rate counts."""
    best: dict[tuple[str, str, int], tuple[str, Row]] = {}
    for (label, size), row in session.rows.items():
        m = row.measurement
        if m is None or row.instance is None or (row.last is not None and not row.last.ok) or row.impossible:
            continue
        key = (row.instance.spec.name, row.instance.dtype, size)
        if key not in best or m.tflops > best[key][1].measurement.tflops:
            best[key] = (label, row)
    return best


def best_lines(session: PerfSession) -> list[str]:
    """One line per kernel, dtype and N: its fastest timed config (or TILE; nothing for a kernel
    with one instantiation, which has neither) and its share of cuBLAS."""
    lines = []
    cublas = session.cublas_measurements()
    for (kernel, dtype, size), (label, row) in sorted(best_rows(session).items(), key=lambda kv: (kv[0][2], kv[0])):
        inst, m = row.instance, row.measurement
        base = row.cublas or cublas.get((ceiling_key(inst), size))
        share = f", {100 * m.tflops / base.tflops:.1f}% of {ceiling_name(ceiling_key(inst), base)}" if base else ""
        which = f"{inst.variant}, " if inst.variant else ""
        lines.append(f"best {kernel} {dtype} N={size}: {which}{m.tflops:.2f} TFLOP/s{share}")
    return lines


def _timing_cells(m: Measurement) -> tuple[str, ...]:
    clock = f"{m.clock_mhz:.0f}" if m.clock_mhz is not None else "n/a"
    samples = f"{len(m.times)}" + (f" (-{m.dropped} throttled)" if m.dropped else "")
    return (f"{m.tflops:.2f}", f"{100 * m.spread:.2f}%", samples, m.stop or "-", clock, m.cold_caches())


def _measured_intensity(row: Row, size: int) -> float | None:
    return roofline.gemm_flops(size, size, size) / row.dram_bytes if row.dram_bytes else None


def ceiling_name(key: str, m: Measurement) -> str:
    """How the table names the ceiling series pooled under `key` (session.ceiling_key): ``cuBLAS
    float32`` for a dtype, else cuBLASLt's GEMM as its measurement is labelled."""
    return f"cuBLAS {key}" if key in dt.DTYPES else m.label


def _kernel_row(session: PerfSession, label: str, size: int, row: Row) -> tuple[str, ...]:
    m = row.measurement
    if row.failure is not None:   # not timed: its launch crashed or hung (here, or in the sized probe)
        return (label, str(size), row.status, *["-"] * 11, _first_line(row.failure), "-")
    if m is None:
        return (label, str(size), "wrong", *["-"] * 11,
                f"first launch: {row.check.worst_ratio:.3g} x bound, {row.check.nans} NaN", "-")
    if row.last is not None and not row.last.ok:
        verdict = f"wrong on last launch: {row.last.worst_ratio:.3g} x bound, {row.last.nans} NaN"
        return (label, str(size), "refused", *_timing_cells(m)[1:], *["-"] * 6, verdict, "-")
    if row.impossible:
        return (label, str(size), "refused", *_timing_cells(m)[1:], *["-"] * 6, "impossible: beats the roofline",
                "-")
    cublas = row.cublas or session.cublas_measurements().get((ceiling_key(row.instance), size))
    ceiling = (f"{100 * m.tflops / cublas.tflops:.1f}", ceiling_name(ceiling_key(row.instance), cublas)) if cublas else (
        "n/a", session.cublas_missing().get((ceiling_key(row.instance), size), "not measured"))
    unit = units.unit_of(row.instance, session.device)
    intensity = _intensity(row)
    roof = _roof(session, unit)
    model = (f"{roof.attainable(intensity):.1f}", roofline.model_roof_cell(m.tflops, roof.attainable(intensity))) \
        if roof else ("-", "-")
    measured = _measured_intensity(row, size)
    return (label, str(size), *_timing_cells(m), *ceiling,
            f"{100 * m.tflops / unit.peak_tflops:.1f}" if unit.peak_tflops else "n/a", unit.label,
            f"{intensity:g}", *model, f"{measured:.1f}" if measured else "-")


def _roof(session: PerfSession, unit: units.Unit) -> roofline.Roof | None:
    """The model roof under the unit's peak (the copy bandwidth's slope, the unit's ceiling)."""
    roof = session.roof()
    return roofline.Roof(unit.peak_tflops, roof.bandwidth_tbs) if roof and unit.peak_tflops else None


def _first_line(exc: BaseException) -> str:
    """What a failed row's launch error says, on one line, without the instantiation's id (the
    row names it)."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    instance = getattr(exc, "instance", None)
    return text.removeprefix(f"{instance.id}: ") if instance is not None else text


def summary_rows(session: PerfSession) -> tuple[tuple[str, ...], list[tuple[str, ...]], list[str]]:
    """(header, rows, footer lines) for what was measured."""
    rows = [_kernel_row(session, label, size, row)
            for (label, size), row in sorted(session.rows.items(), key=lambda kv: (kv[0][1], kv[0][0]))]
    for (dtype, size), m in sorted(session.cublas_measurements().items(), key=lambda kv: (kv[0][1], kv[0][0])):
        rows.append((ceiling_name(dtype, m), str(size), *_timing_cells(m), "100.0", "-", "-", "-", "-", "-", "-", "-"))
    return HEADER, rows, footer(session)


def footer(session: PerfSession) -> list[str]:
    device = session.device
    timing = session.timer.timing
    lines = [f"device: {device.describe()}", *best_lines(session)]
    if session._copy is not None:
        lines.append(f"device copy bandwidth: {session._copy.bandwidth_tbs:.2f} TB/s (read + write, "
                     f"{session._copy.size / 2**20:.0f} MiB buffer)")
    roof = session.roof()
    if roof:
        lines.append(f"model roof: the seed's DRAM-only intensity model (no cache reuse counted) with input "
                     f"elements of their own size, under the copy bandwidth and the peak of the kernel's unit (FP32 SIMT: "
                     f"ridge {roof.ridge:.1f} FLOP/B); a kernel above it shows '{roofline.MODEL_EXCEEDED}'")
    lines.append("ceiling: cuBLAS of the kernel's dtype (cupy.matmul), or for a type per operand cuBLASLt's GEMM "
                 "of its combination (nvmath-python's bindings, TN layout, scale factors of 1), sampled in turn "
                 "with it; '(nearest library GEMM: ...)' names what differs where the library lacks the combination")
    if any(r.cublas is not None and library.NO_GROUPED in r.cublas.label for r in session.rows.values()):
        lines.append(f"grouped: {library.GROUPED_NOTE}")
    lines.append("unit: FP32 SIMT (SMs x FP32 lanes x 2 x clock), or for a kernel whose code names a tensor-core "
                 "instruction (wmma::mma_sync, mma.sync, wgmma.mma_async, tcgen05.mma) the dense tensor-core peak "
                 "of its input type (SMs x FLOP per SM per clock from NVIDIA's architecture whitepapers x clock)")
    clock = getattr(session.timer, "clock", None)
    reference = getattr(clock, "reference_mhz", None)
    lines.append("SM MHz: median NVML SM clock over the kept samples; "
                 + (f"samples below {timing.min_clock_ratio:.0%} of {reference:.0f} MHz are dropped as throttled"
                    if reference else f"clocks unknown ({getattr(clock, 'why_not', None) or 'no NVML'}): "
                                      "nothing dropped"))
    lines.append(f"samples: CUDA events behind a {HOLD_NS // 1000} us hold kernel (host launch cost not timed), "
                 f"kernel and cuBLAS in turn, each until its median is known to {timing.max_noise:.1%} "
                 f"(its standard error from the interquartile range: '{CONVERGED}'), at most {timing.max_samples} samples or "
                 f"{timing.max_seconds:g} s; median reported; spread = interquartile range / median (above "
                 f"{timing.max_spread:.0%}: too noisy to judge; stdev / mean, which a few host stalls inflate, is in "
                 "perf.json as noise)")
    lines.append("cold caches: each sample takes the next input set, so >= 2 x L2 of other data passes "
                 "between two uses of a set; C is poisoned before each sample and the last timed "
                 "launch's output is checked")
    lines.append(f"TF32: {TF32}")
    if session.ncu:
        lines.append("DRAM FLOP/B (ncu): FLOPs / the DRAM bytes ncu measured on one cold launch "
                     "(dram__bytes_read.sum + dram__bytes_write.sum): the measured point of the roofline")
        for (label, size), row in sorted(session.rows.items()):
            if row.dram_note:
                lines.append(f"{label} N={size}: no measured point: {row.dram_note}")
    else:
        lines.append("DRAM FLOP/B (ncu): not measured (pass --gemm-ncu with ncu on PATH)")
    for (dtype, size), why in sorted(session.cublas_missing().items()):
        lines.append(f"ceiling of {dtype} N={size}: not measured: {why}")
    timed_here = {r.instance.spec.name for r in session.rows.values() if r.instance is not None}
    untimed = [f"{name} {', '.join(dtypes)}" for name, dtypes in sorted(session.untimed.items()) if name in timed_here]
    if untimed:
        lines.append("not timed: this profile times each kernel at its lead dtype and at the dtypes a threshold "
                     "names (--gemm-dtypes or --gemm-profile nightly times every one): " + "; ".join(untimed))
    return lines


def table_text(session: PerfSession) -> str:
    header, rows, foot = summary_rows(session)
    return "\n".join(format_table(header, rows) + [""] + foot) + "\n"


def roofline_png(session: PerfSession) -> bytes | None:
    points = [roofline.Point(f"{label} N{size}", _intensity(row), row.measurement.tflops)
              for (label, size), row in sorted(session.rows.items())
              if row.measurement is not None and (row.last is None or row.last.ok) and not row.impossible]
    if not points:
        return None
    measured = [roofline.Point(f"{label} N{size} (ncu)", _measured_intensity(row, size), row.measurement.tflops)
                for (label, size), row in sorted(session.rows.items()) if _measured_intensity(row, size)]
    ceilings = {f"{ceiling_name(d, m)} N{s}": m.tflops for (d, s), m in session.cublas_measurements().items()}
    roof = session.roof()
    return roofline.plot(points, peak_tflops=session.device.fp32_peak_tflops,
                         bandwidth_tbs=roof.bandwidth_tbs if roof else None, ceilings=ceilings,
                         title=f"roofline: {session.device.name}", measured=measured)


def _measurement_json(m: Measurement) -> dict:
    return {"tflops": m.tflops, "median_s": m.median, "noise": m.noise, "spread": m.spread,
            "samples": len(m.times), "dropped_throttled": m.dropped, "stop": m.stop,
            "sm_clock_mhz": m.clock_mhz, "reference_clock_mhz": m.reference_mhz, "n_sets": m.n_sets,
            "flops": m.flops}


def document(session: PerfSession) -> dict:
    """perf.json: every measurement with its timing evidence."""
    def kernel(r: Row) -> dict:
        if r.failure is not None:
            return {"status": r.status, "why": _first_line(r.failure)}
        if r.measurement is None:
            return {"first_check_ratio": r.check.worst_ratio, "first_check_nans": r.check.nans}
        out = _measurement_json(r.measurement)
        if r.last is not None:
            out.update(last_check_ratio=r.last.worst_ratio, last_check_nans=r.last.nans)
        if r.cublas is not None:
            out["interleaved_cublas_tflops"] = r.cublas.tflops
            out["ceiling"] = ceiling_name(ceiling_key(r.instance), r.cublas)
        unit = units.unit_of(r.instance, session.device)
        out.update(unit=unit.name, unit_peak_tflops=unit.peak_tflops)
        out["impossible"] = r.impossible
        out["dram_bytes_ncu"] = r.dram_bytes
        if r.dram_note:
            out["dram_note"] = r.dram_note
        return out

    return {
        "device": session.device.describe(),
        "tf32": TF32,
        "copy_tbs": session._copy.bandwidth_tbs if session._copy else None,
        "cublas": {f"{d}-N{s}": {**_measurement_json(m), "ceiling": ceiling_name(d, m)}
                   for (d, s), m in session.cublas_measurements().items()},
        "kernels": {f"{label}-N{size}": kernel(r) for (label, size), r in session.rows.items()},
        "untimed_dtypes": {name: list(dtypes) for name, dtypes in sorted(session.untimed.items())},
    }


def write_reports(out: Path, session: PerfSession) -> list[Path]:
    """out/{summary.txt, perf.json, roofline.png}; returns what was written."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "summary.txt", out / "perf.json"]
    written[0].write_text(table_text(session))
    written[1].write_text(json.dumps(document(session), indent=2) + "\n")
    png = roofline_png(session)
    if png:
        (out / "roofline.png").write_bytes(png)
        written.append(out / "roofline.png")
    return written
