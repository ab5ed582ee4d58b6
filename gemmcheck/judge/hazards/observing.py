"""Observations: the guarded launches of one instantiation on one problem, on a GPU or on the
CPU simulator (every launch under its thread schedules, its reports kept)."""

from __future__ import annotations

from dataclasses import dataclass, field

from gemmcheck.judge import beta_zero
from gemmcheck.backends import Backend
from gemmcheck.contract.catalog import Instance
from gemmcheck.problems.harness import GuardedGemm, Run
from gemmcheck.problems.problem import DEFAULT_SCALING, Problem
from gemmcheck.verdict import Finding
from gemmcheck.judge.hazards.problems import SMALL_PURPOSES, exposing_problems
from gemmcheck.judge.hazards.outcomes import launch_failure


CONTROL_GUARD_BITS = 0  # +0.0 in every dtype: the control launch's guard fill


@dataclass
class Observation:
    """Everything launched for one instantiation on one problem."""

    instance: Instance
    problem: Problem
    purpose: str = ""
    runs: list[Run] = field(default_factory=list)      # guards hold the dtype's guard NaN
    control: list[Run] = field(default_factory=list)   # guards hold zeros
    finite_c: list[Run] = field(default_factory=list)  # beta = 0 with C finite (kernels that take beta)
    failure: Finding | None = None                     # CRASH / HANG: the launches did not finish
    reports: list = field(default_factory=list)        # cpu-sim: a LaunchReport per launch
    address: object = None                             # cpu-sim: an AddressReport (ASan), if run

    @property
    def operands(self):
        return operands(self.problem)


def operands(problem: Problem):
    """The problem's (A, B): a race size's are made once and shared (Problem.operands)."""
    return problem.operands()[:2]


def scaling(problem: Problem) -> dict:
    """GuardedGemm's alpha, beta and C0 for a problem that scales (the exposing problem at alpha
    2 and beta -1); none at (1, 0), where every other observation launches as it always has."""
    if (problem.alpha, problem.beta) == DEFAULT_SCALING:
        return {}
    return {"alpha": problem.alpha, "beta": problem.beta,
            **({"C0": problem.operands()[2]} if problem.beta != 0 else {})}


def launch_order(repeats: int, control: bool) -> list[str]:
    """The Observation lists an observation's launches go to, in launch order: `repeats`
    "runs" (NaN guards) and, with `control`, one "control" (zero guards) second, between
    them. Interleaved, something that changes from launch to launch whatever the guards
    hold shows in the control as well, and guard-swap does not take it for a read of the
    guards. Launched last, the control once missed NaN that the H200 showed in both
    NaN-guard launches before it (docs/hazards.md, "Why guard swap asks that NaN follow the guards")."""
    kinds = ["runs"] * repeats
    if control:
        kinds.insert(1, "control")
    return kinds


def observe(backend: Backend, instance: Instance, problem: Problem, *, repeats: int = 2,
            control: bool = True, purpose: str = "", prime: bool = False) -> Observation:
    """Launch `repeats` times with NaN guards and (if `control`) once with zero guards, in
    launch_order. `prime`: launch once before, not observed, as the first observation of an
    instantiation in a process does: a kernel that keeps state across launches (the catalog's
    cheat_skips_repeats: right on its first launch in a process, zeros after) is then observed
    in the state it keeps for the session, whatever the process launched before. Without it
    the verdict followed test order: after the correctness suite every launch gave zeros
    (wrong_values); in the hazards suite alone the first was right and the second differed,
    read as a race (H200, the nightly's hazards suite on its own)."""
    A, B = operands(problem)
    batching = {**problem.batching, **scaling(problem)}
    obs = Observation(instance, problem, purpose)
    if prime:   # buffers of its own: what the launch does to A and B stays out of the observation
        GuardedGemm(backend, instance, A, B, **batching).run()
    gemms = {"runs": GuardedGemm(backend, instance, A, B, **batching)}
    if control:
        gemms["control"] = GuardedGemm(backend, instance, A, B, **batching, guard_bits=CONTROL_GUARD_BITS)
    for kind in launch_order(repeats, control):
        getattr(obs, kind).append(gemms[kind].run())
    if watches_c_reads(instance, purpose):
        obs.finite_c.append(GuardedGemm(backend, instance, A, B, **batching, c_fill="finite").run())
    return obs


def watches_c_reads(instance: Instance, purpose: str) -> bool:
    """Whether an observation launches once more with C finite at beta = 0 (beta_zero): for
    kernels that take beta and do not declare reading C there, on the small problems."""
    return (beta_zero.takes_beta(instance) and not instance.spec.reads_c_at_beta_zero
            and purpose in SMALL_PURPOSES)


# -- observations on a backend that explores thread schedules (the CPU simulator) -------------

# Thread orders each simulated launch runs under: forward first (the buffers keep its
# result), then orders that expose a missing barrier, lockstep last for the direction.
SIMULATOR_SCHEDULES = ("forward", "reverse", "shuffle-1", "lockstep")


def simulates_threads(backend) -> bool:
    """Whether `backend` offers what the simulator detectors read: thread schedules and a
    report per launch (gemmcheck.backends capabilities; the CPU simulator does)."""
    from gemmcheck import backends

    return (backends.offers(backend, backends.ExploresSchedules)
            and backends.offers(backend, backends.ReportsLaunches))


def observe_simulated(backend, instance: Instance, problem: Problem, *, repeats: int = 2,
                      control: bool = True, purpose: str = "",
                      schedules=SIMULATOR_SCHEDULES, address_check: bool = False) -> Observation:
    """`observe` on a backend that simulates threads: every launch under `schedules`, its
    LaunchReport kept; a crash, stall or build failure is the observation's `failure`
    (the simulator's worker process is the isolation: this process is unharmed); with
    `address_check` (and a backend that ChecksAddresses), one more launch of the
    AddressSanitizer build on exact-size buffers (skipped after a failure)."""
    from gemmcheck import backends

    A, B = operands(problem)
    batching = {**problem.batching, **scaling(problem)}
    obs = Observation(instance, problem, purpose)
    with backend.using_schedules(schedules):
        for kind in launch_order(repeats, control):
            kw = {"guard_bits": CONTROL_GUARD_BITS} if kind == "control" else {}
            try:
                run = GuardedGemm(backend, instance, A, B, **batching, **kw).run()
            except (backends.KernelLaunchError, backends.KernelCompileError) as exc:
                report = backend.last_launch_report
                if report is not None and not isinstance(exc, backends.KernelCompileError):
                    obs.reports.append(report)
                obs.failure = launch_failure(exc, report)
                return obs
            obs.reports.append(backend.last_launch_report)
            getattr(obs, kind).append(run)
        if watches_c_reads(instance, purpose):
            obs.finite_c.append(GuardedGemm(backend, instance, A, B, **batching, c_fill="finite").run())
    if address_check and backends.offers(backend, backends.ChecksAddresses):
        obs.address = backend.address_check(instance, A, B, batch=problem.batch, groups=problem.groups,
                                            masked=problem.M if problem.masked else 0)
    return obs


def observe_small_problems_simulated(backend, instance: Instance, *, schedules=SIMULATOR_SCHEDULES,
                                     address_check: bool = True) -> list[Observation]:
    """observe_simulated on each small exposing problem of `instance` (the simulator column's
    problems: races show at any size under its schedules; 1024^3 takes minutes there),
    AddressSanitizer (`address_check`) on the first (ragged) one. After a crash, hang or
    build failure the instantiation's other problems are not run (as in an isolated child)."""
    out = []
    for n, (purpose, problem) in enumerate(exposing_problems(instance, race_sizes=())):
        obs = observe_simulated(backend, instance, problem, purpose=purpose, schedules=schedules,
                                address_check=address_check and n == 0)
        out.append(obs)
        if obs.failure is not None:
            break
    return out
