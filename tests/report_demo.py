"""A tiny suite with known defects, run on numpy stand-ins (no GPU), that produces allure
results the way the real suites do: used by tests/test_report.py, and to try the HTML
build and its screenshots on a machine without a GPU:

    python tests/report_demo.py OUT_DIR        # writes OUT_DIR/allure-results, OUT_DIR/verdicts.json
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

TESTS = Path(__file__).resolve().parent

CONFTEST = f"""
import sys
sys.path.insert(0, {str(TESTS)!r})
import numpy as np
import pytest
from gemmcheck.contract import dtypes as dt
from fakes import NumpyBackend


def by_grid(instance, grid, block, A, B, C, M, N, K, k_limit=None):
    # Each block writes its TILE x TILE patch of C: a floor grid leaves the ragged edge unwritten,
    # and a kernel that drops the last partial phase sums only the first floor(K/TILE)*TILE terms.
    d = instance.dt
    a = dt.from_bits(A, d).reshape(M, K).astype(np.float64)
    b = dt.from_bits(B, d).reshape(K, N).astype(np.float64)
    kk = K if k_limit is None else k_limit(K, instance.tile)
    full = dt.to_bits(a[:, :kk] @ b[:kk, :], d)
    c = C.reshape(M, N)
    rows, cols = min(M, grid[1] * block[1]), min(N, grid[0] * block[0])
    c[:rows, :cols] = full[:rows, :cols]


def floor_phases(instance, grid, block, A, B, C, M, N, K):
    by_grid(instance, grid, block, A, B, C, M, N, K, k_limit=lambda K, T: K // T * T)


def unguarded_store(instance, grid, block, A, B, C, M, N, K):
    by_grid(instance, grid, block, A, B, C, M, N, K)
    C.base[C.base.size - 5] = 0   # one element past C's end, into its back guard


@pytest.fixture(scope="session")
def backend():
    return NumpyBackend({{"matmul_tiled_guarded": by_grid, "broken_floor_phases": floor_phases,
                         "broken_unguarded_store": unguarded_store}})
"""

VALUES = '''
"""A value check the way the oracle does it: error / bound per element, evidence on failure."""
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, strategies as st

from gemmcheck import report
from gemmcheck.problems.harness import run_once
from gemmcheck.verdict import Defect, Finding, Verdict

pytestmark = pytest.mark.instances(lambda i: i.spec.name in (
    "matmul_tiled_guarded", "broken_floor_grid", "broken_floor_phases"))


def judge(run, A, B):
    exact = A @ B
    u = run.instance.dt.unit_roundoff
    bound = (run.K * u / (1 - run.K * u)) * (np.abs(A) @ np.abs(B)) + u * np.abs(exact) + 1e-300
    with np.errstate(invalid="ignore"):
        error_map = np.abs(run.C.astype(np.float64) - exact) / bound
    error_map[run.unwritten | np.isnan(error_map)] = np.inf
    findings = []
    if run.unwritten.any():
        findings.append(Finding(Defect.UNWRITTEN_OUTPUT, "poison", "poison survived",
                                int(run.unwritten.sum())))
    over = (error_map > 1) & ~run.unwritten
    if over.any():
        i, j = map(int, np.argwhere(over)[0])
        findings.append(Finding(Defect.WRONG_VALUES, "exact-bits", "error above bound",
                                int(over.sum()), (i, j)))
    text = (f"{run.instance.id} ({run.instance.name_expression}), M{run.M}xN{run.N}xK{run.K}: "
            f"{int(np.count_nonzero(error_map > 1))} of {error_map.size} elements break the bound")
    return SimpleNamespace(findings=findings, error_map=error_map, ok=not findings,
                           ratio=float(np.max(error_map)),
                           message=lambda: report.defect_message([f.defect for f in findings], text))


def check(backend, instance, verdicts, M, N, K, seed=0):
    rng = np.random.default_rng(seed)
    A, B = rng.integers(-4, 5, (M, K)).astype(np.float64), rng.integers(-4, 5, (K, N)).astype(np.float64)
    run = run_once(backend, instance, A, B)
    j = judge(run, A, B)
    verdicts.record(Verdict.for_instance(instance, f"M{M}xN{N}xK{K}", j.findings))
    if not j.ok:
        report.attach_judgement(j, run)
        pytest.fail(j.message(), pytrace=False)


def test_ragged_edges_are_exact(backend, any_kernel, verdicts):
    check(backend, any_kernel, verdicts, 37, 45, 29)


@given(M=st.integers(1, 40), N=st.integers(1, 40), K=st.integers(1, 40))
def test_any_shape_is_exact(backend, any_kernel, gemm, M, N, K):
    check(backend, any_kernel, gemm.verdicts, M, N, K)


def test_needs_a_gpu():
    pytest.skip("no CUDA device: the demo has none")
'''

BOUNDS = '''
"""Guard bands: an out-of-bounds write changes a canary."""
import numpy as np
import pytest

from gemmcheck import report
from gemmcheck.problems.harness import run_once
from gemmcheck.verdict import Defect, Finding, Verdict

pytestmark = pytest.mark.instances(lambda i: i.spec.name in ("matmul_tiled_guarded",
                                                             "broken_unguarded_store"))


def test_guard_bands_are_intact(backend, any_kernel, verdicts):
    A = np.ones((20, 12)); B = np.ones((12, 18))
    run = run_once(backend, any_kernel, A, B)
    damage = {k: v for k, v in run.guard_damage.items() if v}
    findings = [Finding(Defect.OUT_OF_BOUNDS_WRITE, "guard-bands", f"guard of {k} changed", v)
                for k, v in damage.items()]
    verdicts.record(Verdict.for_instance(any_kernel, "M20xN18xK12", findings))
    if findings:
        report.attach_sanitizer_log("memcheck", "========= Invalid __global__ write of size 4 bytes\\n"
                                    "=========     at broken_unguarded_store+0x1d0 (demo log)")
    assert not findings, report.defect_message(Defect.OUT_OF_BOUNDS_WRITE,
                                               f"{any_kernel.id}: guard damage {damage}")
'''

KERNELS = "matmul_tiled_guarded,broken_floor_grid,broken_floor_phases,broken_unguarded_store"


def write_suite(root: Path) -> Path:
    """Write the demo suite under ``root``; return it."""
    root = Path(root)
    (root / "suites" / "correctness").mkdir(parents=True, exist_ok=True)
    (root / "suites" / "hazards").mkdir(parents=True, exist_ok=True)
    (root / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")
    # The project's conftest first: it loads the plugin when gemmcheck is not installed.
    project_conftest = (Path(__file__).resolve().parent.parent / "conftest.py").read_text()
    (root / "conftest.py").write_text(project_conftest + "\n" + textwrap.dedent(CONFTEST))
    (root / "suites" / "correctness" / "test_values.py").write_text(VALUES)
    (root / "suites" / "hazards" / "test_bounds.py").write_text(BOUNDS)
    return root


def args() -> list[str]:
    return ["--gemm-kernels", KERNELS, "--gemm-tiles", "8", "--gemm-dtypes", "float32"]


def main(out: str) -> int:
    root = write_suite(Path(out).resolve())
    cmd = [sys.executable, "-m", "pytest", "-q", str(root / "suites"), *args()]
    return subprocess.run(cmd, cwd=root).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
