"""A step's runs travel from child to parent as raw bytes described in JSON (_save_runs,
_load_runs) and become the same Run objects, and the same hazards.Observation (observation), an
in-process launch gives.

Not .npz: numpy parses every .npy header with ast.literal_eval, and on CPython 3.11 AST
construction races between threads (gh-106905: "AST constructor recursion depth mismatch").
Row children load their runs on pool threads, so shapes and dtypes ride in the JSON instead."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from gemmcheck.judge.isolation.steps import Step, StepOutcome, _instance

# The launches of an Observation that travel: its runs, the control runs, and the beta = 0
# launch with C finite (finite_c: what establishes reads_c_at_beta_zero).
RUN_KINDS = ("runs", "control", "finite_c")


def _save_runs(outdir: Path, step_id: int, obs) -> None:
    meta = {kind: [] for kind in RUN_KINDS}
    with open(outdir / f"step{step_id}.bin", "wb") as blob:
        for kind in RUN_KINDS:
            for run in getattr(obs, kind):
                meta[kind].append({"grid": list(run.grid), "block": list(run.block),
                                   "C": _write_array(blob, run.C_bits),
                                   "unwritten": _write_array(blob, run.unwritten),
                                   "guard_damage": run.guard_damage,
                                   "inputs_changed": run.inputs_changed,
                                   "launched": run.launched, "c_fill": run.c_fill, "output": run.output, "batch": run.batch, "groups": list(run.groups),
                                   "epilogue": {role: _write_array(blob, np.asarray(v)) for role, v in run.epilogue.items()},
                                   "scales": {role: _write_array(blob, v) for role, v in run.scales.items()}})
    (outdir / f"step{step_id}.json").write_text(json.dumps(meta))


def _write_array(blob, array: np.ndarray) -> dict:
    array = np.ascontiguousarray(array)
    where = {"dtype": array.dtype.str, "shape": list(array.shape), "offset": blob.tell()}
    blob.write(array.tobytes())
    return where


def _read_array(data: bytearray, where: dict) -> np.ndarray:
    dtype = np.dtype(where["dtype"])
    count = int(np.prod(where["shape"], dtype=np.int64))
    return np.frombuffer(data, dtype, count, where["offset"]).reshape(where["shape"])


def _load_runs(outdir: Path, step: Step) -> dict:
    from gemmcheck.problems.harness import Run

    instance = _instance(step)
    meta = json.loads((outdir / f"step{step.id}.json").read_text())
    data = bytearray((outdir / f"step{step.id}.bin").read_bytes())  # writable, as np.load's were
    return {kind: [Run(instance, step.M, step.N, step.K, tuple(m["grid"]), tuple(m["block"]),
                       _read_array(data, m["C"]), _read_array(data, m["unwritten"]),
                       dict(m["guard_damage"]), dict(m["inputs_changed"]),
                       launched=m["launched"], c_fill=m["c_fill"], output=m.get("output", "C"), batch=m.get("batch", 1), groups=tuple(m.get("groups", ())),
                       epilogue={role: _epilogue_value(role, _read_array(data, w))
                                 for role, w in m.get("epilogue", {}).items()},
                       scales={role: _read_array(data, w) for role, w in m.get("scales", {}).items()})
                   for m in meta.get(kind, [])]
            for kind in RUN_KINDS}


def _epilogue_value(role: str, array: np.ndarray):
    """A fused epilogue's value as the harness keeps it: the output scale a number, the rest arrays."""
    return float(array.reshape(-1)[0]) if role == "output_scale" else array


def observation(outcome: StepOutcome):
    """The hazards.Observation a step's outcome amounts to (CRASH/HANG as its failure)."""
    from gemmcheck.judge import hazards

    step = outcome.step
    obs = hazards.Observation(_instance(step), step.problem, step.purpose)
    obs.runs, obs.control = outcome.runs.get("runs", []), outcome.runs.get("control", [])
    obs.finite_c = outcome.runs.get("finite_c", [])
    obs.failure = outcome.finding
    return obs
