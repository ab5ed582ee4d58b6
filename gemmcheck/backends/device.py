"""Is there a CUDA device here, and what is it? The one reader of device properties
(name, compute capability, SMs, clock, L2, memory) and of the SM clock (NVML).
Asked once per process; perf, the roofline and the report environment all read it here."""

from __future__ import annotations

import functools
import shutil
from dataclasses import dataclass


@dataclass(frozen=True)
class DeviceProperties:
    """What the CUDA runtime says about one device."""

    name: str
    capability: tuple[int, int]
    sm_count: int
    clock_hz: float                 # the SM clock the runtime reports (the boost clock)
    l2_bytes: int
    memory_bytes: int = 0

    @property
    def fp32_peak_tflops(self) -> float | None:
        from gemmcheck.perf import roofline

        return roofline.fp32_peak_tflops(self.sm_count, self.clock_hz, self.capability)

    def describe(self) -> str:
        from gemmcheck.perf import roofline

        peak = self.fp32_peak_tflops
        lanes = roofline.FP32_LANES_PER_SM.get(self.capability)
        return (f"{self.name} (cc {self.capability[0]}.{self.capability[1]}, {self.sm_count} SMs, "
                f"{self.clock_hz / 1e9:.2f} GHz, L2 {self.l2_bytes / 2**20:.0f} MiB; FP32 peak "
                + (f"{peak:.1f} TFLOP/s = {self.sm_count} SMs x {lanes} lanes x 2 x clock)" if peak
                   else "unknown: no FP32 lanes entry for this compute capability)"))


@functools.lru_cache(maxsize=None)
def cuda_device() -> tuple[bool, str]:
    """(True, 'NVIDIA H200, compute capability 9.0, ...') or (False, why not)."""
    try:
        import cupy
    except Exception as exc:  # ImportError, or a broken CUDA install under it
        return False, f"no CUDA device: cupy does not import ({type(exc).__name__}: {exc})"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        if "cudaErrorInsufficientDriver" in str(exc):
            # What the runtime says on a machine with no NVIDIA driver at all.
            return False, ("no CUDA device: no NVIDIA driver here, or one too old for this CUDA "
                           "runtime (cudaErrorInsufficientDriver)")
        return False, f"no CUDA device: {type(exc).__name__}: {exc}"
    if count < 1:
        return False, "no CUDA device: the CUDA runtime reports 0 devices"
    p = properties(0)
    return True, (f"{p.name}, compute capability {p.capability[0]}.{p.capability[1]}, "
                  f"{p.sm_count} SMs, CuPy {cupy.__version__}")


@functools.lru_cache(maxsize=None)
def properties(device_id: int = 0) -> DeviceProperties:
    """The device's properties from the CUDA runtime (CuPy); needs a device."""
    import cupy

    rt = cupy.cuda.runtime
    props = rt.getDeviceProperties(device_id)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    return DeviceProperties(
        name=name, capability=(int(props["major"]), int(props["minor"])),
        sm_count=int(rt.deviceGetAttribute(rt.cudaDevAttrMultiProcessorCount, device_id)),
        clock_hz=rt.deviceGetAttribute(rt.cudaDevAttrClockRate, device_id) * 1e3,   # kHz
        l2_bytes=int(rt.deviceGetAttribute(rt.cudaDevAttrL2CacheSize, device_id)),
        memory_bytes=int(props["totalGlobalMem"]))


class SmClock:
    """The SM clock of one device through NVML (nvidia-ml-py), read once per timing sample.

    ``reference_mhz`` is the clock a sample is held to: the default applications
    clock, else the maximum SM clock (what nvbench compares against). Without
    NVML, ``why_not`` says why and ``now_mhz()`` gives None.
    """

    def __init__(self, device_id: int = 0, pci_bus_id: str | None = None) -> None:
        self.reference_mhz: float | None = None
        self.why_not: str | None = None
        self._nvml = self._handle = None
        try:
            import pynvml
        except ImportError:
            self.why_not = "nvidia-ml-py is not installed (pip install nvidia-ml-py)"
            return
        try:
            pynvml.nvmlInit()
            # NVML numbers devices its own way (CUDA_VISIBLE_DEVICES does not apply): find the
            # CUDA device by its PCI bus id when it is known.
            self._handle = (pynvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id) if pci_bus_id
                            else pynvml.nvmlDeviceGetHandleByIndex(device_id))
        except Exception as exc:   # pynvml.NVMLError: no driver, no permission
            self.why_not = f"NVML unavailable ({type(exc).__name__}: {exc})"
            return
        self._nvml = pynvml
        for query in (pynvml.nvmlDeviceGetDefaultApplicationsClock, pynvml.nvmlDeviceGetMaxClockInfo):
            try:
                self.reference_mhz = float(query(self._handle, pynvml.NVML_CLOCK_SM))
                break
            except Exception:   # not supported on this board: try the next
                continue

    def now_mhz(self) -> float | None:
        if self._nvml is None:
            return None
        try:
            return float(self._nvml.nvmlDeviceGetClockInfo(self._handle, self._nvml.NVML_CLOCK_SM))
        except Exception:
            return None


def tool(name: str) -> str | None:
    """Path of a CUDA command-line tool (compute-sanitizer, ncu) on PATH, or None."""
    return shutil.which(name)
