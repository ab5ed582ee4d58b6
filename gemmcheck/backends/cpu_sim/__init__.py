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
      a kernel's buffer (A, B, C, D or a scale factor), not both atomically.
    - ``.schedule_dependent`` (bool), ``.exposing_schedule`` (name or None) and
      ``.runs`` (``ScheduleRun`` per schedule: its counts and ``differs``, per buffer the
      number of elements whose bits differ from the first schedule's).
    - ``.divergent`` (bool): a __syncthreads() threads of a block did not all reach;
      ``.bad_warp_calls`` (count, summed over schedules): warp-synchronous calls whose lanes did
      not meet as their masks say; ``.divergences`` (``DivergentBarrier``: block, barrier
      interval, the sites with thread counts, threads that had exited; for a warp-synchronous
      call its ``what``, the call, the warp, the mask and the lanes).
    - ``.uninitialized_shared_reads``: reads of shared memory no thread of the block
      had written (the value read is poison: 0xFF bytes).
    - ``.summary()``: one line per finding, for failure messages.

    What the tracking establishes: shared memory is tracked per byte per
    barrier interval of a block. RAW: a read returned a value another thread wrote in
    the same interval. WAR: a write replaced a value another thread read in the same
    interval. WAW: a write replaced another thread's write of the same interval. These
    are events observed in that schedule: the conflict (two threads, one address, one
    interval, at least one write) exists in every schedule, its direction does not.
    Global memory (the kernel's buffers: A, B, C, D and scale factors, guard bands included)
    is tracked per byte per launch, writes only: the block that last stored there and the last
    two distinct blocks that updated it atomically. A store by one block and a store or an
    atomic by another is a race, seen in every order the blocks can run (CUDA orders none
    within a launch); atomics against atomics are not (a split-K sum into a zeroed C). Blocks
    run in the schedule's order too (``forward``
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

One module per job, each name importable from here:

- backend: the backend (CpuSimBackend)
- schedules: schedule names (RACE_SCHEDULES, parse_schedule)
- reports: what a launch showed (LaunchReport, SharedConflict, DivergentBarrier, BarrierSite,
  GlobalRace, ScheduleRun)
- address: AddressSanitizer's report and its parser (AddressReport, AddressError, parse_asan)
- locating: the buffer slots and the element an offset falls on (BUFFER_NAMES)
- errors: SimulatedCrash, SimulatedHang, NotSimulated, NotModelled, ModuleNotLoaded (a ToolFailure)
- build, isolate, worker: the g++ builds, isolating what is not modelled, the worker process
"""

from gemmcheck.backends.cpu_sim import build, isolate
from gemmcheck.backends.cpu_sim import worker as wk
from gemmcheck.backends.cpu_sim.address import AddressError, AddressReport, parse_asan
from gemmcheck.backends.cpu_sim.backend import CpuSimBackend
from gemmcheck.backends.cpu_sim.errors import ModuleNotLoaded, NotModelled, NotSimulated, SimulatedCrash, SimulatedHang
from gemmcheck.backends.cpu_sim.locating import BUFFER_NAMES
from gemmcheck.backends.cpu_sim.reports import (BarrierSite, DivergentBarrier, GlobalRace, LaunchReport, ScheduleRun,
                                                SharedConflict, Thread)
from gemmcheck.backends.cpu_sim.schedules import RACE_SCHEDULES, parse_schedule

__all__ = [
    "BUFFER_NAMES", "RACE_SCHEDULES", "AddressError", "AddressReport", "BarrierSite", "CpuSimBackend",
    "DivergentBarrier", "GlobalRace", "LaunchReport", "ModuleNotLoaded", "NotModelled", "NotSimulated", "ScheduleRun",
    "SharedConflict", "SimulatedCrash", "SimulatedHang", "Thread", "build", "isolate", "parse_asan",
    "parse_schedule", "wk",
]
