"""The GPU backend: gemmcheck.compiler builds cubins with NVRTC for the device's
own architecture; CuPy loads them, launches and moves memory."""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable, Sequence

import numpy as np

from gemmcheck import compiler, device
from gemmcheck.backends import (Backend, BackendUnavailable, KernelCompileError,
                                launch_error)
from gemmcheck.catalog import Instance
from gemmcheck.phases import timed


class CupyBackend(Backend):
    name = "cupy"

    def __init__(self) -> None:
        ok, why = device.cuda_device()
        if not ok:
            raise BackendUnavailable(f"--gemm-backend cupy needs a CUDA device; {why}")
        import cupy

        self._cupy = cupy
        self._description = why
        major, minor = cupy.cuda.Device().compute_capability
        self.arch = f"sm_{major}{minor}"
        self._modules = []  # loaded cubins stay alive as long as their kernels
        # (source, name expression) -> kernel function, built once per session;
        # gemmcheck.compiler's disk cache makes an unchanged source cost ~0 s later.
        self._kernels: dict[tuple, Any] = {}
        self._failed: dict[tuple, KernelCompileError] = {}

    def describe(self) -> str:
        return f"cupy on {self._description}"

    def prepare(self, instances: Iterable[Instance]) -> None:
        by_source: dict[Any, set[str]] = defaultdict(set)
        for inst in instances:
            key = (inst.spec.source, inst.name_expression)
            if key not in self._kernels and key not in self._failed:
                by_source[inst.spec.source].add(inst.name_expression)
        for source, names in by_source.items():
            try:
                self._compile(source, sorted(names))
            except KernelCompileError:
                # Compile one by one so a broken instantiation fails only its own tests.
                for name in sorted(names):
                    try:
                        self._compile(source, [name])
                    except KernelCompileError as exc:
                        self._failed[(source, name)] = exc

    def _compile(self, source, names: list[str]) -> None:
        try:
            built = compiler.compile_source(source, tuple(names), self.arch)
            module = self._cupy.cuda.function.Module()
            module.load(built.cubin)
            kernels = {(source, name): module.get_function(built.mangled[name]) for name in names}
        except Exception as exc:
            raise KernelCompileError(f"{source.name}: compiling {', '.join(names)} for {self.arch} "
                                     f"failed: {type(exc).__name__}: {exc}") from None
        self._modules.append(module)
        self._kernels.update(kernels)

    def kernel(self, instance: Instance):
        key = (instance.spec.source, instance.name_expression)
        if key not in self._kernels and key not in self._failed:
            self.prepare([instance])
        if key in self._failed:
            raise self._failed[key]
        return self._kernels[key]

    def to_device(self, bits: np.ndarray):
        return self._cupy.asarray(bits)

    @timed("launch")   # the copy waits for the kernel: its time shows here
    def to_host(self, buffer) -> np.ndarray:
        return self._cupy.asnumpy(buffer)

    @timed("launch")
    def launch(self, instance: Instance, grid, block, args: Sequence[Any]) -> None:
        kernel = self.kernel(instance)
        converted = tuple(np.int32(a) if isinstance(a, (int, np.integer)) else a for a in args)
        try:
            kernel(tuple(grid), tuple(block), converted)
            self._cupy.cuda.Device().synchronize()
        except Exception as exc:
            raise launch_error(instance, grid, block, exc) from None
