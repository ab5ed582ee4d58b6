"""The GPU backend: gemmcheck.compile.compiler builds cubins for the device's own
architecture (with nvcc or NVRTC: gemmcheck.compile.choice); CuPy loads them, launches and
moves memory."""

from __future__ import annotations

import time
from typing import Any, Iterable

import numpy as np

from gemmcheck.compile import choice, compiler
from gemmcheck.backends import device
from gemmcheck.backends import extended_launch
from gemmcheck.backends import (Backend, BackendUnavailable, KernelCompileError, KernelHang,
                                KernelLaunchError, NotSupported, launch_error, lose_context, refuse_if_lost)
from gemmcheck.contract.catalog.vocabulary import ARCH
from gemmcheck.contract.catalog import Instance
from gemmcheck.contract.launch import Launch, LaunchError, compiler_disagreement
from gemmcheck.phases import timed


class CupyBackend(Backend):
    name = "cupy"
    runs_on_cuda_device = True

    @classmethod
    def allocate_exactly(cls) -> None:
        import cupy

        # The memory pool hands out slices of big blocks: an out-of-bounds
        # access then lands inside another live allocation and memcheck is silent.
        cupy.cuda.set_allocator(None)
        cupy.cuda.set_pinned_memory_allocator(None)

    def __init__(self) -> None:
        ok, why = device.cuda_device()
        if not ok:
            raise BackendUnavailable(f"--gemm-backend cupy needs a CUDA device; {why}")
        import cupy

        self._cupy = cupy
        self._description = why
        # CuPy says "90" for compute capability 9.0
        self._capability = divmod(int(cupy.cuda.Device().compute_capability), 10)
        self.arch = f"sm_{self._capability[0]}{self._capability[1]}"
        self._modules = []  # loaded cubins stay alive as long as their kernels
        self._differs = None   # same()'s kernel, compiled at its first use
        # (source, name expression) -> kernel function, built once per session;
        # gemmcheck.compile.compiler's disk cache makes an unchanged source cost ~0 s later.
        self._kernels: dict[tuple, Any] = {}
        self._failed: dict[tuple, KernelCompileError] = {}

    def describe(self) -> str:
        return f"cupy on {self._description}"

    def prepare(self, instances: Iterable[Instance]) -> None:
        # One compile per build unit, target and compiler; instantiations of a template share it.
        todo = [i for i in instances if self._key(i) not in self._kernels and self._key(i) not in self._failed]
        for inst in todo:
            why = self._cannot_run(inst)
            if why:
                self._failed[self._key(inst)] = NotSupported(why)
        todo = [i for i in todo if self._key(i) not in self._failed]
        for unit, names in compiler.build_units_of(todo, self.arch).items():
            try:
                self._compile(unit, names)
            except KernelCompileError:
                # Compile one by one so a broken instantiation fails only its own tests.
                for name in names:
                    try:
                        self._compile(unit, [name])
                    except KernelCompileError as exc:
                        exc.source = unit[0]   # names the build test that shows the errors
                        self._failed[self._built_key(unit, name)] = exc
        for inst in todo:
            # arguments are packed as the declaration reads; a kernel the compiler built otherwise never
            # launches with bytes of another size (suites/compile/test_arguments.py shows why)
            symbol = self.__dict__.get("_symbols", {}).get(self._key(inst))
            why = symbol and compiler_disagreement(inst, symbol)
            if why:
                self._failed[self._key(inst)] = NotSupported(
                    f"{inst.id}: its arguments cannot be packed as the compiler compiled its parameters: {why}")

    def _cannot_run(self, instance: Instance) -> str | None:
        """Why this device cannot run `instance` (its catalog's arch is another GPU's), or None."""
        target = instance.spec.arch
        if target is None:
            return None
        m = ARCH.fullmatch(target)
        needs = (int(m["major"]), int(m["minor"]))
        have = self._capability
        # sm_90a / sm_100f code runs on that compute capability only; plain sm_XY on XY and later
        runs = have == needs if m["suffix"] else have >= needs
        if runs:
            return None
        return (f"{instance.id} needs {target} (its catalog's arch); this GPU is {self.arch} "
                f"(compute capability {have[0]}.{have[1]})")

    def _compile(self, unit: tuple, names: list[str]) -> None:
        """Build `names` of `unit` (compiler.build_units_of's key: source, defines, target,
        compiler, linked sources) and load the cubin: NVRTC's or nvcc's, a cubin either way."""
        source, defines, arch, device_compiler, linked = unit
        try:
            built = compiler.compile_source(source, tuple(names), arch, defines=defines, compiler=device_compiler,
                                            linked=linked)
        except compiler.CompileError as exc:
            raise KernelCompileError(str(exc)) from None
        try:
            module = self._cupy.cuda.function.Module()
            module.load(built.cubin)
            kernels = {self._built_key(unit, name): module.get_function(built.mangled[name]) for name in names}
        except Exception as exc:
            raise KernelCompileError(f"{source}: loading {', '.join(names)} for {arch} "
                                     f"failed: {type(exc).__name__}: {exc}") from None
        self._modules.append(module)
        self._kernels.update(kernels)
        self.__dict__.setdefault("_symbols", {}).update({self._built_key(unit, name): built.mangled[name] for name in names})

    def _key(self, instance: Instance) -> tuple:
        unit = (*instance.build_unit, compiler.target(instance, self.arch), choice.of(instance),
                compiler.linked_sources(instance))
        return self._built_key(unit, instance.name_expression)

    @staticmethod
    def _built_key(unit: tuple, name: str) -> tuple:
        """A build of `name` for this device: its unit (compiler.build_units_of's key) and name."""
        return (*unit, name)

    def build_error(self, instance: Instance) -> KernelCompileError | None:
        return self._failed.get(self._key(instance))

    def kernel(self, instance: Instance):
        key = self._key(instance)
        if key not in self._kernels and key not in self._failed:
            self.prepare([instance])
        if key in self._failed:
            # A fresh exception each time: re-raising the stored one would grow its traceback.
            raise type(self._failed[key])(str(self._failed[key])) from None
        return self._kernels[key]

    def to_device(self, bits: np.ndarray):
        return self._cupy.asarray(bits)

    @timed("launch")   # the copy waits for the kernel: its time shows here
    def to_host(self, buffer) -> np.ndarray:
        try:
            return self._cupy.asnumpy(buffer)
        except Exception as exc:
            if not is_sticky(exc):
                raise
            # a kernel enqueued without waiting (timing loops) faulted: the copy reports it
            error = KernelLaunchError(f"copying a result back failed: {type(exc).__name__}: {exc}")
            error.context_lost = True
            raise error from None

    def address_of(self, buffer) -> int:
        return int(buffer.data.ptr)

    def copy(self, buffer):
        out = self._cupy.empty_like(buffer)
        out.data.copy_from_device(buffer.data, buffer.nbytes)   # a plain device-to-device copy
        return out

    def same(self, a, b) -> bool:
        # One tiny kernel of our own for every dtype: CuPy's array_equal compiles an elementwise
        # and a reduction kernel per dtype on first use, ~7 s of the H200's cold ci run.
        cp = self._cupy
        if a.nbytes != b.nbytes:
            return False
        if self._differs is None:
            self._differs = cp.RawKernel(_DIFFERS, "gemmcheck_differs")
        n = a.nbytes                        # compared two bytes at a time, an odd last one alone (8-bit types)
        flag = cp.zeros(1, dtype=cp.int32)  # a memset, no kernel
        blocks = int(min(1024, max(1, -(-(n // 2) // 256))))
        self._differs((blocks,), (256,), (a, b, np.uint64(n), flag))
        return not int(self.to_host(flag)[0])   # to_host: waits, and names a fault as a launch's

    def max_dynamic_shared_bytes(self) -> int:
        return self._cupy.cuda.Device().attributes["MaxSharedMemoryPerBlockOptin"]

    def enqueue(self, instance: Instance, launch: Launch) -> None:
        """Launch without waiting (timing loops); `launch` comes from gemmcheck.contract.launch.plan."""
        refuse_if_lost(instance)   # its isolated probe crashed or hung: never in this process
        kernel = self.kernel(instance)
        if launch.shared_bytes > STATIC_SHARED_LIMIT:
            limit = self.max_dynamic_shared_bytes()
            if launch.shared_bytes > limit:
                raise launch_error(instance, launch.grid, launch.block, ValueError(
                    f"{launch.shared_bytes} bytes of dynamic shared memory; this device allows {limit}"))
            # Above 48 KB a kernel must opt in (cuFuncSetAttribute; CuPy's RawKernel does the same).
            self._allow_dynamic_shared(kernel, launch.shared_bytes)
        if launch.extended:
            # a cluster or a by-value CUtensorMap: cuLaunchKernelEx on CuPy's stream
            extended_launch.enqueue(kernel.ptr, self._cupy.cuda.get_current_stream().ptr, launch)
        else:
            kernel(launch.grid, launch.block, launch.args, shared_mem=launch.shared_bytes)

    def _allow_dynamic_shared(self, kernel, nbytes: int) -> None:
        """Raise the function's dynamic shared memory limit to `nbytes` (once per size)."""
        opted = self.__dict__.setdefault("_opted_in", {})
        if opted.get(kernel.ptr, 0) >= nbytes:
            return
        from cupy_backends.cuda.api import driver
        attribute = getattr(driver, "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES", 8)  # CUDA's value: 8
        driver.funcSetAttribute(kernel.ptr, attribute, nbytes)
        opted[kernel.ptr] = nbytes

    @timed("launch")
    def launch(self, instance: Instance, launch: Launch) -> None:
        refuse_if_lost(instance)
        try:
            self.enqueue(instance, launch)
            self._wait(instance, launch.grid, launch.block)
            self._cupy.cuda.Device().synchronize()
        except (KernelCompileError, LaunchError):
            raise   # not compiled, or a problem the catalog's tensor maps cannot describe
        except Exception as exc:
            error = self.launch_failure(instance, launch.grid, launch.block, exc)
            if error is exc:
                raise
            raise (error or launch_error(instance, launch.grid, launch.block, exc)) from None

    def launch_failure(self, instance: Instance, grid, block, exc: BaseException) -> KernelLaunchError | None:
        """What `exc`, met while launches of `instance` ran (queued with enqueue, waited for
        with wait), says of them when it leaves this process unable to launch again: a hang
        (the kernel still runs, and every later launch queues behind it) or a sticky fault, as
        a KernelLaunchError with context_lost, the loss recorded (lose_context); None for any
        other error (not proof that the kernel failed)."""
        if isinstance(exc, KernelHang):
            error = exc
        elif is_sticky(exc):
            error = exc if isinstance(exc, KernelLaunchError) else launch_error(instance, grid, block, exc)
        else:
            return None
        error.context_lost = True
        lose_context(instance.id)
        return error

    def _wait(self, instance: Instance, grid, block) -> None:
        """Wait for the launch just queued (an event recorded now: wait)."""
        done = self._cupy.cuda.Event(disable_timing=True)
        done.record()
        self.wait(instance, grid, block, done)

    def wait(self, instance: Instance, grid, block, event, *, spin_s: float = 0.0) -> None:
        """Poll `event` (recorded after launches of `instance`) until hang_timeout_s
        (--gemm-hang-timeout), so a kernel that never returns is a KernelHang instead of blocking
        the session in synchronize(). (Its CUDA context stays busy: later launches in this
        process hang too; isolate it.) `spin_s`: poll without sleeping for that long first (a
        timing loop waits no longer than synchronize() would).

        The event's status is read as such: ``Event.done`` is only "status == success", so a
        kernel that faulted looked unfinished forever and was called a hang (seen on the H200:
        broken_faults reported as hang). Any status but success and not-ready is raised."""
        from cupy_backends.cuda.api import runtime

        start = time.monotonic()
        deadline = start + self.hang_timeout_s
        pause = 1e-5
        while True:
            status = runtime.eventQuery(event.ptr)
            if status == CUDA_SUCCESS:
                return
            if status != CUDA_ERROR_NOT_READY:
                runtime.check_status(status)    # the fault, as CuPy's CUDARuntimeError
            now = time.monotonic()
            if now > deadline:
                raise KernelHang(f"{instance.id}: launch of {instance.name_expression} with grid "
                                 f"{tuple(grid)} block {tuple(block)} did not finish within "
                                 f"{self.hang_timeout_s:g} s (--gemm-hang-timeout)")
            if now - start < spin_s:
                time.sleep(0)   # lets other threads run, returns at once
                continue
            time.sleep(pause)
            pause = min(pause * 2, 1e-3)


STATIC_SHARED_LIMIT = 48 * 1024
CUDA_SUCCESS, CUDA_ERROR_NOT_READY = 0, 600   # cudaError_t values (cudaEventQuery)

# CUDA errors that leave the context unusable ("sticky": every later call in the process
# returns them): cudaError_t / CUresult share these numbers.
STICKY_ERRORS = {
    700: "cudaErrorIllegalAddress", 702: "cudaErrorLaunchTimeout", 714: "cudaErrorHardwareStackError",
    715: "cudaErrorIllegalInstruction", 716: "cudaErrorMisalignedAddress",
    717: "cudaErrorInvalidAddressSpace", 718: "cudaErrorInvalidPc", 719: "cudaErrorLaunchFailure",
}


def is_sticky(exc: BaseException) -> bool:
    """Whether a CuPy / CUDA error says the context is lost (its status, or its name in the text)."""
    if getattr(exc, "status", None) in STICKY_ERRORS:
        return True
    text = str(exc)
    names = list(STICKY_ERRORS.values())
    names += ["CUDA_ERROR_ILLEGAL_ADDRESS", "CUDA_ERROR_LAUNCH_FAILED", "CUDA_ERROR_ILLEGAL_INSTRUCTION",
              "CUDA_ERROR_MISALIGNED_ADDRESS", "CUDA_ERROR_HARDWARE_STACK_ERROR", "CUDA_ERROR_INVALID_PC",
              "CUDA_ERROR_INVALID_ADDRESS_SPACE", "CUDA_ERROR_LAUNCH_TIMEOUT"]
    return any(name in text for name in names)


_DIFFERS = r"""
extern "C" __global__ void gemmcheck_differs(const unsigned short* a, const unsigned short* b,
                                             unsigned long long nbytes, int* differs) {
    const unsigned long long n = nbytes / 2;
    if (blockIdx.x == 0 && threadIdx.x == 0 && (nbytes & 1)
        && ((const unsigned char*)a)[nbytes - 1] != ((const unsigned char*)b)[nbytes - 1])
        *differs = 1;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x)
        if (a[i] != b[i]) { *differs = 1; return; }
}
"""

