"""Where kernels run. A backend compiles catalog instantiations, moves raw bits
to and from its memory, and launches; everything else (guards, poison,
signatures, verdicts) is shared and lives above it (gemmcheck.problems.harness).

Extras a backend may offer beyond `Backend` are declared as capabilities
(runtime-checkable protocols below) and asked for by capability, never by the
backend's name: `offers(backend, ExploresSchedules)`. The CPU simulator offers
all of them; the GPU backend none. Where a backend runs kernels is declared on
`Backend` itself (`runs_on_cuda_device`, `simulated`), also never read off its name.
"""

from __future__ import annotations

import abc
import sys
from typing import Any, ContextManager, Iterable, Protocol, Sequence, runtime_checkable

import numpy as np

from gemmcheck.contract.catalog import Instance
from gemmcheck.contract.launch import Launch


class BackendUnavailable(RuntimeError):
    """The backend cannot run here; the message says what is missing."""


class KernelCompileError(RuntimeError):
    """A kernel source failed to compile; carries the compiler log."""


class NotSupported(KernelCompileError):
    """The backend cannot run this instantiation: it uses what the backend does not model.
    No defect of the kernel: its tests skip with the message's first line, which names the
    construct and where the kernel uses it."""


class KernelLaunchError(RuntimeError):
    """A launch failed; names the kernel, its instantiation and the launch shape.

    `context_lost`: True when the launch left this process unable to launch again (a
    sticky CUDA error such as cudaErrorIllegalAddress, or a kernel still running after
    a hang on the GPU); every later launch in the process would fail or wait."""

    context_lost: bool = False


class KernelHang(KernelLaunchError):
    """A launch did not finish within the backend's hang_timeout_s."""


DEFAULT_HANG_TIMEOUT_S = 10.0   # --gemm-hang-timeout's default


# Instantiations this process must not launch, Instance.id -> (status, why): an isolated
# probe saw them crash or hang (gemmcheck.pytest_plugin.build_plugin sets it). A backend whose launches
# share this process's CUDA context calls refuse_if_lost() before every launch.
_REFUSED: dict[str, tuple[str, str]] = {}


def refuse(instance_id: str, status: str, why: str) -> None:
    _REFUSED[instance_id] = (status, why)


def clear_refusals() -> None:
    _REFUSED.clear()


def refused(instance_id: str) -> bool:
    """Whether an isolated probe saw this instantiation crash or hang."""
    return instance_id in _REFUSED


def refuse_if_lost(instance: Instance) -> None:
    """Raise KernelHang / KernelLaunchError, without launching, for a refused instantiation."""
    if instance.id in _REFUSED:
        status, why = _REFUSED[instance.id]
        error = KernelHang if status == "hang" else KernelLaunchError
        raise error(f"{instance.id}: not launched in this process: {why}")


# Launches after which this process's CUDA context is unusable: a hang (its kernel still
# spins there, so freeing memory at exit waits for it forever) or a sticky fault (every
# CUDA call fails; CuPy's destructors print a traceback each at exit).
_CONTEXT_LOST: list[str] = []


def lose_context(instance_id: str) -> None:
    if not _CONTEXT_LOST:
        sys.unraisablehook = dropping_cuda_errors(sys.unraisablehook)
    _CONTEXT_LOST.append(instance_id)


def dropping_cuda_errors(hook):
    """`hook` (a sys.unraisablehook) less the CUDA errors of objects freed after the context
    was lost: every CUDA call fails then, CuPy's destructors' too, and each would print a
    traceback (pytest's unraisable-exception warning, after the summary) about a loss the run
    has reported already. Any other unraisable exception still reaches `hook`."""
    def hook_after_loss(unraisable) -> None:
        if type(unraisable.exc_value).__name__ == "CUDARuntimeError":
            return
        hook(unraisable)
    return hook_after_loss


def contexts_lost() -> list[str]:
    """Instance ids whose launches in this process left its CUDA context unusable."""
    return list(_CONTEXT_LOST)


class Backend(abc.ABC):
    """The few operations a place that runs kernels must provide."""

    name: str = "abstract"
    # A launch that takes longer is a hang (KernelHang); set from --gemm-hang-timeout.
    hang_timeout_s: float = DEFAULT_HANG_TIMEOUT_S
    # Kernels run on a CUDA device and buffers live there: the oracle may compute there
    # (--gemm-oracle gpu), launches can be timed, the simulator is a second opinion.
    runs_on_cuda_device: bool = False
    # Kernels run on the CPU simulator: GPU-only tests skip, no per-GPU workers or probes.
    simulated: bool = False

    @classmethod
    def allocate_exactly(cls) -> None:
        """From now on in this process, give each buffer exactly its size, so that an address
        checker (compute-sanitizer memcheck) sees a read past its end instead of a read into
        a neighbour in the same pooled block. Nothing to do for a backend without a pool."""

    @abc.abstractmethod
    def describe(self) -> str:
        """One line for the pytest header: what runs the kernels."""

    @abc.abstractmethod
    def prepare(self, instances: Iterable[Instance]) -> None:
        """Compile every instantiation in `instances` (once; later calls reuse the build)."""

    def build_error(self, instance: Instance) -> "KernelCompileError | None":
        """Why `instance` did not build (after prepare), or None. Backends that build override it."""
        return None

    @abc.abstractmethod
    def to_device(self, bits: np.ndarray) -> Any:
        """Copy a 1-D array of raw bits to the backend's memory; return its buffer."""

    @abc.abstractmethod
    def to_host(self, buffer: Any) -> np.ndarray:
        """Copy a buffer back as a numpy array of the same raw bits."""

    def copy(self, buffer: Any) -> Any:
        """A new buffer holding `buffer`'s bits (the GPU copies on the device)."""
        return self.to_device(self.to_host(buffer))

    def same(self, a: Any, b: Any) -> bool:
        """Whether two buffers hold the same bits (the GPU compares on the device: nothing
        is copied back)."""
        return bool(np.array_equal(self.to_host(a), self.to_host(b)))

    def address_of(self, buffer: Any) -> int:
        """The address a kernel sees for `buffer` (a buffer or a view of one: its first element):
        what an array of pointers holds (a pointer-array batch)."""
        raise NotImplementedError(f"the {self.name} backend gives no buffer addresses (pointer-array batches)")

    @abc.abstractmethod
    def launch(self, instance: Instance, launch: "Launch") -> None:
        """Run one planned launch (gemmcheck.contract.launch.plan) and wait for it.

        Raises KernelLaunchError naming the kernel, instantiation and shape.
        """


def launch_error(instance: Instance, grid, block, exc: BaseException) -> KernelLaunchError:
    return KernelLaunchError(
        f"{instance.id}: launch of {instance.name_expression} with grid {tuple(grid)} "
        f"block {tuple(block)} failed: {type(exc).__name__}: {exc}")


# -- capabilities: what a backend may offer beyond Backend ------------------------------------

@runtime_checkable
class ExploresSchedules(Protocol):
    """Runs each launch under several thread schedules (names such as forward, reverse,
    shuffle-<seed>, lockstep) and keeps the first schedule's buffers."""

    schedules: tuple[str, ...]

    def using_schedules(self, schedules: Sequence[str]) -> ContextManager: ...


@runtime_checkable
class ReportsLaunches(Protocol):
    """Leaves a report of what it observed (shared-memory conflicts, barriers, schedule
    dependence, crash or hang) in `last_launch_report` after every launch, failed or not."""

    last_launch_report: Any


@runtime_checkable
class ChecksAddresses(Protocol):
    """Launches once on exact-size buffers under an address checker (AddressSanitizer)."""

    def address_check(self, instance: Instance, A: np.ndarray, B: np.ndarray, *, batch: int = 1, groups: tuple = (),
                      masked: int = 0) -> Any: ...


@runtime_checkable
class TracksShared(Protocol):
    """Tracks shared-memory accesses per barrier interval; `track_shared = False` skips it."""

    track_shared: bool


def offers(backend, capability) -> bool:
    """Whether `backend` (an instance, a Backend class or a registered name) offers `capability`."""
    if isinstance(backend, str):
        backend = backend_class(backend)
    if isinstance(backend, type):
        members = [m for m in dir(capability) if not m.startswith("_")]
        members += list(getattr(capability, "__annotations__", {}))
        return all(hasattr(backend, m) for m in members)
    return isinstance(backend, capability)


# name -> "module:Class"; imported only when chosen, so a missing toolchain for one
# backend never breaks another.
REGISTRY = {
    "cupy": "gemmcheck.backends.cupy_backend:CupyBackend",
    "cpu-sim": "gemmcheck.backends.cpu_sim:CpuSimBackend",
}
CHOICES = ("auto", *REGISTRY)


def resolve(name: str) -> str:
    """The backend `name` stands for here: 'auto' is cupy with a CUDA device, else cpu-sim."""
    if name != "auto":
        return name
    from gemmcheck.backends import device

    return "cupy" if device.cuda_device()[0] else "cpu-sim"


def backend_class(name: str) -> type:
    """The Backend class `name` stands for (imports its module; builds nothing)."""
    import importlib

    module, cls = REGISTRY[resolve(name)].split(":")
    return getattr(importlib.import_module(module), cls)


def create(name: str, *, hang_timeout_s: float | None = None) -> Backend:
    """The backend called `name`; 'auto' is the GPU when there is one, else the CPU simulator.
    `hang_timeout_s` (default DEFAULT_HANG_TIMEOUT_S): a launch that takes longer is a hang.

    Raises BackendUnavailable with one clear reason when it cannot run here.
    """
    backend = backend_class(name)()
    if hang_timeout_s is not None:
        backend.hang_timeout_s = float(hang_timeout_s)
    return backend
