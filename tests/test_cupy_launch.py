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
    backend.clear_shared_memory = False      # its kernel needs the real CuPy (test below)
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


LEAVE = r"""
extern "C" __global__ void leave(unsigned int bits, int words) {
    extern __shared__ unsigned int shared[];
    volatile unsigned int *s = shared;
    for (int i = threadIdx.x; i < words; i += blockDim.x) s[i] = bits;
}
extern "C" __global__ void peek(unsigned int *out, int words) {
    extern __shared__ unsigned int shared[];
    volatile unsigned int *s = shared;
    for (int i = threadIdx.x; i < words; i += blockDim.x) out[blockIdx.x * words + i] = s[i];
}
"""


@pytest.mark.gpu
def test_launches_start_from_zeroed_shared_memory():
    """What a kernel finds in shared memory it did not write is what earlier kernels left (here
    a NaN pattern); the backend zeroes every SM's shared memory before a launch."""
    import cupy
    import numpy as np

    backend = backends.create("cupy")
    module = cupy.RawModule(code=LEAVE)
    leave, peek = module.get_function("leave"), module.get_function("peek")
    words, blocks = 12 * 1024, 4 * cupy.cuda.Device().attributes["MultiProcessorCount"]   # 48 KB a block
    out = cupy.zeros(blocks * words, dtype=cupy.uint32)

    def left_behind(clear: bool):
        leave((blocks,), (1024,), (np.uint32(0x7FC0DEAD), np.int32(words)), shared_mem=4 * words)
        if clear:
            backend._clear_shared()
        peek((blocks,), (1024,), (out, np.int32(words)), shared_mem=4 * words)
        cupy.cuda.Device().synchronize()
        return out.get()

    assert (left_behind(clear=False) == 0x7FC0DEAD).any()   # the hazard is real on this card
    assert not left_behind(clear=True).any()
