"""The detector registry: every detector that can produce a Finding, named once.

`Finding.detector` holds a Detector; a string is accepted only if it is a known
detector's name, so a misspelled name (in a detector, a test or a lookup such
as kill_matrix.Column.found) fails loudly with the known names instead of
matching nothing and letting a "references are clean" claim pass unchecked.
"""

from __future__ import annotations

import enum


class UnknownDetector(ValueError):
    """A detector name that no detector has; the message lists the known ones."""


class Detector(str, enum.Enum):
    # The oracle's value check (gemmcheck.judge.oracle.judge): three rules, one name each.
    EXACT_BITS = "exact-bits"              # exact inputs: bits differ from the exact product
    ERROR_BOUND = "error-bound"            # random inputs: error above the forward error bound
    NAN_INF_PATTERN = "nan-inf-pattern"    # NaN / Inf where IEEE gives none, or missing
    # Guarded launches (gemmcheck.problems.harness, gemmcheck.judge.hazards).
    POISON = "poison"                      # C elements still holding the poison bits
    GUARD_SWAP = "guard-swap"              # output depends on the guards around A and B
    GUARD_BANDS = "guard-bands"            # a guard band changed
    INPUT_CHECK = "input-check"            # A or B changed
    REPEAT_LAUNCH = "repeat-launch"        # identical launches left different bits
    BETA_ZERO_READ = "beta-zero-read"      # beta = 0: C holding NaN, then finite values, changes the output
    ISOLATION = "isolation"                # a launch crashed or hung (child or cpu-sim worker)
    COMPILER = "compiler"                  # the source or instantiation did not build
    # compute-sanitizer (gemmcheck.judge.sanitizer).
    RACECHECK = "racecheck"
    SYNCCHECK = "synccheck"
    MEMCHECK = "memcheck"
    INITCHECK = "initcheck"
    # The CPU simulator (gemmcheck.backends.cpu_sim).
    SHARED_TRACKING = "shared-tracking"    # conflicting shared accesses in one barrier interval
    GLOBAL_TRACKING = "global-tracking"    # two blocks of a launch wrote one global address, not both atomically
    SCHEDULES = "schedules"                # output depends on the thread schedule
    BARRIER_TRACKING = "barrier-tracking"  # a __syncthreads() reached by only some threads
    WARP_TRACKING = "warp-tracking"        # a warp-synchronous call whose lanes did not meet as its mask says
    SHARED_INIT = "shared-init"            # reads of shared memory no thread wrote
    ASAN = "asan"                          # AddressSanitizer on exact-size buffers
    # The performance suite (suites/performance).
    THROUGHPUT_THRESHOLD = "throughput-threshold"  # slower than its ratio to cuBLAS / the ceiling

    @classmethod
    def _missing_(cls, value):
        raise UnknownDetector(f"unknown detector {value!r}; known detectors: "
                              f"{', '.join(d.value for d in cls)}")

    def __str__(self) -> str:
        return self.value


# The oracle's value check, as one group (docs/hazards.md's "value check").
VALUE_CHECK = (Detector.EXACT_BITS, Detector.ERROR_BOUND, Detector.NAN_INF_PATTERN)
# compute-sanitizer's tools, by the name its --tool option takes.
SANITIZER_TOOLS = (Detector.RACECHECK, Detector.SYNCCHECK, Detector.MEMCHECK, Detector.INITCHECK)


def lookup(name: "str | Detector") -> Detector:
    """The detector called `name`; UnknownDetector (listing the known names) for any other."""
    return Detector(name)
