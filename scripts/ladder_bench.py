#!/usr/bin/env python3
"""Check and time the reference ladder (kernels/ladder_catalog.toml) on one GPU with CuPy.

For every kernel, configuration and dtype of the catalog:
- compile (NVRTC through cupy.RawModule, every instantiation of a source at once; the
  tensor-core rungs need <mma.h>, found through the toolkit's include directory), or load
  cubins built ahead of time with nvcc (--build-cubins here, --cubins on the GPU machine);
- check against a float64 product: random inputs, aligned and ragged shapes within the
  kernel's shape claim, (alpha, beta) = (1, 0) with C poisoned (NaN) and (2, -1) with a C0;
  operands between guard bands, so unwritten elements, writes outside C and (in a second
  launch with NaN guards) reads outside A and B are counted;
- for the correct rungs, time at SIZE^3 (default 4096) with CUDA events (median of many
  launches after warm-up) against cuBLAS (cupy.matmul, same dtype, TF32 off), the kernel's
  last timed output checked too;
- for the broken twins, report what one launch shows (max error, unwritten elements, C guard
  damage, reads outside A/B, launch-to-launch differences).
Prints a table (rung, config, dtype, ms, TFLOP/s, % of cuBLAS) and the twins' findings.
The work runs in a worker process (this script, supervised): a variant that crashes or hangs
costs its own line (CRASH / HANG) and a fresh worker measures the rest.

    python3 scripts/ladder_bench.py                      # everything
    python3 scripts/ladder_bench.py --only warptiled     # entries whose name contains it
    python3 scripts/ladder_bench.py --twins --plain --small   # for compute-sanitizer runs
    python3 scripts/ladder_bench.py --build-cubins DIR   # nvcc, no GPU; then on the GPU:
    python3 scripts/ladder_bench.py --cubins DIR --small

Needs CuPy and numpy, and gemmcheck on the path (run from the repository root) for one thing:
the catalog's grid / block / shared_bytes / shapes expressions are evaluated by gemmcheck's own
evaluator (gemmcheck.contract.launch), as the suites do.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from gemmcheck.contract.launch import Expression, Geometry  # noqa: E402

HERE = Path(__file__).resolve().parent
CATALOG_CANDIDATES = (HERE.parent / "kernels" / "ladder_catalog.toml", HERE / "ladder_catalog.toml")
# dtype -> (C element type, C scalar type of alpha / beta, unit roundoff of the storage type)
C_TYPES = {
    "float32": ("float", "float", 2.0**-24),
    "float64": ("double", "double", 2.0**-53),
    "float16": ("__half", "float", 2.0**-11),
    "bfloat16": ("__nv_bfloat16", "float", 2.0**-8),
}
ACCUMULATOR_U = {"float32": 2.0**-24, "float64": 2.0**-53, "float16": 2.0**-24, "bfloat16": 2.0**-24}
# Half the smallest subnormal of the storage type: the absolute rounding error near zero.
SUBNORMAL_HALF = {"float32": 2.0**-150, "float64": 2.0**-1075, "float16": 2.0**-25, "bfloat16": 2.0**-134}
CHECK_SHAPES = ((1, 1, 1), (64, 64, 64), (33, 17, 65), (129, 131, 77), (256, 256, 256), (100, 264, 40),
                (300, 136, 520))
SMALL_SHAPES = ((33, 17, 65), (100, 264, 40), (256, 256, 256))
GUARD = 1 << 16          # elements of guard band on each side of every check operand
STATIC_SHARED_LIMIT = 48 * 1024


# -- variants: one kernel entry at one configuration and dtype --------------------------------

@dataclass
class Variant:
    entry: dict
    config: str
    params: dict[str, int]
    dtype: str
    function: object = None
    notes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.entry["name"]

    @property
    def correct(self) -> bool:
        return self.entry["expect"] == "correct"

    @property
    def key(self) -> str:
        """The variant in one word (how the supervisor and its workers name an item)."""
        return f"{self.name}/{self.config}/{self.dtype}"

    @property
    def name_expression(self) -> str:
        template_args = self.entry["template_args"].format(T=C_TYPES[self.dtype][0], **self.params)
        return f"{self.entry['entry']}<{template_args}>"

    def geometry(self, M: int, N: int, K: int):
        """(grid, block, dynamic shared bytes), by the contract's own evaluator (launch.Geometry)."""
        geometry = Geometry.of(self.entry["grid"], self.entry["block"], self.entry.get("shared_bytes", "0"))
        return geometry.evaluate({**self.params, "M": M, "N": N, "K": K})

    def supports(self, M: int, N: int, K: int) -> bool:
        shapes = self.entry.get("shapes", "any")
        return shapes == "any" or Expression(shapes).holds({**self.params, "M": M, "N": N, "K": K})


def load_variants(catalog: Path, only: str | None) -> list[Variant]:
    data = tomllib.loads(catalog.read_text())
    variants = []
    for entry in data["kernel"]:
        if only and only not in entry["name"]:
            continue
        if "tensor_maps" in entry:   # rungs 9 and 10: cuTensorMapEncodeTiled and cluster launches
            print(f"{entry['name']}: takes TMA tensor maps, which this script does not make; the suite runs it "
                  "(rung 10 also scripts/ladder_fp8_bench.py)", flush=True)
            continue
        entry["source_path"] = catalog.parent / entry["source"]
        for config in entry["configs"]:
            params = {k: v for k, v in config.items() if k != "name"}
            for dtype in entry["dtypes"]:
                variants.append(Variant(entry, config.get("name", "default"), params, dtype))
    return variants


def toolkit_include_with_wmma() -> str | None:
    """A CUDA include directory holding crt/mma.h (WMMA): gemmcheck's own search (toolkit.py)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from gemmcheck.compile import toolkit
    return next((d for d in toolkit.include_dirs() if (Path(d) / "crt" / "mma.h").is_file()), None)


def groups_of(variants: list[Variant]) -> dict[tuple[Path, bool], list[Variant]]:
    """Variants by (source, needs tensor cores): each group is compiled as one module."""
    groups: dict[tuple[Path, bool], list[Variant]] = {}
    for v in variants:
        groups.setdefault((v.entry["source_path"], bool(v.entry.get("gpu_only"))), []).append(v)
    return groups


ROLE_TYPES = {"M": "int", "N": "int", "K": "int", "alpha": "{S}", "beta": "{S}", "A": "const {T} *",
              "B": "const {T} *", "C": "{T} *"}


def build_cubins(variants: list[Variant], out: Path, arch: str = "sm_90") -> None:
    """Compile every group ahead of time with nvcc (-cubin) into `out`, with a manifest naming each
    instantiation's symbol, so that a GPU run (--cubins) spends no time compiling."""
    import subprocess

    out.mkdir(parents=True, exist_ok=True)
    include = toolkit_include_with_wmma()
    manifest = []
    for index, ((source, tensor_cores), group) in enumerate(groups_of(variants).items()):
        lines = [f'#include "{source.resolve()}"']
        for expr in sorted({v.name_expression for v in group}):
            v = next(x for x in group if x.name_expression == expr)
            T, S, _ = C_TYPES[v.dtype]
            params = ", ".join(ROLE_TYPES[r].format(T=T, S=S) for r in v.entry["args"])
            lines.append(f"template __global__ void {expr}({params});")
        unit = out / f"group{index}.cu"
        unit.write_text("\n".join(lines) + "\n")
        cubin = out / f"group{index}.cubin"
        defines = [] if tensor_cores else ["-DLADDER_CUDA_CORES_ONLY"]
        subprocess.run(["nvcc", "-std=c++17", f"-arch={arch}", "-cubin", *defines, "-o", str(cubin), str(unit)],
                       check=True)
        symbols = subprocess.run(["readelf", "-Ws", "--wide", str(cubin)], check=True, capture_output=True,
                                 text=True).stdout.split()
        mangled = [sym for sym in symbols if sym.startswith("_Z")]
        demangled = subprocess.run(["c++filt"], input="\n".join(mangled), check=True, capture_output=True,
                                   text=True).stdout.splitlines()
        names = {}
        for m, d in zip(mangled, demangled):
            d = d.removeprefix("void ")
            if ">(" in d:
                names[d[:d.index(">(") + 1]] = m
        wanted = {v.name_expression for v in group}
        missing = wanted - set(names)
        if missing:
            raise SystemExit(f"{cubin}: no symbol for {sorted(missing)[:3]}")
        manifest.append({"source": source.name, "tensor_cores": tensor_cores, "cubin": cubin.name,
                         "symbols": {k: names[k] for k in sorted(wanted)}})
        print(f"built {cubin.name}: {source.name}, {len(wanted)} instantiations", flush=True)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))


def load_cubins(cp, variants: list[Variant], directory: Path) -> list[Variant]:
    """Attach functions from cubins built by build_cubins; variants without one are dropped (said so)."""
    symbols, modules = {}, {}
    for group in json.loads((directory / "manifest.json").read_text()):
        module = cp.RawModule(path=str(directory / group["cubin"]))
        for expr, mangled in group["symbols"].items():
            symbols[(group["source"], expr)] = (module, mangled)
    loaded = []
    for v in variants:
        key = (v.entry["source_path"].name, v.name_expression)
        if key not in symbols:
            print(f"no cubin for {v.name_expression} ({key[0]}): skipped", flush=True)
            continue
        module, mangled = symbols[key]
        v.function = module.get_function(mangled)
        _, _, shared = v.geometry(4096, 4096, 4096)
        if shared > STATIC_SHARED_LIMIT:
            v.function.max_dynamic_shared_size_bytes = shared
        loaded.append(v)
    print(f"loaded {len(loaded)} instantiations from {directory}", flush=True)
    return loaded


def compile_all(cp, variants: list[Variant]) -> list[Variant]:
    """Compile every variant; return those that compiled (a failing group is reported, not fatal).

    The CUDA-core rungs are compiled with -DLADDER_CUDA_CORES_ONLY (no <mma.h> needed), the
    tensor-core ones (gpu_only entries) with a toolkit include directory that has crt/mma.h."""
    include = toolkit_include_with_wmma()
    compiled = []
    for (source, tensor_cores), group in groups_of(variants).items():
        t0 = time.perf_counter()
        names = sorted({v.name_expression for v in group})
        options = ("-std=c++17",) + ((f"-I{include}",) if include else ()) if tensor_cores \
            else ("-std=c++17", "-DLADDER_CUDA_CORES_ONLY")
        what = f"{source.name} ({'tensor-core' if tensor_cores else 'CUDA-core'}, {len(names)} instantiations)"
        try:
            module = cp.RawModule(code=source.read_text(), options=options, name_expressions=names)
            for v in group:
                v.function = module.get_function(v.name_expression)
                _, _, shared = v.geometry(4096, 4096, 4096)
                if shared > STATIC_SHARED_LIMIT:
                    v.function.max_dynamic_shared_size_bytes = shared
        except Exception as exc:
            lines = [line for line in str(exc).splitlines() if "error" in line][:3] or str(exc).splitlines()[:3]
            print(f"NOT COMPILED {what} with {options}: " + " | ".join(lines), flush=True)
            continue
        compiled += group
        print(f"compiled {what} in {time.perf_counter() - t0:.1f} s (options {' '.join(options)})", flush=True)
    return compiled


# -- operands ----------------------------------------------------------------------------------

def to_bfloat16_bits(xp, values):
    """float32 values -> bfloat16 bits (round to nearest even), on numpy or cupy arrays."""
    u = xp.ascontiguousarray(values, dtype=xp.float32).view(xp.uint32)
    return ((u + (((u >> 16) & 1) + 0x7FFF)) >> 16).astype(xp.uint16)


def from_bfloat16_bits(xp, bits):
    return (bits.astype(xp.uint32) << 16).view(xp.float32)


def storage(xp, dtype: str, values):
    """Values (float64) rounded to `dtype`, as the array the kernel reads (bfloat16: uint16 bits)."""
    if dtype == "bfloat16":
        return to_bfloat16_bits(xp, values.astype(xp.float32))
    return values.astype(getattr(xp, dtype))


def as_float64(xp, dtype: str, array):
    if dtype == "bfloat16":
        return from_bfloat16_bits(xp, array).astype(xp.float64)
    return array.astype(xp.float64)


def scalar(dtype: str, value: float):
    return np.float64(value) if C_TYPES[dtype][1] == "double" else np.float32(value)


def launch(v: Variant, M: int, N: int, K: int, alpha, beta, A, B, C) -> None:
    grid, block, shared = v.geometry(M, N, K)
    v.function(grid, block, (np.int32(M), np.int32(N), np.int32(K), scalar(v.dtype, alpha), A, B,
                             scalar(v.dtype, beta), C), shared_mem=shared)


class Guarded:
    """A matrix in the middle of one allocation, between `guard` elements of `fill` on each side."""

    def __init__(self, cp, dtype: str, values: np.ndarray, guard: int, fill: float):
        host = storage(np, dtype, values.reshape(-1))
        fill_bits = storage(np, dtype, np.array([fill]))
        flat = np.concatenate([np.repeat(fill_bits, guard), host, np.repeat(fill_bits, guard)])
        self.device = cp.asarray(flat)
        self.guard, self.size, self.dtype = guard, host.size, dtype
        self.view = self.device[guard:guard + host.size]
        self.fill_bits = fill_bits

    def values(self, cp):
        return cp.asnumpy(as_float64(cp, self.dtype, self.view))

    def guard_damage(self, cp) -> int:
        flat = cp.asnumpy(self.device)
        g, f = self.guard, self.fill_bits.view(np.uint8)
        bands = np.concatenate([flat[:g], flat[g + self.size:]])
        return int(np.count_nonzero(bands.view(np.uint8).reshape(len(bands), -1) != f))


@dataclass
class Outcome:
    max_error: float = 0.0
    worst_ratio: float = 0.0        # error / bound
    unwritten: int = 0
    guard_damage: int = 0
    outside_reads: int = 0
    nondeterministic: int = 0
    failure: str = ""

    def clean(self) -> bool:
        return not (self.failure or self.worst_ratio > 1 or self.unwritten or self.guard_damage
                    or self.outside_reads or self.nondeterministic)

    def describe(self) -> str:
        if self.failure:
            return self.failure
        return (f"max err {self.max_error:.3g} (x{self.worst_ratio:.2g} of bound), unwritten {self.unwritten}, "
                f"C guard damage {self.guard_damage}, reads outside A/B {self.outside_reads}, "
                f"differs on repeat {self.nondeterministic}")


def check_one(cp, v: Variant, M: int, N: int, K: int, alpha: float, beta: float, seed: int, guard: int,
              out: Outcome) -> None:
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((M, K))
    B = rng.standard_normal((K, N))
    C0 = rng.standard_normal((M, N))
    # The reference uses the inputs as the kernel sees them (rounded to the dtype).
    Ar, Br, C0r = (as_float64(np, v.dtype, storage(np, v.dtype, x)) for x in (A, B, C0))
    ref = alpha * (Ar @ Br) + beta * C0r
    u_out, u_acc = C_TYPES[v.dtype][2], ACCUMULATOR_U[v.dtype]
    # Higham-type bound on the accumulation (tensor cores may truncate: 2x), plus the rounding
    # of the output to its type (relative, or absolute in the subnormal range).
    accumulation = 2 * (K + 2) * u_acc * (abs(alpha) * (np.abs(Ar) @ np.abs(Br)) + abs(beta) * np.abs(C0r))
    bound = accumulation + u_out * (np.abs(ref) + accumulation) + SUBNORMAL_HALF[v.dtype] + 1e-300
    dA = Guarded(cp, v.dtype, Ar, guard, 0.0)
    dB = Guarded(cp, v.dtype, Br, guard, 0.0)
    dC = Guarded(cp, v.dtype, C0r if beta else np.full((M, N), np.nan), guard, np.nan)
    launch(v, M, N, K, alpha, beta, dA.view, dB.view, dC.view)
    cp.cuda.Device().synchronize()
    got = dC.values(cp).reshape(M, N)
    first_bits = cp.asnumpy(dC.device).view(np.uint8).copy()   # bits: NaN != NaN as floats
    nan = np.isnan(got)
    out.unwritten += int(np.count_nonzero(nan)) if beta == 0 else 0
    err = np.where(nan, np.inf, np.abs(got - ref))
    if err.size:
        out.max_error = max(out.max_error, float(err.max()))
        out.worst_ratio = max(out.worst_ratio, float((err / bound).max()))
    out.guard_damage += dC.guard_damage(cp)
    # Repeat on the same inputs: a correct kernel gives the same bits.
    dC2 = Guarded(cp, v.dtype, C0r if beta else np.full((M, N), np.nan), guard, np.nan)
    launch(v, M, N, K, alpha, beta, dA.view, dB.view, dC2.view)
    cp.cuda.Device().synchronize()
    second_bits = cp.asnumpy(dC2.device).view(np.uint8)
    out.nondeterministic += int(np.count_nonzero((second_bits != first_bits).reshape(len(dC2.device), -1).any(1)))
    if guard:
        # NaN guard bands around A and B: new NaNs in C come from reads outside A or B.
        nA = Guarded(cp, v.dtype, Ar, guard, np.nan)
        nB = Guarded(cp, v.dtype, Br, guard, np.nan)
        dC3 = Guarded(cp, v.dtype, C0r if beta else np.zeros((M, N)), guard, np.nan)
        launch(v, M, N, K, alpha, beta, nA.view, nB.view, dC3.view)
        cp.cuda.Device().synchronize()
        out.outside_reads += int(np.count_nonzero(np.isnan(dC3.values(cp)) & ~nan.reshape(-1)))


def check(cp, v: Variant, shapes, guard: int) -> Outcome:
    out = Outcome()
    try:
        for i, (M, N, K) in enumerate(shapes):
            if not v.supports(M, N, K):
                continue
            for alpha, beta in ((1.0, 0.0), (2.0, -1.0)):
                check_one(cp, v, M, N, K, alpha, beta, seed=1000 + i, guard=guard, out=out)
    except Exception as exc:  # a fault leaves the context unusable: reported, and the worker ends
        out.failure = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
    return out


# -- timing ------------------------------------------------------------------------------------

def random_operands(cp, dtype: str, size: int, seed: int):
    g = cp.random.default_rng(seed)
    A = g.standard_normal((size, size), dtype=cp.float32)
    B = g.standard_normal((size, size), dtype=cp.float32)
    if dtype == "bfloat16":
        return to_bfloat16_bits(cp, A), to_bfloat16_bits(cp, B), cp.zeros((size, size), cp.uint16)
    return A.astype(dtype), B.astype(dtype), cp.zeros((size, size), dtype)


def gpu_times(cp, fn, repeat: int, warmup: int) -> list[float]:
    """Per-launch device times in ms (CUDA events around each launch), after warm-up."""
    for _ in range(warmup):
        fn()
    starts = [cp.cuda.Event() for _ in range(repeat)]
    ends = [cp.cuda.Event() for _ in range(repeat)]
    for s, e in zip(starts, ends):
        s.record()
        fn()
        e.record()
    ends[-1].synchronize()
    return [cp.cuda.get_elapsed_time(s, e) for s, e in zip(starts, ends)]


def cublas_ms(cp, dtype: str, size: int, repeat: int, warmup: int):
    """Median ms of cupy.matmul on the same dtype and shape, float32 with TF32 off; None if not offered."""
    from cupy._core import _routines_linalg as linalg

    if dtype == "bfloat16":
        return None   # numpy / CuPy have no bfloat16 matmul; compared with the float16 ceiling
    A, B, C = random_operands(cp, dtype, size, seed=7)
    f32 = np.dtype(np.float32)
    previous = linalg.get_compute_type(f32)
    linalg.set_compute_type(f32, linalg.COMPUTE_TYPE_DEFAULT)   # full FP32: no TF32 tensor cores
    try:
        return statistics.median(gpu_times(cp, lambda: cp.matmul(A, B, out=C), repeat, warmup))
    finally:
        linalg.set_compute_type(f32, previous)


def time_variant(cp, v: Variant, size: int, repeat: int, warmup: int):
    """(median ms, spread %, ratio error/bound of the last timed output)."""
    A, B, C = random_operands(cp, v.dtype, size, seed=11)
    times = gpu_times(cp, lambda: launch(v, size, size, size, 1.0, 0.0, A, B, C), repeat, warmup)
    cp.cuda.Device().synchronize()
    # The last timed launch's output against a float64 product (on the device).
    Af, Bf, Cf = (as_float64(cp, v.dtype, x) for x in (A, B, C))
    ref = Af @ Bf
    accumulation = 2 * (size + 2) * ACCUMULATOR_U[v.dtype] * (cp.abs(Af) @ cp.abs(Bf))
    bound = accumulation + C_TYPES[v.dtype][2] * (cp.abs(ref) + accumulation) + SUBNORMAL_HALF[v.dtype] + 1e-300
    ratio = float(cp.nan_to_num(cp.abs(Cf - ref) / bound, nan=float("inf")).max())
    median = statistics.median(times)
    spread = 100 * (np.percentile(times, 90) - np.percentile(times, 10)) / median
    return median, spread, ratio


# -- one fault costs one line: the work runs in a worker process, supervised --------------------
# A kernel that faults leaves a sticky CUDA error (every later call in its process fails) and
# one that hangs keeps its process busy forever: the checks and timings run in a worker (this
# script with --worker) that announces each item; the supervisor (this script) relays its
# output, and when the worker dies or stalls inside an item it prints that item's CRASH or HANG
# line and starts a fresh worker for the items left. It prints the table at the end.

MARK = "@@ladder"
LOST_EXIT = 3             # a worker whose CUDA context is unusable ends with this: a fresh one goes on
ITEM_TIMEOUT_S = 300.0    # one item (a variant's checks, or its timing) taking longer is a hang


def announce(word: str, *rest) -> None:
    print(MARK, word, *rest, flush=True)


def finished(phase: str, v: Variant, **payload) -> None:
    """The worker's END line of an item, with what the supervisor needs of it."""
    announce("END", phase, v.key, json.dumps(payload))


def supervise(command: list[str], *, item_timeout: float = ITEM_TIMEOUT_S, out=sys.stdout) -> tuple[list, dict]:
    """Run the worker `command` (given `--skip-file PATH` more) until every item is done, a
    fresh one after each that died or stalled inside an item; relay its output to `out`.
    Returns (every item's END payload, with "phase" and "key", in order; the cuBLAS ceilings
    {dtype: ms} the first worker that timed measured)."""
    import os
    import queue
    import signal
    import subprocess
    import tempfile
    import threading

    results, ceilings, done = [], {}, []
    with tempfile.TemporaryDirectory(prefix="ladder-bench-") as tmp:
        skip = Path(tmp) / "skip.json"
        while True:
            skip.write_text(json.dumps(done))
            proc = subprocess.Popen([*command, "--skip-file", str(skip)], stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True, start_new_session=True)
            lines: queue.Queue = queue.Queue()
            threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout] + [lines.put(None)],
                             daemon=True).start()
            current, stalled = None, False
            while True:
                try:
                    line = lines.get(timeout=item_timeout if current else None)
                except queue.Empty:   # inside an item, silent too long: a hang
                    os.killpg(proc.pid, signal.SIGKILL)
                    stalled = True
                    break
                if line is None:
                    break
                words = line.rstrip("\n").split(" ", 4)
                if words[0] != MARK:
                    out.write(line)
                    out.flush()
                elif words[1] == "BEGIN":
                    current = (words[2], words[3])
                elif words[1] == "END":
                    results.append({"phase": words[2], "key": words[3], **json.loads(words[4])})
                    done.append([words[2], words[3]])
                    current = None
                elif words[1] == "CEILING":
                    ceilings.setdefault(words[2], float(words[3]))
            code = proc.wait()
            if current is None:
                if code in (0, LOST_EXIT):
                    if code == 0:
                        return results, ceilings
                    continue   # its context was lost after an item it reported: a fresh one goes on
                raise SystemExit(f"ladder_bench: the worker ended outside any item (exit status {code}); "
                                 "its output is above")
            phase, key = current
            what = (f"HANG {key} ({phase}): no output for {item_timeout:g} s; killed (--item-timeout)" if stalled
                    else f"CRASH {key} ({phase}): the worker died in it ({_exit_text(code)})")
            out.write(what + "\n")
            out.flush()
            # a twin that crashes or hangs is caught; a rung that does is a failure, and is not timed
            results.append({"phase": phase, "key": key, "failure": what, "bad": phase != "twins"})
            done += [[phase, key]] + ([["time", key]] if phase == "rungs" else [])


def _exit_text(code: int) -> str:
    return f"killed by signal {-code}" if code < 0 else f"exit status {code}"


def read_skip(path: Path | None) -> set[tuple[str, str]]:
    return {tuple(item) for item in json.loads(path.read_text())} if path else set()


# -- main --------------------------------------------------------------------------------------

def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--catalog", type=Path, default=next((p for p in CATALOG_CANDIDATES if p.exists()), None),
                        metavar="PATH", help="ladder catalog (default: kernels/ladder_catalog.toml)")
    parser.add_argument("--only", metavar="TEXT", help="entries whose name contains TEXT")
    parser.add_argument("--size", type=int, default=4096, metavar="N", help="timing size N^3 (default 4096)")
    parser.add_argument("--repeat", type=int, default=30, metavar="R", help="timed launches (default 30)")
    parser.add_argument("--warmup", type=int, default=5, metavar="W", help="warm-up launches (default 5)")
    parser.add_argument("--twins", action="store_true", help="broken twins only")
    parser.add_argument("--no-timing", action="store_true", help="check only")
    parser.add_argument("--small", action="store_true", help=f"check shapes {SMALL_SHAPES} only")
    parser.add_argument("--profile", action="store_true",
                        help="only launch each selected correct variant once at SIZE^3 (for ncu)")
    parser.add_argument("--build-cubins", type=Path, metavar="DIR",
                        help="compile every selected variant with nvcc into DIR and stop (no GPU needed)")
    parser.add_argument("--cubins", type=Path, metavar="DIR", help="load the cubins of --build-cubins DIR")
    parser.add_argument("--plain", action="store_true",
                        help="no guard bands and no memory pool (for compute-sanitizer memcheck)")
    parser.add_argument("--item-timeout", type=float, default=ITEM_TIMEOUT_S, metavar="S",
                        help=f"a variant's checks or timing taking longer is a hang (default {ITEM_TIMEOUT_S:g} s)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)   # supervised (supervise)
    parser.add_argument("--skip-file", type=Path, help=argparse.SUPPRESS)          # the items done already
    args = parser.parse_args(argv)

    if args.build_cubins:
        build_cubins(load_variants(args.catalog, args.only), args.build_cubins)
        return 0
    if args.worker:
        return work(args)
    results, ceilings = supervise([sys.executable, str(Path(__file__).resolve()), *argv, "--worker"],
                                  item_timeout=args.item_timeout)
    rows = [r["row"] for r in results if r["phase"] == "time" and "row" in r]
    if rows:
        print_table(rows, ceilings, args.size)
    return 1 if any(r.get("bad") for r in results) else 0


def work(args) -> int:
    """The checks and timings, each item announced (BEGIN / END) for the supervisor; the items of
    the skip file (done by an earlier worker) are left out."""
    import cupy as cp

    skip = read_skip(args.skip_file)
    if args.plain:
        cp.cuda.set_allocator(None)
    device = cp.cuda.Device()
    props = cp.cuda.runtime.getDeviceProperties(device.id)
    if not skip:
        print(f"device: {props['name'].decode()} (sm_{props['major']}{props['minor']}, "
              f"{props['multiProcessorCount']} SMs), CuPy {cp.__version__}, CUDA runtime "
              f"{cp.cuda.runtime.runtimeGetVersion()}", flush=True)

    variants = load_variants(args.catalog, args.only)
    if args.twins:
        variants = [v for v in variants if not v.correct]
    variants = load_cubins(cp, variants, args.cubins) if args.cubins else compile_all(cp, variants)
    if args.profile:
        for v in variants:
            if (v.correct and v.dtype != "float64" and v.supports(args.size, args.size, args.size)
                    and ("profile", v.key) not in skip):
                announce("BEGIN", "profile", v.key)
                A, B, C = random_operands(cp, v.dtype, args.size, seed=11)
                launch(v, args.size, args.size, args.size, 1.0, 0.0, A, B, C)
                cp.cuda.Device().synchronize()
                print(f"launched {v.name_expression} at {args.size}^3", flush=True)
                finished("profile", v)
        return 0
    shapes = SMALL_SHAPES if args.small else CHECK_SHAPES
    guard = 0 if args.plain else GUARD

    def run_checks(selected, phase: str, title: str) -> None:
        """Check each variant, one item each; a launch that failed ends this worker (the CUDA
        context may be unusable): a fresh one checks the rest."""
        todo = [v for v in selected if (phase, v.key) not in skip]
        if not todo:
            return
        print(f"\n== {title}: float64 reference, alpha/beta (1, 0) and (2, -1), guard bands ==", flush=True)
        for v in todo:
            announce("BEGIN", phase, v.key)
            out = check(cp, v, shapes, guard)
            verdict = "clean" if out.clean() else ("FAIL" if v.correct else "caught")
            if not v.correct and out.clean():
                verdict = "NOT CAUGHT"
            print(f"{verdict:10s} {v.name:44s} {v.config:24s} {v.dtype:9s} expect {v.entry['expect']}: "
                  f"{out.describe()}", flush=True)
            finished(phase, v, verdict=verdict, bad=verdict in ("FAIL", "NOT CAUGHT"))
            if out.failure:
                print("a launch failed; the CUDA context may be unusable: a fresh process goes on", flush=True)
                sys.exit(LOST_EXIT)

    # References first and timed before the twins run: a faulting twin cannot spoil them.
    run_checks([v for v in variants if v.correct], "rungs", "checks of the rungs")
    if not (args.twins or args.no_timing):
        time_all(cp, args, variants, skip)
    run_checks([v for v in variants if not v.correct], "twins", "broken twins (each must be caught)")
    return 0


def timed_variants(variants, size: int) -> list[Variant]:
    """The correct variants timed at SIZE^3: the CUDA-core rungs in float32, the rest in every
    dtype but float64."""
    return [v for v in variants if v.correct and v.dtype != "float64" and v.supports(size, size, size)
            and not (v.dtype in ("float16", "bfloat16") and v.entry["entry"].startswith("sgemm_"))]


def time_all(cp, args, variants, skip=frozenset()) -> None:
    """Time every correct variant against cuBLAS, one item each (its row in the END line)."""
    todo = [v for v in timed_variants(variants, args.size) if ("time", v.key) not in skip]
    if not todo:
        return
    print(f"\n== timing at {args.size}^3 (alpha 1, beta 0; median of {args.repeat} after {args.warmup} warm-up;"
          f" CUDA events) ==", flush=True)
    flops = 2.0 * args.size**3
    ceilings = {}
    for dtype in ("float32", "float16"):
        ms = cublas_ms(cp, dtype, args.size, args.repeat, args.warmup)
        ceilings[dtype] = ms
        announce("CEILING", dtype, ms)
        print(f"cuBLAS {dtype}: {ms:.3f} ms, {flops / ms / 1e9:.1f} TFLOP/s", flush=True)
    ceilings["bfloat16"] = ceilings["float16"]
    for v in todo:
        announce("BEGIN", "time", v.key)
        ms, spread, ratio = time_variant(cp, v, args.size, args.repeat, args.warmup)
        tflops = flops / ms / 1e9
        percent = 100 * ceilings[v.dtype] / ms
        print(f"{v.name:26s} {v.config:24s} {v.dtype:9s} {ms:8.3f} ms {tflops:7.1f} TFLOP/s {percent:6.1f}% of cuBLAS "
              f"{'float16' if v.dtype == 'bfloat16' else v.dtype}  (p10-p90 {spread:.1f}%, last output "
              f"x{ratio:.2g} of bound{'' if ratio <= 1 else ' FAIL'})", flush=True)
        finished("time", v, row=[v.name, v.config, v.dtype, ms, tflops, percent], bad=ratio > 1)
    again = {d: cublas_ms(cp, d, args.size, args.repeat, args.warmup) for d in ("float32", "float16")}
    print("cuBLAS again (drift): " + ", ".join(f"{d} {flops / ms / 1e9:.1f} TFLOP/s" for d, ms in again.items()))


def print_table(rows, ceilings: dict, size: int, out=sys.stdout) -> None:
    """The markdown table of every timed variant (rows: [name, config, dtype, ms, TFLOP/s, % of
    cuBLAS], from whichever worker timed it) and each kind's best."""
    flops = 2.0 * size**3
    lines = ["", "| rung | config | dtype | ms | TFLOP/s | % of cuBLAS |", "| --- | --- | --- | ---: | ---: | ---: |"]
    for d in ("float32", "float16"):
        if d in ceilings:
            lines.append(f"| cuBLAS (cupy.matmul{', TF32 off' if d == 'float32' else ''}) | - | {d} | "
                         f"{ceilings[d]:.3f} | {flops / ceilings[d] / 1e9:.1f} | 100 |")
    lines += [f"| {name} | {config} | {dtype} | {ms:.3f} | {tflops:.1f} | {percent:.1f} |"
              for name, config, dtype, ms, tflops, percent in rows]
    best = {}
    for name, config, dtype, _, _, percent in rows:
        kind = "float32" if dtype == "float32" else "tensor-core"
        if kind not in best or percent > best[kind][1]:
            best[kind] = (f"{name} {config} {dtype}", percent)
    for kind, (what, percent) in best.items():
        target = 90 if kind == "float32" else 70
        lines.append(f"best {kind}: {what}: {percent:.1f}% of cuBLAS (target {target}%: "
                     f"{'met' if percent >= target else 'missed'})")
    out.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
