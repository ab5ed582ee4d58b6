"""Which unit of the SM a kernel computes on, and that unit's peak: the peak its rate is a
share of in the performance table.

A kernel uses tensor cores when the code it runs names a tensor-core instruction: the WMMA
API's ``wmma::mma_sync``, or PTX's ``mma.sync``, ``wgmma.mma_async`` or ``tcgen05.mma`` in
inline assembly. "The code it runs" is read from its source as written, comments left out:
the kernel's own function and every function of its file (and of the files it includes with
quotes) that it names, transitively, so a file holding both SIMT and tensor-core kernels (the
reference ladder) tells them apart. This is the one definition (``tensor_core_instruction``).

Its peak is then the dense tensor-core peak for its A operand's type (float16, bfloat16, TF32
for float32 or tf32 data, float8, int8: gemmcheck.perf.roofline.TENSOR_FLOP_PER_CLOCK_PER_SM),
and otherwise the FP32 SIMT peak (gemmcheck.perf.roofline.FP32_LANES_PER_SM): never the FP32
peak for a tensor-core kernel.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

from gemmcheck.contract import cuda_source
from gemmcheck.perf import roofline

# A tensor-core instruction as C++ (the WMMA API) or as PTX inside an asm string.
TENSOR_CORE_INSTRUCTION = re.compile(
    r"\bwmma\s*::\s*mma_sync\b|\b(?:wgmma\.mma_async|mma\.sync|tcgen05\.mma)\b")
_CALLED = re.compile(r"\b([A-Za-z_]\w*)\s*(?=[(<])")
_QUOTED_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"\n]+)"', re.M)

SIMT = "FP32 SIMT"


@dataclass(frozen=True)
class Unit:
    """The unit a kernel computes on and its peak on this device (None: unknown here)."""

    name: str                  # "FP32 SIMT", or "tensor cores float16" (the input kind)
    peak_tflops: float | None
    why: str                   # how the peak was reached, or why it is unknown

    @property
    def label(self) -> str:
        return f"{self.name} {self.peak_tflops:.1f}" if self.peak_tflops else f"{self.name} (peak unknown)"


def tensor_core_instruction(instance) -> str | None:
    """The tensor-core instruction the instantiation's kernel runs, as its source names it
    (``wmma::mma_sync``, ``wgmma.mma_async``), or None for a kernel without one."""
    return _instruction(Path(instance.spec.source), instance.spec.entry)


@functools.lru_cache(maxsize=256)
def _instruction(source: Path, entry: str) -> str | None:
    text = _with_local_includes(source, set())
    code, raw = cuda_source.code_only(text), cuda_source.without_comments(text)
    blocks = [(set(_CALLED.findall(head)), start, open_at, end)
              for head, start, open_at, end in cuda_source.top_level_blocks(code)]
    wanted, seen, todo = {entry}, set(), [entry]
    while todo:
        name = todo.pop()
        for i, (defines, start, open_at, end) in enumerate(blocks):
            if name in defines and i not in seen:
                seen.add(i)
                found = TENSOR_CORE_INSTRUCTION.search(raw, start, end + 1)
                if found:
                    return re.sub(r"\s+", "", found.group(0))
                for called in _CALLED.findall(code, open_at, end + 1):
                    if called not in wanted:
                        wanted.add(called)
                        todo.append(called)
    return None


def _with_local_includes(source: Path, seen: set) -> str:
    """The source's text, then the text of each file it includes with quotes that sits next to
    it (once each): where a kernel's helpers may live."""
    if source in seen or not source.is_file():
        return ""
    seen.add(source)
    text = cuda_source.read_source(source)
    parts = [text]
    for header in _QUOTED_INCLUDE.findall(cuda_source.without_comments(text)):
        parts.append(_with_local_includes((source.parent / header).resolve(), seen))
    return "\n".join(parts)


def unit_of(instance, device) -> Unit:
    """The unit `instance` computes on and its peak on `device` (DeviceProperties)."""
    instruction = tensor_core_instruction(instance)
    if instruction is None:
        peak = device.fp32_peak_tflops
        lanes = roofline.FP32_LANES_PER_SM.get(tuple(device.capability))
        why = (f"no tensor-core instruction in its code: FP32 SIMT peak = {device.sm_count} SMs x {lanes} "
               f"lanes x 2 x {device.clock_hz / 1e9:.2f} GHz" if peak else
               f"FP32 lanes per SM unknown for compute capability {device.capability}")
        return Unit(SIMT, peak, why)
    a_type = instance.types.A.name
    kind = roofline.tensor_kind(a_type)
    peak = roofline.tensor_peak_tflops(device.sm_count, device.clock_hz, device.capability, a_type)
    per_clock = roofline.TENSOR_FLOP_PER_CLOCK_PER_SM.get(tuple(device.capability), {}).get(kind)
    why = (f"{instruction} on {a_type} inputs: dense tensor-core peak = {device.sm_count} SMs x {per_clock} "
           f"FLOP/clock x {device.clock_hz / 1e9:.2f} GHz" if peak else
           f"{instruction} on {a_type} inputs: no dense tensor-core rate for {kind or a_type} at compute "
           f"capability {device.capability} in gemmcheck.perf.roofline.TENSOR_FLOP_PER_CLOCK_PER_SM")
    return Unit(f"tensor cores {kind or a_type}", peak, why)
