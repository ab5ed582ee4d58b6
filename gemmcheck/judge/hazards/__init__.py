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
  unknown place: only racecheck or the simulator's tracking says shared memory; on
  hardware the race locator asks the simulator to place it, locate_race)
- at beta = 0 the output changes when C holds NaN instead of finite values
  (gemmcheck.judge.beta_zero; kernels that take beta): READS_C_AT_BETA_ZERO
- a launch that faults / never returns (gemmcheck.judge.isolation), or a kernel that does
  not build: CRASH / HANG / COMPILE_ERROR, each built by `unfinished` only
- compute-sanitizer racecheck / synccheck / memcheck / initcheck
  (gemmcheck.judge.sanitizer): SHARED_MEMORY_RACE, DIVERGENT_BARRIER,
  INVALID_WARP_MASK (synccheck's "Invalid arguments"), out-of-bounds
- on the CPU simulator (cpu-sim; observe_simulated): its shared-memory
  tracking (SHARED_MEMORY_RACE observed, the lockstep direction as a
  detail), its global-memory tracking (GLOBAL_MEMORY_RACE: two blocks of a
  launch wrote one address, not both atomically; the element and the two
  blocks named), output that depends on the thread or block schedule
  (NONDETERMINISM, with the schedule that exposes it), barrier tracking
  (DIVERGENT_BARRIER), warp tracking (INVALID_WARP_MASK: a warp-synchronous call
  whose mask leaves out a lane that calls it or names one that never does; the
  call, its line and the lanes named),
  reads of shared memory no thread wrote, AddressSanitizer on exact-size
  buffers (OUT_OF_BOUNDS_READ / _WRITE naming the buffer), and a crash or
  a stall of its worker process (CRASH / HANG)

`classify` turns all findings for one instantiation into the most specific
root cause and says which other findings it explains; the classes, their
priority and what each explains come from gemmcheck.verdict.defects, the detectors'
names from gemmcheck.verdict.detectors. Detectors take any Backend: the GPU, or one
that offers thread schedules and launch reports (the CPU simulator).

One module per job, each public name importable from here:

- problems: the problems hazards are looked for on (exposing_problems, SMALL_PURPOSES, K_ZERO,
  is_race_stress)
- observing: guarded launches observed on a GPU or the CPU simulator (Observation, observe,
  observe_simulated, simulates_threads, SIMULATOR_SCHEDULES)
- outcomes: launches that did not finish, CRASH / HANG / COMPILE_ERROR (unfinished, launch_failure)
- plain_detectors: the checks on any backend's launches (check_values, ..., PLAIN_DETECTORS)
- simulator_detectors: the checks on cpu-sim's launch reports (check_shared_conflicts, ...,
  SIMULATOR_DETECTORS)
- detection: every detector on one observation (detect)
- classification: the root defect and what it explains (classify, Diagnosis, caught_as, PLACES_A_RACE)
- locating: a race hardware shows without a place, placed by the CPU simulator (locate_race,
  Placement, cpu_simulator, with_place)
"""

from gemmcheck.judge.hazards.classification import (EXPLAINS, NEEDS_A_TOOL, NEEDS_THE_SIMULATOR, PLACES_A_RACE,
                                                    PRIORITY, UNKNOWN_PLACE, UNSEEN_ON_HARDWARE, Diagnosis,
                                                    caught_as, classify)
from gemmcheck.judge.hazards.detection import detect
from gemmcheck.judge.hazards.observing import (CONTROL_GUARD_BITS, SIMULATOR_SCHEDULES, Observation, launch_order,
                                               observe, observe_simulated, observe_small_problems_simulated,
                                               operands, scaling, simulates_threads, watches_c_reads)
from gemmcheck.judge.hazards.locating import PLACED_BY, Placement, cpu_simulator, locate_race, with_place
from gemmcheck.judge.hazards.outcomes import UNFINISHED, launch_failure, unfinished
from gemmcheck.judge.hazards.plain_detectors import (PLAIN_DETECTORS, check_input_mutation, check_nondeterminism,
                                                     check_out_of_bounds_read, check_out_of_bounds_write,
                                                     check_reads_c_at_beta_zero, check_unwritten, check_values)
from gemmcheck.judge.hazards.problems import (ALL_RACE_SIZES_MIN_TILE, K_ZERO, SMALL_PURPOSES, exposing_problems,
                                              is_race_stress, no_race_stress)
from gemmcheck.judge.hazards.simulator_detectors import (SIMULATOR_DETECTORS, check_address_sanitizer,
                                                         check_divergent_barriers, check_global_races,
                                                         check_schedule_dependence, check_shared_conflicts,
                                                         check_uninitialized_shared, check_warp_masks)

__all__ = [
    "ALL_RACE_SIZES_MIN_TILE", "CONTROL_GUARD_BITS", "Diagnosis", "EXPLAINS", "K_ZERO", "NEEDS_A_TOOL",
    "NEEDS_THE_SIMULATOR", "Observation", "PLACED_BY", "PLACES_A_RACE", "PLAIN_DETECTORS", "PRIORITY", "Placement",
    "SIMULATOR_DETECTORS", "SIMULATOR_SCHEDULES", "SMALL_PURPOSES", "UNFINISHED", "UNKNOWN_PLACE",
    "UNSEEN_ON_HARDWARE", "caught_as", "check_address_sanitizer", "check_divergent_barriers", "check_global_races",
    "check_input_mutation", "check_nondeterminism", "check_out_of_bounds_read", "check_out_of_bounds_write",
    "check_reads_c_at_beta_zero", "check_schedule_dependence", "check_shared_conflicts",
    "check_uninitialized_shared", "check_unwritten", "check_values", "check_warp_masks", "classify",
    "cpu_simulator", "detect", "exposing_problems", "is_race_stress", "launch_failure", "launch_order",
    "locate_race", "no_race_stress", "observe", "observe_simulated", "scaling", "observe_small_problems_simulated", "operands",
    "simulates_threads", "unfinished", "watches_c_reads", "with_place",
]
