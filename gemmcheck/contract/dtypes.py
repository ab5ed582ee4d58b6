"""The element types gemmcheck knows: how each is named in C, stored, rounded and poisoned.

Everything that depends on the dtype lives here, so adding one is one entry.
Buffers travel as raw unsigned bits (``storage``), so bfloat16 needs nothing
from the array library beyond 16-bit integers.
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np


@dataclass(frozen=True)
class DType:
    name: str            # the catalog's and the test ids' name: "float16"
    c_type: str          # what the kernel template is instantiated with: "__half"
    numpy: np.dtype      # host dtype of values
    storage: np.dtype    # same-size unsigned integer: how bits travel and compare
    accumulator: str     # the name of the type partial sums are kept in
    unit_roundoff: float  # u = 2**-p for p significand bits (round to nearest)
    poison_bits: int     # quiet NaN with a payload no arithmetic produces: "never written"
    guard_bits: int      # another payloaded quiet NaN: the guard bands around buffers

    @property
    def itemsize(self) -> int:
        return self.numpy.itemsize

    @property
    def significand_bits(self) -> int:
        return int(round(-np.log2(self.unit_roundoff)))


DTYPES: dict[str, DType] = {
    d.name: d
    for d in (
        DType("float32", "float", np.dtype(np.float32), np.dtype(np.uint32),
              "float32", 2.0**-24, 0x7FC0DEAD, 0x7FC0CAFE),
        DType("float64", "double", np.dtype(np.float64), np.dtype(np.uint64),
              "float64", 2.0**-53, 0x7FF8DEADDEADDEAD, 0x7FF8CAFECAFECAFE),
        DType("float16", "__half", np.dtype(np.float16), np.dtype(np.uint16),
              "float32", 2.0**-11, 0x7EAD, 0x7ECA),
        DType("bfloat16", "__nv_bfloat16", np.dtype(ml_dtypes.bfloat16), np.dtype(np.uint16),
              "float32", 2.0**-8, 0x7FED, 0x7FCA),
    )
}


def get(name: str) -> DType:
    """Return the DType called `name`; a ValueError lists the known ones."""
    try:
        return DTYPES[name]
    except KeyError:
        raise ValueError(f"unknown dtype {name!r}; known: {', '.join(DTYPES)}") from None


def finfo(dtype: DType):
    """numpy-style finfo for every gemmcheck dtype (bfloat16 included): the one place it is read."""
    return ml_dtypes.finfo(dtype.numpy)


def to_bits(values: np.ndarray, dtype: DType) -> np.ndarray:
    """Round `values` to `dtype` (round to nearest even) and return the raw bits."""
    return np.ascontiguousarray(np.asarray(values).astype(dtype.numpy)).view(dtype.storage)


def from_bits(bits: np.ndarray, dtype: DType) -> np.ndarray:
    """The values held in raw `bits` of `dtype`."""
    return np.asarray(bits).view(dtype.numpy)
