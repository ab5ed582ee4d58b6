"""Run one GEMM the way gemmcheck watches it: guarded buffers, poisoned output.

Every operand sits in one flat buffer between two guard bands filled with a
payloaded quiet NaN (dtypes.DType.guard_bits). An out-of-bounds read pulls
that NaN into a result; an out-of-bounds write changes a guard's bits. C is
filled with another payloaded NaN (poison_bits) before each launch, so an
element whose bits still equal the poison was never written. Bits, not
values, are compared: NaN == NaN is False, and a payload is evidence.

A GuardedGemm is built once per problem (initialize) and launched as often
as a detector needs (run); each run returns a Run with what it saw.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gemmcheck import dtypes as dt
from gemmcheck import launch
from gemmcheck.backends import Backend
from gemmcheck.catalog import Instance

MIN_GUARD = 1024


def guard_elements(M: int, N: int, K: int, tile: int) -> int:
    """Guard band length: enough that any read a TILE-rounded index can make lands in it.

    A kernel that rounds the grid up but forgets its load guards reads up to
    TILE rows (of K or N elements) plus TILE past the end of an operand.
    """
    return max(MIN_GUARD, tile * max(M, N, K) + 2 * tile)


@dataclass
class GuardedBuffer:
    """A matrix laid out as [guard | rows x cols | guard] in one flat allocation."""

    name: str
    rows: int
    cols: int
    guard: int
    bits: np.ndarray          # host copy: the whole flat buffer as it was uploaded
    device: object = None     # the backend's buffer

    @property
    def size(self) -> int:
        return self.rows * self.cols

    def inner(self):
        """The device view of the matrix itself (what the kernel gets a pointer to)."""
        if self.guard == 0:
            return self.device  # exact-size: the allocation itself, nothing around it
        return self.device[self.guard:self.guard + self.size]

    def split(self, flat: np.ndarray):
        """(front guard, matrix, back guard) of a flat host array of this layout."""
        g, s = self.guard, self.size
        return flat[:g], flat[g:g + s].reshape(self.rows, self.cols), flat[g + s:]


def guarded(name: str, matrix_bits: np.ndarray, guard: int, guard_bits: int) -> GuardedBuffer:
    rows, cols = matrix_bits.shape
    flat = np.full(guard + rows * cols + guard, guard_bits, dtype=matrix_bits.dtype)
    flat[guard:guard + rows * cols] = matrix_bits.reshape(-1)
    return GuardedBuffer(name, rows, cols, guard, flat)


@dataclass
class Run:
    """What one launch left behind."""

    instance: Instance
    M: int
    N: int
    K: int
    grid: tuple
    block: tuple
    C_bits: np.ndarray                    # (M, N) raw bits of the output
    unwritten: np.ndarray                 # (M, N) bool: still the poison pattern
    guard_damage: dict[str, int] = field(default_factory=dict)    # buffer -> guard elements changed
    inputs_changed: dict[str, int] = field(default_factory=dict)  # "A"/"B" -> elements changed

    @property
    def C(self) -> np.ndarray:
        return dt.from_bits(self.C_bits, self.instance.dt)


class GuardedGemm:
    """One problem on one instantiation: initialize once, run many times."""

    def __init__(self, backend: Backend, instance: Instance, A: np.ndarray, B: np.ndarray,
                 *, guard_bits: int | None = None, poison_bits: int | None = None,
                 guard: int | None = None):
        """`guard` elements of guard band on each side of every buffer (default: enough
        for any TILE-rounded overshoot). guard=0 gives exact-size allocations: what
        compute-sanitizer memcheck needs to see an out-of-bounds access as one."""
        M, K = A.shape
        K2, N = B.shape
        if K != K2:
            raise ValueError(f"A is {A.shape} and B is {B.shape}: inner dimensions differ")
        if not {"M", "K"} & set(instance.spec.roles) and not (M == N == K):
            raise ValueError(f"{instance.id} takes square problems only; got M={M} N={N} K={K}")
        self.backend, self.instance = backend, instance
        self.M, self.N, self.K = M, N, K
        d = instance.dt
        self.guard_bits = d.guard_bits if guard_bits is None else guard_bits
        self.poison_bits = d.poison_bits if poison_bits is None else poison_bits
        g = guard_elements(M, N, K, instance.tile) if guard is None else guard
        self.A = guarded("A", dt.to_bits(A, d), g, self.guard_bits)
        self.B = guarded("B", dt.to_bits(B, d), g, self.guard_bits)
        self.C = guarded("C", np.full((M, N), self.poison_bits, dtype=d.storage), g, self.guard_bits)
        for buf in (self.A, self.B):
            buf.device = backend.to_device(buf.bits)
        self.grid, self.block = instance.launch_shape(M, N, K)

    def role_values(self) -> dict:
        """Every role's value: row-major operands with tight leading dimensions, alpha 1, beta 0."""
        lds = launch.tight_leading_dimensions({}, self.M, self.N, self.K)
        return {"A": self.A.inner(), "B": self.B.inner(), "C": self.C.inner(),
                "M": self.M, "N": self.N, "K": self.K, **lds, "alpha": 1, "beta": 0}

    def run(self) -> Run:
        """Poison C, launch, and read back what the kernel did to every buffer."""
        self.C.device = self.backend.to_device(self.C.bits)
        self.backend.launch(self.instance, launch.plan(self.instance, self.role_values()))
        c_flat = self.backend.to_host(self.C.device)
        front, c_bits, back = self.C.split(c_flat)
        damage = {"C": int(np.count_nonzero(front != self.guard_bits)
                           + np.count_nonzero(back != self.guard_bits))}
        changed = {}
        for buf in (self.A, self.B):
            now = self.backend.to_host(buf.device)
            was_front, was_inner, was_back = buf.split(buf.bits)
            n_front, n_inner, n_back = buf.split(now)
            damage[buf.name] = int(np.count_nonzero(n_front != was_front)
                                   + np.count_nonzero(n_back != was_back))
            changed[buf.name] = int(np.count_nonzero(n_inner != was_inner))
        return Run(self.instance, self.M, self.N, self.K, self.grid, self.block,
                   c_bits.copy(), c_bits == self.poison_bits, damage, changed)


def run_once(backend: Backend, instance: Instance, A: np.ndarray, B: np.ndarray, **kw) -> Run:
    """Initialize and run a problem once."""
    return GuardedGemm(backend, instance, A, B, **kw).run()
