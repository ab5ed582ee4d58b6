"""The performance suite's own CuPy kernels, compiled once per run before its first timing.

A timed test judges outputs with CuPy: the input sets' raw bits widened to float64, the
poison fill, perf.measurement.check_output (the oracle's bound, NaNs, the worst element),
the hold kernel. CuPy compiles each at its first call (NVRTC) into its cache folder
(CUPY_CACHE_DIR), which the processes of a host share. Cold, the first performance test
of a ci run on an H200 compiled 25 of them in 8.1 s (count_nonzero's reduction alone 5.1 s),
holding the GPU shared, so no other worker could time meanwhile (in that run, -n 8, the
three other timing workers waited 9.7 to 13.0 s for their first turn).

So one child process per run (`Ahead`) runs the same judging path once per dtype and
layout on tiny input sets at the start, beside the other suites, and the timing workers
then read the kernels from the cache. It is only ever a head start: a child that fails
leaves each test to compile what it needs, as before.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import Future

from gemmcheck import phases

SIZE = 64            # N of the tiny sets: CuPy's kernels do not depend on it (32-bit indexing up to 2^31 elements)
TIMEOUT_S = 300.0    # the child's limit (cold it took ~10 s on an H200 host among ci's workers)
LABEL = "perf-warm"  # the child's tool in --gemm-phases' record of children


def compile_judging(cupy, kinds, size: int = SIZE) -> None:
    """Run the performance suite's judging path once per (dtype, {operand: layout}) in `kinds`
    on tiny input sets, and compile its hold kernel: what the timed tests would compile."""
    from gemmcheck.contract import operand_types
    from gemmcheck.perf import gpu
    from gemmcheck.perf.inputs import InputSets

    for dtype_name, layouts in kinds:
        sets = InputSets(cupy, operand_types.coerce(dtype_name), size, 0, seed=0, layouts=dict(layouts)).upload()
        sets.poison(sets.check_set)
        gpu.output_check(cupy, sets, sets.check_set)
    gpu.hold_kernel(cupy).compile()
    cupy.ones(1, dtype=cupy.float32)   # the copy bandwidth's buffer (GpuTimer.copy)
    cupy.cuda.Device().synchronize()


def kinds_of(instances) -> list[tuple[str, tuple]]:
    """The (dtype, layouts) the timed tests of these instantiations judge, sorted; float32 in
    row-major always (cuBLAS float32 is timed alone, for the TF32 check)."""
    kinds = {("float32", ())}
    for i in instances:
        name = i.dtype if i.types.uniform else i.types.spelling
        kinds.add((name, tuple(sorted((o, l) for o, l in i.spec.layouts.items() if l != "row"))))
    return sorted(kinds)


def command(kinds) -> list[str]:
    return [sys.executable, "-m", "gemmcheck.perf.warm", json.dumps([[d, list(map(list, l))] for d, l in kinds])]


class Ahead:
    """The run's compile-ahead child as one process sees it: started at construction on a
    thread of its own (by the first process of the run to ask, `shared`: a once.Once; the
    others wait for its word), `wait` for its end. `hold`: (started, ended) callables around
    the child's life (a worker that shares its GPU holds it shared: the child launches)."""

    def __init__(self, kinds, shared=None, hold=None, timeout: float = TIMEOUT_S) -> None:
        self.kinds = list(kinds)
        self._timeout = timeout
        self._hold = hold
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()
        self._stopped = False
        self._done: Future = Future()
        key = f"{LABEL} " + hashlib.sha256(repr(self.kinds).encode()).hexdigest()

        def body() -> None:
            try:
                self._done.set_result(self._run() if shared is None else shared.do(key, self._run))
            except BaseException as exc:   # the child is a head start: its failure is a note
                self._done.set_result(f"{type(exc).__name__}: {exc}")
        threading.Thread(target=body, name="gemmcheck-perf-warm", daemon=True).start()

    def wait(self, timeout: float | None = None) -> str | None:
        """None once the kernels are in CuPy's cache; else why they are not (each test then
        compiles what it needs)."""
        try:
            return self._done.result(timeout)
        except TimeoutError:
            return f"still compiling after {timeout:g} s"

    def stop(self) -> None:
        """Kill the child if it still runs (the session ends)."""
        with self._lock:
            self._stopped = True
            if self._proc is not None and self._proc.poll() is None:
                self._proc.kill()

    def _run(self) -> str | None:
        started = time.time()
        if self._hold:
            self._hold[0]()
        try:
            with self._lock:
                if self._stopped:
                    return "stopped before it started"
                # A copy of the environment: with env=None the vfork()ed child reads this
                # process's environ while other threads may change it (isolation.supervise).
                self._proc = subprocess.Popen(command(self.kinds), stdout=subprocess.DEVNULL,
                                              stderr=subprocess.PIPE, text=True, env=dict(os.environ),
                                              start_new_session=True, errors="replace")
            try:
                _, err = self._proc.communicate(timeout=self._timeout)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.communicate()
                return f"killed after {self._timeout:g} s"
            if self._proc.returncode:
                last = (err.strip().splitlines() or ["no output"])[-1]
                return f"exit {self._proc.returncode}: {last}"
            return None
        finally:
            if self._hold:
                self._hold[1]()
            phases.child_ran(f"{LABEL}: " + ", ".join(d + "".join(f"-{o}{l}" for o, l in lay)
                                                      for d, lay in self.kinds),
                             started, None, time.time())


def main(argv=None) -> int:
    kinds = [(d, tuple(map(tuple, l))) for d, l in json.loads((argv or sys.argv[1:])[0])]
    import cupy

    compile_judging(cupy, kinds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
