"""AddressSanitizer's word on one launch: the AddressReport, its AddressErrors, and the parser
that reads them off an ASan log, attributed to the kernel's buffers."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from gemmcheck.backends.cpu_sim.locating import BUFFER_NAMES


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


def parse_asan(log: str, names=BUFFER_NAMES) -> list[AddressError]:
    """The errors in an AddressSanitizer log, attributed to the kernel's buffers (`names`: the
    buffer of each slot, locating.buffer_names)."""
    buffers = {int(m.group(2), 16): (names[int(m.group(1))] if int(m.group(1)) < len(names) else m.group(1),
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
