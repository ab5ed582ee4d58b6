#!/usr/bin/env python3
"""Nsight Compute's profile of one catalog instantiation at SIZE^3, and of cuBLAS beside it.

    python scripts/ncu_profile.py kernels/ladder_catalog.toml ladder_wgmma-float16-128x256x64-s4-c1x2
    python scripts/ncu_profile.py CATALOG ID --size 4096 --set full --cublas --export reports/ncu

ID is the instantiation's test id (``kernel-dtype-config``, as pytest prints it). One launch
at SIZE x SIZE x SIZE runs in an isolated child (gemmcheck.judge.isolation: the suite's own
launch path, tensor maps and clusters included, as ``--gemm-ncu`` measures DRAM bytes) under
``ncu --set SET``; ncu's report is printed as ncu prints it. ``--cublas`` adds one
``cupy.matmul`` of the same size and dtype under the same options. ncu locks the clocks
(base clock), so durations are longer than the performance suite's; read ratios, pipes and
stalls, not absolute times. Needs ncu on PATH and a GPU.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gemmcheck.backends import device  # noqa: E402
from gemmcheck.contract import catalog  # noqa: E402
from gemmcheck.perf import ncu  # noqa: E402

TIMEOUT_S = 600.0

CUBLAS = """
import sys, numpy as np, cupy as cp
from gemmcheck.contract import dtypes
n, d = int(sys.argv[1]), dtypes.get(sys.argv[2])
rng = np.random.default_rng(0)
# raw bits up, then viewed as the dtype, as the performance suite's cuBLAS sees its operands
a, b = (cp.asarray(rng.standard_normal((n, n)).astype(d.numpy).view(d.storage)).view(d.numpy) for _ in range(2))
c = cp.empty((n, n), d.storage).view(d.numpy)
cp.cuda.Device().synchronize()
cp.matmul(a, b, out=c)
cp.cuda.Device().synchronize()
"""


def ncu_options(exe: str, ncu_set: str, entry: str | None, export: Path | None) -> list[str]:
    """ncu with section set `ncu_set`, profiling the first launch of kernel `entry` (or the
    first launch of all, when None), its report kept in `export` if given."""
    options = [exe, "--set", ncu_set]
    options += ncu.first_launch_of(entry) if entry else ["--launch-count", "1", "--target-processes", "all"]
    if export:
        options += ["--export", str(export), "--force-overwrite"]
    return options


def find(path: Path, wanted: str):
    instances = [i for spec in catalog.load(path) for i in spec.instances()]
    for instance in instances:
        if instance.id == wanted:
            return instance
    near = [i.id for i in instances if wanted.split("-")[0] in i.id] or [i.id for i in instances]
    sys.exit(f"ncu_profile: {path} has no instantiation {wanted!r}; it has: {', '.join(near[:12])}")


def print_report(exe: str, export: Path | None) -> None:
    """ncu prints nothing of a profile it exports: read the report back, as it would have printed
    it (none when the launch crashed or hung before ncu wrote one)."""
    if export is not None and Path(f"{export}.ncu-rep").is_file():
        subprocess.run([exe, "--import", f"{export}.ncu-rep", "--page", "details"], timeout=TIMEOUT_S)


def profile_instance(instance, size: int, options: list[str], backend: str = "cupy") -> int:
    """ncu over one launch in an isolated child: a kernel that crashes or hangs costs its one
    line (and exit status 1), never this process (cuBLAS is profiled after it all the same)."""
    from gemmcheck.judge import isolation

    outcome, children = ncu.launch_once(instance, size, options, backend=backend, timeout=TIMEOUT_S)
    for child in children:
        print("\n".join(line for line in child.lines if not line.startswith(isolation.MARK)), flush=True)
    if outcome.status != "ok":
        print(f"ncu_profile: the launch {outcome.status}: {outcome.message}", file=sys.stderr)
        return 1
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("catalog", type=Path)
    parser.add_argument("id", help="the instantiation's test id, e.g. ladder_wgmma-float16-128x256x64-s4-c1x2")
    parser.add_argument("--size", type=int, default=4096, help="N of the N^3 problem (default 4096)")
    parser.add_argument("--set", dest="ncu_set", default="full", help="ncu's section set (default full)")
    parser.add_argument("--cublas", action="store_true", help="also profile cupy.matmul at that size and dtype")
    parser.add_argument("--export", type=Path, metavar="DIR",
                        help="also keep ncu's .ncu-rep files there (open them in Nsight Compute)")
    parser.add_argument("--backend", default="cupy", help=argparse.SUPPRESS)   # cpu-sim: the tests' dry run
    args = parser.parse_args(argv)
    exe = device.tool("ncu")
    if exe is None:
        sys.exit("ncu_profile: needs ncu (Nsight Compute) on PATH; not found")
    instance = find(args.catalog, args.id)
    if args.export:
        args.export.mkdir(parents=True, exist_ok=True)
    export = args.export / instance.id if args.export else None
    rc = profile_instance(instance, args.size, ncu_options(exe, args.ncu_set, instance.spec.entry, export),
                          args.backend)
    print_report(exe, export)
    if args.cublas:
        # Host-made inputs: the matmul is the process's first kernel, so ncu profiles it.
        export = args.export / f"cublas-{instance.dtype}-{args.size}" if args.export else None
        command = ncu_options(exe, args.ncu_set, None, export) + [sys.executable, "-c", CUBLAS, str(args.size),
                                                                  instance.dtype]
        rc |= subprocess.run(command, timeout=TIMEOUT_S).returncode
        print_report(exe, export)
    return rc


if __name__ == "__main__":
    sys.exit(main())
