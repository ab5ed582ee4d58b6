#!/usr/bin/env python3
"""Check and time rung 10 of the reference ladder (ladder_wgmma_fp8: e4m3 wgmma + TMA, a scale
per tensor, bfloat16 D) on one Hopper GPU, against the vendor library's fp8 GEMM in the same run.

The kernel goes through gemmcheck's own path: the catalog entry (kernels/ladder_catalog.toml),
the GPU backend's compile (gemmcheck.backends.cupy_backend), launch.plan for the arguments and
tensor maps, cuLaunchKernelEx for the cluster. For each config:
- check at a few shapes (ragged M, N and K too) against a float64 product of the same e4m3
  values times the scales; the error is reported against a generous allowance for the bfloat16
  output and the tensor cores' 14-bit partial sums, 2^-8 |D| + 2^-10 (|sA A| |sB B|): a sanity
  check only, the suite's oracle is the judge (pytest suites/ --gemm-catalog=ladder);
- time SIZE^3 (default 4096): the median of REPEAT launches after WARMUP, CUDA events around each.
The ceiling, timed the same way on the same data, is cuBLASLt's e4m3 GEMM with per-tensor
scales into bfloat16: through gemmcheck.perf.library (nvmath-python's cuBLASLt bindings), the
performance suite's own ceiling, where this tree has it; else nvmath.linalg.advanced.matmul on
PyTorch float8 tensors; else none (said so). cuBLAS HGEMM (cupy.matmul, float16) is printed
beside it for scale.

    python3 scripts/ladder_fp8_bench.py                    # every config, check and time
    python3 scripts/ladder_fp8_bench.py --only p2 --size 8192
    python3 scripts/ladder_fp8_bench.py --no-timing        # check only
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from gemmcheck.contract import dtypes as dt  # noqa: E402
from gemmcheck.contract import launch as launching  # noqa: E402
from gemmcheck.contract.catalog import loading  # noqa: E402

ENTRY = "ladder_wgmma_fp8"
CHECK_SHAPES = ((1, 1, 16), (33, 17, 16), (129, 131, 80), (256, 256, 256), (300, 136, 528), (512, 384, 1024))
SCALES = (0.75, 1.25)      # sA, sB: neither 1, so a scale left out shows
E4M3, BF16 = dt.get("float8_e4m3fn"), dt.get("bfloat16")


def operands(cp, M: int, N: int, K: int, seed: int):
    """e4m3 A (M x K, row-major) and B stored column-major (N rows of K), as device bits, and their
    float64 values; normal draws times 8, so products span several binades."""
    rng = np.random.default_rng(seed)
    A = (rng.standard_normal((M, K)) * 8).astype(E4M3.numpy)
    Bt = (rng.standard_normal((N, K)) * 8).astype(E4M3.numpy)
    return (cp.asarray(A.view(np.uint8)), cp.asarray(Bt.view(np.uint8)),
            A.astype(np.float64), Bt.astype(np.float64))


def values(cp, M, N, K, dA, dB, dD, scales):
    return {"M": M, "N": N, "K": K, "A": dA, "B": dB, "D": dD, "scale_A": scales[0], "scale_B": scales[1]}


def check(cp, backend, instance, M: int, N: int, K: int) -> str:
    """One launch at M x N x K: the worst error as a share of 2^-8 |D| + 2^-10 P (<= 1 expected)."""
    dA, dB, A, Bt = operands(cp, M, N, K, seed=M * 7 + N * 3 + K)
    dD = cp.full(M * N, 0x7FC1, dtype=cp.uint16)   # a NaN no result is: unwritten elements show
    scales = [cp.asarray(np.array([s], np.float32)) for s in SCALES]
    backend.launch(instance, launching.plan(instance, values(cp, M, N, K, dA, dB, dD, scales)))
    D = cp.asnumpy(dD).view(BF16.numpy).astype(np.float64).reshape(M, N)
    s = SCALES[0] * SCALES[1]
    ref = (A @ Bt.T) * s
    allowed = 2.0**-8 * np.abs(ref) + 2.0**-10 * (np.abs(A) @ np.abs(Bt.T)) * s + 2.0**-133
    unwritten = int(np.isnan(D).sum())
    ratio = float(np.max(np.abs(D - ref) / allowed)) if not unwritten else float("inf")
    verdict = "ok" if ratio <= 1 else "FAIL"
    return f"{verdict:4s} {M}x{N}x{K}: worst error {ratio:.3f} of the allowance, {unwritten} unwritten"


def median_ms(cp, launch_once, repeat: int, warmup: int) -> float:
    for _ in range(warmup):
        launch_once()
    times = []
    for _ in range(repeat):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        launch_once()
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop))
    return statistics.median(times)


def vendor_launcher(types, size: int, dA, dB, dD):
    """(a function launching the vendor's fp8 GEMM of `types` on the same bits, its name), or
    (None, why)."""
    try:
        from gemmcheck.perf import library   # the performance suite's ceiling, where this tree has it
    except ImportError:
        library = None
    if library is not None:
        gemm, label = library.planned(types, size, size, size)
        return ((lambda: gemm.launch(dA, dB, dD)) if gemm else None), label
    try:
        import nvmath
        import torch

        a = torch.as_tensor(dA, device="cuda").view(torch.float8_e4m3fn).reshape(size, size)
        b = torch.as_tensor(dB, device="cuda").view(torch.float8_e4m3fn).reshape(size, size).T   # K-major B
        mm = nvmath.linalg.advanced.Matmul(a, b, options={"result_type": nvmath.CudaDataType.CUDA_R_16BF},
                                           quantization_scales={"a": 1.0, "b": 1.0})
        mm.plan()
    except Exception as exc:   # ImportError, or a GEMM nvmath refuses
        return None, f"no ceiling: no gemmcheck.perf.library here, and nvmath-python on PyTorch failed ({exc})"
    return mm.execute, "cuBLASLt e4m3e4m3bf16 scale_A=tensor scale_B=tensor (nvmath.linalg.advanced.Matmul)"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--catalog", type=Path, default=ROOT / "kernels" / "ladder_catalog.toml", metavar="PATH")
    parser.add_argument("--only", metavar="TEXT", help="configs whose name contains TEXT")
    parser.add_argument("--size", type=int, default=4096, metavar="N", help="timing size N^3 (default 4096)")
    parser.add_argument("--repeat", type=int, default=50, metavar="R", help="timed launches (default 50)")
    parser.add_argument("--warmup", type=int, default=10, metavar="W", help="warm-up launches (default 10)")
    parser.add_argument("--no-timing", action="store_true", help="check only")
    args = parser.parse_args(argv)

    import cupy as cp
    from gemmcheck.backends.cupy_backend import CupyBackend

    backend = CupyBackend()
    print(backend.describe(), flush=True)
    spec = next(s for s in loading.load(args.catalog) if s.name == ENTRY)
    instances = [i for i in spec.instances() if not args.only or args.only in i.config]
    failed = False
    for instance in instances:
        print(f"\n{instance.id}: {instance.name_expression}", flush=True)
        for M, N, K in CHECK_SHAPES:
            if instance.supports(M, N, K):
                line = check(cp, backend, instance, M, N, K)
                failed |= line.startswith("FAIL")
                print("  " + line, flush=True)
    if args.no_timing:
        return int(failed)

    n, flops = args.size, 2.0 * args.size**3
    dA, dB, _, _ = operands(cp, n, n, n, seed=1)
    dD = cp.zeros(n * n, dtype=cp.uint16)
    scales = [cp.asarray(np.array([s], np.float32)) for s in SCALES]
    print(f"\n== {n}^3: median of {args.repeat} launches after {args.warmup}, CUDA events ==", flush=True)
    vendor, label = vendor_launcher(instances[0].types, n, dA, dB, dD)
    ceiling = median_ms(cp, vendor, args.repeat, args.warmup) if vendor else None
    print(f"{label}: " + (f"{ceiling:.3f} ms, {flops / ceiling / 1e9:.1f} TFLOP/s" if ceiling else "not timed"))
    half = cp.random.default_rng(2).standard_normal((n, n), dtype=cp.float32).astype(cp.float16)
    hgemm = median_ms(cp, lambda: cp.matmul(half, half), args.repeat, args.warmup)
    print(f"cuBLAS HGEMM (cupy.matmul, float16, for scale): {hgemm:.3f} ms, {flops / hgemm / 1e9:.1f} TFLOP/s")
    for instance in instances:
        planned = launching.plan(instance, values(cp, n, n, n, dA, dB, dD, scales))
        ms = median_ms(cp, lambda: backend.enqueue(instance, planned), args.repeat, args.warmup)
        share = f", {100 * ceiling / ms:.1f} % of the vendor's fp8 GEMM" if ceiling else ""
        print(f"{instance.config:26s} {ms:.3f} ms, {flops / ms / 1e9:.1f} TFLOP/s{share}", flush=True)
    return int(failed)


if __name__ == "__main__":
    sys.exit(main())
