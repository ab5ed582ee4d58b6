"""The arithmetic of performance: FLOPs, the seed's intensity model, rooflines, ratios.

Pure functions of numbers; nothing here touches a GPU, so all of it is tested
without one (tests/test_perf_roofline.py).

The seed (tiled-gemm-cuda.txt, section 2) models global-memory traffic: a
naive kernel loads 2 elements per multiply-add (I = 2 FLOP / (2 x itemsize)
bytes = 1 / itemsize, 0.25 FLOP/byte for float32); a TILE x TILE tiled kernel
reuses every loaded element TILE times (I = TILE / itemsize, TILE / 4 for
float32). Under a roofline with memory bandwidth BW and compute peak P a
kernel of intensity I can reach at most min(P, I x BW): memory-bound left of
the ridge point P / BW, compute-bound right of it.

That model counts DRAM traffic only, as if no cache kept anything between two
tiles: it is a *model* roof, not a bound. L1 and L2 reuse loads far more than
it counts (the naive kernel reaches 5-7x its model roof on an H200), so a
kernel above its model roof is shown as "model exceeded", never as > 100 %
(``model_roof_cell``). The bounds no kernel can beat are the device's: the
highest FLOP rate any unit of the SM reaches for the dtype (tensor cores
included, ``peak_tflops``) and the copy bandwidth over the bytes a GEMM must
move at least (``min_bytes``); ``impossible`` refuses a time faster than both
allow.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass

# FP32 lanes (FFMA results per clock) per SM, by compute capability: the CUDA C++
# Programming Guide, "Arithmetic Instructions" throughput table (32-bit
# floating-point add, multiply, multiply-add). Unknown capabilities give None
# and the FP32 peak is then reported as unknown rather than guessed.
FP32_LANES_PER_SM = {
    (5, 0): 128, (5, 2): 128, (5, 3): 128,
    (6, 0): 64, (6, 1): 128, (6, 2): 128,
    (7, 0): 64, (7, 2): 64, (7, 5): 64,
    (8, 0): 64, (8, 6): 128, (8, 7): 128, (8, 9): 128,
    (9, 0): 128,
    (10, 0): 128, (10, 3): 128, (12, 0): 128, (12, 1): 128,
}


# Dense tensor-core operations per SM per clock (one multiply-add counts 2), by compute
# capability and input kind: NVIDIA's architecture whitepapers (Tesla V100, A100 and H100
# Tensor Core GPU Architecture: the dense TFLOP/s or TOPS of the SXM part / its SMs / its boost
# clock: H100 SXM 989.4 TFLOP/s float16 = 132 x 4096 x 1.83 GHz). Sparse rates are never used.
# A pair the table lacks gives None: its peak is shown as unknown, never guessed.
TENSOR_FLOP_PER_CLOCK_PER_SM = {
    (7, 0): {"float16": 1024},
    (8, 0): {"float64": 128, "tf32": 1024, "float16": 2048, "bfloat16": 2048, "int8": 4096},
    (9, 0): {"float64": 256, "tf32": 2048, "float16": 4096, "bfloat16": 4096, "float8": 8192, "int8": 8192},
}
# The tensor-core input kind of each element type (float32 data reaches tensor cores as TF32).
TENSOR_KIND = {"float64": "float64", "float32": "tf32", "tf32": "tf32", "float16": "float16",
               "bfloat16": "bfloat16", "float8_e4m3fn": "float8", "float8_e5m2": "float8",
               "int8": "int8", "uint8": "int8"}
IMPOSSIBLE_SLACK = 0.10   # clocks and bandwidth are read, not exact: refuse only 10 % past a bound


def gemm_flops(M: int, N: int, K: int) -> int:
    """2MNK: one multiply and one add per (i, j, k)."""
    return 2 * M * N * K


def tflops(flops: float, seconds: float) -> float:
    if seconds <= 0:
        raise ValueError(f"a time must be positive to give a rate; got {seconds!r} s")
    return flops / seconds / 1e12


def fp32_peak_tflops(sm_count: int, clock_hz: float, capability: tuple[int, int]) -> float | None:
    """SMs x FP32 lanes per SM x 2 FLOP per FMA x clock; None for an unknown capability."""
    lanes = FP32_LANES_PER_SM.get(tuple(capability))
    if lanes is None:
        return None
    return sm_count * lanes * 2 * clock_hz / 1e12


def tensor_kind(input_type: str) -> str | None:
    """The tensor-core input kind of an A (or B) element type: "float16", "tf32", "float8", ..."""
    return TENSOR_KIND.get(input_type)


def tensor_peak_tflops(sm_count: int, clock_hz: float, capability: tuple[int, int], input_type: str) -> float | None:
    """The dense tensor-core peak for inputs of this element type: SMs x the table's operations
    per SM per clock x clock; None when the table does not know the pair."""
    per_clock = TENSOR_FLOP_PER_CLOCK_PER_SM.get(tuple(capability), {}).get(tensor_kind(input_type))
    return None if per_clock is None else sm_count * per_clock * clock_hz / 1e12


def peak_tflops(sm_count: int, clock_hz: float, capability: tuple[int, int], dtype: str) -> float | None:
    """The highest rate any unit of the device reaches for inputs of this element type: its
    tensor-core peak, or for float32 the FP32 SIMT peak where that is higher (a card without
    TF32). None for a capability the tensor-core table lacks: its tensor cores may be faster
    than any number known here. A time faster than this allows is impossible."""
    if tuple(capability) not in TENSOR_FLOP_PER_CLOCK_PER_SM:
        return None
    known = [p for p in (tensor_peak_tflops(sm_count, clock_hz, capability, dtype),
                         fp32_peak_tflops(sm_count, clock_hz, capability) if dtype == "float32" else None)
             if p is not None]
    return max(known) if known else None


def min_bytes(M: int, N: int, K: int, itemsize: int) -> int:
    """The least a GEMM with beta = 0 must move: read A and B once, write C once."""
    return (M * K + K * N + M * N) * itemsize


def operand_bytes(M: int, N: int, K: int, *, a: int, b: int, out: int, scales: int = 0) -> int:
    """The same least traffic with an element size per operand (bytes of A's, B's and the
    output's elements) and `scales` bytes of scale factors: a GEMM of mixed operand types."""
    return M * K * a + K * N * b + M * N * out + scales


def impossible(seconds: float, *, flops: float, nbytes: float, peak_tflops: float | None,
               bandwidth_tbs: float | None, slack: float = IMPOSSIBLE_SLACK) -> str | None:
    """Why ``seconds`` is faster than the device allows (a sentence), or None when it is possible.

    The fastest possible time is max(flops / peak, bytes / bandwidth); a time below
    (1 - slack) x that is refused. A bound whose number is unknown (None) is not applied.
    """
    reasons = []
    if peak_tflops:
        floor = flops / (peak_tflops * 1e12)
        if seconds < (1 - slack) * floor:
            reasons.append(f"{flops / seconds / 1e12:.1f} TFLOP/s exceeds the device's peak "
                           f"{peak_tflops:.1f} TFLOP/s (needs >= {floor * 1e6:.1f} us)")
    if bandwidth_tbs:
        floor = nbytes / (bandwidth_tbs * 1e12)
        if seconds < (1 - slack) * floor:
            reasons.append(f"moving at least {nbytes / 2**20:.0f} MiB at {nbytes / seconds / 1e12:.2f} TB/s "
                           f"exceeds the copy bandwidth {bandwidth_tbs:.2f} TB/s (needs >= {floor * 1e6:.1f} us)")
    if not reasons:
        return None
    return (f"{seconds * 1e6:.1f} us is faster than the roofline allows: " + "; ".join(reasons)
            + "; a kernel this fast skipped work or replayed a cached result")


def reuse_factor(policy: str, tile: int, shared_tiles: int | None) -> int:
    """How often the seed's model says each loaded element is used: TILE for a kernel
    that stages tiles in shared memory, 1 for one thread per output reading global memory."""
    if policy == "naive" or shared_tiles == 0:
        return 1
    return tile


def model_intensity(policy: str, tile: int, shared_tiles: int | None, itemsize: int) -> float:
    """The seed's arithmetic intensity (FLOP per byte of global input traffic)."""
    return reuse_factor(policy, tile, shared_tiles) / itemsize


def block_tile_intensity(block_m: int, block_n: int, itemsize: int) -> float:
    """The same DRAM-only model for a BM x BN block tile (register-blocked kernels): per k it loads
    BM + BN elements for 2 BM BN FLOPs; a square TILE gives TILE / itemsize, as above."""
    return 2 * block_m * block_n / ((block_m + block_n) * itemsize)


@dataclass(frozen=True)
class Roof:
    """A roofline: a memory slope and a compute ceiling (TFLOP/s and TB/s)."""

    peak_tflops: float
    bandwidth_tbs: float

    @property
    def ridge(self) -> float:
        """The intensity (FLOP/byte) where the two roofs meet."""
        return self.peak_tflops / self.bandwidth_tbs

    def attainable(self, intensity: float) -> float:
        return min(self.peak_tflops, intensity * self.bandwidth_tbs)

    def bound(self, intensity: float) -> str:
        """'memory' or 'compute': which roof is lower at this intensity."""
        return "memory" if intensity * self.bandwidth_tbs < self.peak_tflops else "compute"


MODEL_EXCEEDED = "model exceeded: caches reuse more than the model counts"


def model_roof_cell(achieved_tflops: float, model_roof_tflops: float) -> str:
    """A kernel's share of its model roof as a table cell: a percentage up to 100, and past it
    the reason, never a percentage above 100 (the model is not a bound)."""
    share = 100 * achieved_tflops / model_roof_tflops
    return f"{share:.1f}" if share <= 100 else MODEL_EXCEEDED


def ratio(value: float, baseline: float) -> float:
    """value / baseline, for rates measured in the same run; both must be positive."""
    if not (baseline > 0 and math.isfinite(baseline)):
        raise ValueError(f"baseline must be a positive finite rate, got {baseline!r}")
    if not (value >= 0 and math.isfinite(value)):
        raise ValueError(f"value must be a non-negative finite rate, got {value!r}")
    return value / baseline


def spread(times) -> float:
    """Relative spread of repeated timings: interquartile range / median."""
    ordered = sorted(times)
    if not ordered:
        raise ValueError("no timings")
    q1, med, q3 = (_quantile(ordered, q) for q in (0.25, 0.5, 0.75))
    return (q3 - q1) / med if med > 0 else math.inf


def median(times) -> float:
    ordered = sorted(times)
    if not ordered:
        raise ValueError("no timings")
    return _quantile(ordered, 0.5)


def _quantile(ordered, q: float) -> float:
    # Linear interpolation between closest ranks (numpy's default), on a sorted list.
    pos = (len(ordered) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


@dataclass(frozen=True)
class Point:
    """One kernel on the roofline plot."""

    label: str
    intensity: float   # FLOP/byte (the seed's model)
    tflops: float      # achieved


def plot(points: list[Point], *, peak_tflops: float | None, bandwidth_tbs: float | None,
         ceilings: dict[str, float] | None = None, title: str = "", measured: list[Point] = ()) -> bytes:
    """A log-log roofline as PNG bytes: each kernel a point at its model intensity,
    the memory roof (bandwidth x intensity) and the FP32 peak as lines, and each
    measured ceiling (e.g. cuBLAS per dtype, in TFLOP/s) as a dashed horizontal line."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    if not points:
        raise ValueError("nothing to plot: no measured kernels")
    ceilings = ceilings or {}
    xs = [p.intensity for p in [*points, *measured]]
    lo_x = min(xs + [0.1]) / 2
    hi_x = 1.5 * max(xs + [64.0] + ([peak_tflops / bandwidth_tbs * 4] if peak_tflops and bandwidth_tbs else []))
    # The legend goes below the axes (inside, it hid the low-intensity points of a full
    # catalog on the H200); the figure grows with its rows.
    entries = 1 + len(ceilings or {}) + len(points) + len(measured)
    ncol = 3 if entries > 24 else 2 if entries > 8 else 1
    fig = Figure(figsize=(12, 8 + 0.13 * -(-entries // ncol)), dpi=100)
    ax = fig.add_subplot(1, 1, 1)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    if bandwidth_tbs:
        grid = [lo_x * (hi_x / lo_x) ** (i / 200) for i in range(201)]
        roof = [min(peak_tflops or math.inf, x * bandwidth_tbs) for x in grid]
        ax.plot(grid, roof, color="black", linewidth=2,
                label=f"model roof: copy bandwidth {bandwidth_tbs:.2f} TB/s x model intensity"
                      + (f", FP32 peak {peak_tflops:.1f} TFLOP/s" if peak_tflops else "")
                      + " (a point above the slope: caches reuse more than the model counts)")
    elif peak_tflops:
        ax.axhline(peak_tflops, color="black", linewidth=2, label=f"FP32 peak {peak_tflops:.1f} TFLOP/s")
    styles = ["tab:red", "tab:purple", "tab:brown", "tab:olive", "tab:cyan", "tab:gray"]
    for (name, value), color in zip(sorted(ceilings.items()), styles * 4):
        ax.axhline(value, color=color, linestyle="--", linewidth=1.2, label=f"{name}: {value:.1f} TFLOP/s")
    markers = "osD^v<>phX*"
    for i, p in enumerate(points):
        ax.scatter([p.intensity], [p.tflops], marker=markers[i % len(markers)], s=55, zorder=3,
                   label=f"{p.label}: {p.tflops:.2f} TFLOP/s at {p.intensity:g} FLOP/B")
    for p in measured:   # the same kernel at the intensity ncu measured: hollow, so the two read apart
        ax.scatter([p.intensity], [p.tflops], marker="o", s=70, zorder=3, facecolors="none",
                   edgecolors="black", label=f"{p.label}: measured {p.intensity:.1f} FLOP/B (DRAM bytes)")
    ax.set_xlim(lo_x, hi_x)
    ax.set_xlabel("arithmetic intensity from the seed's DRAM-only model, no cache reuse counted "
                  "(FLOP / byte of global input traffic): a model, not a measurement")
    ax.set_ylabel("TFLOP/s (device-event time, median)")
    ax.set_title(title or "roofline")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.08), ncol=ncol)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", bbox_inches="tight")
    return buffer.getvalue()
