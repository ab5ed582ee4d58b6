"""numpy stand-ins for kernels with one defect each, for the hazard detectors' own tests.

Each is fn(instance, grid, block, A, B, C, M, N, K) as tests/fakes.NumpyBackend
runs it: A, B, C are flat views of raw bits inside the guarded buffers, so a
stand-in can reach past an operand's end exactly as a kernel would.
"""

import os
import signal
import time

import numpy as np

from gemmcheck.contract import catalog
from gemmcheck.contract import dtypes as dt

from fakes import NumpyBackend, correct_product


def spec(name="mine", entry="mine", expect="correct", signature="mnk", tiles=(4,)):
    return catalog.KernelSpec(name=name, source=catalog.BUILTIN, entry=entry, signature=signature,
                              policy="tile2d", tiles=tuple(tiles), dtypes=("float32",), expect=expect)


def instance(entry="mine", **kw):
    return catalog.Instance(spec(name=kw.pop("name", entry), entry=entry, **kw), "float32", 4)


def beyond(view: np.ndarray, offset: int) -> int:
    """Index into view.base of the element `offset` places past the view's end."""
    start = (view.__array_interface__["data"][0] - view.base.__array_interface__["data"][0]) // view.itemsize
    return start + view.size + offset


def _values(instance, bits, rows, cols):
    values = dt.from_bits(bits, instance.dt)
    if rows and values.size != rows * cols:   # empty lines keep a leading dimension of 1 (BLAS)
        values = values.reshape(rows, -1)[:, :cols]
    return values.reshape(rows, cols).astype(np.float64)


def drops_k_tail(instance, grid, block, A, B, C, M, N, K):
    """floor(K / TILE) phases: deterministic wrong values on ragged K."""
    k = K // instance.tile * instance.tile
    a, b = _values(instance, A, M, K), _values(instance, B, K, N)
    C[:] = dt.to_bits(a[:, :k] @ b[:k], instance.dt).reshape(-1)


def floor_grid(instance, grid, block, A, B, C, M, N, K):
    """Only whole tiles of C are written."""
    a, b = _values(instance, A, M, K), _values(instance, B, K, N)
    full = dt.to_bits(a @ b, instance.dt)
    m, n = M // instance.tile * instance.tile, N // instance.tile * instance.tile
    c = C.reshape(M, N)
    c[:m, :n] = full[:m, :n]


def carries_the_poison(instance, grid, block, A, B, C, M, N, K):
    """Writes every element; the first row's hold a NaN carrying the poison's payload: what a race
    that reads stale shared memory which held the poison computes (NaN + x keeps the payload on
    the CPU and in a GPU's float64; on an H200, broken_no_barriers float64 at 2048^3)."""
    correct_product(instance, grid, block, A, B, C, M, N, K)
    C[:N] = instance.dt.poison_bits


def reads_past_A(instance, grid, block, A, B, C, M, N, K):
    """The last element of C also multiplies the element just past A's end by B[0, 0]."""
    correct_product(instance, grid, block, A, B, C, M, N, K)
    if A.base is None or K == 0:  # an exact-size allocation (under a sanitizer), or no A to read past
        return
    extra = dt.from_bits(A.base[beyond(A, 0)], instance.dt).astype(np.float64)
    c = _values(instance, C, M, N)
    c[-1, -1] += extra * dt.from_bits(B[0], instance.dt).astype(np.float64)
    C[:] = dt.to_bits(c, instance.dt).reshape(-1)


class StaleNaN:
    """A race that reads stale shared memory: NaN at a different element each launch."""

    def __init__(self):
        self.launches = 0

    def __call__(self, instance, grid, block, A, B, C, M, N, K):
        correct_product(instance, grid, block, A, B, C, M, N, K)
        C[self.launches % C.size] = dt.to_bits(np.array([np.nan]), instance.dt)[0]
        self.launches += 1


class LingeringNaN:
    """NaN at the same elements in the first two launches whatever the guards hold, none
    after: something earlier left behind and read until overwritten (on the H200, in a long
    run, broken_no_barriers put NaN at the same places in two launches in a row)."""

    def __init__(self, launches: int = 2):
        self.launches, self.lingers = 0, launches

    def __call__(self, instance, grid, block, A, B, C, M, N, K):
        correct_product(instance, grid, block, A, B, C, M, N, K)
        if self.launches < self.lingers:
            C[:3] = dt.to_bits(np.array([np.nan]), instance.dt)[0]
        self.launches += 1


class NaNAt:
    """NaN at the given elements of C in each launch (a list: launch i -> elements), whatever
    the guards hold: what a race that reads stale shared memory leaves. On the H200, in
    nightly shard 1/10, broken_no_barriers bfloat16 TILE8 left NaN in ~2% of C each launch,
    592 elements of it in both NaN-guard launches and finite in the control between them."""

    def __init__(self, *places):
        self.places, self.launches = places, 0

    def __call__(self, instance, grid, block, A, B, C, M, N, K):
        correct_product(instance, grid, block, A, B, C, M, N, K)
        here = self.places[self.launches] if self.launches < len(self.places) else ()
        C[list(here)] = dt.to_bits(np.array([np.nan]), instance.dt)[0]
        self.launches += 1


def always_nan(instance, grid, block, A, B, C, M, N, K):
    """NaN at C[0, 0] whatever the guards hold: wrong, but not an out-of-bounds read."""
    correct_product(instance, grid, block, A, B, C, M, N, K)
    C[0] = dt.to_bits(np.array([np.nan]), instance.dt)[0]


class WrappingStore:
    """No store guard: row i's columns past N land at the start of row i + 1 (and the last row's
    past C's end, in its guard). Which store wins changes between launches, as the block
    schedule does on hardware: launches 1 and 2 happen to leave the right values, 3 and 4 not,
    and so on (an observation's NaN-guard launches are its first and third: hazards.launch_order)."""

    def __init__(self):
        self.launches = 0

    def __call__(self, instance, grid, block, A, B, C, M, N, K):
        a, b = _values(instance, A, M, K), _values(instance, B, K, N)
        width = -(-N // instance.tile) * instance.tile
        values = np.zeros((M, width))
        values[:, :N] = a @ b
        values[:, N:] = 7.0 + np.arange(width - N)        # what the threads past N computed
        bits = dt.to_bits(values, instance.dt)
        rows = range(M) if self.launches // 2 % 2 == 0 else reversed(range(M))
        for i in rows:
            for j in range(width):
                flat = i * N + j
                if flat < C.size:
                    C[flat] = bits[i, j]
                elif C.base is not None:  # (an exact-size allocation has nowhere past its end)
                    C.base[beyond(C, flat - C.size)] = bits[i, j]
        self.launches += 1


def scribbles_on_B(instance, grid, block, A, B, C, M, N, K):
    correct_product(instance, grid, block, A, B, C, M, N, K)
    B[-1] = dt.to_bits(np.array([123.0]), instance.dt)[0]


class Racy:
    """Adds one to a different element each launch: what a shared-memory race looks like."""

    def __init__(self):
        self.launches = 0

    def __call__(self, instance, grid, block, A, B, C, M, N, K):
        correct_product(instance, grid, block, A, B, C, M, N, K)
        c = _values(instance, C, M, N)
        c.reshape(-1)[self.launches % c.size] += 1
        C[:] = dt.to_bits(c, instance.dt).reshape(-1)
        self.launches += 1


class SkipsRepeats:
    """Right on its first launch, zeros after (state kept across launches): the catalog's
    cheat_skips_repeats, which counts its launches in __device__ memory."""

    def __init__(self):
        self.launches = 0

    def __call__(self, instance, grid, block, A, B, C, M, N, K):
        if self.launches == 0:
            correct_product(instance, grid, block, A, B, C, M, N, K)
        else:
            C[:] = dt.to_bits(np.zeros(M * N), instance.dt)
        self.launches += 1


# -- kernels that crash or hang the (child) process ----------------------------------

def segfaults(instance, grid, block, A, B, C, M, N, K):
    os.kill(os.getpid(), signal.SIGSEGV)


def sleeps(instance, grid, block, A, B, C, M, N, K):
    time.sleep(3600)


def does_not_build(instance, grid, block, A, B, C, M, N, K):
    """What a backend raises for an instantiation its compiler rejected."""
    from gemmcheck.backends import KernelCompileError

    raise KernelCompileError(f"k.cu:3: error: expected ';' before '}}' token ({instance.id})")


def unbuildable_backend():
    """A good kernel and one that does not build, over one backend."""
    return NumpyBackend({"good": correct_product, "unbuildable": does_not_build})


class DeadlineBackend(NumpyBackend):
    """Stops a launch that outlives hang_timeout_s (KernelHang), as the GPU backend's wait does."""

    def launch(self, instance, launch):
        from gemmcheck.backends import KernelHang

        start = time.monotonic()
        super().launch(instance, launch)
        if time.monotonic() - start > self.hang_timeout_s:
            raise KernelHang(f"{instance.id}: did not finish within {self.hang_timeout_s:g} s")


def takes_half_a_second(instance, grid, block, A, B, C, M, N, K):
    """A correct kernel whose launch is slow (as any launch is under a compute-sanitizer tool)."""
    time.sleep(0.5)
    correct_product(instance, grid, block, A, B, C, M, N, K)


def takes_three_seconds(instance, grid, block, A, B, C, M, N, K):
    time.sleep(3)


def deadline_backend():
    """`shared` is a slow correct kernel and `stuck` one that outlives any timeout a test gives,
    timed as the GPU backend times a launch."""
    return DeadlineBackend({"shared": takes_half_a_second, "stuck": takes_three_seconds})


def shared_backend():
    """Two catalog kernels over one function (`shared`), as the sanitizer run test needs."""
    return NumpyBackend({"shared": correct_product})


# -- a stand-in compute-sanitizer -------------------------------------------------------

FAKE_SANITIZER = '''
import json, os, subprocess, sys
# Runs the target and, when a step of a kernel it has a report for starts, prints that
# report (as the real tool prints during the launch), then exits 99 if it printed any.
args = sys.argv[1:]
options = {}
while args[0].startswith("--"):   # every option gemmcheck passes takes a value
    options[args[0]], args = args[1], args[2:]
tool, target = options["--tool"], args
reports = json.loads(open(os.environ["FAKE_SANITIZER_REPORTS"]).read()).get(tool, {})
steps = {s["id"]: s for s in json.loads(open(target[-2]).read())["steps"]}
if os.environ.get("FAKE_SANITIZER_CALLS"):   # one line per child: its tool and kernels
    with open(os.environ["FAKE_SANITIZER_CALLS"], "a") as calls:
        calls.write(json.dumps([tool, sorted({s["kernel"] for s in steps.values()})]) + "\\n")
proc = subprocess.Popen(target, stdout=subprocess.PIPE, text=True)
print("========= COMPUTE-SANITIZER", flush=True)
found = unprinted = 0
full = died = False
# A report starting "!reports-then-fails": printed, then the launch fails and the child leaves
# (memcheck ends a kernel at the access it reports). One starting "!fails-in-a-batch": in a
# child of several kernels, the launch fails with
# nothing reported and the child leaves ("!fails-once": in the first child that launches it;
# "!fails": in every child); "!only-in-a-batch": reported only there; "!only-alone": only in a
# child of its own. Otherwise they report as written.
# "!fills-the-print-limit": printed, and no report after it in that child is (the real tool
# prints 100 in all).
batch = len({s["kernel"] for s in steps.values()}) > 1
for line in proc.stdout:
    print(line, end="", flush=True)
    words = line.split()
    if len(words) == 3 and words[1] == "LAUNCH":
        report = list(reports.get(steps[int(words[2])]["kernel"], []))
        if report and report[0] == "!reports-then-fails":   # the report, then the launch fails
            for out in report[1:]:
                print(out, flush=True)
                found += 1
            print(f'@@gemmcheck FAILED {words[2]} "cudaErrorLaunchFailure: unspecified launch failure (stand-in)"',
                  flush=True)
            proc.kill()
            died = True
            break
        if report and report[0] in ("!fails-in-a-batch", "!fails-once", "!fails"):
            once = os.path.join(os.path.dirname(os.environ["FAKE_SANITIZER_REPORTS"]),
                                "failed-once-" + steps[int(words[2])]["kernel"])
            if (report[0] == "!fails" or (report[0] == "!fails-in-a-batch" and batch)
                    or (report[0] == "!fails-once" and not os.path.exists(once))):
                open(once, "w").close()   # the launch fails and its child leaves
                print(f'@@gemmcheck FAILED {words[2]} "cudaErrorLaunchFailure (stand-in)"', flush=True)
                proc.kill()
                died = True
                break
            report = report[1:]
        if report and report[0] == "!only-in-a-batch":
            report = report[1:] if batch else []
        if report and report[0] == "!only-alone":
            report = [] if batch else report[1:]
        fills = bool(report) and report[0] == "!fills-the-print-limit"
        report = report[1:] if fills else report
        if full:
            unprinted += len(report)
            report = []
        full = full or fills
        for out in report:
            print(out, flush=True)
            found += 1
proc.wait()
if died:
    print("========= Error: process didn't terminate successfully", flush=True)
    print("========= The application may have hit an error when dereferencing Unified Memory from the host.", flush=True)
print(f"========= ERROR SUMMARY: {found + unprinted} errors", flush=True)
if unprinted:
    print(f"========= ERROR SUMMARY: {unprinted} errors were not printed. Use --print-limit option to "
          "adjust the number of printed errors", flush=True)
sys.exit(99 if found else proc.returncode)
'''


def fake_sanitizer(directory, reports, monkeypatch):
    """Write a stand-in `compute-sanitizer` into `directory`; `reports` maps tool -> kernel
    name -> the lines it prints when a launch of that kernel starts. Returns its path."""
    import json
    import sys

    (directory / "fake_reports.json").write_text(json.dumps(reports))
    monkeypatch.setenv("FAKE_SANITIZER_REPORTS", str(directory / "fake_reports.json"))
    tool = directory / "compute-sanitizer"
    tool.write_text(f"#!{sys.executable}\n" + FAKE_SANITIZER)
    tool.chmod(0o755)
    return tool


def last_row_wrong_on_ragged_m(instance, grid, block, A, B, C, M, N, K):
    """What a barrier inside `if (row < M)` looks like on hardware: wrong values in the last
    block row when M is ragged, nothing else to see."""
    correct_product(instance, grid, block, A, B, C, M, N, K)
    if M % instance.tile:
        c = _values(instance, C, M, N)
        c[-1] += 1.0
        C[:] = dt.to_bits(c, instance.dt).reshape(-1)


MATRIX_KERNELS = {  # entry -> (declared defect, stand-in factory)
    "good": ("correct", lambda: correct_product),
    "good_too": ("correct", lambda: correct_product),     # two references share a batch
    "racy": ("shared_memory_race", Racy),
    "reads_past_A": ("out_of_bounds_read", lambda: reads_past_A),
    "wrapping_store": ("out_of_bounds_write", WrappingStore),
    "floor_grid": ("unwritten_output", lambda: floor_grid),
    "drops_k_tail": ("wrong_values", lambda: drops_k_tail),
    "skips_repeats": ("wrong_values", SkipsRepeats),      # right on its first launch only
    "divergent": ("divergent_barrier", lambda: last_row_wrong_on_ragged_m),
    "segfaults": ("crash", lambda: segfaults),
    "sleeps": ("hang", lambda: sleeps),
    "slow": ("too_slow", lambda: correct_product),
}


def matrix_backend():
    return NumpyBackend({name: make() for name, (_, make) in MATRIX_KERNELS.items()})


def faults_after_return(instance, grid, block, A, B, C, M, N, K):
    """What a fault looks like when a call after the launch sees it (on an H200, racecheck over
    an out-of-bounds store): CuPy's sticky error from no launch of ours."""
    raise RuntimeError("cudaErrorLaunchFailure: unspecified launch failure")


def late_fault_backend():
    """matrix_backend, its "segfaults" faulting as faults_after_return does."""
    kernels = {name: make() for name, (_, make) in MATRIX_KERNELS.items()}
    return NumpyBackend({**kernels, "segfaults": faults_after_return})


def matrix_catalog(directory):
    """A catalog of MATRIX_KERNELS (TILE 4 and 8, float32 and float16), written to `directory`."""
    (directory / "k.cu").write_text("\n".join(f"template <typename T, int TILE> __global__ void {name}();"
                                               for name in MATRIX_KERNELS))
    entries = "".join(f'''
[[kernel]]
name = "{name}"
source = "k.cu"
entry = "{name}"
signature = "mnk"
policy = "tile2d"
tiles = [4, 8]
dtypes = ["float16", "float32"]
expect = "{expect}"
''' for name, (expect, _) in MATRIX_KERNELS.items())
    path = directory / "catalog.toml"
    path.write_text(entries)
    return path
