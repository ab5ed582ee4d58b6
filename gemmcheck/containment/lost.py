"""This session's lost instantiations: one that did not build, crashed or hung is remembered
(Lost, in the session's Containment), never launched again (refuse_lost), raised as the plain
class of its status (uniform) and recorded as one verdict; its other tests skip naming the test
that met it (skip_reason)."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from dataclasses import dataclass, field

import pytest

from gemmcheck.backends import KernelCompileError, KernelHang, KernelLaunchError
from gemmcheck.contract.catalog import Instance
from gemmcheck.schedule import rerun
from gemmcheck.verdict import Defect, Verdict

COMPILE_ERROR = Defect.COMPILE_ERROR.value   # a Lost status, beside "crash" and "hang"


@dataclass
class Lost:
    """An instantiation that did not build, crashed or hung: never launched again in this session."""

    status: str            # "compile_error" | "crash" | "hang"
    message: str           # what happened, where (one line; the compiler's first lines)
    test: str = ""         # the test that failed with it ("" : the probe found it, no test yet)
    problem: str = ""      # the problem that showed it (M64xN64xK64), where known


@dataclass
class Containment:
    """This session's lost instantiations and, on the GPU, whether the CUDA context is lost."""

    lost: dict[str, Lost] = field(default_factory=dict)     # Instance.id -> Lost
    context_lost_by: str = ""                                # the test that lost it
    deferred: list[str] = field(default_factory=list)        # node ids to re-run in a fresh process
    # A fault leaves a sticky error: a fresh process can run the rest. A hang leaves its kernel
    # spinning on the GPU for as long as this process lives: a child would share the GPU with it.
    rerun_after_loss: bool = False
    probe: Future | None = None       # the isolated probe's {Instance.id: Lost}, started ahead
    sized_probe: Future | None = None  # the sized probe's {(Instance.id, N): Lost}, started beside it
    probe_stop: threading.Event = field(default_factory=threading.Event)
    probed: bool = False              # its findings are in: launches here may begin
    items: list = field(default_factory=list)
    session: pytest.Session | None = None
    lost_before: int = 0        # contexts lost in this process before this session (an outer one's)


CONTAINMENT = pytest.StashKey[Containment]()


def containment(config: pytest.Config) -> Containment:
    if CONTAINMENT not in config.stash:
        config.stash[CONTAINMENT] = Containment()
    return config.stash[CONTAINMENT]


def status_of(exc: BaseException) -> str:
    if isinstance(exc, KernelCompileError):
        return COMPILE_ERROR
    return "hang" if isinstance(exc, KernelHang) else "crash"


def refuse_lost(config: pytest.Config, instance: Instance) -> None:
    """Raise (without launching) when `instance` crashed or hung earlier in this session:
    a search (hypothesis) that retries a failing example then fails at once, not after
    another --gemm-hang-timeout per example."""
    lost = containment(config).lost.get(instance.id)
    if lost is not None:
        error = {"hang": KernelHang, COMPILE_ERROR: KernelCompileError}.get(lost.status, KernelLaunchError)
        refused = error(f"{instance.id}: not launched again: {lost.message}")
        if lost.problem:    # the shape that showed it, for the verdict (not the refusal's "launch")
            refused.problem = lost.problem
        raise refused


def lose(config: pytest.Config, instance: Instance, exc: BaseException, test: str) -> Lost:
    """Remember that `instance` crashed or hung in `test` (the first time only)."""
    state = containment(config)
    if instance.id not in state.lost:
        if isinstance(exc, KernelCompileError):
            first = _compiler_lines(exc)
        else:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            first = first.removeprefix(f"{instance.id}: ")   # the failing line names it already
        state.lost[instance.id] = Lost(status_of(exc), first, test, getattr(exc, "problem", ""))
    elif not state.lost[instance.id].test:
        state.lost[instance.id].test = test
    if getattr(exc, "context_lost", False) and not state.context_lost_by:
        state.context_lost_by = test
        state.rerun_after_loss = rerun.available(config) and not isinstance(exc, KernelHang)
    return state.lost[instance.id]


def uniform(exc: BaseException) -> BaseException:
    """`exc` as the plain class of its status (KernelCompileError, KernelLaunchError,
    KernelHang), to be raised from one place: hypothesis tells failures apart by type and
    origin, and a replay refused by refuse_lost must look like the first launch's failure."""
    cls = {COMPILE_ERROR: KernelCompileError, "hang": KernelHang}.get(status_of(exc), KernelLaunchError)
    out = cls(str(exc))
    for attr in ("source", "context_lost", "problem", "instance"):
        if hasattr(exc, attr):
            setattr(out, attr, getattr(exc, attr))
    return out


def unfinished_verdict(instance: Instance, exc: BaseException, test: str) -> Verdict:
    """The compile_error / crash / hang verdict for a launch (or build) that raised `exc`, on
    the problem that showed it where the exception names one (its `problem`)."""
    from gemmcheck.judge import hazards

    return Verdict.for_instance(instance, getattr(exc, "problem", "") or "launch", [hazards.launch_failure(exc)],
                                test)


def skip_reason(lost: Lost) -> str:
    what = "not compiled:" if lost.status == COMPILE_ERROR else f"not run: {lost.status};"
    return f"{what} see {lost.test}"


def _compiler_lines(error: BaseException, n: int = 12) -> str:
    lines = str(error).strip().splitlines()
    return "\n".join(lines[:n] + ([f"... ({len(lines) - n} more lines)"] if len(lines) > n else []))
