"""A job's steps over as few children as possible: one child runs every step it can, and only
a crash or hang costs a fresh one for the steps left (run_steps); the child's command line."""

from __future__ import annotations

import json
import sys
import tempfile
import threading
from dataclasses import asdict
from pathlib import Path

from gemmcheck.judge.isolation.steps import StepOutcome
from gemmcheck.judge.isolation.supervising import (READY_TIMEOUT_S, STEP_TIMEOUT_S, ChildResult, IsolationError,
                                                   _exit_text, supervise)
from gemmcheck.judge.isolation.transfer import _load_runs

def child_command(job: Path, outdir: Path) -> list[str]:
    return [sys.executable, "-u", "-m", "gemmcheck.judge.isolation", str(job), str(outdir)]


def run_steps(steps, *, backend: str = "cupy", prefix=(), exact_allocations: bool = False,
              ready_timeout: float = READY_TIMEOUT_S, step_timeout: float = STEP_TIMEOUT_S,
              workdir: Path | None = None, env=None, hang_timeout_s: float | None = None,
              stop: threading.Event | None = None):
    """Run `steps` in as few children as possible; return ({step id: StepOutcome}, [ChildResult]).

    After a step crashes or hangs, the rest of that instantiation's steps are
    not run (not_run, saying why) and a fresh child takes the other steps.
    `prefix` goes before the child's command (compute-sanitizer and its options).
    `hang_timeout_s`: the child's backend's own hang timeout (a launch it stops itself is
    reported HUNG, a hang); keep it below `step_timeout`. `stop`: once set, no further child
    starts (IsolationError), so the one running can be killed (stop_running_children) for good.
    """
    steps = list(steps)
    outcomes: dict[int, StepOutcome] = {}
    children: list[ChildResult] = []
    tmp = tempfile.TemporaryDirectory(prefix="gemmcheck-iso-") if workdir is None else None
    base = Path(tmp.name if tmp else workdir)
    try:
        remaining = steps
        while remaining:
            if stop is not None and stop.is_set():
                raise IsolationError("stopped before its steps were done: the session ended")
            n = len(children)
            job, outdir = base / f"job{n}.json", base / f"out{n}"
            outdir.mkdir(parents=True, exist_ok=True)
            job.write_text(json.dumps({"backend": backend, "exact_allocations": exact_allocations,
                                       "hang_timeout_s": hang_timeout_s,
                                       "steps": [asdict(s) for s in remaining]}))
            result = supervise([*prefix, *child_command(job, outdir)], remaining,
                               ready_timeout=ready_timeout, step_timeout=step_timeout, env=env)
            children.append(result)
            if result.error or not result.ready:
                why = result.error or (f"not ready within {result.not_ready_in:g} s; killed"
                                       if result.not_ready_in is not None else _exit_text(result.returncode))
                raise IsolationError(
                    f"the isolated child ({' '.join(prefix) or 'python'}) could not run its job "
                    f"({why})\nits output:\n"
                    + "\n".join(result.lines[-40:]) + "\n" + result.stderr[-4000:])
            dead = set()
            for step in remaining:
                out = result.outcomes[step.id]
                if out.status == "ok" and not step.plain:
                    out.runs = _load_runs(outdir, step)
                if out.status != "not_run":
                    outcomes[step.id] = out
                if out.status in ("failed", "crash", "hang", "compile_error"):
                    dead.add(step.instance_key)
            still = []
            for step in remaining:
                if step.id in outcomes:
                    continue
                if step.instance_key in dead:
                    outcomes[step.id] = StepOutcome(step, "not_run", "an earlier problem of this "
                                                    "instantiation crashed, hung or did not build")
                else:
                    still.append(step)
            if len(still) == len(remaining):
                raise IsolationError("the isolated child made no progress; its output:\n"
                                     + "\n".join(result.lines[-40:]) + "\n" + result.stderr[-4000:])
            remaining = still
    finally:
        if tmp:
            tmp.cleanup()
    return outcomes, children
