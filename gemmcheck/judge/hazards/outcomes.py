"""Launches that did not finish: the one place CRASH / HANG / COMPILE_ERROR findings are built."""

from __future__ import annotations

from gemmcheck.verdict.detectors import Detector
from gemmcheck.verdict import Defect, Finding


# How a launch ended -> the defect class it establishes ("failed": a launch error that is
# not a hang, e.g. a fault that left the CUDA context unusable).
UNFINISHED = {"crash": Defect.CRASH, "failed": Defect.CRASH, "hang": Defect.HANG,
              "compile_error": Defect.COMPILE_ERROR}


def unfinished(status: str, summary: str, *, detector: Detector = Detector.ISOLATION,
               **details) -> Finding:
    """The one Finding for a launch that did not finish (every CRASH / HANG / COMPILE_ERROR
    finding is built here): `status` is a key of UNFINISHED."""
    if status not in UNFINISHED:
        raise ValueError(f"unknown launch status {status!r}; use one of {', '.join(UNFINISHED)}")
    return Finding(UNFINISHED[status], detector, summary, 1, None, {"status": status, **details})


def launch_failure(exc: BaseException, report=None) -> Finding:
    """The Finding for an exception a launch (or its build) raised: a compile error, a hang
    (KernelHang, or a simulator report that says so) or a crash. `report`: the backend's
    last launch report, where it offers one (ReportsLaunches)."""
    from gemmcheck.backends import KernelCompileError, KernelHang

    if isinstance(exc, KernelCompileError):
        return unfinished("compile_error", f"the kernel did not build: {_first_lines(str(exc))}",
                          detector=Detector.COMPILER)
    outcome = getattr(report, "outcome", None)
    failure = getattr(report, "failure", None)
    if isinstance(exc, KernelHang) or outcome == "hang":
        return unfinished("hang", f"the launch did not finish within the hang timeout and was "
                                  f"stopped: {failure or exc}")
    return unfinished("crash" if outcome == "crash" else "failed",
                      f"the launch failed: {failure if outcome == 'crash' else exc}")


def _first_lines(text: str, n: int = 12) -> str:
    lines = text.strip().splitlines()
    return "\n".join(lines[:n]) + (f"\n... ({len(lines) - n} more lines)" if len(lines) > n else "")
