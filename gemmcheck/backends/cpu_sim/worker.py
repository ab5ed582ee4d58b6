"""The Python side of the simulator's worker process: requests, the report, shared buffers.

Mirrors the structs at the top of runtime.cpp. Buffers live in memfds, so the worker
maps the very memory the harness reads; a crash or a hang of a kernel kills only the
worker, which is restarted for the next launch.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import select
import signal
import socket
import subprocess
import time
import weakref
from pathlib import Path

import numpy as np

KIND_NAMES = {1: "RAW", 2: "WAR", 3: "WAW", 4: "uninitialized"}
SCHEDULES = {"forward": 0, "reverse": 1, "shuffle": 2, "lockstep": 3}
MAX_POINTERS, MAX_ARGUMENT_BYTES, MAX_RANGES, MAX_CONFLICTS, MAX_DIVERGENT, MAX_SITES = 16, 256, 1024, 16, 8, 4
MAX_GLOBAL_RACES = 8
# What each block of a global-memory race did to the address (GLOBAL_* in runtime.cpp).
GLOBAL_ACCESS = {1: "store", 2: "atomic"}
MESSAGE_SIZE = 256
# The reply's first byte (STATUS_* in runtime.cpp): done; a request the worker cannot run; a
# module that does not load (dlopen's error follows).
STATUS_DONE, STATUS_BAD_REQUEST, STATUS_MODULE_NOT_LOADED = 0, 1, 2
# What a divergence record is (DIVERGE_* in runtime.cpp).
DIVERGENCE_KINDS = {0: "barrier", 1: "warp_missing_lanes", 2: "warp_mask", 3: "warp_source",
                    4: "warp_masks_differ"}
# The warp-synchronous call a warp record is of (WARP_* in runtime.cpp), as CUDA names it.
WARP_CALLS = ("__shfl_sync", "__shfl_up_sync", "__shfl_down_sync", "__shfl_xor_sync", "__ballot_sync",
              "__all_sync", "__any_sync", "__syncwarp", "__match_any_sync", "__match_all_sync",
              "__reduce_add_sync", "__reduce_min_sync", "__reduce_max_sync", "__reduce_and_sync",
              "__reduce_or_sync", "__reduce_xor_sync")


class Conflict(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_uint32), ("interval", ctypes.c_uint32), ("thread_a", ctypes.c_uint32),
                ("thread_b", ctypes.c_uint32), ("block", ctypes.c_uint32 * 3), ("pad", ctypes.c_uint32),
                ("address", ctypes.c_uint64)]


class Site(ctypes.Structure):
    _fields_ = [("file", ctypes.c_char * 48), ("line", ctypes.c_int32), ("count", ctypes.c_uint32),
                ("first_thread", ctypes.c_uint32)]


class Divergence(ctypes.Structure):
    _fields_ = [("block", ctypes.c_uint32 * 3), ("interval", ctypes.c_uint32), ("nsites", ctypes.c_uint32),
                ("exited", ctypes.c_uint32), ("first_exited", ctypes.c_uint32), ("what", ctypes.c_uint32),
                ("sites", Site * MAX_SITES), ("warp", ctypes.c_uint32), ("mask", ctypes.c_uint32),
                ("lanes", ctypes.c_uint32), ("op", ctypes.c_uint32)]


class GlobalRace(ctypes.Structure):
    _fields_ = [("earlier", ctypes.c_uint32), ("later", ctypes.c_uint32),
                ("earlier_block", ctypes.c_uint32 * 3), ("later_block", ctypes.c_uint32 * 3),
                ("buffer", ctypes.c_uint32), ("pad", ctypes.c_uint32), ("byte_offset", ctypes.c_int64)]


class Report(ctypes.Structure):
    _fields_ = [("heartbeat", ctypes.c_uint64), ("state", ctypes.c_uint32), ("signal", ctypes.c_uint32),
                ("fault_address", ctypes.c_uint64), ("cur_block", ctypes.c_uint32 * 3),
                ("cur_thread", ctypes.c_uint32), ("counts", ctypes.c_uint64 * 5),
                ("divergent", ctypes.c_uint64), ("nconflicts", ctypes.c_uint32),
                ("ndivergent", ctypes.c_uint32), ("conflicts", Conflict * MAX_CONFLICTS),
                ("divergences", Divergence * MAX_DIVERGENT), ("message", ctypes.c_char * MESSAGE_SIZE),
                ("global_races", ctypes.c_uint64), ("nglobal", ctypes.c_uint32), ("pad", ctypes.c_uint32),
                ("global_", GlobalRace * MAX_GLOBAL_RACES), ("bad_warp_calls", ctypes.c_uint64)]


class Request(ctypes.Structure):
    """One launch. `arguments` holds the by-value arguments, each in the bytes of the type the
    kernel declares (gemmcheck.backends.cpu_sim.build.argument_bytes lays them out). An array of
    pointers (a bit of `pointer_arrays`) holds this process's addresses (`pointer_host_base`),
    which the worker turns into its own for the launch."""

    _fields_ = [("module", ctypes.c_char * 1024), ("kernel", ctypes.c_int32), ("npointers", ctypes.c_int32),
                ("nbytes", ctypes.c_int32), ("schedule", ctypes.c_int32), ("seed", ctypes.c_uint64),
                ("grid", ctypes.c_uint32 * 3), ("block", ctypes.c_uint32 * 3),
                ("arguments", ctypes.c_uint64 * (MAX_ARGUMENT_BYTES // 8)),   # by-value arguments' bytes
                ("pointer_offset", ctypes.c_uint64 * MAX_POINTERS),
                ("pointer_length", ctypes.c_uint64 * MAX_POINTERS),
                ("nranges", ctypes.c_uint32), ("track", ctypes.c_uint32),
                ("range_start", ctypes.c_uint64 * MAX_RANGES), ("range_size", ctypes.c_uint64 * MAX_RANGES),
                ("pointer_host_base", ctypes.c_uint64 * MAX_POINTERS),   # each buffer's address here
                ("pointer_arrays", ctypes.c_uint32), ("pad", ctypes.c_uint32)]   # bit i: buffer i holds pointers


# -- shared buffers ----------------------------------------------------------------------

class SharedBuffer(mmap.mmap):
    """An mmap of a memfd: the memory a 'device' array lives in, shareable with the worker."""

    fd: int
    address: int


def shared_array(bits: np.ndarray) -> np.ndarray:
    """A copy of the 1-D array `bits` in a fresh memfd-backed buffer."""
    bits = np.ascontiguousarray(bits).reshape(-1)
    nbytes = max(bits.nbytes, 1)
    fd = os.memfd_create("gemmcheck-cpu-sim", os.MFD_CLOEXEC)
    os.ftruncate(fd, nbytes)
    buf = SharedBuffer(fd, nbytes)
    buf.fd = fd
    buf.address = ctypes.addressof(ctypes.c_char.from_buffer(buf))
    weakref.finalize(buf, os.close, fd)
    out = np.frombuffer(buf, dtype=bits.dtype, count=bits.size)
    out[...] = bits
    return out


def root_of(view: np.ndarray) -> tuple[SharedBuffer, np.ndarray]:
    """The SharedBuffer a device array or a view of one lives in, and the whole array over it."""
    obj, top = view, view
    while isinstance(obj, np.ndarray):
        top, obj = obj, obj.base
    if isinstance(obj, memoryview):
        obj = obj.obj
    if not isinstance(obj, SharedBuffer):
        raise TypeError("cpu-sim: kernel pointer arguments must be arrays from backend.to_device()")
    return obj, top


# -- the worker process ------------------------------------------------------------------

class WorkerDied(RuntimeError):
    def __init__(self, signal_number: int | None, exit_code: int | None, report: Report):
        self.signal_number, self.exit_code, self.report = signal_number, exit_code, report
        super().__init__(f"worker died (signal {signal_number}, exit code {exit_code})")


class WorkerStalled(RuntimeError):
    def __init__(self, seconds: float, report: Report):
        self.seconds, self.report = seconds, report
        super().__init__(f"no progress for {seconds:.1f} s")


class Worker:
    """One worker process; started on first use, restarted after a crash or a hang."""

    def __init__(self, executable: Path):
        self.executable = executable
        self.proc: subprocess.Popen | None = None
        self.sock: socket.socket | None = None
        self._report_fd = os.memfd_create("gemmcheck-cpu-sim-report", os.MFD_CLOEXEC)
        os.ftruncate(self._report_fd, ctypes.sizeof(Report))
        self._report_map = mmap.mmap(self._report_fd, ctypes.sizeof(Report))
        self.report = Report.from_buffer(self._report_map)

    def _start(self) -> None:
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.proc = subprocess.Popen([str(self.executable), str(child.fileno()), str(self._report_fd)],
                                     pass_fds=(child.fileno(), self._report_fd), stdin=subprocess.DEVNULL)
        child.close()
        self.sock = parent

    def stop(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self.proc is not None:
            try:
                self.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None

    def _kill(self) -> tuple[int | None, int | None]:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        code = self.proc.wait()
        self.sock.close()
        self.proc, self.sock = None, None
        return (-code, None) if code < 0 else (None, code)

    def run(self, request: Request, fds: list[int], stall_timeout_s: float) -> tuple[int, str]:
        """Send one launch; return (status, error text). Raises WorkerDied / WorkerStalled."""
        if self.proc is None or self.proc.poll() is not None:
            if self.proc is not None:
                self._kill()
            self._start()
        try:
            socket.send_fds(self.sock, [bytes(request)], fds)
        except OSError:
            sig, code = self._kill()
            raise WorkerDied(sig, code, Report.from_buffer_copy(self.report)) from None
        beat, since = self.report.heartbeat, time.monotonic()
        while True:
            ready, _, _ = select.select([self.sock], [], [], 0.05)
            if ready:
                reply = self.sock.recv(1024)
                if not reply:
                    sig, code = self._kill()
                    raise WorkerDied(sig, code, Report.from_buffer_copy(self.report))
                return reply[0], reply[1:].decode(errors="replace")
            now = time.monotonic()
            if self.report.heartbeat != beat:
                beat, since = self.report.heartbeat, now
            elif now - since > stall_timeout_s:
                snapshot = Report.from_buffer_copy(self.report)
                self._kill()
                raise WorkerStalled(now - since, snapshot)
