"""The environment of a pytest or python run a test starts: this tree first on the path, then
whatever the caller had there (where the project's dependencies may live, e.g. wheels unpacked
beside an image's Python); and such a run of the suites on one catalog (judge_catalog)."""

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def child_env(*first: Path | str, **extra: str) -> dict[str, str]:
    """os.environ with `first` (default: the repository root) before the caller's PYTHONPATH."""
    path = [str(p) for p in (first or (ROOT,))] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path), **extra}


def judge_catalog(catalog: Path | str, out: Path, *suites: str, timeout: int = 900):
    """(the finished run, its verdicts' instance rows): pytest run in a child on the
    CPU simulator over `suites` (default: correctness and hazards) with only `catalog`, its
    verdicts and allure results under `out`."""
    import json
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--gemm-backend=cpu-sim",
                          f"--gemm-catalog={catalog}", f"--gemm-verdicts={out / 'verdicts.json'}",
                          f"--alluredir={out / 'allure'}", *(suites or ("suites/correctness", "suites/hazards"))],
                         cwd=ROOT, env=child_env(), capture_output=True, text=True, timeout=timeout)
    verdicts = out / "verdicts.json"
    return run, json.loads(verdicts.read_text())["instances"] if verdicts.exists() else []
