"""Isolation: a kernel that faults is a CRASH and one that never returns a HANG, each in its
own child process (on cpu-sim, the simulator's worker process); this process's CUDA context
(or the simulator) stays healthy and the session goes on."""

import pytest

from gemmcheck.judge import kill_matrix
from gemmcheck.verdict.detectors import Detector
from gemmcheck.problems.harness import run_once
from gemmcheck.judge.kill_matrix import declares
from gemmcheck.judge.oracle import judge
from gemmcheck.problems.problem import Problem
from gemmcheck.verdict import Defect


@pytest.mark.instances.with_args(declares("crash"))
def test_a_faulting_kernel_is_a_crash(matrix_row):
    assert matrix_row.plain.diagnosis.defect == Defect.CRASH, matrix_row.plain.diagnosis.explanation
    assert matrix_row.plain.found(detector=Detector.ISOLATION, defect=Defect.CRASH)


@pytest.mark.instances.with_args(declares("hang"))
def test_a_kernel_that_never_returns_is_a_hang(matrix_row, request):
    assert matrix_row.plain.diagnosis.defect == Defect.HANG, matrix_row.plain.diagnosis.explanation
    assert matrix_row.seconds < request.config.getoption("gemm_hang_timeout") + 60


@pytest.mark.instances.with_args(lambda i: i.spec.expect in kill_matrix.ISOLATED)
def test_this_process_runs_kernels_correctly_after_an_isolated_crash_or_hang(matrix_row, backend, gemm):
    assert matrix_row.plain.unfinished is not None, matrix_row.plain.diagnosis.explanation
    reference = next((i for i in gemm.instances("reference") if i.supports(33, 17, 65)), None)
    if reference is None:
        pytest.skip("no reference kernel in the selection supports a 33x17x65 problem")
    problem = Problem(33, 17, 65, reference.types, "exact", 11)
    A, B = problem.operands()
    judgement = judge(run_once(backend, reference, A, B), A, B, exact=True, problem=problem)
    assert judgement.ok, judgement.message()
