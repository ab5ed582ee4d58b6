"""The child side: `python -m gemmcheck.judge.isolation JOB OUTDIR` (__main__.py) runs
child_main, which makes the backend, says READY, then for each step LAUNCH and DONE / FAILED /
HUNG / UNBUILT, saving each step's runs for the parent."""

from __future__ import annotations

import json
import time
from pathlib import Path

from gemmcheck.judge.isolation.steps import MARK, Step, _instance
from gemmcheck.judge.isolation.transfer import _save_runs

def _say(word: str, rest: str = "") -> None:
    print(f"{MARK} {word} {rest}".rstrip(), flush=True)


def _make_backend(name: str, exact_allocations: bool):
    if ":" in name:  # "module:factory", e.g. a test's stand-in backend
        import importlib

        module, attr = name.split(":")
        return getattr(importlib.import_module(module), attr)()
    from gemmcheck import backends

    if exact_allocations:
        backends.backend_class(name).allocate_exactly()
    return backends.create(name)


def child_main(job_path: str, outdir: str) -> int:
    from gemmcheck.judge import hazards
    from gemmcheck.backends import KernelCompileError, KernelHang, KernelLaunchError
    from gemmcheck.backends.cupy_backend import is_sticky
    from gemmcheck.problems import harness
    from gemmcheck.problems.harness import GuardedGemm

    job = json.loads(Path(job_path).read_text())
    out = Path(outdir)
    steps = [Step(**s) for s in job["steps"]]
    marks = {"main": _MAIN_AT or time.time()}   # where its start-up went (the parent's timeline)
    try:
        backend = _make_backend(job["backend"], job.get("exact_allocations", False))
        marks["backend"] = time.time()
        if job.get("hang_timeout_s"):
            backend.hang_timeout_s = float(job["hang_timeout_s"])
        instances = {s.id: _instance(s) for s in steps}
        backend.prepare(list({i.id: i for i in instances.values()}.values()))
        marks["prepared"] = time.time()
    except Exception as exc:
        _say("ERROR", json.dumps(f"{type(exc).__name__}: {exc}"))
        return 2
    _say("READY", json.dumps(marks))
    unbuilt = set()   # instantiations that did not compile: their other steps are not run
    primed = set()    # instantiations launched in this child (hazards.observe's prime)
    plain = {}        # (kernel, dtype, M, N, K) -> the plain steps' operands, made once a shape
    for step in steps:
        if step.instance_key in unbuilt:
            continue
        instance = instances[step.id]
        problem = step.problem
        _say("LAUNCH", str(step.id))
        try:
            if step.plain:
                shape = (instance.spec.name, step.dtype, step.M, step.N, step.K, step.batch, step.groups, step.masked)
                if shape not in plain:
                    plain.clear()   # one shape's at a time: 8192^2 float64 operands are 1.5 GB
                    plain[shape] = harness.plain_operands(backend, instance, step.M, step.N, step.K, batch=step.batch,
                                                          groups=step.groups, masked=step.masked)
                harness.plain_launch(backend, instance, step.M, step.N, step.K, plain[shape])
                _say("DONE", str(step.id))
                continue
            if job.get("exact_allocations"):
                gemm = GuardedGemm(backend, instance, *hazards.operands(problem), guard=0, **problem.batching,
                                   **hazards.scaling(problem))
                obs = hazards.Observation(instance, problem, step.purpose,
                                          [gemm.run() for _ in range(step.repeats)])
            else:
                obs = hazards.observe(backend, instance, problem, repeats=step.repeats,
                                      control=step.control, purpose=step.purpose,
                                      prime=step.instance_key not in primed)
                primed.add(step.instance_key)
        except KernelCompileError as exc:
            # This instantiation's verdict; the context is fine, so go on with the next step.
            _say("UNBUILT", f"{step.id} {json.dumps(str(exc))}")
            unbuilt.add(step.instance_key)
            continue
        except KernelLaunchError as exc:
            # The context is unusable now (or busy, after a hang): report and leave; the
            # parent restarts a child.
            _say("HUNG" if isinstance(exc, KernelHang) else "FAILED", f"{step.id} {json.dumps(str(exc))}")
            return 3
        except Exception as exc:
            if is_sticky(exc):
                # A fault that left the context unusable, seen by a call after the launch had
                # returned (on an H200, racecheck over broken_unguarded_store: CuPy's
                # cudaErrorLaunchFailure from the step's next call): the step's kernel did it.
                _say("FAILED", f"{step.id} {json.dumps(f'{type(exc).__name__}: {exc}')}")
                return 3
            # not the kernel's doing (a compile error, a bug here)
            _say("ERROR", json.dumps(f"{type(exc).__name__}: {exc}"))
            return 2
        _save_runs(out, step.id, obs)
        _say("DONE", str(step.id))
    return 0


_MAIN_AT = None   # when the child's modules had loaded (its interpreter and imports done)
