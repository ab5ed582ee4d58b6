"""Risky launches in a child process: a fault is CRASH, a timeout is HANG.

A kernel that faults leaves its process's CUDA context unusable, and one
that never returns blocks its process forever. Such launches (catalog
`expect` crash or hang, and everything under compute-sanitizer) run in a
child: `python -m gemmcheck.judge.isolation JOB OUTDIR`. The child announces each
step on stdout (READY, LAUNCH id, then DONE id, FAILED id, HUNG id: the backend stopped
a launch that outlived its hang timeout, or UNBUILT id: the instantiation did not compile); the parent watches the clock
between them, kills the child's process group when a step overruns, and
starts a fresh child for the steps left. Child startup costs about a second
and a half on a warm machine, so steps are batched: one child runs every
step it can, and only a crash or hang costs another.

Each step is one Observation (hazards.observe) of one instantiation on one
problem; its runs come back as raw bytes described in JSON and become the same Run objects
an in-process launch gives, so the same detectors judge them.

One module per job, each name importable from here:

- steps: what parent and child exchange (Step, StepOutcome, MARK, instance_key)
- supervising: the parent side of one child (supervise, ChildResult, IsolationError,
  stop_running_children, startup_parts, STARTUP_PARTS, READY_TIMEOUT_S, STEP_TIMEOUT_S)
- running: a job's steps over as few children as possible (run_steps, child_command)
- transfer: runs back from the child as raw bytes (observation, RUN_KINDS)
- child: the child side (child_main; __main__.py runs it)
"""

from gemmcheck.judge.isolation.child import child_main
from gemmcheck.judge.isolation.running import child_command, run_steps
from gemmcheck.judge.isolation.steps import MARK, Step, StepOutcome, instance_key
from gemmcheck.judge.isolation.supervising import (READY_TIMEOUT_S, STARTUP_PARTS, STEP_TIMEOUT_S, ChildResult,
                                                   IsolationError, _running, startup_parts, stop_running_children,
                                                   supervise)
from gemmcheck.judge.isolation.transfer import RUN_KINDS, _load_runs, _save_runs, observation

__all__ = [
    "MARK", "READY_TIMEOUT_S", "RUN_KINDS", "STARTUP_PARTS", "STEP_TIMEOUT_S", "ChildResult", "IsolationError",
    "Step", "StepOutcome", "_load_runs", "_running", "_save_runs", "child_command", "child_main", "observation",
    "instance_key", "run_steps", "startup_parts", "stop_running_children", "supervise",
]
