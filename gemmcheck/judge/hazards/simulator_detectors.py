"""The simulator detectors: each looks at the cpu-sim LaunchReports of an Observation.
(They find nothing in an observation from another backend: it has no reports.)"""

from __future__ import annotations

from gemmcheck.verdict.detectors import Detector
from gemmcheck.verdict import Defect, Finding
from gemmcheck.judge.hazards.outcomes import unfinished
from gemmcheck.judge.hazards.observing import Observation


def _xyz(index) -> str:
    """A thread or block index as CUDA writes it: (x,y,z)."""
    return "(" + ",".join(str(int(i)) for i in index) + ")"


def shared_place(conflict) -> str:
    """Where a shared-memory conflict is: the array and offset, the block and the two threads."""
    array = conflict.array.rsplit("::", 1)[-1]   # the array's own name, not its kernel's signature
    return (f"shared {array} + {conflict.byte_offset} bytes, block {_xyz(conflict.block)}, "
            f"threads {_xyz(conflict.thread)} and {_xyz(conflict.other)} ({conflict.kind})")


def global_place(race) -> str:
    """Where a global-memory race is: the element (or offset) and the two blocks."""
    where = (f"{race.buffer}[{', '.join(str(int(i)) for i in race.element)}]" if race.element is not None
             else f"{race.buffer} + {race.byte_offset} bytes")
    return f"{where}, blocks {_xyz(race.earlier_block)} and {_xyz(race.later_block)}"


def barrier_place(divergence) -> str:
    """Where a divergent barrier is: the block and the barriers its threads waited at."""
    sites = "; ".join(f"{s.threads} thread(s) at {s.file}:{s.line}" for s in divergence.sites)
    exited = f"; {divergence.exited} thread(s) had exited" if divergence.exited else ""
    return f"block {_xyz(divergence.block)}: {sites}{exited}"


def warp_call_place(call) -> str:
    """Where a warp-synchronous call with a bad mask is: the call and its line, the block, the
    warp, its mask and the lanes at fault."""
    site = f" at {call.sites[0].file}:{call.sites[0].line}" if call.sites else ""
    return (f"{call.call}{site}, block {_xyz(call.block)}, warp {call.warp}, mask 0x{call.mask:08x}, "
            f"lanes {call.lane_ranges} ({call.what})")


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
                              "examples": [c.describe() for c in pairs[:4]],
                              "place": shared_place(pairs[0]) if pairs else ""})]


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
                     "buffer": first.buffer if first else None,
                     "place": global_place(first) if first is not None else ""})]


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
    barriers = [d for d in report.divergences if not d.is_warp_call]
    first = barriers[0].describe() if barriers else "no detail recorded"
    return [Finding(Defect.DIVERGENT_BARRIER, Detector.BARRIER_TRACKING,
                    f"cpu-sim: a __syncthreads() is reached by only some threads of a block "
                    f"({n} divergent barrier(s) over schedules {', '.join(report.schedules)}); "
                    f"first: {first}", n, None,
                    {"divergences": [d.describe() for d in barriers[:4]],
                     "place": barrier_place(barriers[0]) if barriers else ""})]


def check_warp_masks(obs: Observation) -> list[Finding]:
    """INVALID_WARP_MASK: a warp-synchronous call (shuffle, vote, match, reduction, __syncwarp)
    whose lanes did not meet as its mask says: a lane called it outside its own mask, lanes of
    one warp gave different masks, a lane the mask names never called it (it waited elsewhere),
    or a shuffle read a lane that did not take part. CUDA leaves each undefined, whatever values
    the schedule happened to give; the call, its line and the lanes are named."""
    bad = [r for r in obs.reports if r.bad_warp_calls]
    if not bad:
        return []
    report = max(bad, key=lambda r: r.bad_warp_calls)
    calls = [d for d in report.divergences if d.is_warp_call]
    first = calls[0] if calls else None
    return [Finding(Defect.INVALID_WARP_MASK, Detector.WARP_TRACKING,
                    f"cpu-sim: a warp-synchronous call whose mask does not match the lanes that call it "
                    f"({report.bad_warp_calls} call(s) over schedules {', '.join(report.schedules)}); first: "
                    + (first.describe() if first else "no detail recorded"), report.bad_warp_calls, None,
                    {"calls": [d.describe() for d in calls[:4]],
                     "lanes": list(first.lanes) if first else [], "mask": first.mask if first else None,
                     "call": first.call if first else "", "kind": first.what if first else "",
                     "line": f"{first.sites[0].file}:{first.sites[0].line}" if first and first.sites else "",
                     "place": warp_call_place(first) if first else ""})]


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
                       check_divergent_barriers, check_warp_masks, check_uninitialized_shared,
                       check_address_sanitizer)
