"""The cupy backend launches what plan() gives, opting in to dynamic shared memory above
48 KB. Checked with a stand-in for CuPy: the GPU run itself is the integrator's."""

from types import SimpleNamespace

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
    backend._failed, backend._kernels = {}, {}
    backend.hang_timeout_s = 10.0
    spec = next(s for s in catalog.load(catalog.BUILTIN) if s.name == "matmul_tiled_guarded")
    instance = spec.instances()[0]
    kernel = FakeKernel()
    backend._kernels[(spec.source, instance.defines, instance.name_expression)] = kernel
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
