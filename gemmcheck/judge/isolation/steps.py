"""What parent and child exchange: a job's Steps (one problem on one instantiation each), what
became of each (StepOutcome), the protocol's marker, and the catalog entries steps name."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from gemmcheck.verdict import Finding
from gemmcheck.verdict.detectors import Detector

MARK = "@@gemmcheck"


@dataclass(frozen=True)
class Step:
    """One problem on one instantiation, run in a child."""

    id: int
    catalog: str
    kernel: str
    dtype: str
    tile: int
    M: int
    N: int
    K: int
    seed: int
    purpose: str = ""
    repeats: int = 2
    control: bool = True
    config: str | None = None   # the catalog config: several configs may share one tile
    # One plain launch (harness.plain_launch), watched only for a crash or a hang; nothing
    # comes back (the isolated probe at the performance suite's sizes)
    plain: bool = False
    batch: int = 1              # a strided batch's products (Problem.batch)
    broadcast: str = ""
    groups: tuple = ()          # a grouped GEMM's rows per group (Problem.groups)
    masked: bool = False

    def __post_init__(self):
        object.__setattr__(self, "groups", tuple(self.groups))   # a list, as JSON gives it back

    @property
    def instance_key(self) -> tuple:
        return (self.catalog, self.kernel, self.dtype, self.tile, self.config)

    @property
    def instance_label(self) -> str:
        """The instantiation as a log names it, without loading the catalog: its test id
        (Instance.id) where it comes from a named config, else kernel-dtype-TILE<n>."""
        return f"{self.kernel}-{self.dtype}-" + (self.config or f"TILE{self.tile}")

    @classmethod
    def of(cls, id, instance, problem, *, purpose="", repeats=2, control=True, plain=False) -> "Step":
        step = cls(id, str(instance.spec.catalog), instance.spec.name, instance.dtype, instance.tile,
                   problem.M, problem.N, problem.K, problem.seed, purpose, repeats, control, instance.config,
                   plain, problem.batch, problem.broadcast, problem.groups, problem.masked)
        _SPECS.setdefault((step.catalog, step.kernel), instance.spec)   # see _spec
        return step

    @property
    def problem(self):
        from gemmcheck.problems.problem import Problem

        return Problem(self.M, self.N, self.K, _instance(self).types, "exact", self.seed,
                       batch=self.batch, broadcast=self.broadcast, groups=tuple(self.groups), masked=self.masked)


@dataclass
class StepOutcome:
    """What happened to one step: ok, failed (launch error), crash, hang, or not_run."""

    step: Step
    status: str
    message: str = ""
    output: list[str] = field(default_factory=list)  # child output lines printed during the step
    seconds: float = 0.0
    runs: dict = field(default_factory=dict)         # "runs" / "control" -> [Run], when ok

    @property
    def finding(self) -> Finding | None:
        """CRASH, HANG or COMPILE_ERROR for a launch that did not complete; None otherwise."""
        from gemmcheck.judge import hazards

        if self.status == "hang":
            return hazards.unfinished("hang", self.message)
        if self.status == "compile_error":
            return hazards.unfinished("compile_error", f"the kernel did not build: {self.message}",
                                      detector=Detector.COMPILER)
        if self.status in ("failed", "crash"):
            return hazards.unfinished(self.status, f"the launch failed: {self.message}")
        return None


# (catalog path, kernel name) -> KernelSpec: the parent's own, from Step.of, so that runs read
# back on pool threads (kill-matrix children, the probe) never load a catalog there: loading
# parses launch expressions with ast.parse, which races between threads on CPython 3.11
# (gh-106905). A child, single-threaded, loads its catalog once.
_SPECS: dict[tuple[str, str], object] = {}
_SPECS_LOCK = threading.Lock()


def _spec(step: Step):
    key = (step.catalog, step.kernel)
    if key not in _SPECS:
        from gemmcheck.contract import catalog

        with _SPECS_LOCK:
            if key not in _SPECS:
                for spec in catalog.load(step.catalog):
                    _SPECS.setdefault((step.catalog, spec.name), spec)
    return _SPECS[key]


def instance_key(instance) -> tuple:
    """What Step.instance_key is for the steps of `instance`."""
    return (str(instance.spec.catalog), instance.spec.name, instance.dtype, instance.tile, instance.config)


def _instance(step: Step):
    from gemmcheck.contract import catalog

    spec = _spec(step)
    if step.config is not None:
        return catalog.Instance(spec, step.dtype, params=dict(spec.assignments())[step.config], config=step.config)
    return catalog.Instance(spec, step.dtype, step.tile)
