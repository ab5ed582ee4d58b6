"""The kill matrix: for every catalog kernel, what it declares and what the detectors establish.

One row per instantiation, two columns:

- plain detectors: guarded launches on the device (values, poison, guard
  swap, guard bands, inputs, repeated launches), kernels declared crash or
  hang in an isolated child;
- with sanitizer: the plain findings plus compute-sanitizer's racecheck,
  synccheck, memcheck and initcheck (exact-size allocations, in children).

A row passes when a reference has no finding in any column, and a broken
kernel is caught and classified as its declared defect: by the plain column
where hardware alone can establish that class, by the sanitizer column
always. A class the plain detectors cannot establish (a divergent barrier
shows only as wrong values on hardware) needs the tool; without it that row
is reported as caught but not classified (a skip that says so), never as a
pass. A class nothing on hardware establishes (a global-memory race: racecheck
sees shared memory only) is caught there as what it explains (nondeterminism,
wrong values). Where the plain column shows a race of unknown place, the race
locator (hazards.locate_race) runs the instantiation on the CPU simulator in
this process: what its tracking sees (a global-memory race with the element and
blocks, a shared-memory race with the address and threads, a divergent barrier)
joins the plain column as placed by the simulator, and the row is judged on it.
Where nothing placed it (gpu_only, not modelled, not reproduced), a declared
global-memory race is reported as caught but not classified, naming the
simulator's tracking and why it placed nothing; anything else a column shows
for it is a mismatch.

On the CPU simulator (cpu-sim) the first column is the *simulator
detectors*: the same value, poison, guard and input checks, plus what the
simulator establishes itself: shared-memory conflicts tracked per barrier
interval (an observed race, with the schedule whose output differs and the
lockstep direction as a detail), global-memory writes tracked per block
within a launch (two blocks writing one address, not both atomically),
divergent barriers exactly, AddressSanitizer
on exact-size buffers (out-of-bounds read or write of A, B or C), and a
crash or stall of its worker process (CRASH / HANG: the worker is the
isolation). It runs the small problems only (races show at any size under
its schedules; 1024^3 takes minutes there). The sanitizer column does not
apply there: compute-sanitizer needs a GPU.

Each row is built on its own (build_row): a kernel that does not build, crashes or hangs
gives its row that verdict (COMPILE_ERROR, CRASH, HANG) and touches no other row, so
rows can be separate tests, spread over processes, and merged afterwards (merge).

Which instantiations: one per kernel (float32 and TILE 16 where declared,
else the declared dtype and the TILE nearest 16) keeps the matrix to ~1 s
of device time per kernel; a defect in the kernel's logic shows in any of
its instantiations. The nightly profile runs every instantiation.

One module per job, each public name importable from here:

- selection: which instantiations the matrix runs (select, in_matrix, declares, ISOLATED, NOT_IN_MATRIX)
- rows: a row, its two columns and its outcome (Row, Column, unfinished, HARDWARE, SIMULATOR)
- settings: what a matrix is built under (Settings)
- observing: a row's observations, here, in children or on cpu-sim (plain_observations,
  isolated_observations, simulator_observations, small_problems)
- row_children: the child processes of many rows, side by side (RowChildren, Closing)
- building: a row on its own, every row, a row's sanitizer column (build_row, build, sanitizer_column)
- document: the matrix as JSON and as text (document, merge, table, runs_on)

A test that replaces a function for the code that calls it patches the module the caller looks it
up in (e.g. RowChildren's isolated_observations: ``kill_matrix.row_children``).
"""

from gemmcheck.judge.kill_matrix.building import build, build_row, sanitizer_column
from gemmcheck.judge.kill_matrix.document import document, merge, runs_on, table
from gemmcheck.judge.kill_matrix.observing import (isolated_observations, plain_observations, simulator_observations,
                                                   small_problems)
from gemmcheck.judge.kill_matrix.row_children import Closing, RowChildren
from gemmcheck.judge.kill_matrix.rows import (COLUMN_TITLES, HARDWARE, SANITIZER_NOT_APPLICABLE, SANITIZER_ON_SIMULATOR,
                                              SIMULATOR, Column, Row, unfinished)
from gemmcheck.judge.kill_matrix.selection import (ISOLATED, NOT_IN_MATRIX, PREFERRED_DTYPE, PREFERRED_TILE, declares,
                                                   in_matrix, select)
from gemmcheck.judge.kill_matrix.settings import Settings

__all__ = [
    "COLUMN_TITLES", "HARDWARE", "ISOLATED", "NOT_IN_MATRIX", "PREFERRED_DTYPE", "PREFERRED_TILE",
    "SANITIZER_NOT_APPLICABLE", "SANITIZER_ON_SIMULATOR", "SIMULATOR", "Closing", "Column", "Row", "RowChildren",
    "Settings", "build", "build_row", "declares", "document", "in_matrix", "isolated_observations", "merge",
    "plain_observations", "runs_on", "sanitizer_column", "select", "simulator_observations", "small_problems",
    "table", "unfinished",
]
