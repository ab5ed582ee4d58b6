"""Which device compiler builds a catalog entry: nvcc or NVRTC.

- An entry that pins one (``compiler = "nvcc"`` or ``"nvrtc"`` in its catalog) is built with it.
- An entry with device code in other files (``sources``) needs nvcc's device link.
- Otherwise the run's choice, ``--gemm-compiler auto|nvcc|nvrtc``: ``auto`` is nvcc where it is
  installed (the compiler the author's own build uses: host code, host prototypes, the
  toolkit's host headers compile as written), NVRTC where it is not.

The run's choice is kept in the environment (GEMMCHECK_COMPILER) so every process that
builds kernels for the run, pytest-xdist workers and isolated children alike, builds the
same binaries as the one that checked them.
"""

from __future__ import annotations

import os

from gemmcheck.compile import nvcc_tool

CHOICES = ("auto", "nvcc", "nvrtc")
COMPILERS = ("nvrtc", "nvcc")
ENVIRONMENT = "GEMMCHECK_COMPILER"


def requested() -> str:
    """The run's --gemm-compiler (default auto)."""
    value = os.environ.get(ENVIRONMENT, "auto")
    return value if value in CHOICES else "auto"


def request(choice: str) -> None:
    """Make `choice` the run's, for this process and the processes it starts."""
    if choice not in CHOICES:
        raise ValueError(f"unknown compiler {choice!r}; choose from {', '.join(CHOICES)}")
    os.environ[ENVIRONMENT] = choice


def installed() -> tuple[str, ...]:
    """The device compilers that can build here: NVRTC (a dependency) always, nvcc where found."""
    return COMPILERS if nvcc_tool.find() is not None else ("nvrtc",)


def resolve(pinned: str | None = None, *, linked: bool = False, run_choice: str | None = None) -> str:
    """"nvcc" or "nvrtc" for an entry that pins `pinned` (or nothing), has device code in
    other files (`linked`), in a run whose choice is `run_choice` (default: requested())."""
    if pinned:
        return pinned
    if linked:
        return "nvcc"
    choice = run_choice or requested()
    if choice != "auto":
        return choice
    return "nvcc" if nvcc_tool.find() is not None else "nvrtc"


def of(instance, run_choice: str | None = None) -> str:
    """The compiler that builds `instance` in this run."""
    spec = instance.spec
    return resolve(getattr(spec, "compiler", None), linked=bool(getattr(spec, "sources", ())), run_choice=run_choice)
