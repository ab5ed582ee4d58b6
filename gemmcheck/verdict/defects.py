"""The defect registry: every defect class, defined once, with all the code needs to know of it.

Every other list of defect classes (catalog `expect` values, report categories, the
classifier's priority and what each root cause explains, which classes need a tool or
the simulator, which are isolated or left out of the kill matrix, which the correctness
suite runs) is derived here from DEFECTS. Adding a class means one enum member and one DEFECTS
entry (plus the detector that establishes it).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Mapping


class Defect(str, enum.Enum):
    """Defect classes. Catalog `expect` values are these names (or 'correct')."""

    COMPILE_ERROR = "compile_error"
    HANG = "hang"
    CRASH = "crash"
    DIVERGENT_BARRIER = "divergent_barrier"
    INVALID_WARP_MASK = "invalid_warp_mask"
    OUT_OF_BOUNDS_WRITE = "out_of_bounds_write"
    OUT_OF_BOUNDS_READ = "out_of_bounds_read"
    INPUT_MUTATION = "input_mutation"
    READS_C_AT_BETA_ZERO = "reads_c_at_beta_zero"
    SHARED_MEMORY_RACE = "shared_memory_race"
    GLOBAL_MEMORY_RACE = "global_memory_race"
    UNWRITTEN_OUTPUT = "unwritten_output"
    NONDETERMINISM = "nondeterminism"
    WRONG_VALUES = "wrong_values"
    TOO_SLOW = "too_slow"


@dataclass(frozen=True)
class DefectClass:
    """What the code needs to know of one defect class."""

    defect: Defect
    priority: int                        # lower: more specific root cause (classify picks the lowest)
    category: str                        # the report category (a key of CATEGORIES)
    summary: str                         # one line: what the class means
    explains: frozenset = frozenset()    # other classes this one accounts for as a root cause
    explains_every_other: bool = False   # a launch that never finished left nothing else to judge
    needs_tool: str = ""                 # the tool that establishes it on hardware ("" : none needed)
    needs_simulator: str = ""            # what establishes it where nothing on hardware can ("" : hardware can);
                                         # on hardware only the classes it explains show
    unseen_on_hardware: str = ""         # what establishes it where hardware and its tools may show nothing
                                         # at all (the GPU happens to give the right values); "" : they show
                                         # something (a kill-matrix row that shows nothing there fails)
    isolated: bool = False               # launched in a child process (it takes its process down)
    not_in_matrix: str = ""              # why the kill matrix leaves it out ("" : it is in)
    correctness_suite: bool = True       # the correctness suite runs kernels declaring it


# Report categories, in the order a failure is matched against them (first match wins).
CATEGORIES: dict[str, str] = {
    "Crash or hang": "the kernel faulted (its CUDA context is lost) or never returned",
    "Does not compile": "the compiler rejected the kernel's source or instantiation",
    "Divergent barrier": "__syncthreads() not reached by every thread of a block",
    "Invalid warp mask": ("a warp-synchronous call (__shfl*_sync, __ballot_sync, __syncwarp, ...) whose mask "
                          "leaves out a lane that calls it, or names one that never does"),
    "Reads C at beta = 0": "the output depends on C's old contents although beta = 0 (BLAS: C is not read)",
    "Shared-memory race": "racecheck or the simulator's shared-memory tracking saw two threads conflict",
    "Global-memory race": ("the simulator's global-memory tracking saw two blocks write one address, "
                           "not both atomically"),
    "Race of unknown place": "results change between identical launches; no detector localized the race",
    "Out-of-bounds access": "guard bands changed, guard NaNs read into results, inputs written",
    "Unwritten output": "elements of C never written: the poison after the launch, a second one after another",
    "Wrong values": "bits differ from the exact result, or the error breaks the bound",
    "Performance regression": "slower than the ratio to cuBLAS or the device ceiling allows",
}

_D = Defect
_ENTRIES = (
    DefectClass(_D.COMPILE_ERROR, 0, "Does not compile", "the source or instantiation does not build",
                explains_every_other=True, correctness_suite=False),
    DefectClass(_D.HANG, 1, "Crash or hang", "a launch never returned", explains_every_other=True,
                isolated=True, correctness_suite=False),
    # memcheck's invalid access in a launch that faulted says where it faulted.
    DefectClass(_D.CRASH, 2, "Crash or hang", "a launch faulted",
                explains=frozenset({_D.OUT_OF_BOUNDS_WRITE, _D.OUT_OF_BOUNDS_READ}),
                isolated=True, correctness_suite=False),
    # Threads that skip a barrier read shared tiles others are still writing. On hardware
    # it shows only as wrong values: synccheck (or the simulator) establishes it.
    DefectClass(_D.DIVERGENT_BARRIER, 3, "Divergent barrier",
                "a __syncthreads() reached by only some threads of a block",
                explains=frozenset({_D.SHARED_MEMORY_RACE, _D.NONDETERMINISM, _D.WRONG_VALUES}),
                needs_tool="synccheck"),
    # A store past a row's end lands in the next row, where another thread's store of that
    # element races with it (another block's, in global memory): wrong and launch-dependent values.
    # A warp-synchronous call (__shfl*_sync, votes, matches, __reduce_*_sync, __syncwarp) is
    # defined only when every lane that calls it is in its mask and every non-exited lane its
    # mask names calls it, with the same mask. Converged warps on current GPUs often give the
    # right values anyway: the compiler drops a constant mask from a shuffle (sm_90: SHFL.IDX
    # with no mask operand), so neither hardware nor synccheck sees it there; synccheck reports
    # a __syncwarp() whose caller is not in its mask ("Invalid arguments"). The simulator's
    # warp tracking sees every call's lanes. Lanes that skip the call explain wrong or
    # launch-dependent values and the race in what the call was to order. Its values may be
    # right, so the correctness suite leaves it to the hazards suite.
    DefectClass(_D.INVALID_WARP_MASK, 4, "Invalid warp mask",
                "a warp-synchronous call whose mask leaves out a lane that calls it, or names one that never "
                "does (or lanes of one warp give different masks)",
                explains=frozenset({_D.SHARED_MEMORY_RACE, _D.NONDETERMINISM, _D.WRONG_VALUES}),
                needs_tool="synccheck",
                unseen_on_hardware="the CPU simulator's warp tracking (--gemm-backend cpu-sim)",
                correctness_suite=False),
    DefectClass(_D.OUT_OF_BOUNDS_WRITE, 5, "Out-of-bounds access", "a write outside the output",
                explains=frozenset({_D.GLOBAL_MEMORY_RACE, _D.WRONG_VALUES, _D.NONDETERMINISM})),
    DefectClass(_D.OUT_OF_BOUNDS_READ, 6, "Out-of-bounds access", "a read outside the operands",
                explains=frozenset({_D.WRONG_VALUES})),
    DefectClass(_D.INPUT_MUTATION, 7, "Out-of-bounds access", "A or B changed by the launch",
                explains=frozenset({_D.GLOBAL_MEMORY_RACE, _D.WRONG_VALUES, _D.NONDETERMINISM})),
    # C = alpha * acc + beta * C[i] at beta = 0 turns the poison NaN into NaN results (on
    # cpu-sim 0 * NaN keeps the poison's payload, so those look unwritten): the one cause of both.
    DefectClass(_D.READS_C_AT_BETA_ZERO, 8, "Reads C at beta = 0",
                "the output depends on C's old contents at beta = 0 (fix: skip the C load when beta == 0)",
                explains=frozenset({_D.UNWRITTEN_OUTPUT, _D.WRONG_VALUES})),
    # Established only where the race is seen: racecheck, or the simulator's tracking. On
    # hardware nondeterminism alone does not say where the threads raced (gemmcheck.judge.hazards).
    DefectClass(_D.SHARED_MEMORY_RACE, 9, "Shared-memory race",
                "two threads access one shared address between barriers, one writing",
                explains=frozenset({_D.NONDETERMINISM, _D.WRONG_VALUES}), needs_tool="racecheck"),
    # CUDA orders nothing between the blocks of one launch: a plain store by one block and a
    # store or an atomic by another to one address race, whatever order they happened to run
    # in (a split-K slice storing C while another atomicAdds into it). Established only where
    # it is seen: the simulator tracks every block's writes. On hardware no tool localizes it
    # (racecheck sees shared memory only); launches differ, or values are wrong.
    DefectClass(_D.GLOBAL_MEMORY_RACE, 10, "Global-memory race",
                "two blocks of one launch write one global address, not both atomically, with nothing "
                "ordering them",
                explains=frozenset({_D.NONDETERMINISM, _D.WRONG_VALUES}),
                needs_simulator="the CPU simulator's global-memory tracking (--gemm-backend cpu-sim)"),
    DefectClass(_D.UNWRITTEN_OUTPUT, 11, "Unwritten output", "elements of C never written"),
    # With exact inputs at most one of two different outputs is the right one. No detector
    # says where: shared memory, global memory on hardware (blocks ordering stores and
    # atomics), anything.
    DefectClass(_D.NONDETERMINISM, 12, "Race of unknown place",
                "launches on identical inputs give different bits (a race no detector localized)",
                explains=frozenset({_D.WRONG_VALUES})),
    DefectClass(_D.WRONG_VALUES, 13, "Wrong values", "values differ from the exact or bounded result"),
    DefectClass(_D.TOO_SLOW, 14, "Performance regression", "slower than its thresholds allow",
                not_in_matrix="judged by the performance suite", correctness_suite=False),
)
DEFECTS: dict[Defect, DefectClass] = {c.defect: c for c in sorted(_ENTRIES, key=lambda c: c.priority)}


# -- derived lists: each takes the registry so a test can show a new entry reaches it ----------

def priority(registry: Mapping = DEFECTS) -> tuple:
    """Every class, most specific root cause first."""
    return tuple(c.defect for c in sorted(registry.values(), key=lambda c: c.priority))


def explains(registry: Mapping = DEFECTS) -> dict:
    """Root cause -> the other classes it accounts for (classes that explain nothing are absent)."""
    every = frozenset(registry)
    out = {}
    for d, c in registry.items():
        covered = (every - {d}) if c.explains_every_other else c.explains
        if covered:
            out[d] = frozenset(covered)
    return out


def needs_a_tool(registry: Mapping = DEFECTS) -> dict:
    """Class -> the tool that establishes it on hardware, for classes plain detectors cannot."""
    return {d: c.needs_tool for d, c in registry.items() if c.needs_tool}


def needs_the_simulator(registry: Mapping = DEFECTS) -> dict:
    """Class -> what establishes it, for classes no detector on hardware can (plain or tool)."""
    return {d: c.needs_simulator for d, c in registry.items() if c.needs_simulator}


def unseen_on_hardware(registry: Mapping = DEFECTS) -> dict:
    """Class -> what establishes it, for classes hardware and its tools may not show at all."""
    return {d: c.unseen_on_hardware for d, c in registry.items() if c.unseen_on_hardware}


def not_in_matrix(registry: Mapping = DEFECTS) -> dict:
    """Catalog `expect` value -> why the kill matrix leaves kernels declaring it out."""
    return {d.value: c.not_in_matrix for d, c in registry.items() if c.not_in_matrix}


def isolated(registry: Mapping = DEFECTS) -> tuple:
    """`expect` values whose kernels the kill matrix launches in a child process."""
    return tuple(d.value for d, c in registry.items() if c.isolated)


def not_for_correctness(registry: Mapping = DEFECTS) -> tuple:
    """`expect` values the correctness suite leaves to other suites."""
    return tuple(d.value for d, c in registry.items() if not c.correctness_suite)


def expectations(registry: Mapping = DEFECTS) -> tuple:
    """Every value a catalog's `expect` may hold: 'correct' first, then each class."""
    return ("correct", *(d.value for d in registry))


def in_category(name: str, registry: Mapping = DEFECTS) -> tuple:
    """The classes reported under category `name`, in priority order."""
    if name not in CATEGORIES:
        raise KeyError(f"unknown report category {name!r}; known: {', '.join(CATEGORIES)}")
    return tuple(d for d in priority(registry) if registry[d].category == name)


def _check(registry: Mapping = DEFECTS) -> None:
    missing = set(Defect) - set(registry)
    if missing:
        raise RuntimeError(f"gemmcheck.verdict.defects: no DEFECTS entry for {sorted(d.value for d in missing)}")
    for d, c in registry.items():
        if c.category not in CATEGORIES:
            raise RuntimeError(f"gemmcheck.verdict.defects: {d.value}: unknown category {c.category!r}; "
                               f"known: {', '.join(CATEGORIES)}")


_check()
