"""The inputs the performance suite times on: Problems, rotated so caches stay cold.

Each set's A and B are exactly what ``problems.Problem(N, N, N, dtype, "uniform",
seed).operands()`` gives (one definition of how inputs are made: generated on
the host in float64, exact in the dtype, uploaded as raw bits; made afresh with
``make_operands``, not kept in Problem's cache of shared large operands); set i uses seed
``seed + i``. Enough sets rotate that the others hold >= 2 x L2 between two uses
of one set (``n_input_sets``), so no launch finds its operands cached. One more
set (``check_set``), never timed, is the one the first launch is checked on: the
last timed launch always runs on other inputs, so a kernel that replays its
first result cannot pass both checks.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from gemmcheck.contract import dtypes as dt
from gemmcheck.phases import phase
from gemmcheck.problems.problem import Problem

VALUES = "uniform"   # U(-1, 1) rounded to the dtype: judged against the oracle's bound


def n_input_sets(set_bytes: int, l2_bytes: int, *, factor: int = 2) -> int:
    """Sets to rotate so the others hold >= factor x L2 between two uses of one set."""
    if set_bytes <= 0 or l2_bytes < 0:
        raise ValueError(f"set_bytes must be positive and l2_bytes non-negative, got {set_bytes}, {l2_bytes}")
    return max(2, 1 + math.ceil(factor * l2_bytes / set_bytes))


class InputSets:
    """Rotating (A, B, C) sets for one dtype and size on the array module ``xp`` (CuPy, or numpy
    in tests): ``sets[:n_sets]`` rotate, ``sets[check_set]`` is for the first check. Buffers hold
    raw bits (``dtype.storage``), as every backend launches them. Made on the host; `upload`
    puts them on the device (a worker that shares its GPU uploads in its turn, and draws the
    values beside the others)."""

    def __init__(self, xp, dtype: dt.DType, size: int, l2_bytes: int, seed: int, layouts=None) -> None:
        """`layouts`: the kernel's {"A"|"B"|"C": "row"|"col"}; a column-major operand's buffer
        holds its transpose's rows (what column-major means), so the product judged is A @ B."""
        self.xp, self.dtype, self.size, self.seed = xp, dtype, size, seed
        self.layouts = {o: (layouts or {}).get(o, "row") for o in "ABC"}
        self.n_sets = n_input_sets(3 * size * size * dtype.itemsize, l2_bytes)
        self.check_set = self.n_sets          # the extra set, outside the rotation
        self.problems = [Problem(size, size, size, dtype.name, VALUES, seed + i) for i in range(self.n_sets + 1)]
        self.sets = []
        self._operands64 = _operands_side_by_side(self.problems)
        self._references: dict[int, tuple] = {}
        self._finite_C = None

    def upload(self) -> "InputSets":
        """The sets on the device (once)."""
        if not self.sets:
            size, xp = self.size, self.xp
            self.sets = [(self._upload(A, "A"), self._upload(B, "B"), xp.zeros((size, size), dtype=self.dtype.storage))
                         for A, B in self._operands64]
        return self

    def _upload(self, X, operand: str):
        stored = X if self.layouts[operand] == "row" else X.T
        return self.xp.asarray(dt.to_bits(np.ascontiguousarray(stored), self.dtype))

    def result(self, index: int):
        """Set ``index``'s C as float64 values, rows of C (whatever the kernel's layout of C)."""
        C = self.to_float64(self.sets[index][2])
        return C if self.layouts["C"] == "row" else C.T

    def poison(self, index: int, *, finite: bool = False) -> None:
        """Fill set ``index``'s C so an element the launch does not write shows: the poison bits,
        or, with ``finite`` (a kernel that declares reads_c_at_beta_zero: its callers always
        initialize C), the correctness harness's finite garbage, far above any result."""
        C = self.sets[index][2]
        if not finite:
            C.fill(self.dtype.poison_bits)
            return
        if self._finite_C is None:   # made once a size: drawing it per sample would cost seconds
            from gemmcheck.problems.harness import finite_garbage

            garbage = finite_garbage(self.size, self.size, self.dtype)
            self._finite_C = self.xp.asarray(dt.to_bits(garbage, self.dtype))
        C[...] = self._finite_C

    def to_float64(self, bits):
        """Raw bits of the dtype as float64 values, exact (dtypes.from_bits: on CuPy too)."""
        return dt.from_bits(bits, self.dtype).astype(self.xp.float64)

    def as_values(self, bits):
        """The buffer as cupy.matmul should see it: the dtype's values, not raw bits."""
        return bits.view(self.dtype.numpy)

    def reference(self, index: int = 0):
        """(C_ref, |A||B|) for set ``index``, in float64 on ``xp``; computed once per set."""
        if index not in self._references:
            xp = self.xp
            A, B = (xp.asarray(x) for x in self._operands64[index])
            self._references[index] = (A @ B, xp.abs(A) @ xp.abs(B))
        return self._references[index]


def _operands_side_by_side(problems) -> list:
    """Each problem's operands, drawn on threads of their own (numpy's generators and ufuncs
    release the GIL): the host drew the nightly's 8192^2 sets one after the other, 46 s of
    the performance tests' time over half the nightly on an H200."""
    with phase("inputs"), ThreadPoolExecutor(len(problems)) as pool:
        return list(pool.map(Problem.make_operands, problems))
