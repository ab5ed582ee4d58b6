"""What one cpu-sim launch showed: the LaunchReport and its findings (shared-memory conflicts,
divergent barriers, global-memory races, the runs per schedule)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

Thread = tuple[int, int, int]


def _thread(linear: int, block: Sequence[int]) -> Thread:
    bx, by = int(block[0]), int(block[1])
    return (linear % bx, (linear // bx) % by, linear // (bx * by))


@dataclass(frozen=True)
class SharedConflict:
    kind: str                  # "RAW" | "WAR" | "WAW" | "uninitialized"
    schedule: str
    block: Thread
    interval: int              # barrier intervals the block had completed
    thread: Thread             # the access that saw the conflict
    other: Thread | None       # the thread whose access in the same interval it conflicts with
    array: str
    byte_offset: int

    def describe(self) -> str:
        where = f"{self.array} + {self.byte_offset} bytes"
        if self.kind == "uninitialized":
            return (f"read of shared memory no thread of block {self.block} had written: thread "
                    f"{self.thread}, barrier interval {self.interval}, {where} [{self.schedule}]")
        verb = {"RAW": "read a value thread {o} wrote", "WAR": "overwrote a value thread {o} read",
                "WAW": "overwrote a value thread {o} wrote"}[self.kind].format(o=self.other)
        return (f"{self.kind}: block {self.block}, thread {self.thread} {verb} in the same barrier "
                f"interval ({self.interval}): {where} [{self.schedule}]")


@dataclass(frozen=True)
class BarrierSite:
    file: str
    line: int
    threads: int
    first_thread: Thread


@dataclass(frozen=True)
class DivergentBarrier:
    """Threads that did not meet as a barrier or a warp-synchronous call asks."""

    schedule: str
    block: Thread
    interval: int
    sites: tuple[BarrierSite, ...]
    exited: int
    first_exited: Thread | None
    # "barrier": threads at different __syncthreads (or exited while others wait). A
    # warp-synchronous call (shuffle, vote, match, reduction, __syncwarp), one of WARP_KINDS:
    # "warp_mask" (lanes called it with a mask that leaves them out), "warp_masks_differ"
    # (lanes called it with another mask than the lane that opened it),
    # "warp_missing_lanes" (lanes its mask names never came), "warp_source" (a shuffle read a
    # lane that did not take part).
    what: str = "barrier"
    # A warp-synchronous call: its warp in the block, the call as CUDA names it, the mask the
    # lane that opened it gave, and the lanes (0..31) the record is about.
    warp: int = 0
    call: str = ""
    mask: int = 0
    lanes: tuple[int, ...] = ()

    @property
    def is_warp_call(self) -> bool:
        return self.what in WARP_KINDS

    @property
    def lane_ranges(self) -> str:
        """The lanes as ranges: (0, 1, 2, 5) -> "0-2, 5"."""
        out: list[list[int]] = []
        for lane in sorted(self.lanes):
            if out and lane == out[-1][1] + 1:
                out[-1][1] = lane
            else:
                out.append([lane, lane])
        return ", ".join(f"{a}-{b}" if b > a else f"{a}" for a, b in out)

    def describe(self) -> str:
        if self.is_warp_call:
            return self._describe_warp_call()
        parts = [f"{s.threads} thread(s) at {s.file}:{s.line} (first {s.first_thread})" for s in self.sites]
        if self.exited:
            parts.append(f"{self.exited} thread(s) had exited (first {self.first_exited})")
        return (f"divergent barrier: block {self.block}, barrier interval {self.interval}: "
                + "; ".join(parts) + f" [{self.schedule}]")

    def _describe_warp_call(self) -> str:
        call = self.sites[0] if self.sites else None
        where = f"{self.call} at {call.file}:{call.line}" if call else self.call
        lanes = f"lane{'s' if len(self.lanes) != 1 else ''} {self.lane_ranges}"
        mask = f"0x{self.mask:08x}"
        what = {
            "warp_mask": f"{lanes} called it with mask {mask}, which leaves them out",
            "warp_masks_differ": f"{lanes} called it with another mask than the lane that opened it "
                                 f"(mask {mask})",
            "warp_missing_lanes": f"its mask {mask} names {lanes}, which never called it",
            "warp_source": f"{lanes} read a lane that did not take part (mask {mask}): the GPU gives an "
                           f"undefined value there",
        }[self.what]
        elsewhere = [f"{s.threads} thread(s) at {s.file}:{s.line} (first {s.first_thread})"
                     for s in self.sites[1:]]
        if self.exited:
            elsewhere.append(f"{self.exited} thread(s) had exited (first {self.first_exited})")
        return (f"invalid warp mask: {where}, block {self.block}, warp {self.warp}: {what}"
                + (f"; they are at: {'; '.join(elsewhere)}" if elsewhere else "") + f" [{self.schedule}]")


# The kinds of DivergentBarrier that are about a warp-synchronous call, not a barrier.
WARP_KINDS = ("warp_mask", "warp_masks_differ", "warp_missing_lanes", "warp_source")



@dataclass(frozen=True)
class GlobalRace:
    """Two blocks of one launch wrote one address of a kernel buffer, not both atomically:
    CUDA orders nothing between them, so the result depends on which came last."""

    schedule: str
    earlier: str               # what the block that ran first did there: "store" | "atomic"
    earlier_block: Thread
    later: str                 # what the block that ran after it did
    later_block: Thread
    buffer: str                # "A" | "B" | "C"
    byte_offset: int           # from the buffer's start (negative: before it)
    element: tuple | None      # (row, column) of the buffer's matrix, None outside it

    def describe(self) -> str:
        where = (f"{self.buffer}{list(self.element)}" if self.element is not None
                 else f"{self.buffer} + {self.byte_offset} bytes (outside the matrix)")
        return (f"global-memory race on {where}: block {self.earlier_block} {_DID[self.earlier]} it and "
                f"block {self.later_block} {_DID[self.later]} it in the same launch, nothing ordering "
                f"the two [{self.schedule}]")


_DID = {"store": "stored to", "atomic": "atomically updated"}


@dataclass
class ScheduleRun:
    schedule: str
    counts: dict[str, int]                 # RAW / WAR / WAW / uninitialized / global -> accesses
    divergent_barriers: int
    differs: dict[str, int] = field(default_factory=dict)  # buffer -> elements differing from run 0


@dataclass
class LaunchReport:
    instance: str
    grid: tuple
    block: tuple
    schedules: tuple[str, ...]
    runs: list[ScheduleRun] = field(default_factory=list)
    conflicts: list[SharedConflict] = field(default_factory=list)
    divergences: list[DivergentBarrier] = field(default_factory=list)
    global_conflicts: list[GlobalRace] = field(default_factory=list)
    outcome: str = "ok"
    failure: str | None = None
    buffer_names: tuple[str, ...] = ("A", "B", "C")   # the buffer of each pointer slot (locating.buffer_names)

    def _total(self, kind: str) -> int:
        return sum(r.counts.get(kind, 0) for r in self.runs)

    @property
    def raw(self) -> int:
        return self._total("RAW")

    @property
    def war(self) -> int:
        return self._total("WAR")

    @property
    def waw(self) -> int:
        return self._total("WAW")

    @property
    def uninitialized_shared_reads(self) -> int:
        return self._total("uninitialized")

    @property
    def global_races(self) -> int:
        """Writes (summed over schedules) into an address another block of the launch wrote,
        not both atomically."""
        return self._total("global")

    @property
    def schedule_dependent(self) -> bool:
        return any(any(r.differs.values()) for r in self.runs)

    @property
    def exposing_schedule(self) -> str | None:
        return next((r.schedule for r in self.runs if any(r.differs.values())), None)

    @property
    def race(self) -> bool:
        return bool(self.raw or self.war or self.waw or self.global_races or self.schedule_dependent)

    @property
    def divergent(self) -> bool:
        """A __syncthreads() that threads of a block did not all reach, in some schedule."""
        return any(r.divergent_barriers for r in self.runs)

    @property
    def bad_warp_calls(self) -> int:
        """Warp-synchronous calls (summed over schedules) whose lanes did not meet as their
        masks say: a caller outside its mask, masks that differ, lanes named that never came,
        a shuffle reading a lane that did not take part."""
        return self._total("warp")

    def summary(self) -> str:
        lines = []
        if self.failure:
            lines.append(self.failure)
        if self.raw or self.war or self.waw:
            lines.append(f"shared-memory conflicts (accesses, all schedules): RAW {self.raw}, "
                         f"WAR {self.war}, WAW {self.waw}")
        lines += [c.describe() for c in self.conflicts]
        if self.global_races:
            lines.append(f"global-memory races (writes, all schedules): {self.global_races}")
        lines += [g.describe() for g in self.global_conflicts]
        if self.schedule_dependent:
            first = self.runs[0].schedule
            for r in self.runs:
                if any(r.differs.values()):
                    diffs = ", ".join(f"{b}: {n}" for b, n in r.differs.items() if n)
                    lines.append(f"schedule {r.schedule} gives different bits than {first} ({diffs} elements)")
        if self.bad_warp_calls:
            lines.append(f"warp-synchronous calls whose lanes did not meet as their masks say (all schedules): "
                         f"{self.bad_warp_calls}")
        lines += [d.describe() for d in self.divergences]
        return "\n".join(lines) or "no findings"

