"""Observing one row's instantiation: in this process, in isolated children, or on the CPU
simulator; and the small problems compute-sanitizer runs on."""

from __future__ import annotations

from gemmcheck.judge import hazards, isolation
from gemmcheck.contract.catalog import Instance
from gemmcheck.phases import timed
from gemmcheck.judge.kill_matrix.settings import Settings


def plain_observations(backend, instance: Instance, settings: Settings) -> list[hazards.Observation]:
    """Observe one instantiation in this process on every exposing problem. A launch (or
    build) that fails is the observation's `failure` (COMPILE_ERROR, CRASH or HANG) and the
    instantiation's other problems are not run."""
    from gemmcheck.backends import KernelCompileError, KernelLaunchError

    out = []
    for n, (purpose, problem) in enumerate(hazards.exposing_problems(instance, settings.race_sizes)):
        race = hazards.is_race_stress(purpose)
        try:
            obs = hazards.observe(backend, instance, problem, purpose=purpose, prime=n == 0,
                                  repeats=settings.race_repeats if race else 2, control=not race)
        except (KernelCompileError, KernelLaunchError) as exc:
            obs = hazards.Observation(instance, problem, purpose)
            obs.failure = hazards.launch_failure(exc)
        out.append(obs)
        if obs.failure is not None:
            break
    return out


@timed("isolation")
def isolated_observations(instances, settings: Settings) -> dict[str, list[hazards.Observation]]:
    """Observe instantiations in children: a fault is CRASH, a timeout HANG, a build failure
    COMPILE_ERROR (one child per failure)."""
    steps, owner = [], {}
    for inst in instances:
        for purpose, problem in hazards.exposing_problems(inst, settings.race_sizes):
            race = hazards.is_race_stress(purpose)
            step = isolation.Step.of(len(steps), inst, problem, purpose=purpose,
                                     repeats=settings.race_repeats if race else 2, control=not race)
            steps.append(step)
            owner[step.id] = inst
    out: dict[str, list[hazards.Observation]] = {i.id: [] for i in instances}
    if not steps:
        return out
    outcomes, _ = isolation.run_steps(steps, backend=settings.backend_name,
                                      step_timeout=settings.hang_timeout)
    for step_id, outcome in sorted(outcomes.items()):
        if outcome.status != "not_run":
            out[owner[step_id].id].append(isolation.observation(outcome))
    return out


def simulator_observations(backend, instance: Instance, settings: Settings) -> list[hazards.Observation]:
    """Observe one instantiation on a backend that simulates threads (cpu-sim): the small
    exposing problems, every launch under `settings.schedules`, AddressSanitizer on the
    first (ragged) problem when `settings.address_check` (hazards.observe_small_problems_simulated)."""
    return hazards.observe_small_problems_simulated(backend, instance, schedules=settings.schedules,
                                                    address_check=settings.address_check)


def small_problems(instance: Instance, settings: Settings) -> list:
    """The (purpose, problem) pairs compute-sanitizer runs on: the small exposing problems."""
    return [(p, q) for p, q in hazards.exposing_problems(instance, settings.race_sizes)
            if p in hazards.SMALL_PURPOSES]
