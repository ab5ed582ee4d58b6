"""The GPU timing path (gemmcheck.perf.gpu.GpuTimer) end to end, with numpy standing in for
CuPy and a made-up device clock: interleaving, poisoning, the first and last launch checks,
the impossibility check, and the positive control's behaviour (right once, wrong on repeats)."""

import json
import sys
import types

import numpy as np
import pytest

from gemmcheck.contract import catalog
from gemmcheck.backends import device
from gemmcheck import perf
from gemmcheck.contract import dtypes as dt
from gemmcheck.perf import summary

N = 64


class FakeGpu:
    """The parts of CuPy the timer uses, on numpy, with a clock that launches advance."""

    def __init__(self):
        self.now = 0.0
        self.log: list[str] = []
        self.fault = None    # a sticky CUDA error: every later wait on the device raises it

    def module(self):
        gpu = self
        cp = types.ModuleType("cupy")
        cp.__getattr__ = lambda name: getattr(np, name)   # zeros, asarray, isnan, where, ...

        class Event:
            def record(self):
                self.t = gpu.now

            def synchronize(self):
                if gpu.fault:
                    raise CUDARuntimeError(gpu.fault)

        class Device:
            id = 0
            pci_bus_id = "0000:00:00.0"

            def __init__(self, *args):
                pass

            def synchronize(self):
                pass

        cp.cuda = types.SimpleNamespace(Event=Event, Device=Device,
                                        get_elapsed_time=lambda a, b: (b.t - a.t) * 1e3)

        def matmul(A, B, out):
            gpu.log.append("cublas")
            out[...] = A @ B
            gpu.now += 2 * N**3 / 50.5e12
        cp.matmul = matmul

        class RawKernel:   # the hold kernel: keeps the stream busy, advances no timed clock
            def __init__(self, source, name):
                assert "globaltimer" in source and name == "gemmcheck_hold"

            def __call__(self, grid, block, args):
                gpu.log.append("hold")
        cp.RawKernel = RawKernel
        linalg = types.ModuleType("cupy._core._routines_linalg")
        linalg.COMPUTE_TYPE_DEFAULT = 0
        linalg.get_compute_type = lambda dtype: 0
        linalg.set_compute_type = lambda dtype, kind: None
        core = types.ModuleType("cupy._core")
        core._routines_linalg = linalg
        cp._core = core
        return {"cupy": cp, "cupy._core": core, "cupy._core._routines_linalg": linalg}


class CUDARuntimeError(RuntimeError):
    """CuPy's, by name (the backends tell sticky errors by status or text, never import CuPy)."""


class Backend:
    """Launches a 'kernel' on the fake GPU: honest (the product every time), a cheat that
    stores zeros after its first launch, one that replays its first launch's result, one that
    faults (an illegal address: sticky) or hangs on its third launch (the first timed ones)."""

    name = "cupy"

    def __init__(self, gpu, behaviour):
        self.gpu, self.behaviour, self.launches, self.first = gpu, behaviour, 0, None

    def enqueue(self, instance, planned):
        by_role = dict(zip(instance.spec.roles, planned.args))   # whatever the kernel's argument order
        self.kernel(instance)(planned.grid, planned.block, (by_role["A"], by_role["B"], by_role["C"]))

    def launch(self, instance, planned):   # enqueue and wait (the check launch)
        self.enqueue(instance, planned)

    def wait(self, instance, grid, block, event, *, spin_s=0.0):
        from gemmcheck.backends import KernelHang

        if getattr(self, "hung", False):
            raise KernelHang(f"{instance.id}: launch of {instance.name_expression} did not finish within 10 s")
        event.synchronize()

    def launch_failure(self, instance, grid, block, exc):
        from gemmcheck.backends.cupy_backend import CupyBackend

        return CupyBackend.launch_failure(self, instance, grid, block, exc)

    def kernel(self, instance):
        def launch(grid, block, args):
            A, B, C = args[:3]
            product = (A.view(np.float32) @ B.view(np.float32)).view(np.uint32)
            old = C.view(np.float32).copy()              # what C held before the launch
            self.gpu.log.append("kernel")
            if self.launches == 0 or self.behaviour == "honest" or self.behaviour.startswith("reads_c"):
                C[...] = product
                self.first = product.copy() if self.first is None else self.first
                self.gpu.now += 2 * N**3 / 8.8e12
            elif self.behaviour == "zeros":
                C[...] = 0
                self.gpu.now += 1e-12
            elif self.behaviour in ("faults", "hangs"):
                C[...] = product
                self.gpu.now += 2 * N**3 / 8.8e12
                if self.launches == 2:
                    self.gpu.fault = "cudaErrorIllegalAddress: an illegal memory access was encountered"
                    self.hung = self.behaviour == "hangs"
            elif self.behaviour == "replay":
                C[...] = self.first                      # the first result, whatever the inputs
                self.gpu.now += 2 * N**3 / 8.8e12
            if self.behaviour.startswith("reads_c"):     # the tutorial epilogue alpha acc + beta C[i]
                C[...] = (product.view(np.float32) + np.float32(0) * old).view(np.uint32)
                if self.behaviour == "reads_c_skips_a_row":
                    C[-1] = old[-1].view(np.uint32)
            self.launches += 1
        return launch


class Clock:
    reference_mhz, why_not = 1980.0, None

    def __init__(self, *args):
        pass

    def now_mhz(self):
        return 1980.0


def fake_device(monkeypatch, l2_bytes: int) -> FakeGpu:
    """A FakeGpu standing in for CuPy, on a device with `l2_bytes` of L2 and a steady SM clock."""
    gpu = FakeGpu()
    for name, module in gpu.module().items():
        monkeypatch.setitem(sys.modules, name, module)
    props = device.DeviceProperties("Fake H200", (9, 0), 132, 1.98e9, l2_bytes)
    monkeypatch.setattr(device, "properties", lambda device_id=0: props)
    monkeypatch.setattr(device, "SmClock", Clock)
    return gpu


@pytest.fixture
def timer_for(monkeypatch):
    gpu = fake_device(monkeypatch, 3 * N * N * 4)   # L2 of one set: three sets rotate

    def make(behaviour, turn=None):
        timer = perf.GpuTimer(Backend(gpu, behaviour), perf.Timing(warmup=2), turn=turn)
        session = perf.PerfSession(timer, repeats=6)
        session._copy = perf.Measurement("copy", 2**30, (0.5e-3,) * 5, bytes_moved=2 * 2**30)
        return session, gpu
    return make


def instance():
    spec = next(s for s in catalog.load(catalog.BUILTIN) if s.name == "matmul_tiled_guarded")
    return catalog.Instance(spec, "float32", 32)


def test_an_honest_kernel_is_timed_in_turn_with_cublas_and_accepted(timer_for):
    session, gpu = timer_for("honest")
    rate = perf.timed_rate(session, instance(), N)
    row = session.rows[(instance().id, N)]
    assert rate == pytest.approx(8.8, rel=1e-6) and row.cublas.tflops == pytest.approx(50.5, rel=1e-6)
    assert row.check.ok and row.last.ok and row.impossible is None
    assert row.measurement.stop == "converged" and len(row.measurement.times) == 6
    assert row.measurement.clock_mhz == 1980 and row.measurement.n_sets == 3
    launches = [e for e in gpu.log if e != "hold"]
    timed = launches[launches.index("cublas"):]        # after the first check: the probe, then rounds
    assert timed[1:] == ["cublas", "kernel"] * (len(timed[1:]) // 2)


def _with_logged_turns(timer_for):
    """An honest kernel's session whose turns write "turn" / "end of turn" into the GPU's log."""
    import contextlib

    log = []

    @contextlib.contextmanager
    def turn():
        log.append("turn")
        yield
        log.append("end of turn")

    session, gpu = timer_for("honest", turn)
    gpu.log = log
    return session, gpu


def test_every_step_on_the_device_runs_in_the_workers_turn_and_drawing_inputs_outside(timer_for, monkeypatch):
    """Under pytest-xdist with workers sharing a GPU, the turn (the card to this worker alone)
    covers all of a timed test's device work: the first check (uploads, launch, judgement) in
    one turn; cuBLAS's dtype probe, the warm-up, the samples and the last launch's judgement in
    another. Drawing the input sets on the host holds nothing: other workers sample meanwhile."""
    from gemmcheck.perf import gpu as perf_gpu, inputs

    session, gpu = _with_logged_turns(timer_for)
    log = gpu.log
    drawn, uploaded, judged = inputs._operands_side_by_side, perf.InputSets.upload, perf_gpu.output_check
    monkeypatch.setattr(inputs, "_operands_side_by_side", lambda p: (log.append("draw"), drawn(p))[1])
    monkeypatch.setattr(perf.InputSets, "upload", lambda self: (log.append("upload"), uploaded(self))[1])
    monkeypatch.setattr(perf_gpu, "output_check", lambda *a: (log.append("judge"), judged(*a))[1])
    perf.timed_rate(session, instance(), N)
    seen = [e for e in gpu.log if e != "hold"]
    assert seen[:6] == ["draw", "turn", "upload", "kernel", "judge", "end of turn"]
    second = seen[6:]
    assert second[:3] == ["turn", "upload", "cublas"] and second[-2:] == ["judge", "end of turn"]
    inside = second[3:-2]
    samples = len(session.rows[(instance().id, N)].measurement.times)
    assert set(inside) == {"kernel", "cublas"} and len(inside) == 4 + samples * 2   # warm-up, then rounds


def test_cublas_timed_alone_runs_in_one_turn(timer_for):
    session, gpu = _with_logged_turns(timer_for)
    session.cublas("float32", N)
    seen = [e for e in gpu.log if e != "hold"]
    assert seen[0] == "turn" and seen[-1] == "end of turn" and set(seen[1:-1]) == {"cublas"}


@pytest.mark.parametrize("behaviour, says", [
    ("zeros", "correct on its first launch, wrong on its last timed launch"),
    ("replay", "correct on its first launch, wrong on its last timed launch"),
])
def test_a_kernel_right_once_and_wrong_on_repeats_is_refused(timer_for, behaviour, says):
    session, _ = timer_for(behaviour)
    with pytest.raises(perf.WrongOutput, match=says):
        perf.timed_rate(session, instance(), N)
    row = session.rows[(instance().id, N)]
    assert row.check.ok and not row.last.ok
    # Storing zeros takes no time: the roofline refuses that too. Replaying costs as much as
    # the real product, so only the last-launch check can catch it.
    assert (row.impossible is not None) == (behaviour == "zeros"), row.impossible


def declaring_it(inst):
    """The instantiation as a kernel that declares reads_c_at_beta_zero = true."""
    import dataclasses

    return catalog.Instance(dataclasses.replace(inst.spec, reads_c_at_beta_zero=True), inst.dtype, inst.tile)


def takes_beta():
    """An instantiation whose kernel takes alpha and beta (the fake launch does the rest)."""
    spec = next(s for s in catalog.load(catalog.BUILTIN) if s.name == "broken_reads_c_at_beta_zero")
    return catalog.Instance(spec, "float32", 16)


def test_a_kernel_that_reads_c_at_beta_zero_is_refused_unless_it_declares_the_convention(timer_for):
    session, _ = timer_for("reads_c")
    with pytest.raises(perf.WrongOutput, match="NaN"):
        perf.timed_rate(session, instance(), N)
    session, _ = timer_for("reads_c")
    assert perf.timed_rate(session, declaring_it(instance()), N) == pytest.approx(8.8, rel=1e-6)


def test_its_refusal_points_at_the_read_of_c_when_the_kernel_takes_beta(timer_for):
    session, _ = timer_for("reads_c")
    with pytest.raises(perf.WrongOutput) as caught:
        perf.timed_rate(session, takes_beta(), N)
    first = str(caught.value).splitlines()[0]
    assert first.startswith("reads_c_at_beta_zero: this failure is the read of C at beta = 0"), first
    assert "test_beta_zero_never_reads_c" in first
    # a kernel whose NaN has another cause is told its own story
    session, _ = timer_for("reads_c_skips_a_row")
    with pytest.raises(perf.WrongOutput) as caught:
        perf.timed_rate(session, takes_beta(), N)
    assert not str(caught.value).startswith("reads_c_at_beta_zero"), caught.value


def test_under_the_convention_an_unwritten_element_is_still_refused(timer_for):
    session, _ = timer_for("reads_c_skips_a_row")
    with pytest.raises(perf.WrongOutput):
        perf.timed_rate(session, declaring_it(instance()), N)


def test_a_cublas_sample_after_the_kernels_last_one_cannot_hide_its_wrong_output(timer_for, monkeypatch):
    # cuBLAS, noisy, samples on after the kernel's series has settled, over every input set: the
    # product it computes must not land in the output the kernel's last check reads.
    session, gpu = timer_for("zeros")
    calls = []

    def noisy_matmul(A, B, out):
        calls.append(1)
        gpu.log.append("cublas")
        out[...] = A @ B
        gpu.now += 2 * N**3 / (25e12 if len(calls) % 2 else 50.5e12)

    monkeypatch.setattr(sys.modules["cupy"], "matmul", noisy_matmul)
    with pytest.raises(perf.WrongOutput, match="wrong on its last timed launch"):
        perf.timed_rate(session, instance(), N)
    row = session.rows[(instance().id, N)]
    assert len(row.cublas.times) > len(row.measurement.times) + 3   # cuBLAS went on over every set


def test_every_sample_starts_from_a_poisoned_output(timer_for, monkeypatch):
    session, _ = timer_for("honest")
    poisoned = []
    original = perf.InputSets.poison
    monkeypatch.setattr(perf.InputSets, "poison", lambda self, i, *a, **kw: (poisoned.append(i), original(self, i, *a, **kw)))
    perf.timed_rate(session, instance(), N)
    m = session.rows[(instance().id, N)]
    # first check + the kernel's warm-up (2 rounds) + its every timed sample; cuBLAS writes
    # outputs of its own, poisoned by nobody
    assert len(poisoned) == 1 + 2 + len(m.measurement.times)
    assert poisoned[0] == 3 and set(poisoned[1:]) == {0, 1, 2}   # the check set is never timed
    assert dt.get("float32").poison_bits not in session.timer.inputs("float32", N).sets[poisoned[-1]][2]


def test_every_sample_is_held_behind_a_busy_stream_so_host_launch_overhead_is_not_timed(timer_for):
    session, gpu = timer_for("honest")
    perf.timed_rate(session, instance(), N)
    log = [e for e in gpu.log if e in ("hold", "kernel", "cublas")]
    holds = [i for i, e in enumerate(log) if e == "hold"]
    assert holds and all(log[i + 1] in ("kernel", "cublas") for i in holds)   # a hold, then the timed launch
    row = session.rows[(instance().id, N)]
    taken = sum(len(m.times) + m.dropped for m in (row.measurement, row.cublas))
    warmups = 2 * session.timer.timing.warmup          # warm-up rounds are samples too, not kept
    assert len(holds) == taken + warmups               # one hold per sample; the checks are not held


def test_scratch_memory_is_reset_before_every_sample_outside_the_timed_span(timer_for, monkeypatch):
    # a split-K kernel that counts arrivals in its semaphores: each launch must find them zero
    session, gpu = timer_for("honest")
    backend = session.timer.backend
    scratch = {}
    backend.to_device = lambda bits: scratch.setdefault(id(bits), np.array(bits))
    backend.address_of = id

    def memset(ptr, value, nbytes, stream):
        gpu.log.append("memset")
        next(b for b in scratch.values() if id(b) == ptr)[:nbytes] = value
    cupy = sys.modules["cupy"]
    monkeypatch.setattr(cupy.cuda, "runtime", types.SimpleNamespace(memsetAsync=memset), raising=False)
    monkeypatch.setattr(cupy.cuda, "get_current_stream", lambda: types.SimpleNamespace(ptr=0), raising=False)
    counted = []
    enqueue = backend.enqueue

    def counting(instance, planned):
        semaphores = dict(zip(instance.spec.roles, planned.args))["semaphores"]
        counted.append(int(semaphores.any()))   # what the last launch left, unless reset
        semaphores[...] = 1
        enqueue(instance, planned)
    backend.enqueue = counting
    (splitk,) = [s for s in catalog.load("examples/splitk/catalog.toml") if s.name == "splitk_workspace"]
    perf.timed_rate(session, splitk.instances()[0], N)
    assert counted and not any(counted)
    log = [e for e in gpu.log if e in ("memset", "hold", "kernel")]
    kernels = [i for i, e in enumerate(log) if e == "kernel"]
    # every launch: a memset first; a timed one, then its hold (the memset is not timed)
    assert all(log[i - 1] == "memset" or log[i - 2:i] == ["memset", "hold"] for i in kernels)
    assert sum(e == "memset" for e in log) >= len(kernels)


# -- a kernel that crashes or hangs costs its own row -----------------------------------------

def other_instance():
    spec = next(s for s in catalog.load(catalog.BUILTIN) if s.name == "matmul_tiled")
    return catalog.Instance(spec, "float32", 32)


@pytest.fixture
def no_context_lost_here(monkeypatch):
    """lose_context's record and hook, put back after the test (the process is not lost)."""
    from gemmcheck import backends

    monkeypatch.setattr(backends, "_CONTEXT_LOST", [])
    monkeypatch.setattr(sys, "unraisablehook", sys.unraisablehook)
    return backends


def test_a_row_the_sized_probe_saw_crash_is_refused_without_a_launch_and_the_others_are_timed(timer_for):
    from gemmcheck.backends import KernelHang, KernelLaunchError
    from gemmcheck.containment.lost import Lost

    session, gpu = timer_for("honest")
    bad, good = instance(), other_instance()
    session.refused = {(bad.id, N): Lost("crash", f"in the isolated probe on M{N}xN{N}xK{N}: launch of "
                                                  "x failed: cudaErrorIllegalAddress", problem=f"M{N}xN{N}xK{N}")}
    for _ in range(2):   # asked again (a claim after the throughput test): the same error, afresh
        with pytest.raises(KernelLaunchError) as caught:
            perf.timed_rate(session, bad, N)
        assert not isinstance(caught.value, KernelHang) and not caught.value.context_lost
        assert caught.value.instance == bad and caught.value.problem == f"M{N}xN{N}xK{N}"
        assert str(caught.value).startswith(f"{bad.id}: in the isolated probe on M{N}xN{N}xK{N}: ")
    assert "kernel" not in gpu.log                      # never launched here
    assert perf.timed_rate(session, good, N) == pytest.approx(8.8, rel=1e-6)
    table = summary.table_text(session)
    row = next(line for line in table.splitlines() if line.startswith(bad.id)).split()
    assert row[1:3] == [str(N), "crash"] and "isolated probe on M64xN64xK64:" in " ".join(row), table
    assert summary.document(session)["kernels"][f"{bad.id}-N{N}"]["status"] == "crash"
    assert [line.split(":")[0] for line in summary.best_lines(session)] == [f"best {good.spec.name} float32 N={N}"]


@pytest.mark.parametrize("behaviour, error", [("faults", "cudaErrorIllegalAddress"), ("hangs", "did not finish")])
def test_a_kernel_that_crashes_or_hangs_while_timed_loses_its_row_and_the_context(timer_for, no_context_lost_here,
                                                                                  behaviour, error):
    """Timed after a right first launch, the third launch faults (a sticky error, seen at the
    sample's wait) or never ends (the wait's hang timeout): the row is that kernel's crash or
    hang, naming the problem; the process's context is lost (the session runs the rest in a fresh
    process); nothing is left blocking."""
    from gemmcheck.backends import KernelHang, KernelLaunchError

    session, gpu = timer_for(behaviour)
    with pytest.raises(KernelLaunchError) as caught:
        perf.timed_rate(session, instance(), N)
    exc = caught.value
    assert isinstance(exc, KernelHang) == (behaviour == "hangs")
    assert exc.context_lost and exc.instance == instance() and exc.problem == f"M{N}xN{N}xK{N}"
    assert error in str(exc) and str(exc).endswith(f"; problem M{N} N{N} K{N}"), exc
    assert no_context_lost_here.contexts_lost() == [instance().id]
    assert session.rows[(instance().id, N)].status == ("hang" if behaviour == "hangs" else "crash")


def test_an_error_that_is_not_the_kernels_is_raised_as_it_is(timer_for, no_context_lost_here, monkeypatch):
    from gemmcheck.backends import KernelLaunchError
    from gemmcheck.perf import gpu as perf_gpu

    session, _ = timer_for("honest")
    monkeypatch.setattr(perf_gpu, "output_check", lambda *a: (_ for _ in ()).throw(ValueError("a bug of ours")))
    with pytest.raises(ValueError, match="a bug of ours") as caught:
        perf.timed_rate(session, instance(), N)
    assert not isinstance(caught.value, KernelLaunchError) and no_context_lost_here.contexts_lost() == []


def test_a_session_whose_rest_ran_in_a_fresh_process_prints_both_processes_tables(timer_for, tmp_path, monkeypatch):
    """After a lost CUDA context the rows left run in a fresh process (schedule.rerun), which
    writes its reports as a part; the session's summary joins its own rows with them."""
    from types import SimpleNamespace

    from gemmcheck.containment.lost import containment
    from gemmcheck.pytest_plugin import perf_plugin
    from gemmcheck.schedule import rerun

    monkeypatch.delenv(rerun.RERUN_AS, raising=False)
    ours, _ = timer_for("honest")
    perf.timed_rate(ours, instance(), N)
    theirs, _ = timer_for("honest")
    perf.timed_rate(theirs, other_instance(), N)
    reports = tmp_path / "performance"
    summary.write_reports(reports / "parts" / "gw-rerun1", theirs)
    config = SimpleNamespace(stash=pytest.Stash())
    config.stash[perf_plugin.PERF_CONFIG] = perf_plugin.PerfConfig(None, reports, session=ours)
    config.stash[perf_plugin.STARTED] = 0.0
    containment(config).deferred.append("suites/performance/test_throughput.py::test_throughput[x]")
    lines = []
    terminal = SimpleNamespace(section=lambda title: lines.append(f"== {title}"), write_line=lines.append)
    perf_plugin.pytest_terminal_summary(terminal, 1, config)
    text = "\n".join(lines)
    assert "== gw-rerun1 ==" in text and "== session ==" in text, text
    assert instance().id in text and other_instance().id in text
    assert set(json.loads((reports / "perf.json").read_text())["kernels"]) == {
        f"{instance().id}-N{N}", f"{other_instance().id}-N{N}"}
