"""The oracle on the GPU (gemmcheck.arrays.use_device): large problems judged with CuPy give
the judgement numpy gives, for correct and for broken outputs, exact and bounded."""

import numpy as np
import pytest

from gemmcheck import arrays
from gemmcheck.contract import catalog
from gemmcheck.contract import dtypes as dt
from gemmcheck.judge import oracle
from gemmcheck.problems.harness import Run
from gemmcheck.problems.problem import Problem

SHAPE = (2053, 2049, 96)          # M N >= 2^22: judged on the GPU once the device is in use


def _instance(dtype, tile=16):
    return next(i for s in catalog.load_all(catalog.resolve(["builtin"])) for i in s.instances()
                if s.name == "matmul_tiled" and i.dtype == dtype and i.tile == tile)


def _run(inst, problem, C_values, *, unwritten=None, C_bits=None):
    M, N, K = problem.M, problem.N, problem.K
    bits = dt.to_bits(C_values, inst.dt) if C_bits is None else C_bits
    *_, C0 = problem.operands() if problem.reads_C else (None,)
    mask = np.zeros((M, N), bool) if unwritten is None else unwritten
    return Run(inst, M, N, K, (1, 1, 1), (1, 1, 1), bits, mask, alpha=problem.alpha, beta=problem.beta,
               C0=C0 if problem.reads_C else None)


def test_small_problems_and_a_host_session_stay_on_numpy():
    assert arrays.module_for(*SHAPE) is np          # the device is not in use by default
    arrays.use_device(True)
    try:
        assert arrays.module_for(64, 64, 4096) is np  # small: the host's passes take ms
    finally:
        arrays.use_device(False)


@pytest.fixture
def both(request):
    cupy = pytest.importorskip("cupy")
    try:
        cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        pytest.skip(f"no CUDA device: {exc}")

    def judge_both(run, A, B, exact):
        arrays.use_device(False)
        host = oracle.judge(run, A, B, exact=exact)
        arrays.use_device(True)
        try:
            assert arrays.module_for(run.M, run.N, run.K) is cupy
            device = oracle.judge(run, A, B, exact=exact)
        finally:
            arrays.use_device(False)
        return host, device
    return judge_both


def _same_findings(host, device, names=("failing", "unwritten")):
    """The same findings and masks (and, for exact judgements, the same expected values and error
    map: a bounded one's reference differs in its last bits, summed in another order)."""
    assert [(f.defect, f.detector, f.count, f.where, f.details) for f in host.findings] == \
           [(f.defect, f.detector, f.count, f.where, f.details) for f in device.findings]
    for name in names:
        assert np.array_equal(getattr(host, name), getattr(device, name), equal_nan=True), name
        assert isinstance(getattr(device, name), np.ndarray)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
@pytest.mark.parametrize("scaling", [(1, 0), (2, -1)], ids=["plain", "alpha2-beta-1"])
def test_exact_judgements_agree_for_a_correct_and_a_broken_output(both, dtype, scaling):
    inst = _instance(dtype)
    problem = Problem(*SHAPE, dtype, "exact", 5, alpha=scaling[0], beta=scaling[1])
    A, B, *C0 = problem.operands()
    exact = scaling[0] * (A @ B) + (scaling[1] * C0[0] if C0 else 0)
    host, device = both(_run(inst, problem, exact), A, B, True)
    assert host.ok and device.ok and host.ratio == device.ratio == 0
    broken = exact.copy()
    row = broken[17, 3:40]
    broken[17, 3:40] = np.where(row == 0, 1.0, -row)   # wrong values in one row (in any dtype)
    broken[900:, -1] = np.nan                   # NaN where none belongs
    unwritten = np.zeros(broken.shape, bool)
    unwritten[5:9, 100:140] = True              # never written
    bits = dt.to_bits(broken, inst.dt)
    bits[unwritten] = inst.dt.poison_bits if not C0 else dt.to_bits(C0[0], inst.dt)[unwritten]
    bits[1000, 7] = inst.dt.guard_bits          # a NaN with the guard payload
    host, device = both(_run(inst, problem, None, unwritten=unwritten, C_bits=bits), A, B, True)
    assert not host.ok and np.isinf(host.ratio) and np.isinf(device.ratio)
    assert {f.detector for f in host.findings} == {"poison", "nan-inf-pattern", "exact-bits"}
    _same_findings(host, device, ("failing", "unwritten", "expected", "bound", "error_map"))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_bounded_judgements_agree_for_a_correct_and_a_perturbed_output(both, dtype):
    inst = _instance(dtype)
    problem = Problem(*SHAPE, dtype, "normal", 9)
    A, B = problem.operands()
    C = dt.from_bits(dt.to_bits(A @ B, inst.dt), inst.dt).astype(np.float64)
    host, device = both(_run(inst, problem, C), A, B, False)
    assert host.ok and device.ok
    # float64 references summed in different orders: the ratio agrees to far below the bound
    assert abs(host.ratio - device.ratio) < 1e-6
    far = C.copy()
    far[::97, ::89] += 0.5                       # far outside any bound at K = 96
    host, device = both(_run(inst, problem, far), A, B, False)
    assert not host.ok and host.findings[0].count == far[::97, ::89].size
    _same_findings(host, device)
