"""cpu-sim's errors: a simulated crash or hang, a kernel not simulated (gpu_only) or using what
the simulator does not model, the error for an instantiation that did not build alone, and a
built module the worker could not load (the simulator's own failure)."""

from __future__ import annotations

import re

from gemmcheck.backends import KernelCompileError, KernelHang, KernelLaunchError, NotSupported
from gemmcheck.backends.cpu_sim import build, isolate
from gemmcheck.containment.tools import ToolFailure
from gemmcheck.contract.catalog import Instance


class SimulatedCrash(KernelLaunchError):
    """The kernel faulted in the simulator (the worker died); the report says where."""


class SimulatedHang(KernelHang):
    """The kernel made no progress for hang_timeout_s; the worker was killed."""


class NotSimulated(KernelLaunchError, NotSupported):
    """The kernel is gpu_only in its catalog: it needs what the simulator does not model. Met
    at a launch, and like every NotSupported no defect of the kernel: a test that meets it
    skips, never a crash."""


# What g++ names when a kernel uses tensor cores: the WMMA API, or PTX's mma / wgmma / ldmatrix.
_TENSOR_CORES = re.compile(r"\bnvcuda::wmma\b|asm: (?:w?gmma|mma|ldmatrix|stmatrix)\.")


class NotModelled(NotSupported):
    """The kernel uses a construct the simulator does not model (g++ says which, and where).

    A build error of this one kernel only: the other kernels of its file are built without it.
    ``construct``, ``where`` (file:line, or "" when g++ could not say) and ``kernel`` name it.
    Tensor-core instructions (wmma, mma, wgmma) are named as such: every tensor-core kernel
    gets the same reason."""

    def __init__(self, kernel: str, found: "isolate.Unmodelled", log: str):
        self.kernel, self.construct = kernel, found.construct
        self.where = f"{found.file}:{found.line}" if found.file else ""
        at = f" at {self.where}" if self.where else ""
        what = f"tensor cores ({found.construct})" if _TENSOR_CORES.search(found.construct) else found.construct
        super().__init__(f"cpu-sim does not model {what} (used by kernel {kernel}{at}); declare "
                         f"the kernel gpu_only = true in its catalog entry to skip it on cpu-sim, or run it "
                         f"with --gemm-backend cupy on a GPU\n{log}")


def _build_failure(inst: Instance, exc: build.BuildError) -> KernelCompileError:
    """The error for one instantiation that did not build alone: NotModelled when g++ shows a
    construct the simulator does not model, else the compile error as g++ gave it."""
    found = isolate.unmodelled(exc.log, inst.spec.source, inst.spec.entry)
    if found is not None:
        return NotModelled(inst.spec.entry, found, str(exc))
    return KernelCompileError(str(exc))


class ModuleNotLoaded(ToolFailure):
    """The worker could not load a module g++ built (dlopen failed: a symbol the module needs
    and nothing defines). The kernel never ran: no verdict, an error of the suite."""

    tool = "the CPU simulator's worker"

    def __init__(self, inst: Instance, dlerror: str):
        symbol = re.search(r"undefined symbol: (\S+)", dlerror)
        self.symbol = symbol.group(1) if symbol else None
        needs = f"undefined symbol {self.symbol}" if self.symbol else dlerror
        super().__init__(
            f"{inst.spec.source.name}: kernel {inst.spec.entry}: the module built for {inst.id} does not load "
            f"({needs}); the kernel was not run\n{dlerror}",
            todo=(f"nothing says the kernel is wrong: if its source defines every function it calls, the "
                  f"simulator lacks {self.symbol or 'what dlopen names'}; report it with this message" if self.symbol
                  else "report it with this message"))
