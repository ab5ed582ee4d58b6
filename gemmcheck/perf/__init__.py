"""Timing on the device, and the ceilings to compare against, measured in the same run.

One module per job; this package re-exports their public names
(``from gemmcheck import perf; perf.judge(...)``):

- thresholds   the thresholds file: Timing, Threshold, Refusal, load_thresholds
- sampling     when to stop (noise <= 0.5 %, caps), which samples count (SM clock), interleaving
- inputs       Problem-generated input sets, rotated so caches stay cold
- measurement  Measurement (times, clocks, stop reason), the output check (the oracle's bound)
- gpu          GpuTimer: kernels interleaved with their ceiling, the copy bandwidth (CuPy)
- library      cuBLASLt's GEMM of a combination of operand types (nvmath-python), strided-batched or with
               its fused epilogue: the ceiling of a mixed, batched, grouped or epilogue kernel
- units        the unit a kernel computes on (tensor cores or FP32 SIMT) and its peak
- session      PerfSession, timed_rate (first + last launch checked, impossible times refused), judge
- clock        DeviceClock: pytest-benchmark stats from device-event times
- summary      the table, perf.json and the roofline PNG
- warm         the suite's own CuPy kernels compiled once per run, ahead, in a child (Ahead)

Device properties come from gemmcheck.backends.device; the roofline arithmetic from gemmcheck.perf.roofline.
"""

from gemmcheck.backends.device import DeviceProperties as Device
from gemmcheck.perf.clock import DEVICE_CLOCK, DeviceClock
from gemmcheck.perf.gpu import TF32, GpuTimer, Timed
from gemmcheck.perf.inputs import InputSets, n_input_sets
from gemmcheck.perf.measurement import Check, Measurement, check_output
from gemmcheck.perf.sampling import Sample, StoppingRule, sample_interleaved
from gemmcheck.perf.session import (
    Evaluation, ImpossibleTime, PerfSession, Row, Unjudgeable, WrongOutput, evaluate, judge, timed_rate)
from gemmcheck.perf.thresholds import (
    BUILTIN_THRESHOLDS, CUBLAS, FP32_PEAK, Refusal, Threshold, ThresholdError, Thresholds, Timing,
    load_thresholds, parse_thresholds)
