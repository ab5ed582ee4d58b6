"""Timing on the GPU (CuPy): kernels interleaved with cuBLAS, the copy bandwidth.

Each sample, outside the timed region: the next input set in the rotation
(cold caches), its C filled with the poison bits. The first launch is checked
on a set outside the rotation, so the last timed one runs on other inputs. Inside: a CUDA event, the
launch, a CUDA event; then the SM clock (NVML). A kernel and cuBLAS on the
same shape are sampled in turn (gemmcheck.perf.sampling) until the noise
rule stops them; the output of the kernel's *last* timed launch is checked
against the float64 reference, so a kernel correct once and wrong on repeats
fails. cuBLAS runs with TF32 off (see TF32). A kernel with a type per operand, a strided batch
or a fused epilogue is sampled in turn with cuBLASLt's GEMM of its combination instead
(gemmcheck.perf.library: strided-batched with the same count, its fused epilogue), on the same
A and B buffers. A strided-batched kernel is timed on [timing] batch products of N x N x N
(tight strides), its FLOPs 2 N^3 x batch.

Kernels launch through the catalog (``_launch``: one small function, the only
place perf builds a kernel's arguments); nothing here names a kernel.
"""

from __future__ import annotations

import contextlib
import itertools
from dataclasses import dataclass

import numpy as np

from gemmcheck.backends import device
from gemmcheck.perf import library, roofline
from gemmcheck.contract import dtypes as dt
from gemmcheck.contract import launch as launching
from gemmcheck.contract import operand_types
from gemmcheck.contract.catalog import Instance
from gemmcheck.contract.launch import plan
from gemmcheck.problems.harness import (default_c_fill, plain_bits, plain_pointer_arrays, plain_scalars, plain_scratch,
                                        plain_values, scratch_fill)
from gemmcheck.perf import sampling
from gemmcheck.perf.inputs import InputSets, n_input_sets, timed_products
from gemmcheck.perf.measurement import Check, Measurement, check_output
from gemmcheck.perf.thresholds import Timing

TF32 = ("off: cuBLAS float32 runs with CuPy's COMPUTE_TYPE_DEFAULT (full FP32, no TF32 tensor cores), "
        "pinned for the ceiling measurement whatever CUPY_TF32 says")


@dataclass
class Timed:
    """A kernel timed interleaved with cuBLAS on the same shape and input sets."""

    kernel: Measurement
    cublas: Measurement | None     # the ceiling: cuBLAS (one type), cuBLASLt's GEMM (mixed types)
    cublas_error: str | None       # why there is no ceiling series (e.g. no matmul for the dtype)
    last: Check                    # the output of the kernel's last timed launch


HOLD_NS = 300_000   # 300 us: well above the host's cost to enqueue event, launch, event (any of ours)
FINISH_SPIN_S = 0.01   # a kernel's sample is polled without sleeping this long (then with pauses)
HOLD_SOURCE = r"""
extern "C" __global__ void gemmcheck_hold(unsigned long long ns)
{
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
}
"""


def hold_kernel(cupy):
    """nvbench's blocking kernel, in its simplest form: one thread spinning for HOLD_NS on
    the global timer, enqueued before each sample's start event. Without it the device sat
    idle between the start event and the launch while Python prepared the call (cupy.matmul
    costs tens of microseconds on the host), and that idle time was timed: on the H200
    cuBLAS float16 at 2048 read 174 TFLOP/s with 35 % noise, against ~390 back to back."""
    return cupy.RawKernel(HOLD_SOURCE, "gemmcheck_hold")


def output_check(cupy, sets: InputSets, index: int) -> Check:
    """Set ``index``'s C against its float64 reference (what every timed output is judged by)."""
    ref, absprod = sets.reference(index)
    return check_output(cupy, sets.result(index), ref, absprod, sets.types, sets.size, sets.epilogue_values(index))


def by_cublas(instance: Instance) -> bool:
    """Whether a kernel's ceiling is cuBLAS of its dtype (cupy.matmul): one type, one product,
    no fused epilogue. Else it is cuBLASLt's GEMM of its combination, batch and epilogue (a
    grouped kernel's: the strided-batched GEMM of the same work)."""
    return (instance.types.uniform and not instance.batched and not instance.grouped
            and not instance.types.epilogue.roles)


class GpuTimer:
    """Measures kernels, cuBLAS and copies on the current CUDA device (CuPy)."""

    SEED = 20240605

    def __init__(self, backend, timing: Timing, turn=None) -> None:
        """`turn`: a context manager factory held around all of this timer's work on the device
        (uploads, launches, judgements, sampling): a pytest-xdist worker that shares its GPU
        has the card to itself there (gpu_turns.alone), and only there. Its host work (drawing
        the input sets) runs beside the other workers' sampling. Each public method is one turn."""
        import cupy

        self.cupy = cupy
        self.backend = backend
        self.timing = timing
        self.turn = turn or contextlib.nullcontext
        device_id = cupy.cuda.Device().id
        self.device = device.properties(device_id)
        self.clock = device.SmClock(device_id, cupy.cuda.Device(device_id).pci_bus_id)
        self._inputs: dict[tuple, InputSets] = {}
        self._pointer_arrays: dict[tuple, dict] = {}   # (operands, input sets, set) -> A_array ... (kept with the sets)
        self._scalars: dict = {}   # instance -> the buffers of alpha and beta it takes through pointers
        self._scratch: dict = {}   # (instance, input sets) -> its scratch memory by role (reset before each launch)

    # Inputs -----------------------------------------------------------------------------------

    def inputs(self, dtype_name: str, size: int, layouts=None, **kinds) -> InputSets:
        """Input sets for one dtype (or combination of operand types) and size, laid out as the
        kernel reads them (the ceiling times the same buffers: the same work whatever the
        layout), drawn on the host; a turn uploads them. `kinds`: InputSets' separate_d,
        scales_by_value, batch, groups and masked."""
        layouts = {o: l for o, l in (layouts or {}).items() if l != "row"}
        key = (dtype_name, size, tuple(sorted(layouts.items())), tuple(sorted(kinds.items())))
        if key not in self._inputs:
            types = operand_types.coerce(dtype_name)
            self._inputs[key] = InputSets(self.cupy, types, size, self.device.l2_bytes,
                                          seed=self.SEED + 1000 * size + _seed_offset(types),
                                          layouts=layouts, **kinds)
        return self._inputs[key]

    def inputs_of(self, instance: Instance, size: int) -> InputSets:
        """`instance`'s input sets: its types, layouts, output (D or C), scale factors, epilogue
        inputs and products (Timing.products)."""
        if by_cublas(instance):
            return self.inputs(instance.dtype, size, instance.spec.layouts)
        by_value = tuple(sorted(s.role for s in instance.types.scales if launching.by_value(instance, s.role)))
        products = self.timing.products(instance)
        batching = timed_products(instance, size, products)
        if instance.grouped:   # the table in the integer type the kernel declares it in
            batching["table"] = launching.table_type(instance, next(
                r for r in instance.spec.roles if r in launching.GROUP_POINTER_ROLES)).name
        return self.inputs(instance.types.spelling, size, instance.spec.layouts,
                           separate_d=launching.takes_operand(instance.spec.roles, "D"), scales_by_value=by_value, **batching)

    # One launch -------------------------------------------------------------------------------

    def _plan(self, instance: Instance, size: int, sets: InputSets, index: int):
        """The one place perf plans a catalog kernel's launch: the one launch path (launch.plan)
        with the plain launch's values (harness.plain_values: what the sized probe launched) on
        set `index` (its output is D for a kernel that writes a separate D, C then only read)."""
        A, B, out = sets.sets[index]
        C, D = (sets.C_read, out) if sets.output == "D" else (out, None)
        scales = sets.scales[index] if sets.scales else None
        groups = (len(sets.groups), sets.group_role, sets.group_tables[index]) if sets.groups else None
        arrays = None
        if instance.pointer_arrays:   # uploaded once per set, never inside the timed loop
            key = (instance.pointer_arrays, id(sets), index)
            if key not in self._pointer_arrays:
                self._pointer_arrays[key] = plain_pointer_arrays(self.backend, instance, {"A": A, "B": B, "C": C, "D": D},
                                                                 sets.batch)
            arrays = self._pointer_arrays[key]
        if instance not in self._scalars:   # alpha and beta taken through pointers: uploaded once
            self._scalars[instance] = plain_scalars(self.backend, instance)
        return plan(instance, plain_values(instance, sets.M, size, size, A, B, C, D, scales, batch=sets.batch,
                                           epilogue=sets.epilogue[index] if sets.epilogue else None, groups=groups,
                                           arrays=arrays, scalars=self._scalars[instance],
                                           scratch=self._scratch_of(instance, size, sets)))

    def _scratch_of(self, instance: Instance, size: int, sets: InputSets) -> dict:
        """`instance`'s scratch memory at the sets' problem (allocated once; _reset_scratch)."""
        if not instance.spec.scratch:
            return {}
        key = (instance, id(sets))
        if key not in self._scratch:
            self._scratch[key] = plain_scratch(self.backend, instance, sets.M, size, size, sets.batch,
                                               len(sets.groups) or 1)
        return self._scratch[key]

    def _reset_scratch(self, instance: Instance, size: int, sets: InputSets) -> None:
        """Scratch memory as its callers leave it before every launch (zeros, or garbage where
        scratch_zeroed = false): a memset queued before the sample's start event, so not timed."""
        fill = scratch_fill(instance.spec)
        stream = self.cupy.cuda.get_current_stream().ptr
        for buffer in self._scratch_of(instance, size, sets).values():
            self.cupy.cuda.runtime.memsetAsync(self.backend.address_of(buffer), fill, buffer.nbytes, stream)

    def _launch(self, instance: Instance, size: int, sets: InputSets, index: int) -> None:
        """Queued without a wait (backend.enqueue), so back-to-back samples measure the kernel alone."""
        self.backend.enqueue(instance, self._plan(instance, size, sets, index))

    def _cublas_launcher(self, sets: InputSets, own_outputs: bool = False):
        """launch(index): cupy.matmul on set `index`; into outputs of its own with `own_outputs`
        (sampled in turn with a kernel: a cuBLAS sample after the kernel's last one must not
        write the output that last check reads, the right product over a wrong one)."""
        views = [tuple(sets.as_values(x) for x in s) for s in sets.sets]
        if own_outputs:
            views = [(A, B, self.cupy.empty_like(C)) for A, B, C in views]

        def launch(index: int) -> None:
            A, B, C = views[index]
            self.cupy.matmul(A, B, out=C)
        return launch

    def _library_launcher(self, sets: InputSets, types) -> tuple:
        """(launch(index), label) of cuBLASLt's GEMM for `types` (the sets' batch of them) on the
        sets' A and B, or (None, why not) when the library has none near it here. It writes
        outputs of its own, one a set, in its own D type: its TN product is not the kernel's, and
        a library sample taken after the kernel's last one must not overwrite the output that
        last check reads."""
        size, products = sets.size, len(sets.rows)
        gemm, label = library.planned(types, size, size, size, products)
        if gemm is None:
            return None, label
        if sets.groups:
            label += f" (the same work: {library.NO_GROUPED})"
        d = dt.get(gemm.gemm.d)
        outputs = [self.cupy.zeros((products * size, size), dtype=d.storage) for _ in sets.sets]
        return (lambda index: gemm.launch(sets.sets[index][0], sets.sets[index][1], outputs[index])), label

    # Sampling ---------------------------------------------------------------------------------

    def _sampler(self, sets: InputSets, launch, cycle, fill: str | None = "poison", finish=None, prepare=None):
        """A sampler for gemmcheck.perf.sampling: next set, fill its C (`fill`: see InputSets.poison;
        None for a ceiling writing outputs of its own), `prepare()` (what else a launch needs reset:
        scratch memory), time one
        launch. `finish(end)` waits for the sample's end event (a catalog kernel's: with the hang
        timeout, _finish); by default, synchronize()."""
        cp = self.cupy
        start, end = cp.cuda.Event(), cp.cuda.Event()
        finish = finish or (lambda event: event.synchronize())

        hold = self._hold_kernel()

        def take() -> sampling.Sample:
            index = next(cycle)
            if fill:
                sets.poison(index, fill)
            if prepare is not None:
                prepare()
            hold((1,), (1,), (np.uint64(HOLD_NS),))   # the stream stays busy while the host enqueues the rest
            start.record()
            launch(index)
            end.record()
            finish(end)
            seconds = cp.cuda.get_elapsed_time(start, end) / 1e3
            return sampling.Sample(seconds, self.clock.now_mhz(), index)
        return take

    def _finish(self, instance: Instance, size: int):
        """finish(event) for `instance`'s samples: the backend's wait (a launch that does not end
        within the hang timeout is a KernelHang), spinning at first as synchronize() would."""
        grid, block = instance.launch_shape(size, size, size)
        return lambda event: self.backend.wait(instance, grid, block, event, spin_s=FINISH_SPIN_S)

    @contextlib.contextmanager
    def _watching(self, instance: Instance, size: int):
        """A crash or hang of `instance`'s launches inside, however it shows (the wait's
        KernelHang, a sticky CUDA error from a later call), raised as the backend's
        KernelLaunchError with the context lost; any other error as it is."""
        try:
            yield
        except Exception as exc:
            grid, block = instance.launch_shape(size, size, size)
            error = self.backend.launch_failure(instance, grid, block, exc)
            if error is None:
                raise
            if error is exc:
                raise
            raise error from None

    def _hold_kernel(self):
        if getattr(self, "_hold", None) is None:
            self._hold = hold_kernel(self.cupy)
        return self._hold

    def _rule(self, min_samples: int) -> sampling.StoppingRule:
        t = self.timing
        return sampling.StoppingRule(t.max_noise, max(2, min_samples), max(t.max_samples, min_samples),
                                     t.max_seconds, t.enough_seconds)

    def _sample(self, samplers, min_samples: int) -> sampling.Sampled:
        """(In a turn.) The warm-up rounds, then samples until the rule stops them."""
        for _ in range(self.timing.warmup):
            for take in samplers.values():
                take()
        return sampling.sample_interleaved(samplers, self._rule(min_samples),
                                           reference_mhz=self.clock.reference_mhz,
                                           min_clock_ratio=self.timing.min_clock_ratio)

    def check(self, instance: Instance, size: int, index: int | None = None, finite_C: bool | None = None) -> Check:
        """Launch once on set ``index`` (default: the check set, never timed), its output poisoned
        first as the correctness harness fills it (finite garbage with ``finite_C``), and compare
        with the float64 reference."""
        sets = self.inputs_of(instance, size)
        index = sets.check_set if index is None else index
        with self.turn():
            fill = default_c_fill(instance.spec) if finite_C is None else ("finite" if finite_C else "poison")
            sets.upload().poison(index, fill)
            if instance.spec.scratch:
                self._reset_scratch(instance, size, sets)
            # waited for with the hang timeout; a crash or hang is the backend's KernelLaunchError
            self.backend.launch(instance, self._plan(instance, size, sets, index))
            return output_check(self.cupy, sets, index)

    def timed(self, instance: Instance, size: int, min_samples: int) -> Timed:
        """The kernel and its ceiling (cuBLAS for one type, cuBLASLt's GEMM of its combination
        for mixed types; same shape and input sets) sampled in turn."""
        sets = self.inputs_of(instance, size)
        with self.turn(), self._watching(instance, size):
            sampled, cublas_error, label = self._sample_with_cublas(instance, size, sets.upload(), min_samples)
            self.cupy.cuda.Device().synchronize()
            last = output_check(self.cupy, sets, sampled.series["kernel"].last.set_index)
        flops = sets.flops
        ref = self.clock.reference_mhz
        series = sampled.series
        kernel = Measurement.from_series(series["kernel"], size, sampled.stop, flops=flops,
                                         n_sets=sets.n_sets, reference_mhz=ref, label=instance.id)
        base = (Measurement.from_series(series["cublas"], size, sampled.stop, flops=flops, n_sets=sets.n_sets,
                                        reference_mhz=ref, label=label)
                if "cublas" in series else None)
        return Timed(kernel, base, cublas_error, last)

    def _sample_with_cublas(self, instance: Instance, size: int, sets: InputSets, min_samples: int):
        """(In a turn.) (the kernel and its ceiling sampled in turn, why the ceiling is not among
        them or None, the ceiling's label)."""
        cycle = itertools.cycle(range(sets.n_sets))
        samplers = {}
        cublas_error = None
        label = f"cublas-{instance.dtype}"
        try:
            if by_cublas(instance):
                cublas = self._cublas_launcher(sets, own_outputs=True)
            else:
                cublas, label = self._library_launcher(sets, instance.types)
                if cublas is None:
                    raise LookupError(label)
            with self._tf32_off():
                cublas(sets.check_set)     # does the library take this dtype at all?
            samplers["cublas"] = self._sampler(sets, cublas, cycle, fill=None)
        except Exception as exc:  # e.g. a CuPy without this dtype in matmul
            cublas_error = (f"cupy.matmul has no {instance.dtype} here ({type(exc).__name__}: {exc})"
                            if by_cublas(instance) else f"no library ceiling: {exc}")
        samplers["kernel"] = self._sampler(sets, lambda i: self._launch(instance, size, sets, i), cycle,
                                           fill=default_c_fill(instance.spec), finish=self._finish(instance, size),
                                           prepare=(lambda: self._reset_scratch(instance, size, sets))
                                           if instance.spec.scratch else None)
        with self._tf32_off():
            return self._sample(samplers, min_samples), cublas_error, label

    def cublas(self, dtype_name: str, size: int, min_samples: int) -> Measurement:
        """cupy.matmul alone on the same dtype and shape, TF32 off (see TF32)."""
        sets = self.inputs(dtype_name, size)
        cycle = itertools.cycle(range(sets.n_sets))
        with self.turn(), self._tf32_off():
            sets.upload()
            sampled = self._sample({f"cublas-{dtype_name}": self._sampler(sets, self._cublas_launcher(sets), cycle)},
                                   min_samples)
        return Measurement.from_series(sampled.series[f"cublas-{dtype_name}"], size, sampled.stop,
                                       flops=roofline.gemm_flops(size, size, size), n_sets=sets.n_sets,
                                       reference_mhz=self.clock.reference_mhz)

    def library(self, types, M: int, N: int, K: int, min_samples: int, batch: int = 1) -> Measurement:
        """cuBLASLt's GEMM for `types` (gemmcheck.perf.library) alone on M x N x K (`batch` of
        them, strided), on buffers of finite values rotated so caches stay cold; its label names
        the GEMM timed (the nearest the library has, when it lacks the combination).
        library.NoAlgorithm when it has none near it here."""
        cp = self.cupy
        with self.turn():
            gemm, label = library.planned(types, M, N, K, batch)
            if gemm is None:
                raise library.NoAlgorithm(label)
            g, m, n = gemm.gemm, gemm.m, gemm.n   # (N, M) for a product computed transposed
            set_bytes = batch * (m * K * dt.get(g.a).itemsize + K * n * dt.get(g.b).itemsize
                                 + m * n * dt.get(g.d).itemsize)
            n_sets = n_input_sets(set_bytes, self.device.l2_bytes)
            rng = np.random.default_rng(self.SEED)
            buffers = [tuple(cp.asarray(plain_bits(dt.get(g_type), count, rng)) for g_type, count in
                             ((g.a, batch * m * K), (g.b, batch * K * n), (g.d, batch * m * n)))
                       for _ in range(n_sets)]
            cycle = itertools.cycle(range(n_sets))
            start, end = cp.cuda.Event(), cp.cuda.Event()
            hold = self._hold_kernel()

            def take() -> sampling.Sample:
                index = next(cycle)
                hold((1,), (1,), (np.uint64(HOLD_NS),))
                start.record()
                gemm.launch(*buffers[index])
                end.record()
                end.synchronize()
                return sampling.Sample(cp.cuda.get_elapsed_time(start, end) / 1e3, self.clock.now_mhz(), index)

            try:
                sampled = self._sample({label: take}, min_samples)
            finally:
                del buffers
        return Measurement.from_series(sampled.series[label], M, sampled.stop,
                                       flops=batch * roofline.gemm_flops(M, N, K), n_sets=n_sets,
                                       reference_mhz=self.clock.reference_mhz, label=label)

    def copy(self, min_samples: int) -> Measurement:
        """Device-to-device copy of a buffer 16 x L2 (at least 256 MiB): read + write bytes / time."""
        cp = self.cupy
        nbytes = max(256 * 2**20, 16 * self.device.l2_bytes)
        with self.turn():
            src = cp.ones(nbytes // 4, dtype=cp.float32)
            dst = cp.empty_like(src)
            start, end = cp.cuda.Event(), cp.cuda.Event()

            def take() -> sampling.Sample:
                start.record()
                dst.data.copy_from_device_async(src.data, nbytes)
                end.record()
                end.synchronize()
                return sampling.Sample(cp.cuda.get_elapsed_time(start, end) / 1e3, self.clock.now_mhz())

            try:
                sampled = self._sample({"copy": take}, min_samples)
            finally:
                del src, dst
        return Measurement.from_series(sampled.series["copy"], nbytes, sampled.stop,
                                       bytes_moved=2 * nbytes, reference_mhz=self.clock.reference_mhz)

    def dram_bytes(self, instance: Instance, size: int, exe: str) -> tuple[float | None, str]:
        """One cold launch's DRAM bytes under Nsight Compute (gemmcheck.perf.ncu), in a turn: its
        child launches on this GPU."""
        from gemmcheck.perf import ncu

        with self.turn():
            return ncu.dram_bytes(instance, size, exe=exe)

    def _tf32_off(self):
        """cuBLAS float32 at full FP32 for the duration (restored after)."""
        from cupy._core import _routines_linalg as linalg

        @contextlib.contextmanager
        def pinned():
            f32 = np.dtype(np.float32)
            previous = linalg.get_compute_type(f32)
            linalg.set_compute_type(f32, linalg.COMPUTE_TYPE_DEFAULT)
            try:
                yield
            finally:
                linalg.set_compute_type(f32, previous)
        return pinned()


def _seed_offset(types) -> int:
    """A one-type kernel's inputs keep the seed they always had (its dtype's place in DTYPES);
    a combination's is past them, from its spelling."""
    if types.uniform and types.A.name in dt.DTYPES:
        return list(dt.DTYPES).index(types.A.name)
    return len(dt.DTYPES) + sum(types.spelling.encode()) % 97

