"""cpu-sim: the same .cu kernels, compiled by g++ and run on the CPU under a simulated
CUDA execution model. Small shapes only; no GPU needed.

How it runs a launch
--------------------
Every instantiation of one kernel source is compiled in one g++ run (build.py) into a
module the worker process (runtime.cpp) loads; when that run fails, each is built alone
and a kernel using what the simulator does not model gets ``NotModelled`` naming it (the
device API modelled, and what is not: docs/cpu-simulator-device-api.md). Each CUDA thread of a block is a fiber;
a scheduler runs one block at a time and the block's fibers between barriers. Buffers
from ``to_device`` live in memfds the worker maps, so the harness's guard bands and
poison work unchanged; a fault or a hang kills only the worker.

The API for detectors (gemmcheck.judge.hazards)
-----------------------------------------
``backend.schedules`` (tuple of names, default ``("forward",)``)
    Each launch runs once per schedule, from the same inputs: ``forward`` (threads in
    order, each to its next barrier), ``reverse``, ``shuffle-<seed>`` (a seeded random
    order, new each barrier interval), ``lockstep`` (one shared-memory access per thread
    in turn, as a warp issues them). Buffers are left as the first schedule left them.
    ``RACE_SCHEDULES`` is a good set; ``with backend.using_schedules(RACE_SCHEDULES):``.
``backend.last_launch_report`` -> ``LaunchReport`` after every launch (also after a
    crash or hang, which raise ``SimulatedCrash`` / ``SimulatedHang``, both
    ``KernelLaunchError``s):

    - ``.outcome``: "ok" | "crash" | "hang"; ``.failure``: the crash/hang description.
    - ``.race`` (bool): a shared-memory conflict or a global-memory race was observed in
      some schedule, or the result depends on the schedule. ``.raw``, ``.war``, ``.waw``
      (counts of accesses, summed over schedules), ``.conflicts`` (examples:
      ``SharedConflict`` with kind, schedule, block, barrier interval, the two threads, the
      array and byte offset).
    - ``.global_races`` (count of writes, summed over schedules) and ``.global_conflicts``
      (examples: ``GlobalRace`` with schedule, the two blocks and what each did, "store" or
      "atomic", the buffer and the element): two blocks of one launch wrote one address of
      A, B or C, not both atomically.
    - ``.schedule_dependent`` (bool), ``.exposing_schedule`` (name or None) and
      ``.runs`` (``ScheduleRun`` per schedule: its counts and ``differs``, per buffer the
      number of elements whose bits differ from the first schedule's).
    - ``.divergent`` (bool), ``.divergences`` (``DivergentBarrier``: block, barrier
      interval, the barrier sites with thread counts, threads that had exited).
    - ``.uninitialized_shared_reads``: reads of shared memory no thread of the block
      had written (the value read is poison: 0xFF bytes).
    - ``.summary()``: one line per finding, for failure messages.

    What the tracking establishes: shared memory is tracked per 2-byte granule per
    barrier interval of a block. RAW: a read returned a value another thread wrote in
    the same interval. WAR: a write replaced a value another thread read in the same
    interval. WAW: a write replaced another thread's write of the same interval. These
    are events observed in that schedule: the conflict (two threads, one address, one
    interval, at least one write) exists in every schedule, its direction does not.
    Global memory (A, B and C, guard bands included) is tracked per 2-byte granule per
    launch, writes only: the block that last stored there and the one that last updated it
    atomically. A store by one block and a store or an atomic by another is a race in every
    order the blocks can run (CUDA orders none within a launch); atomics against atomics are
    not (a split-K sum into a zeroed C). Blocks run in the schedule's order too (``forward``
    in order, ``reverse`` backwards, ``shuffle-<seed>`` shuffled), so the result of such a
    race also shows as schedule dependence.
    Under ``lockstep`` the direction is the one a warp issuing the same instruction
    stream would show (a missing barrier after the load reads as RAW, after the dot
    product as WAR).
``backend.address_check(instance, A, B)`` -> ``AddressReport``: one launch of an
    AddressSanitizer build in a child process on exact-size heap buffers. ``.errors``:
    ``AddressError`` (access "read"/"write", buffer "A"/"B"/"C", ASan's bug type, bytes
    past the end or before the start, the kernel frame); ``.crashed``, ``.hung``,
    ``.log``.
``backend.hang_timeout_s`` (``--gemm-hang-timeout``, default 10): a launch with no
    scheduler progress for that long is a hang (``SimulatedHang``, a ``KernelHang``).
``backend.track_shared`` (default True): False skips shared- and global-memory tracking
    (and the per-block poisoning of shared memory) for speed, ~2x; the schedules still run.

Speed: small shapes. The guarded kernel at TILE 16 takes ~25 ms at 64^3 and ~1 s at
256^3 per schedule; 1024^3 takes minutes. Races show at any size here, so hazard
detectors should use small shapes on this backend (it offers
``gemmcheck.backends.ExploresSchedules``: code asks for that, not for the name).
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import tempfile
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from gemmcheck.backends import (Backend, BackendUnavailable, KernelCompileError, KernelHang, NotSupported,
                                KernelLaunchError, launch_error)
from gemmcheck.backends.cpu_sim import build, isolate
from gemmcheck.backends.cpu_sim import worker as wk
from gemmcheck.contract.catalog import Instance
from gemmcheck.contract.launch import (MAX_STATIC_SHARED_BYTES, Launch, check_block, plan,
                              tight_leading_dimensions)
from gemmcheck.phases import timed

RACE_SCHEDULES = ("forward", "reverse", "shuffle-1", "shuffle-2", "lockstep")
BUFFER_NAMES = ("A", "B", "C")

Thread = tuple[int, int, int]


class SimulatedCrash(KernelLaunchError):
    """The kernel faulted in the simulator (the worker died); the report says where."""


class SimulatedHang(KernelHang):
    """The kernel made no progress for hang_timeout_s; the worker was killed."""


class NotSimulated(KernelLaunchError):
    """The kernel is gpu_only in its catalog: it needs what the simulator does not model."""


class NotModelled(NotSupported):
    """The kernel uses a construct the simulator does not model (g++ says which, and where).

    A build error of this one kernel only: the other kernels of its file are built without it.
    ``construct``, ``where`` (file:line, or "" when g++ could not say) and ``kernel`` name it."""

    def __init__(self, kernel: str, found: "isolate.Unmodelled", log: str):
        self.kernel, self.construct = kernel, found.construct
        self.where = f"{found.file}:{found.line}" if found.file else ""
        at = f" at {self.where}" if self.where else ""
        super().__init__(f"cpu-sim does not model {found.construct} (used by kernel {kernel}{at}); declare "
                         f"the kernel gpu_only = true in its catalog entry to skip it on cpu-sim, or run it "
                         f"with --gemm-backend cupy on a GPU\n{log}")


def _build_failure(inst: Instance, exc: build.BuildError) -> KernelCompileError:
    """The error for one instantiation that did not build alone: NotModelled when g++ shows a
    construct the simulator does not model, else the compile error as g++ gave it."""
    found = isolate.unmodelled(exc.log, inst.spec.source, inst.spec.entry)
    if found is not None:
        return NotModelled(inst.spec.entry, found, str(exc))
    return KernelCompileError(str(exc))


def parse_schedule(name: str) -> tuple[int, int]:
    """(schedule code, seed) for a schedule name; ValueError names the known ones."""
    base, _, seed = name.partition("-")
    if base in wk.SCHEDULES and (base == "shuffle") == bool(seed) and (not seed or seed.isdigit()):
        return wk.SCHEDULES[base], int(seed or 0)
    raise ValueError(f"unknown schedule {name!r}; use forward, reverse, lockstep or shuffle-<seed>")


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
    schedule: str
    block: Thread
    interval: int
    sites: tuple[BarrierSite, ...]
    exited: int
    first_exited: Thread | None
    # "barrier": threads at different __syncthreads (or exited while others wait). For a
    # warp-synchronous call (shuffle, vote, __syncwarp): "warp_missing_lanes" (lanes its mask
    # names never came), "warp_mask" (a lane left itself out of its mask, or the lanes' masks
    # or calls differ), "warp_source" (a shuffle read a lane that did not take part).
    what: str = "barrier"

    def describe(self) -> str:
        parts = [f"{s.threads} thread(s) at {s.file}:{s.line} (first {s.first_thread})" for s in self.sites]
        if self.exited:
            parts.append(f"{self.exited} thread(s) had exited (first {self.first_exited})")
        head = {
            "barrier": "divergent barrier",
            "warp_missing_lanes": "divergent warp-synchronous call (lanes its mask names did not arrive)",
            "warp_mask": "warp-synchronous call with a bad mask (a lane not in its own mask, or lanes "
                         "of one warp with different masks or calls)",
            "warp_source": "shuffle from a lane that did not take part (the GPU gives an undefined value)",
        }[self.what]
        return (f"{head}: block {self.block}, barrier interval {self.interval}: "
                + "; ".join(parts) + f" [{self.schedule}]")


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
        return any(r.divergent_barriers for r in self.runs)

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
        lines += [d.describe() for d in self.divergences]
        return "\n".join(lines) or "no findings"


@dataclass(frozen=True)
class AddressError:
    access: str | None     # "read" | "write" | None (ASan did not say)
    buffer: str | None     # "A" | "B" | "C" | None (not a kernel buffer)
    kind: str              # ASan's bug type: heap-buffer-overflow, SEGV, ...
    bytes_past: int | None  # > 0: past the end; < 0: before the start
    size: int | None        # access size in bytes
    frame: str              # the innermost kernel frame ASan printed

    def describe(self) -> str:
        where = ""
        if self.buffer and self.bytes_past is not None:
            where = (f" {self.bytes_past} bytes past the end of {self.buffer}" if self.bytes_past >= 0
                     else f" {-self.bytes_past} bytes before the start of {self.buffer}")
        return f"out-of-bounds {self.access or 'access'}{where} ({self.kind}, {self.size} bytes) in {self.frame}"


@dataclass
class AddressReport:
    instance: str
    errors: list[AddressError]
    returncode: int | None
    log: str
    C_bits: np.ndarray | None = None
    hung: bool = False

    @property
    def crashed(self) -> bool:
        return not self.hung and self.returncode not in (0,) and not self.errors

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.errors


class CpuSimBackend(Backend):
    """Offers every capability in gemmcheck.backends: ExploresSchedules, ReportsLaunches,
    ChecksAddresses, TracksShared (declared here, at class level, so they can be asked
    for before a backend is built)."""

    name = "cpu-sim"
    simulated = True
    schedules: tuple[str, ...] = ("forward",)
    track_shared: bool = True
    last_launch_report: "LaunchReport | None" = None

    def __init__(self) -> None:
        try:
            self._cxx = build.compiler()
            self._worker = wk.Worker(build.worker())
        except build.BuildError as exc:
            raise BackendUnavailable(f"--gemm-backend cpu-sim: {exc}") from None
        # A build unit is (source, -D macros): one g++ run builds all its wanted instantiations.
        self._wanted: dict[tuple, set[Instance]] = defaultdict(set)
        self._module_of: dict[tuple, build.Module] = {}       # (unit, name expression) -> module
        self._failed: dict[tuple, KernelCompileError] = {}    # (unit, name expression) -> why
        self.build_seconds: dict[str, float] = {}   # source name -> g++ seconds (cache misses only)

    def describe(self) -> str:
        return f"cpu-sim ({self._cxx[1]}; fibers, one block at a time; small shapes only)"

    # -- building ----------------------------------------------------------------------

    def prepare(self, instances: Iterable[Instance]) -> None:
        new: set[tuple] = set()
        for inst in instances:
            if inst.spec.gpu_only or _key(inst) in self._module_of or _key(inst) in self._failed:
                continue
            self._wanted[inst.build_unit].add(inst)
            new.add(inst.build_unit)

        def one(unit):
            source, defines = unit
            wanted = {i.name_expression: i for i in self._wanted[unit]
                      if (unit, i.name_expression) not in self._failed}
            try:
                module = build.module(source, list(wanted.values()), defines)
                return unit, {name: module for name in wanted}
            except build.BuildError as exc:
                if len(wanted) == 1:
                    return unit, {name: _build_failure(inst, exc) for name, inst in wanted.items()}
            # One broken instantiation must not take the others of the same file down: each is
            # built alone, with the file's other kernels left out.
            results = {}
            for name, inst in wanted.items():
                try:
                    results[name] = build.module(source, [inst], defines)
                except build.BuildError as exc:
                    results[name] = _build_failure(inst, exc)
            return unit, results

        # One g++ per build unit, units side by side (g++ is single-threaded).
        with ThreadPoolExecutor(max_workers=max(1, min(len(new), os.cpu_count() or 1))) as pool:
            for unit, results in pool.map(one, sorted(new, key=repr)):
                for name, result in results.items():
                    if isinstance(result, KernelCompileError):
                        result.source = unit[0]   # names the build test that shows the errors
                        self._failed[(unit, name)] = result
                        continue
                    self._module_of[(unit, name)] = result
                    if result.build_seconds is not None:
                        self.build_seconds[unit[0].name] = result.build_seconds

    def build_error(self, instance: Instance) -> KernelCompileError | None:
        if instance.spec.gpu_only:
            return None
        try:
            self._module(instance)
        except KernelCompileError as exc:
            return exc
        return None

    def _module(self, instance: Instance) -> build.Module:
        if instance.spec.gpu_only:
            raise NotSimulated(f"{instance.id}: the catalog declares it gpu_only (it needs what the CPU "
                               "simulator does not model); run it with --gemm-backend cupy on a GPU")
        key = _key(instance)
        if key not in self._module_of and key not in self._failed:
            self.prepare([instance])
        if key in self._failed:
            # A fresh exception each time: re-raising the stored one would grow its traceback
            # (and hypothesis' notes) with every launch.
            stored = self._failed[key]
            error = type(stored).__new__(type(stored))   # a fresh one: same type, message and fields
            error.args = stored.args
            error.__dict__.update({k: v for k, v in vars(stored).items() if k != "__notes__"})
            raise error from None
        module = self._module_of[key]
        shared = build.static_shared_bytes(module, instance.name_expression)
        if shared > MAX_STATIC_SHARED_BYTES:
            # What the GPU refuses, the simulator refuses too (it has no such limit of its own).
            error = KernelCompileError(
                f"{instance.id}: {instance.name_expression} declares {shared} bytes of static shared memory; "
                f"CUDA allows {MAX_STATIC_SHARED_BYTES} (use dynamic shared memory above 48 KB)")
            error.source = instance.spec.source
            raise error
        return module

    # -- memory ------------------------------------------------------------------------

    def to_device(self, bits: np.ndarray):
        return wk.shared_array(bits)

    def to_host(self, buffer) -> np.ndarray:
        return np.array(buffer, copy=True)

    def copy(self, buffer):
        return wk.shared_array(buffer)

    def same(self, a, b) -> bool:
        return bool(np.array_equal(a, b))

    # -- launching ---------------------------------------------------------------------

    @contextlib.contextmanager
    def using_schedules(self, schedules: Sequence[str]):
        """Run launches inside the block under these schedules; restore the old ones after."""
        for s in schedules:
            parse_schedule(s)
        old, self.schedules = self.schedules, tuple(schedules)
        try:
            yield self
        finally:
            self.schedules = old

    @timed("launch")
    def launch(self, instance: Instance, launch: Launch) -> None:
        module = self._module(instance)
        grid, block = tuple(int(g) for g in launch.grid), tuple(int(b) for b in launch.block)
        why = check_block(block)
        if why:
            raise launch_error(instance, grid, block, ValueError(why))
        if launch.shared_bytes:
            raise NotSimulated(f"{instance.id}: asks for {launch.shared_bytes} bytes of dynamic shared memory "
                               "(extern __shared__), which cpu-sim does not model; run it on a GPU")
        schedules = tuple(self.schedules) or ("forward",)
        by_role = dict(zip(instance.spec.roles, launch.args))
        pointers = [by_role[name] for name in BUFFER_NAMES]   # slots 0, 1, 2 are A, B, C
        ints = build.int_slots(instance, launch.args)
        report = LaunchReport(instance.id, grid, block, schedules)
        locate = _element_locator(instance, by_role)
        self.last_launch_report = report
        request = self._request(module, instance, grid, block, pointers, ints)
        roots = [wk.root_of(p) for p in pointers]
        distinct = list({id(buf): (buf, whole) for buf, whole in roots}.values())
        before = [whole.copy() for _, whole in distinct] if len(schedules) > 1 else None
        first_after = None
        for index, name in enumerate(schedules):
            if index > 0:
                for (_, whole), saved in zip(distinct, before):
                    whole[...] = saved
            request.schedule, request.seed = parse_schedule(name)
            run = self._run_one(module, instance, grid, block, request, [buf.fd for buf, _ in roots],
                                name, report, locate)
            report.runs.append(run)
            if len(schedules) == 1:
                continue
            after = [whole.copy() for _, whole in distinct]
            if index == 0:
                first_after = after
                continue
            for p, (buf, _) in enumerate(roots[:len(BUFFER_NAMES)]):
                k = next(i for i, (b, _) in enumerate(distinct) if b is buf)
                differ = int(np.count_nonzero(after[k] != first_after[k]))
                if differ:
                    run.differs[BUFFER_NAMES[p]] = differ
        if first_after is not None:
            for (_, whole), saved in zip(distinct, first_after):
                whole[...] = saved

    def _request(self, module, instance, grid, block, pointers, ints) -> wk.Request:
        if len(pointers) > wk.MAX_POINTERS or len(ints) > wk.MAX_INTS:
            raise launch_error(instance, grid, block, ValueError("too many kernel arguments"))
        rq = wk.Request()
        rq.module = str(module.path).encode()
        rq.kernel = module.index(instance.name_expression)
        rq.npointers, rq.nints = len(pointers), len(ints)
        for i, v in enumerate(ints):
            rq.ints[i] = v
        for i, p in enumerate(pointers):
            buf, _ = wk.root_of(p)
            offset = p.ctypes.data - buf.address
            rq.pointer_offset[i] = offset
            rq.pointer_length[i] = len(buf) - offset
        rq.grid[:] = grid
        rq.block[:] = block
        arrays = module.shared[:wk.MAX_RANGES]
        rq.nranges = len(arrays)
        rq.track = 1 if self.track_shared else 0
        for i, arr in enumerate(arrays):
            rq.range_start[i], rq.range_size[i] = arr.start, arr.size
        return rq

    def _run_one(self, module, instance, grid, block, request, fds, schedule, report, locate=None) -> ScheduleRun:
        try:
            status, error = self._worker.run(request, fds, self.hang_timeout_s)
        except wk.WorkerDied as died:
            r = died.report
            what = (f"signal {died.signal_number}" if died.signal_number else f"exit code {died.exit_code}")
            where = (f"block {tuple(r.cur_block)}, thread {_thread(r.cur_thread, block)}")
            address = f" at address {r.fault_address:#x}" if r.signal else ""
            report.outcome = "crash"
            why = r.message.decode(errors="replace")
            report.failure = (f"{instance.id}: the kernel crashed the simulator ({what}{address}) in {where} "
                              f"[{schedule}]" + (f": {why}" if why else ""))
            self._collect(module, report, r, schedule, block, locate)
            raise SimulatedCrash(report.failure) from None
        except wk.WorkerStalled as stalled:
            r = stalled.report
            report.outcome = "hang"
            report.failure = (f"{instance.id}: no progress for {stalled.seconds:.1f} s; last running: block "
                              f"{tuple(r.cur_block)}, thread {_thread(r.cur_thread, block)} [{schedule}]")
            self._collect(module, report, r, schedule, block, locate)
            raise SimulatedHang(report.failure) from None
        if status != 0:
            raise launch_error(instance, grid, block, RuntimeError(f"cpu-sim worker: {error}"))
        return self._collect(module, report, wk.Report.from_buffer_copy(self._worker.report), schedule, block,
                             locate)

    def _collect(self, module, report: LaunchReport, r: wk.Report, schedule, block, locate=None) -> ScheduleRun:
        """`locate`: (buffer, byte offset) -> element (_element_locator), for global races."""
        counts = {name: int(r.counts[k]) for k, name in wk.KIND_NAMES.items()}
        for c in r.conflicts[:r.nconflicts]:
            array, offset = module.array_at(int(c.address))
            other = None if c.thread_b == 0xFFFF else _thread(c.thread_b, block)
            report.conflicts.append(SharedConflict(
                wk.KIND_NAMES[c.kind], schedule, tuple(c.block), int(c.interval), _thread(c.thread_a, block),
                other, array, offset))
        for d in r.divergences[:r.ndivergent]:
            sites = tuple(BarrierSite(s.file.decode(errors="replace"), int(s.line), int(s.count),
                                      _thread(s.first_thread, block)) for s in d.sites[:d.nsites])
            report.divergences.append(DivergentBarrier(
                schedule, tuple(d.block), int(d.interval), sites, int(d.exited),
                _thread(d.first_exited, block) if d.exited else None,
                wk.DIVERGENCE_KINDS.get(int(d.what), "barrier")))
        counts["global"] = int(r.global_races)
        for g in r.global_[:r.nglobal]:
            name = BUFFER_NAMES[g.buffer] if g.buffer < len(BUFFER_NAMES) else f"pointer {g.buffer}"
            report.global_conflicts.append(GlobalRace(
                schedule, wk.GLOBAL_ACCESS[g.earlier], tuple(g.earlier_block), wk.GLOBAL_ACCESS[g.later],
                tuple(g.later_block), name, int(g.byte_offset),
                locate(name, int(g.byte_offset)) if locate else None))
        return ScheduleRun(schedule, counts, int(r.divergent))

    # -- AddressSanitizer ----------------------------------------------------------------

    def address_check(self, instance: Instance, A: np.ndarray, B: np.ndarray, *,
                      timeout_s: float = 120.0) -> AddressReport:
        """One launch of an AddressSanitizer build on exact-size buffers, in a child process."""
        from gemmcheck.contract import dtypes as dt

        self._module(instance)
        # The kernel's own instantiations only: an ASan build is slow and cached per kernel.
        wanted = [i for i in instance.spec.instances()]
        if instance not in wanted:
            wanted.append(instance)
        try:
            runner, names = build.asan_runner(instance.spec.source, [i for i in wanted if i.defines == instance.defines],
                                              instance.defines)
        except build.BuildError as exc:
            raise KernelCompileError(str(exc)) from None
        M, K = A.shape
        N = B.shape[1]
        d = instance.dt
        buffers = [dt.to_bits(A, d), dt.to_bits(B, d), np.full((M, N), d.poison_bits, dtype=d.storage)]
        values = {"A": None, "B": None, "C": None, "M": M, "N": N, "K": K, "alpha": 1, "beta": 0,
                  **tight_leading_dimensions(instance.spec.layouts, M, N, K)}
        planned = plan(instance, values)
        grid, block = planned.grid, planned.block
        ints = build.int_slots(instance, planned.args)
        with tempfile.TemporaryDirectory(prefix="gemmcheck-asan-") as tmp:
            paths = []
            for name, bits in zip(BUFFER_NAMES, buffers):
                path = Path(tmp) / f"{name}.bin"
                path.write_bytes(np.ascontiguousarray(bits).tobytes())
                paths += [str(path), str(bits.nbytes)]
            cmd = [str(runner), str(names.index(instance.name_expression)), *map(str, grid), *map(str, block),
                   str(len(ints)), *map(str, ints), str(len(buffers)), *paths]
            env = {"ASAN_OPTIONS": "detect_leaks=0:halt_on_error=1:abort_on_error=0:"
                                   "detect_stack_use_after_return=0:allocator_may_return_null=1"}
            try:
                out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env)
            except subprocess.TimeoutExpired as exc:
                log = (exc.stderr or b"").decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
                return AddressReport(instance.id, [], None, log, hung=True)
            C_bits = None
            if out.returncode == 0:
                C_bits = np.fromfile(Path(tmp) / "C.bin", dtype=d.storage).reshape(M, N)
        return AddressReport(instance.id, parse_asan(out.stderr), out.returncode, out.stderr, C_bits)

    def close(self) -> None:
        self._worker.stop()


_BUFFER_LINE = re.compile(r"cudasim-buffer (\d+) (0x[0-9a-f]+) (\d+)")
_ERROR = re.compile(r"ERROR: AddressSanitizer: ([\w-]+)")
_ACCESS = re.compile(r"\b(READ|WRITE) of size (\d+) at (0x[0-9a-f]+)")
# libasan before GCC 13 / LLVM 15 says "to the right of" / "to the left of"; later ones
# "after" / "before".
_REGION = re.compile(r"(0x[0-9a-f]+) is located (\d+) bytes (to the right of|to the left of|inside of|after|before) "
                     r"(\d+)-byte region \[(0x[0-9a-f]+),")
# "#0 0x55c0 in void k<float, 16, (Flaw)5>(float const*, int) /path/k.cu:75": the
# function is everything up to the last space (template arguments hold spaces and parens).
_FRAME = re.compile(r"#\d+ 0x[0-9a-f]+ in (.+) (\S+)$", re.M)
_SEGV_ACCESS = re.compile(r"The signal is caused by a (READ|WRITE) memory access")


def parse_asan(log: str) -> list[AddressError]:
    """The errors in an AddressSanitizer log, attributed to the kernel's buffers."""
    buffers = {int(m.group(2), 16): (BUFFER_NAMES[int(m.group(1))] if int(m.group(1)) < 3 else m.group(1),
                                     int(m.group(3)))
               for m in _BUFFER_LINE.finditer(log)}
    errors = []
    for m in _ERROR.finditer(log):
        chunk = log[m.start():]
        access = _ACCESS.search(chunk) or None
        kind = m.group(1)
        acc = access.group(1).lower() if access else None
        size = int(access.group(2)) if access else None
        if acc is None:
            seg = _SEGV_ACCESS.search(chunk)
            acc = seg.group(1).lower() if seg else None
        region = _REGION.search(chunk)
        buffer, past = None, None
        if region:
            start = int(region.group(5), 16)
            buffer = buffers.get(start, (None, None))[0]
            distance = int(region.group(2))
            if region.group(3) in ("to the right of", "after"):
                past = distance
            elif region.group(3) in ("to the left of", "before"):
                past = -distance
        frames = [f.group(1) for f in _FRAME.finditer(chunk)]
        frame = next((f for f in frames if "cudasim" not in f and "run_" not in f), frames[0] if frames else "?")
        errors.append(AddressError(acc, buffer, kind, past, size, frame))
    return errors


def _element_locator(instance: Instance, by_role: dict):
    """A function (buffer name, byte offset from its start) -> (row, column) of that operand's
    matrix, or None where the offset lies outside it (a guard band): read from the launch's
    sizes and leading dimensions and the catalog's layouts."""
    ints = {k: int(v) for k, v in by_role.items() if isinstance(v, (int, np.integer))}
    M, N, K = (ints.get(k, ints.get("N", 0)) for k in ("M", "N", "K"))
    shapes = {"A": (M, K), "B": (K, N), "C": (M, N)}
    lds = {**tight_leading_dimensions(instance.spec.layouts, M, N, K),
           **{k: v for k, v in ints.items() if k.startswith("ld")}}
    itemsize = np.dtype(instance.dt.storage).itemsize

    def locate(name: str, byte_offset: int):
        if name not in shapes or byte_offset < 0:
            return None
        e, ld = byte_offset // itemsize, lds[f"ld{name.lower()}"]
        rows, cols = shapes[name]
        row_major = instance.spec.layouts.get(name, "row") == "row"
        r, c = (e // ld, e % ld) if row_major else (e % ld, e // ld)
        return (int(r), int(c)) if r < rows and c < cols else None

    return locate


def _key(instance: Instance) -> tuple:
    return (instance.build_unit, instance.name_expression)
