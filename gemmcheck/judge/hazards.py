"""Hazard detectors and the classifier that names a kernel's root defect.

A detector looks at what launches left behind (an Observation: guarded runs
of one instantiation on one problem) and returns Findings, each with the
defect class it truly establishes and nothing more:

- value check (gemmcheck.judge.oracle.judge, exact integer inputs): WRONG_VALUES
- poison bits still in C: UNWRITTEN_OUTPUT
- output depends on memory outside the operands (NaN at the same places in
  every launch with NaN guards, none with zero guards): OUT_OF_BOUNDS_READ
- guard bands changed: OUT_OF_BOUNDS_WRITE
- A or B changed: INPUT_MUTATION
- bits differ between launches on identical inputs: NONDETERMINISM (a race of
  unknown place: only racecheck or the simulator's tracking says shared memory)
- at beta = 0 the output changes when C holds NaN instead of finite values
  (gemmcheck.judge.beta_zero; kernels that take beta): READS_C_AT_BETA_ZERO
- a launch that faults / never returns (gemmcheck.judge.isolation), or a kernel that does
  not build: CRASH / HANG / COMPILE_ERROR, each built by `unfinished` only
- compute-sanitizer racecheck / synccheck / memcheck / initcheck
  (gemmcheck.judge.sanitizer): SHARED_MEMORY_RACE, DIVERGENT_BARRIER, out-of-bounds
- on the CPU simulator (cpu-sim; observe_simulated): its shared-memory
  tracking (SHARED_MEMORY_RACE observed, the lockstep direction as a
  detail), its global-memory tracking (GLOBAL_MEMORY_RACE: two blocks of a
  launch wrote one address, not both atomically; the element and the two
  blocks named), output that depends on the thread or block schedule
  (NONDETERMINISM, with the schedule that exposes it), barrier tracking
  (DIVERGENT_BARRIER),
  reads of shared memory no thread wrote, AddressSanitizer on exact-size
  buffers (OUT_OF_BOUNDS_READ / _WRITE naming the buffer), and a crash or
  a stall of its worker process (CRASH / HANG)

`classify` turns all findings for one instantiation into the most specific
root cause and says which other findings it explains; the classes, their
priority and what each explains come from gemmcheck.verdict.defects, the detectors'
names from gemmcheck.verdict.detectors. Detectors take any Backend: the GPU, or one
that offers thread schedules and launch reports (the CPU simulator).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from gemmcheck.verdict import defects
from gemmcheck.judge import beta_zero, oracle
from gemmcheck.backends import Backend
from gemmcheck.contract.catalog import Instance
from gemmcheck.problems.harness import GuardedGemm, Run
from gemmcheck.phases import timed
from gemmcheck.problems.problem import Problem
from gemmcheck.verdict.detectors import Detector
from gemmcheck.verdict import Defect, Finding


# -- problems ---------------------------------------------------------------------------

# Blocks of 1 or 4 threads (TILE 1, 2) run latency-bound at the larger race sizes: on the
# H200 a nightly kill-matrix row (race sizes 1024 and 2048, 10 repeats) took 12-16 s at TILE 1
# and 5-8 s at TILE 2, against 2-3 s from TILE 4 up. At the first size such a kernel already
# runs hundreds of thousands of blocks side by side, which is what a race stress is for.
ALL_RACE_SIZES_MIN_TILE = 4


def exposing_problems(instance: Instance, race_sizes=(1024,)) -> list[tuple[str, Problem]]:
    """(purpose, problem) pairs hazards are looked for on, derived from the instantiation's TILE.

    - ragged edges (2T+1, T+1, 4T+1): a partial tile in M, N and K, where
      bounds flaws and a barrier inside `if (row < M)` show;
    - tile-aligned 4T cube: no edges (a kernel may be right only here);
    - large ragged (R - T/2 - 1 cubed): many blocks share each edge row;
    - race stress R cubed (R from the profile, 1024 and up): where missing
      barriers show on real hardware (a WAR race stayed exact at 64^3 on an H200);
    - K = 0 (2T+1 x T+1, or 2T x 2T): BLAS gives C = beta C0, zeros written everywhere
      at beta = 0; a kernel that returns early at K = 0 leaves C unwritten.
    Inputs are exact integers (problems.Problem values="exact"): any summation
    order gives the same bits, so a difference between launches is a defect.
    Shapes the instantiation does not claim to support are left out. A TILE below
    ALL_RACE_SIZES_MIN_TILE gets the first race size only (see there).
    """
    T = instance.tile
    if T < ALL_RACE_SIZES_MIN_TILE:
        race_sizes = tuple(race_sizes)[:1]
    shapes = [("ragged edges", 2 * T + 1, T + 1, 4 * T + 1), ("tile-aligned", 4 * T, 4 * T, 4 * T)]
    shapes += [("large ragged", R - T // 2 - 1, R - T // 2 - 1, R - T // 2 - 1) for R in race_sizes]
    shapes += [("race stress", R, R, R) for R in race_sizes]
    # K = 0 (BLAS: C = beta C0, zeros at beta = 0), ragged where claimed, else whole tiles.
    shapes += [(K_ZERO, 2 * T + 1, T + 1, 0), (K_ZERO, 2 * T, 2 * T, 0)]
    seen, out = set(), []
    for purpose, M, N, K in shapes:
        if ((M, N, K) in seen or min(M, N) < 1 or (K < 1 and purpose != K_ZERO)
                or (purpose == K_ZERO and any(p == K_ZERO for p, _ in out))
                or not instance.supports(M, N, K)):
            continue
        seen.add((M, N, K))
        out.append((purpose, Problem(M, N, K, instance.dtype, "exact", seed=len(out) + 1)))
    return out


SMALL_PURPOSES = ("ragged edges", "tile-aligned")  # cheap enough for compute-sanitizer
K_ZERO = "K = 0"


def is_race_stress(purpose: str) -> bool:
    return purpose == "race stress"


# -- observations -----------------------------------------------------------------------

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
    obs = Observation(instance, problem, purpose)
    if prime:   # buffers of its own: what the launch does to A and B stays out of the observation
        GuardedGemm(backend, instance, A, B).run()
    gemms = {"runs": GuardedGemm(backend, instance, A, B)}
    if control:
        gemms["control"] = GuardedGemm(backend, instance, A, B, guard_bits=CONTROL_GUARD_BITS)
    for kind in launch_order(repeats, control):
        getattr(obs, kind).append(gemms[kind].run())
    if watches_c_reads(instance, purpose):
        obs.finite_c.append(GuardedGemm(backend, instance, A, B, c_fill="finite").run())
    return obs


def watches_c_reads(instance: Instance, purpose: str) -> bool:
    """Whether an observation launches once more with C finite at beta = 0 (beta_zero): for
    kernels that take beta and do not declare reading C there, on the small problems."""
    return (beta_zero.takes_beta(instance) and not instance.spec.reads_c_at_beta_zero
            and purpose in SMALL_PURPOSES)


# -- launches that did not finish: CRASH / HANG / COMPILE_ERROR, built here only ----------------

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
    obs = Observation(instance, problem, purpose)
    with backend.using_schedules(schedules):
        for kind in launch_order(repeats, control):
            kw = {"guard_bits": CONTROL_GUARD_BITS} if kind == "control" else {}
            try:
                run = GuardedGemm(backend, instance, A, B, **kw).run()
            except (backends.KernelLaunchError, backends.KernelCompileError) as exc:
                report = backend.last_launch_report
                if report is not None and not isinstance(exc, backends.KernelCompileError):
                    obs.reports.append(report)
                obs.failure = launch_failure(exc, report)
                return obs
            obs.reports.append(backend.last_launch_report)
            getattr(obs, kind).append(run)
        if watches_c_reads(instance, purpose):
            obs.finite_c.append(GuardedGemm(backend, instance, A, B, c_fill="finite").run())
    if address_check and backends.offers(backend, backends.ChecksAddresses):
        obs.address = backend.address_check(instance, A, B)
    return obs


# -- plain detectors: each looks at an Observation ---------------------------------------

def _first(mask: np.ndarray):
    idx = np.argwhere(mask)
    return (int(idx[0][0]), int(idx[0][1])) if len(idx) else None


def check_values(obs: Observation) -> list[Finding]:
    """WRONG_VALUES: the oracle's exact judgement of each launch, the worst one reported.

    Unwritten elements are the poison detector's, so only the value and NaN
    findings are kept. A launch with the same bits as an earlier one is not
    judged again.
    """
    if not obs.runs:
        return []
    A, B = obs.operands
    judged: list[np.ndarray] = []
    worst: list[Finding] = []
    wrong_launches = 0
    reference = oracle.reference_of(obs.runs[0], A, B)   # the runs share the problem: one exact product
    for run in obs.runs:
        if any(_same_bits(run.C_bits, seen) for seen in judged):
            continue
        judged.append(run.C_bits)
        found = [f for f in oracle.judge(run, A, B, exact=True, problem=obs.problem,
                                         reference=reference).findings
                 if f.defect == Defect.WRONG_VALUES]
        if found:
            wrong_launches += 1
        if sum(f.count for f in found) > sum(f.count for f in worst):
            worst = found
    if len(judged) > 1 and worst:
        worst = [replace(f, details={**f.details, "distinct_outputs": len(judged),
                                     "wrong_outputs": wrong_launches}) for f in worst]
    return worst


def check_unwritten(obs: Observation) -> list[Finding]:
    """UNWRITTEN_OUTPUT: elements that still hold the poison bits after a launch."""
    worst = max(obs.runs + obs.control, key=lambda r: int(r.unwritten.sum()), default=None)
    if worst is None or not worst.unwritten.any():
        return []
    n = int(worst.unwritten.sum())
    where = _first(worst.unwritten)
    rows = np.flatnonzero(worst.unwritten.any(axis=1))
    cols = np.flatnonzero(worst.unwritten.any(axis=0))
    return [Finding(Defect.UNWRITTEN_OUTPUT, Detector.POISON,
                    f"{n} of {worst.unwritten.size} elements of C still hold the poison bits after "
                    f"the launch (never written); rows {rows[0]}..{rows[-1]}, columns {cols[0]}..{cols[-1]}",
                    n, where, {"rows": [int(rows[0]), int(rows[-1])], "cols": [int(cols[0]), int(cols[-1])]})]


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two outputs hold the same bits; runs that left the same bits share one array
    (GuardedGemm.run), which is not compared with itself."""
    return a is b or bool(np.array_equal(a, b))


def _nan(run: Run) -> np.ndarray:
    return np.isnan(run.C.astype(np.float64)) & ~run.unwritten


def check_out_of_bounds_read(obs: Observation) -> list[Finding]:
    """OUT_OF_BOUNDS_READ: the output depends on what lies outside the operands.

    Inputs are finite integers, so a NaN in C comes from memory the kernel was
    not given: the guard bands, or memory no operand holds (stale shared memory
    a race reads, uninitialised registers). Guard-swap tells the guards apart
    only where the NaN follows them: the same elements NaN in every launch with
    NaN guards, and no NaN at all in the zero-guard launch between them
    (launch_order). NaN that moves between NaN-guard launches, or NaN in the
    control, comes from somewhere the guards do not decide, and then a NaN
    proves nothing about them. On the H200, in nightly shard 1/10,
    broken_no_barriers bfloat16 TILE8 left NaN in ~2% of C each launch; 592
    elements were NaN in both NaN-guard launches and finite in the control, and
    a rule that asked only that called the race an out-of-bounds read
    (docs/hazards.md, "Why guard swap ..."). A kernel that both races and reads its guards
    is then not named for the read here (memcheck names it).
    """
    if len(obs.runs) < 2 or not obs.control:
        return []
    # once per distinct output: runs that left the same bits share one array (GuardedGemm.run)
    distinct = list({id(r.C_bits): r for r in obs.runs}.values())
    nan_guards = [_nan(r) for r in distinct]
    if not nan_guards[0].any() or any((n != nan_guards[0]).any() for n in nan_guards[1:]):
        return []
    if any(_nan(r).any() for r in obs.control):
        return []
    reads = nan_guards[0]
    n, where = int(reads.sum()), _first(reads)
    return [Finding(Defect.OUT_OF_BOUNDS_READ, Detector.GUARD_SWAP,
                    f"{n} of {reads.size} elements of C are NaN in every launch while the guard bands "
                    f"around A and B hold NaN, and C has no NaN while they hold zeros: the kernel "
                    f"reads outside its operands; "
                    f"first at C{list(where)}", n, where, {"launches": len(obs.runs) + len(obs.control)})]


def _worst_counts(obs: Observation, attribute: str) -> dict[str, int]:
    """Per buffer, the largest nonzero count any launch reported in Run.<attribute>."""
    worst: dict[str, int] = {}
    for run in obs.runs + obs.control:
        for name, n in getattr(run, attribute).items():
            worst[name] = max(worst.get(name, 0), n)
    return {k: v for k, v in sorted(worst.items()) if v}


def check_out_of_bounds_write(obs: Observation) -> list[Finding]:
    """OUT_OF_BOUNDS_WRITE: a guard band around A, B or C changed."""
    hit = _worst_counts(obs, "guard_damage")
    if not hit:
        return []
    text = ", ".join(f"{v} in {k}'s guards" for k, v in hit.items())
    return [Finding(Defect.OUT_OF_BOUNDS_WRITE, Detector.GUARD_BANDS,
                    f"the kernel wrote outside its output: {text}", sum(hit.values()),
                    None, {"guard_damage": hit})]


def check_input_mutation(obs: Observation) -> list[Finding]:
    """INPUT_MUTATION: elements of A or B changed by the launch."""
    hit = _worst_counts(obs, "inputs_changed")
    if not hit:
        return []
    text = ", ".join(f"{v} elements of {k}" for k, v in hit.items())
    return [Finding(Defect.INPUT_MUTATION, Detector.INPUT_CHECK, f"the launch changed its inputs: {text}",
                    sum(hit.values()), None, {"inputs_changed": hit})]


def check_nondeterminism(obs: Observation) -> list[Finding]:
    """NONDETERMINISM: launches on identical inputs (same guards, same poison) left different bits."""
    if len(obs.runs) < 2:
        return []
    first = obs.runs[0].C_bits
    others = [r.C_bits for r in obs.runs[1:] if not _same_bits(r.C_bits, first)]
    if not others:
        return []
    differs = np.logical_or.reduce([bits != first for bits in others])
    n, where = int(differs.sum()), _first(differs)
    return [Finding(Defect.NONDETERMINISM, Detector.REPEAT_LAUNCH,
                    f"{n} of {differs.size} elements of C differ between {len(obs.runs)} launches on "
                    f"identical inputs; first at C{list(where)}", n, where,
                    {"launches": len(obs.runs)})]


def check_reads_c_at_beta_zero(obs: Observation) -> list[Finding]:
    """READS_C_AT_BETA_ZERO: at beta = 0 the output depends on whether C held NaN or finite
    values (gemmcheck.judge.beta_zero); the finite launch's right elements are counted."""
    if not obs.finite_c or not obs.runs:
        return []
    finite = obs.finite_c[0]
    read = beta_zero.read_elements(obs.runs, finite)
    if not read.any():
        return []
    A, B = obs.operands
    right = ~oracle.judge(finite, A, B, exact=True, problem=obs.problem).failing
    return [beta_zero.finding(obs.instance, obs.problem.label, read, finite, right)]


PLAIN_DETECTORS = (check_reads_c_at_beta_zero, check_values, check_unwritten, check_out_of_bounds_read,
                   check_out_of_bounds_write, check_input_mutation, check_nondeterminism)


# -- simulator detectors: each looks at the cpu-sim LaunchReports of an Observation -----------
# (They find nothing in an observation from another backend: it has no reports.)

def _direction(report) -> dict[str, int]:
    """RAW / WAR / WAW counts under the lockstep schedule: the order a warp issuing the same
    instruction stream would show (the simulator's tracking establishes it in that order)."""
    run = next((r for r in report.runs if r.schedule == "lockstep"), None)
    return {k: run.counts.get(k, 0) for k in ("RAW", "WAR", "WAW")} if run else {}


def check_shared_conflicts(obs: Observation) -> list[Finding]:
    """SHARED_MEMORY_RACE (observed): two threads of a block accessed one shared address in
    one barrier interval, at least one of them writing. The conflict exists in every
    schedule; its direction is reported as lockstep showed it."""
    racy = [r for r in obs.reports if r.raw or r.war or r.waw]
    if not racy:
        return []
    worst = max(racy, key=lambda r: r.raw + r.war + r.waw)
    n = worst.raw + worst.war + worst.waw
    direction = _direction(worst)
    shown = ", ".join(f"{k} {v}" for k, v in direction.items() if v)
    lockstep = (f"; under lockstep (one shared access per thread in turn, as a warp issues "
                f"them): {shown}" if direction else "")
    exposing = (f"; the output differs under schedule {worst.exposing_schedule}"
                if worst.exposing_schedule else "")
    pairs = sorted((c for c in worst.conflicts if c.kind in ("RAW", "WAR", "WAW")),
                   key=lambda c: c.schedule != "lockstep")
    example = pairs[0].describe() if pairs else ""
    return [Finding(Defect.SHARED_MEMORY_RACE, Detector.SHARED_TRACKING,
                    f"cpu-sim tracked {n} conflicting shared-memory accesses over schedules "
                    f"{', '.join(worst.schedules)} (two threads, one address, one barrier interval, "
                    f"at least one write){lockstep}{exposing}" + (f"; e.g. {example}" if example else ""),
                    n, None, {"raw": worst.raw, "war": worst.war, "waw": worst.waw,
                              "lockstep": direction, "exposing_schedule": worst.exposing_schedule,
                              "uninitialized_shared_reads": worst.uninitialized_shared_reads,
                              "examples": [c.describe() for c in pairs[:4]]})]


def check_global_races(obs: Observation) -> list[Finding]:
    """GLOBAL_MEMORY_RACE (observed): two blocks of one launch wrote one address of A, B or C,
    not both atomically. CUDA orders nothing between blocks of a launch, so it is a race in
    every order they can run, whether or not the order a schedule picked gave the right bits."""
    racy = [r for r in obs.reports if r.global_races]
    if not racy:
        return []
    worst = max(racy, key=lambda r: r.global_races)
    examples = [g.describe() for g in worst.global_conflicts[:4]]
    first = worst.global_conflicts[0] if worst.global_conflicts else None
    exposing = (f"; the output differs under schedule {worst.exposing_schedule}"
                if worst.exposing_schedule else "")
    return [Finding(Defect.GLOBAL_MEMORY_RACE, Detector.GLOBAL_TRACKING,
                    f"cpu-sim tracked {worst.global_races} write(s) over schedules {', '.join(worst.schedules)} "
                    f"into a global address another block of the same launch wrote, not both atomically "
                    f"(nothing orders blocks within a launch){exposing}"
                    + (f"; e.g. {examples[0]}" if examples else ""),
                    worst.global_races, first.element if first is not None and first.buffer == "C" else None,
                    {"exposing_schedule": worst.exposing_schedule, "examples": examples,
                     "blocks": [list(first.earlier_block), list(first.later_block)] if first else [],
                     "accesses": [first.earlier, first.later] if first else [],
                     "buffer": first.buffer if first else None})]


def check_schedule_dependence(obs: Observation) -> list[Finding]:
    """NONDETERMINISM: one launch on identical inputs gave different bits under different
    thread schedules; the first schedule that differs from the first one is named."""
    dependent = [r for r in obs.reports if r.schedule_dependent]
    if not dependent:
        return []
    report = max(dependent, key=lambda r: max(sum(run.differs.values()) for run in r.runs))
    run = max(report.runs, key=lambda r: sum(r.differs.values()))
    n = sum(run.differs.values())
    return [Finding(Defect.NONDETERMINISM, Detector.SCHEDULES,
                    f"the output depends on the thread schedule: {report.exposing_schedule} first gives "
                    f"different bits than {report.runs[0].schedule} on identical inputs; "
                    f"{run.schedule} differs in {n} elements "
                    f"({', '.join(f'{b}: {k}' for b, k in run.differs.items())})",
                    n, None, {"exposing_schedule": report.exposing_schedule,
                              "schedules": list(report.schedules),
                              "differs": {r.schedule: dict(r.differs) for r in report.runs}})]


def check_divergent_barriers(obs: Observation) -> list[Finding]:
    """DIVERGENT_BARRIER: threads of one block waited at different __syncthreads() calls, or
    some had exited while others waited (the simulator tracks every barrier exactly)."""
    divergent = [r for r in obs.reports if r.divergent]
    if not divergent:
        return []
    report = divergent[0]
    n = sum(run.divergent_barriers for run in report.runs)
    first = report.divergences[0].describe() if report.divergences else "no detail recorded"
    return [Finding(Defect.DIVERGENT_BARRIER, Detector.BARRIER_TRACKING,
                    f"cpu-sim: a __syncthreads() is reached by only some threads of a block "
                    f"({n} divergent barrier(s) over schedules {', '.join(report.schedules)}); "
                    f"first: {first}", n, None,
                    {"divergences": [d.describe() for d in report.divergences[:4]]})]


def check_uninitialized_shared(obs: Observation) -> list[Finding]:
    """OUT_OF_BOUNDS_READ: reads of shared memory no thread of the block had written, with no
    shared-memory conflict to explain them (with one, the race is the reading-too-early)."""
    if any(r.raw or r.war or r.waw for r in obs.reports):
        return []
    reads = [r for r in obs.reports if r.uninitialized_shared_reads]
    if not reads:
        return []
    report = max(reads, key=lambda r: r.uninitialized_shared_reads)
    example = next((c.describe() for c in report.conflicts if c.kind == "uninitialized"), "")
    return [Finding(Defect.OUT_OF_BOUNDS_READ, Detector.SHARED_INIT,
                    f"cpu-sim: {report.uninitialized_shared_reads} read(s) of shared memory no thread "
                    f"of the block had written (outside what the block stored there)"
                    + (f"; e.g. {example}" if example else ""),
                    report.uninitialized_shared_reads, None, {})]


def check_address_sanitizer(obs: Observation) -> list[Finding]:
    """OUT_OF_BOUNDS_READ / _WRITE: AddressSanitizer's reports from a launch on exact-size A,
    B and C, with the buffer and the distance past its end; a crash or stall under it
    without a report is CRASH / HANG."""
    report = obs.address
    if report is None:
        return []
    if report.hung:
        return [unfinished("hang", "the AddressSanitizer launch did not finish", detector=Detector.ASAN)]
    found, by_class = [], {}
    for e in report.errors:
        defect = {"read": Defect.OUT_OF_BOUNDS_READ, "write": Defect.OUT_OF_BOUNDS_WRITE}.get(e.access,
                                                                                          Defect.CRASH)
        by_class.setdefault(defect, []).append(e)
    for defect, errors in by_class.items():
        e = errors[0]
        found.append(Finding(defect, Detector.ASAN, f"AddressSanitizer: {e.describe()}", len(errors), None,
                             {"buffer": e.buffer, "bytes_past": e.bytes_past, "kind": e.kind,
                              "frame": e.frame, "access": e.access}))
    if not found and report.crashed:
        tail = report.log.strip().splitlines()[-3:]
        found.append(unfinished("crash", "the AddressSanitizer launch failed without a "
                                f"report (exit {report.returncode}): {' '.join(tail)}", detector=Detector.ASAN))
    return found


SIMULATOR_DETECTORS = (check_shared_conflicts, check_global_races, check_schedule_dependence,
                       check_divergent_barriers, check_uninitialized_shared, check_address_sanitizer)


@timed("detectors")
def detect(obs: Observation) -> list[Finding]:
    """Every detector's findings for one observation (or its CRASH / HANG). The simulator's
    detectors find nothing in an observation without cpu-sim reports."""
    if obs.failure is not None:
        return [obs.failure]
    return [f for detector in PLAIN_DETECTORS + SIMULATOR_DETECTORS for f in detector(obs)]


# -- classification ----------------------------------------------------------------------

# From the defect registry (gemmcheck.verdict.defects): most specific first, what each root cause
# explains, and the classes plain detectors cannot establish on real hardware (a divergent
# barrier shows only as wrong values there; the CPU simulator's barrier tracking
# establishes it without the tool).
PRIORITY = defects.priority()
EXPLAINS = defects.explains()
# Nondeterminism is named by where it was seen. Shared memory only when racecheck or the
# simulator's tracking saw two threads conflict there; global memory only when the
# simulator's tracking saw two blocks write one address (a split-K kernel whose slice 0
# stores C while slice 1 atomicAdds into it differs between launches too, with no shared
# memory involved: on an H200 racecheck stayed silent). Launches that differ with nothing to
# localize them are a race of unknown place.
UNKNOWN_PLACE = (
    "a race of unknown place: launches on identical inputs gave different bits and no detector "
    "localized it (racecheck, or the simulator's shared-memory tracking, would name shared memory; "
    "the simulator's global-memory tracking would name two blocks ordering global stores and atomics)")
NEEDS_A_TOOL = defects.needs_a_tool()
# Classes nothing on hardware establishes (a global-memory race): there only the classes they
# explain show, and the kill matrix says what would establish the declared one.
NEEDS_THE_SIMULATOR = defects.needs_the_simulator()


@dataclass(frozen=True)
class Diagnosis:
    """The root cause of everything found for one instantiation."""

    defect: Defect | None            # None: nothing found
    basis: str                       # "observed" or "" (nothing found): a class is named only where seen
    established_by: tuple[str, ...]  # detectors whose findings establish `defect`
    explains: tuple[Defect, ...]     # other classes found that the root cause accounts for
    also: tuple[Defect, ...]         # classes found that it does not: independent defects
    explanation: str

    @property
    def label(self) -> str:
        if self.defect is None:
            return "none"
        if self.defect == Defect.NONDETERMINISM:
            return f"{self.defect.value} (race of unknown place)"
        return self.defect.value

    def to_json(self) -> dict:
        return {"defect": self.defect.value if self.defect else None, "basis": self.basis,
                "established_by": [str(d) for d in self.established_by],
                "explains": [d.value for d in self.explains], "also": [d.value for d in self.also],
                "explanation": self.explanation}


def classify(findings) -> Diagnosis:
    """The most specific root cause among `findings`, what it explains, and what is left over."""
    findings = list(findings)
    by_defect: dict[Defect, list[Finding]] = {}
    for f in findings:
        by_defect.setdefault(Defect(f.defect), []).append(f)
    if not by_defect:
        return Diagnosis(None, "", (), (), (), "no detector found anything")
    present = set(by_defect)
    root = next(d for d in PRIORITY if d in present)
    basis = "observed"
    explained = EXPLAINS.get(root, frozenset()) & (present - {root})
    # A class explained by another leftover class is not independent either.
    leftover = [d for d in PRIORITY if d in present and d != root and d not in explained]
    also = tuple(d for d in leftover
                 if not any(d in EXPLAINS.get(other, ()) for other in leftover if other != d))
    by = tuple(sorted({f.detector for f in by_defect[root]}))
    lines = [f"{root.value} ({basis}, by {', '.join(by)}): {by_defect[root][0].summary}"]
    if root == Defect.NONDETERMINISM:
        lines.append(UNKNOWN_PLACE)
    for d in sorted(explained, key=PRIORITY.index):
        lines.append(f"explains {d.value}: {by_defect[d][0].summary}")
    for d in also:
        lines.append(f"also {d.value}, not explained by {root.value}: {by_defect[d][0].summary}")
    return Diagnosis(root, basis, by, tuple(sorted(explained, key=PRIORITY.index)), also,
                     "\n".join(lines))


def caught_as(findings, declared: Defect) -> bool:
    """Whether `findings` classify to `declared` (the kill matrix's criterion)."""
    return classify(findings).defect == declared
