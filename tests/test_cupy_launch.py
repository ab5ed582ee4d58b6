"""The cupy backend launches what plan() gives, opting in to dynamic shared memory above
48 KB. Checked with a stand-in for CuPy: the GPU run itself is the integrator's; the last test
(marker gpu) runs kernels that declare size_t, int64_t and __half parameters on a GPU."""

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from gemmcheck.contract import catalog
from gemmcheck import backends
from gemmcheck.backends import KernelHang, KernelLaunchError
from gemmcheck.backends.cupy_backend import CupyBackend
from gemmcheck.contract.launch import Launch


class FakeKernel:
    def __init__(self):
        self.calls, self.ptr, self.max_dynamic_shared_size_bytes = [], 0xC0DE, 0

    def __call__(self, grid, block, args, shared_mem=0):
        self.calls.append((grid, block, args, shared_mem))


@pytest.fixture
def gpu(monkeypatch):
    backend = object.__new__(CupyBackend)   # no device here: only the launch logic
    device = SimpleNamespace(attributes={"MaxSharedMemoryPerBlockOptin": 232448}, synchronize=lambda: None)
    from cupy_backends.cuda.api import runtime
    statuses = {"now": 0}                                          # cudaEventQuery: 0, the launch finished
    monkeypatch.setattr(runtime, "eventQuery", lambda ptr: statuses["now"])
    finished = SimpleNamespace(record=lambda: None, ptr=0xE7)
    backend._cupy = SimpleNamespace(cuda=SimpleNamespace(Device=lambda: device, Event=lambda **kw: finished))
    backend._failed, backend._kernels, backend.arch = {}, {}, "sm_90"
    backend.hang_timeout_s = 10.0
    spec = next(s for s in catalog.load(catalog.BUILTIN) if s.name == "matmul_tiled_guarded")
    instance = spec.instances()[0]
    kernel = FakeKernel()
    backend._kernels[backend._key(instance)] = kernel
    backend.statuses = statuses
    return backend, instance, kernel


def test_a_launch_passes_grid_block_arguments_and_shared_memory(gpu):
    backend, instance, kernel = gpu
    backend.launch(instance, Launch((2, 3, 1), (16, 16, 1), 1024, ("a", "b", "c", 1, 2, 3)))
    assert kernel.calls == [((2, 3, 1), (16, 16, 1), ("a", "b", "c", 1, 2, 3), 1024)]
    assert kernel.max_dynamic_shared_size_bytes == 0      # under 48 KB: no opt-in


def test_above_48k_the_kernel_opts_in_and_above_the_device_limit_it_is_refused(gpu, monkeypatch):
    from cupy_backends.cuda.api import driver
    backend, instance, kernel = gpu
    monkeypatch.setattr(driver, "funcSetAttribute", lambda f, attribute, value: setattr(
        kernel, "max_dynamic_shared_size_bytes", value) if (f, attribute) == (kernel.ptr, 8) else None)
    backend.launch(instance, Launch((1, 1, 1), (32, 1, 1), 100_000, ()))
    assert kernel.max_dynamic_shared_size_bytes == 100_000 and kernel.calls[-1][3] == 100_000
    with pytest.raises(KernelLaunchError, match="232449 bytes of dynamic shared memory; this device allows 232448"):
        backend.launch(instance, Launch((1, 1, 1), (32, 1, 1), 232_449, ()))
    assert backends.contexts_lost() == []               # a refusal leaves the context whole


def test_a_kernel_that_faults_is_a_launch_error_that_says_the_context_is_lost_not_a_hang(gpu):
    from gemmcheck.backends.cupy_backend import is_sticky
    backend, instance, kernel = gpu
    backend.statuses["now"] = 700            # cudaErrorIllegalAddress, as the event query reports it
    with pytest.raises(KernelLaunchError, match="cudaErrorIllegalAddress") as caught:
        backend.launch(instance, Launch((1, 1, 1), (32, 1, 1), 0, ()))
    assert not isinstance(caught.value, KernelHang) and is_sticky(caught.value)
    assert backends.contexts_lost() == [instance.id]     # the session then leaves without CuPy's teardown


def test_a_kernel_still_running_at_the_timeout_is_a_hang(gpu):
    backend, instance, kernel = gpu
    backend.statuses["now"], backend.hang_timeout_s = 600, 0.05   # cudaErrorNotReady, for ever
    with pytest.raises(KernelHang, match="did not finish within 0.05 s"):
        backend.launch(instance, Launch((1, 1, 1), (32, 1, 1), 0, ()))
    assert backends.contexts_lost() == [instance.id]


def test_prepare_compiles_each_build_unit_once_and_a_broken_instantiation_alone(monkeypatch):
    from gemmcheck.compile import compiler

    backend = object.__new__(CupyBackend)   # no device here: only the grouping
    backend._failed, backend._kernels, backend.arch = {}, {}, "sm_90"
    instances = [i for s in catalog.load(catalog.BUILTIN) for i in s.instances()]
    broken = instances[1]
    side_by_side, compiles = [], []

    def compile_unit(unit, names):
        source, defines = unit[:2]
        compiles.append((source, defines, tuple(names)))
        if broken.name_expression in names and broken.build_unit == (source, defines):
            raise backends.KernelCompileError("no")
    monkeypatch.setattr(compiler, "build_many", lambda jobs: side_by_side.extend(jobs))
    monkeypatch.setattr(backend, "_compile", compile_unit)

    backend.prepare(instances + instances[:5])   # repeats are built once
    units = {i.build_unit for i in instances}
    assert len(side_by_side) == len(units) and len(units) < len(instances)
    first = {}
    for source, defines, names in compiles:
        first.setdefault((source, defines), names)
    assert sorted((*unit, n) for unit, names in first.items() for n in names) == \
        sorted({(*i.build_unit, i.name_expression) for i in instances})
    retried = [c for c in compiles if c[:2] == broken.build_unit][1:]   # the broken unit only, one at a time
    assert len(compiles) == len(units) + len(retried)
    assert sorted(names for *_, names in retried) == sorted({(i.name_expression,) for i in instances
                                                             if i.build_unit == broken.build_unit})
    assert list(backend._failed) == [backend._key(broken)]


@pytest.mark.parametrize("storage", ["uint8", "uint16", "uint32", "uint64"])   # uint8: 8-bit floats, int8
def test_on_a_gpu_same_tells_every_differing_element_and_copy_is_a_copy(storage):
    """Backend.same / copy on the device (the harness compares A, B and C there before reading
    anything back): every single changed element, at either end or inside, is seen."""
    import numpy as np

    from gemmcheck.backends import device
    ok, why = device.cuda_device()
    if not ok:
        pytest.skip(why)
    gpu = CupyBackend()
    bits = np.arange(3 * 1024 * 1024 + 7, dtype=storage)      # odd length, more than one grid
    a = gpu.to_device(bits)
    b = gpu.copy(a)
    assert b is not a and b.data.ptr != a.data.ptr and gpu.same(a, b)
    for where in (0, 1, len(bits) // 2, len(bits) - 1):
        changed = bits.copy()
        changed[where] ^= 1
        assert not gpu.same(a, gpu.to_device(changed)), where
    assert not gpu.same(a, gpu.to_device(bits[:-1]))
    b[0] = 0
    assert gpu.same(a, gpu.to_device(bits))                   # the copy is its own buffer


# -- arguments in the types the kernel declares, on the GPU ---------------------------------

DECLARED_TYPES = Path(__file__).resolve().parent / "data" / "declared_types" / "catalog.toml"


@pytest.mark.gpu
@pytest.mark.parametrize("instance", [i for s in catalog.load(DECLARED_TYPES) for i in s.instances()],
                         ids=lambda i: i.id)
def test_on_the_gpu_each_argument_arrives_in_the_type_the_kernel_declares(instance):
    """size_t sizes, int64_t leading dimensions, unsigned and long long sizes, a __half or
    __nv_bfloat16 alpha and beta: the kernel computes alpha A B + beta C0 exactly. (Before,
    every size went as an int and alpha/beta as a float: the float16 and bfloat16 tutorial
    kernels read 2 of the float's 4 bytes, alpha 2.0 as 0, and wrote wrong values.)"""
    from gemmcheck.backends import device
    from gemmcheck.contract import dtypes as dt
    from gemmcheck.problems.harness import run_problem
    from gemmcheck.problems.problem import Problem

    ok, why = device.cuda_device()
    if not ok:
        pytest.skip(why)
    scaling = (2, -1) if "beta" in instance.spec.roles else (1, 0)
    problem = Problem(37, 45, 29, instance.dtype, "exact", 5, *scaling)
    A, B, *C0 = problem.operands()
    run = run_problem(CupyBackend(), instance, problem)
    product = scaling[0] * (A @ B) + (scaling[1] * C0[0] if C0 else 0)
    expected = dt.from_bits(dt.to_bits(product, instance.dt), instance.dt).astype(np.float64)
    assert run.launched and not run.unwritten.any() and run.guard_damage == {"A": 0, "B": 0, "C": 0}
    np.testing.assert_array_equal(run.C.astype(np.float64), expected)
    assert np.abs(expected).sum() > 0


def test_an_instantiation_nvrtc_compiled_with_other_parameter_types_is_never_launched(monkeypatch):
    """prepare compares what plan() packs with the symbol NVRTC built: a disagreement (a misread
    declaration) makes the instantiation NotSupported, never a launch with bytes of another size."""
    from gemmcheck.compile import compiler

    backend = object.__new__(CupyBackend)
    backend.arch, backend._failed, backend._kernels = "sm_90", {}, {}
    by_id = {i.id: i for s in catalog.load(DECLARED_TYPES) for i in s.instances()}
    half, size_t = by_id["tutorial-float16"], by_id["size_t_dims-float32"]
    symbols = {half.name_expression: "_Z13gemm_tutorialI6__halfEvmmmT_PKS1_mS3_mS1_PS1_m",   # NVRTC's own
               size_t.name_expression: "_Z11gemm_size_tIfEvPKT_S2_PS0_iii"}   # as if M, N, K were int

    def compile_unit(unit, names):
        for name in names:
            key = backend._built_key(unit, name)
            backend._kernels[key] = FakeKernel()
            backend.__dict__.setdefault("_symbols", {})[key] = symbols[name]
    monkeypatch.setattr(compiler, "build_many", lambda jobs: None)
    monkeypatch.setattr(backend, "_compile", compile_unit)
    backend.prepare([half, size_t])
    assert backend.build_error(half) is None
    assert isinstance(backend.build_error(size_t), backends.NotSupported)
    assert str(backend.build_error(size_t)) == (
        "size_t_dims-float32: its arguments cannot be packed as the compiler compiled its parameters: parameter 4 (M) is "
        "packed as unsigned long (integer, 8 bytes); the compiler's void gemm_size_t<float>(float const*, float "
        "const*, float*, int, int, int) declares int (integer, 4 bytes)")


BATCHED = Path(__file__).resolve().parent.parent / "examples" / "batched" / "catalog.toml"


@pytest.mark.gpu
@pytest.mark.parametrize("name, broadcast", [("gemm_batched", ""), ("gemm_batched", "B"),
                                             ("gemm_batched_separate_d", ""), ("sgemm_batched_magma_style", "A")])
def test_on_the_gpu_a_pointer_array_batch_gets_each_products_device_address(name, broadcast):
    """The arrays hold device pointers (CuPy's data.ptr) a guard band apart, one per product (the
    same one for a broadcast operand); every product exact and the arrays left as given."""
    from gemmcheck.backends import device
    from gemmcheck.judge.oracle import judge
    from gemmcheck.problems.harness import run_problem
    from gemmcheck.problems.problem import Problem

    ok, why = device.cuda_device()
    if not ok:
        pytest.skip(why)
    instance = next(s for s in catalog.load(BATCHED) if s.name == name).instances()[0]
    problem = Problem(37, 45, 29, instance.types, "exact", 5, 2, -1, batch=3, broadcast=broadcast)
    run = run_problem(CupyBackend(), instance, problem)
    judgement = judge(run, *problem.operands()[:2], exact=True, problem=problem)
    assert judgement.ok, judgement.message()
    assert all(run.inputs_changed[f"{X}_array"] == 0 for X in instance.pointer_arrays)
