#!/usr/bin/env python3
"""Do nvcc and NVRTC judge the kernels alike? Each catalog judged once per compiler, compared.

    python scripts/compare_compilers.py [--catalog C ...] [-n WORKERS] [--out DIR] [-- PYTEST ARGS]

For each catalog (default: every catalog of the repository, `CATALOGS`; a comma-separated group
of catalogs whose kernel names differ runs in one session, as one "catalog") and each compiler,
``pytest suites/ --ignore=suites/performance --gemm-catalog=C --gemm-compiler=X`` writes its
verdicts.json and kill_matrix.json under DIR/X/<catalog>; then the two runs of a catalog are
compared as scripts/compare_runs.py compares two runs: each instantiation's verdict and status,
which defects each detector saw in each test (over its problems: hypothesis chooses a failing
kernel's recorded problems afresh in each run), the kill matrix's rows. Each catalog runs
alone: kernel names repeat across catalogs (``good`` in two of them). The performance suite is
left out: its timings differ from run to run whatever the compiler.

A catalog built to fail (``bad``, ``blas_conventions``, ``faults_at_shapes``) fails with both
compilers: what is compared is how, not whether. Exit 0 when every catalog's runs agree, 1 with
the differences listed, 2 when a compiler is not installed here (the line says which).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from compare_runs import compare  # noqa: E402

COMPILERS = ("nvcc", "nvrtc")
# Every catalog of the repository, each judged on its own.
CATALOGS = ("builtin", "ladder", "examples/catalog.toml", "examples/blas_conventions.toml",
            "examples/mixed/catalog.toml", "examples/published/catalog.toml",
            "examples/published/project/catalog.toml", "examples/hopper/catalog.toml",
            "examples/multifile/catalog.toml", "examples/batched/catalog.toml", "examples/epilogue/catalog.toml",
            "examples/grouped/catalog.toml", "examples/splitk/catalog.toml", "examples/bad/catalog.toml", "tests/data/declared_types/catalog.toml",
            "tests/data/trust_sim/catalog.toml", "tests/data/include_dirs/catalog.toml",
            "tests/data/nested_headers/catalog.toml", "tests/data/compiled_sizes/catalog.toml",
            "tests/data/scalar_pointers/catalog.toml", "tests/data/struct_params/catalog.toml",
            "tests/data/faults_at_shapes/catalog.toml",
            "tests/data/perf_faults/catalog.toml")
_SUMMARY = re.compile(r"^=*\s*(\d+ (passed|failed|error|skipped).*?)\s*=*$")


def slug(catalog: str) -> str:
    """A directory name for a catalog: ``examples_mixed`` for examples/mixed/catalog.toml (a
    group's: its members' joined by ``+``)."""
    names = [re.sub(r"[^A-Za-z0-9]+", "_", c.removesuffix(".toml").removesuffix("/catalog")).strip("_")
             for c in catalog.split(",")]
    joined = "+".join(names)
    # a file name holds 255 bytes: a long group goes by its first member and how many more
    return joined if len(joined) <= 120 else f"{names[0]}+{len(names) - 1}_more"


def judge(catalog: str, compiler: str, out: Path, workers: str, extra: list[str]) -> str:
    """One run of the suites on `catalog` with `compiler`; its verdicts and kill matrix in `out`.
    Returns pytest's summary line."""
    out.mkdir(parents=True, exist_ok=True)
    matrix = ROOT / "reports" / "kill_matrix.json"
    matrix.unlink(missing_ok=True)   # the run's own, or none
    cmd = [sys.executable, "-m", "pytest", "suites/", "--ignore=suites/performance", "-q", "-p", "no:cacheprovider",
           *(f"--gemm-catalog={c}" for c in catalog.split(",")), f"--gemm-compiler={compiler}",
           f"--gemm-verdicts={out / 'verdicts.json'}",
           *(["-n", workers] if workers != "0" else ["-p", "no:xdist"]), *extra]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, errors="replace")
    if matrix.is_file():
        shutil.copy(matrix, out / "kill_matrix.json")
    lines = [m[1] for m in map(_SUMMARY.match, done.stdout.splitlines()) if m]
    return lines[-1] if lines else f"no summary (exit {done.returncode}): {done.stderr.strip()[-300:]}"


def _alike(runs: dict, lines: list[str]) -> str:
    """``57 of 57 instantiations judged alike``: each run's instantiations, less those whose
    verdict or status differ."""
    judged = set()
    for run in runs.values():
        path = run / "verdicts.json"
        if path.is_file():
            judged |= {i["instance"] for i in json.loads(path.read_text())["instances"]}
    differ = sum(line.startswith("instance ") for line in lines)
    return f"{len(judged) - differ} of {len(judged)} instantiations judged alike"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--catalog", action="append",
                        help="a catalog to judge, or a comma-separated group judged in one session "
                             "(repeat; default: every catalog, each alone)")
    parser.add_argument("-n", dest="workers", default="2", help="pytest-xdist workers per run (0: none; default 2)")
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "compilers")
    parser.add_argument("pytest_args", nargs="*", help="after --: more arguments for every pytest run")
    args = parser.parse_args(argv)
    from gemmcheck.compile import choice

    missing = [c for c in COMPILERS if c not in choice.installed()]
    if missing:
        print(f"compare_compilers: {' and '.join(missing)} is not installed here (pip install nvidia-cuda-nvcc, "
              "or put a CUDA toolkit's nvcc on PATH)")
        return 2
    differences = 0
    for catalog in args.catalog or CATALOGS:
        runs = {c: args.out / c / slug(catalog) for c in COMPILERS}
        summaries = {c: judge(catalog, c, runs[c], args.workers, args.pytest_args) for c in COMPILERS}
        judged = [c for c in COMPILERS if (runs[c] / "verdicts.json").is_file()]
        if not judged:   # every kernel skipped here (GPU-only kernels on the simulator)
            print(f"{catalog}: nvcc {summaries['nvcc']}; nvrtc {summaries['nvrtc']}; no instantiation judged by "
                  "either run")
            continue
        lines = compare(runs["nvcc"], runs["nvrtc"], labels=COMPILERS, per_test=True)
        differences += bool(lines)
        print(f"{catalog}: nvcc {summaries['nvcc']}; nvrtc {summaries['nvrtc']}; {_alike(runs, lines)}; "
              + (f"{len(lines)} difference(s)" if lines else "the runs agree"))
        for line in lines:
            print(f"    {line}")
    print(f"{differences} catalog(s) judged differently" if differences else "every catalog judged alike")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
