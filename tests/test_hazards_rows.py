"""Kill-matrix rows on their own, end to end on the CPU simulator: a row that cannot build or
whose launches crash is that row's verdict (compile_error, crash), every other row is
judged, and no "references are clean" claim passes for a kernel whose launches never
finished. Stand-in kernels: tests/cpu_sim_kernels/does_not_compile.cu and crashes.cu."""

import json
import re
import shutil
from pathlib import Path

import pytest

from gemmcheck.backends import BackendUnavailable, create

ROOT = Path(__file__).resolve().parent.parent
KERNELS = Path(__file__).resolve().parent / "cpu_sim_kernels"

ENTRY = '''
[[kernel]]
name = "{name}"
source = "{source}"
entry = "{name}"
signature = "mnk"
policy = "tile2d"
tiles = [16]
dtypes = ["float32"]
shapes = "any"
expect = "correct"
'''
# The claims that a reference touches only its own buffers, has no race and no divergent
# barrier: on cpu-sim, these tests of suites/hazards.
CLEAN_CLAIMS = ("test_the_simulator_sees_every_barrier_reached_by_every_thread_in_references",
                "test_references_read_and_write_only_their_own_buffers",
                "test_addresssanitizer_is_silent_on_references",
                "test_references_give_identical_bits_under_every_schedule_and_no_memory_conflict")


@pytest.fixture(scope="module")
def simulator():
    try:
        create("cpu-sim")
    except BackendUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture
def hazards_run(pytester, simulator):
    """suites/hazards on a catalog of a good reference, one that does not compile and one
    whose launch crashes (both declared correct); returns (result, outcomes, reports dir)."""
    pytester.makeconftest((ROOT / "conftest.py").read_text())
    for test_file in (ROOT / "suites" / "hazards").glob("test_*.py"):
        # Renamed: this session may have imported suites/hazards' modules under their names.
        shutil.copy(test_file, pytester.path / test_file.name.replace("test_", "test_rows_", 1))
    catalog = ENTRY.format(name="matmul_tiled_guarded", source=ROOT / "kernels" / "reference_tiled.cu")
    catalog += ENTRY.format(name="does_not_compile", source=KERNELS / "does_not_compile.cu")
    catalog += ENTRY.format(name="crashes", source=KERNELS / "crashes.cu")
    (pytester.path / "cat.toml").write_text(catalog)
    result = pytester.runpytest("-v", "-rs", "-p", "no:cacheprovider", "--gemm-catalog", "cat.toml",
                                "--gemm-backend", "cpu-sim", "--gemm-hang-timeout", "30")
    outcomes = {}   # test name[id] -> its last outcome word in the verbose lines
    for line in result.outlines:
        m = re.match(r"\S+\.py::(\S+) (PASSED|FAILED|ERROR|SKIPPED)", line)
        if m:
            outcomes[m.group(1)] = m.group(2)
    return result, outcomes, pytester.path / "reports"


def test_a_row_that_cannot_build_or_crashes_is_its_verdict_and_the_good_row_is_judged(hazards_run):
    result, outcomes, reports = hazards_run
    assert outcomes["test_kill_matrix[matmul_tiled_guarded-float32-TILE16]"] == "PASSED", result.outlines
    assert outcomes["test_kill_matrix[does_not_compile-float32-TILE16]"] == "FAILED"
    assert outcomes["test_kill_matrix[crashes-float32-TILE16]"] == "FAILED"
    rows = {r["instance"]: r for r in json.loads((reports / "kill_matrix.json").read_text())["rows"]}
    assert rows["matmul_tiled_guarded-float32-TILE16"]["status"] == "pass"
    assert rows["does_not_compile-float32-TILE16"]["plain"]["diagnosis"]["defect"] == "compile_error"
    assert rows["crashes-float32-TILE16"]["plain"]["diagnosis"]["defect"] == "crash"
    verdicts = {r["instance"]: r for r in json.loads((reports / "verdicts.json").read_text())["instances"]}
    assert set(verdicts["does_not_compile-float32-TILE16"]["defects"]) == {"compile_error"}
    assert set(verdicts["crashes-float32-TILE16"]["defects"]) == {"crash"}
    assert verdicts["matmul_tiled_guarded-float32-TILE16"]["status"] == "as_expected"


def test_no_clean_claim_passes_for_a_reference_whose_launches_never_finished(hazards_run):
    result, outcomes, _ = hazards_run
    for broken in ("does_not_compile", "crashes"):
        claims = {c: outcomes[f"{c}[{broken}-float32-TILE16]"] for c in CLEAN_CLAIMS}
        assert "PASSED" not in claims.values(), claims
        # The row's own test fails with the verdict; the claims skip, naming it: one failure.
        assert set(claims.values()) == {"SKIPPED"}, claims
        assert outcomes[f"test_kill_matrix[{broken}-float32-TILE16]"] == "FAILED"
        assert any(f"not checked: {broken}-float32-TILE16" in line
                   and f"see test_rows_kill_matrix.py::test_kill_matrix[{broken}-float32-TILE16]" in line
                   for line in result.outlines), "\n".join(result.outlines)
    # ... while the good reference's claims are checked and pass.
    assert all(outcomes[f"{c}[matmul_tiled_guarded-float32-TILE16]"] == "PASSED" for c in CLEAN_CLAIMS)
