"""Where kernels run. A backend compiles catalog instantiations, moves raw bits
to and from its memory, and launches; everything else (guards, poison,
signatures, verdicts) is shared and lives above it (gemmcheck.harness).
"""

from __future__ import annotations

import abc
from typing import Any, Iterable

import numpy as np

from gemmcheck.catalog import Instance
from gemmcheck.launch import Launch


class BackendUnavailable(RuntimeError):
    """The backend cannot run here; the message says what is missing."""


class KernelCompileError(RuntimeError):
    """A kernel source failed to compile; carries the compiler log."""


class KernelLaunchError(RuntimeError):
    """A launch failed; names the kernel, its instantiation and the launch shape."""


class Backend(abc.ABC):
    """The few operations a place that runs kernels must provide."""

    name: str = "abstract"

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

    @abc.abstractmethod
    def launch(self, instance: Instance, launch: "Launch") -> None:
        """Run one planned launch (gemmcheck.launch.plan) and wait for it.

        Raises KernelLaunchError naming the kernel, instantiation and shape.
        """


def launch_error(instance: Instance, grid, block, exc: BaseException) -> KernelLaunchError:
    return KernelLaunchError(
        f"{instance.id}: launch of {instance.name_expression} with grid {tuple(grid)} "
        f"block {tuple(block)} failed: {type(exc).__name__}: {exc}")


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
    from gemmcheck import device

    return "cupy" if device.cuda_device()[0] else "cpu-sim"


def create(name: str) -> Backend:
    """The backend called `name`; 'auto' is the GPU when there is one, else the CPU simulator.

    Raises BackendUnavailable with one clear reason when it cannot run here.
    """
    import importlib

    module, cls = REGISTRY[resolve(name)].split(":")
    return getattr(importlib.import_module(module), cls)()
