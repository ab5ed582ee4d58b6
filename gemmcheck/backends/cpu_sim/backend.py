"""The cpu-sim backend itself: CpuSimBackend builds kernels with g++ (build.py), runs their
launches in the worker process under the chosen schedules, collects each launch's report and runs
AddressSanitizer builds in a child (the API is described in the package's docstring)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import subprocess
import tempfile
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from gemmcheck.backends import Backend, BackendUnavailable, KernelCompileError, launch_error
from gemmcheck.backends.cpu_sim import build
from gemmcheck.backends.cpu_sim import worker as wk
from gemmcheck.backends.cpu_sim.address import AddressReport, parse_asan
from gemmcheck.backends.cpu_sim.errors import (ModuleNotLoaded, NotSimulated, SimulatedCrash, SimulatedHang,
                                               _build_failure)
from gemmcheck.backends.cpu_sim.locating import _element_locator, buffer_names, is_pointer_array
from gemmcheck.backends.cpu_sim.reports import (BarrierSite, DivergentBarrier, GlobalRace, LaunchReport,
                                                ScheduleRun, SharedConflict, _thread)
from gemmcheck.backends.cpu_sim.schedules import parse_schedule
from gemmcheck.containment.tools import retry_once
from gemmcheck.problems.harness import product_pointers, scratch_contents
from gemmcheck.problems.problem import group_table
from gemmcheck.contract.catalog import Instance
from gemmcheck.contract.launch import (MAX_STATIC_SHARED_BYTES, Launch, check_block, plan, scalar_pointee, table_type,
                                       tight_batch_strides, tight_leading_dimensions)
from gemmcheck.phases import timed


class CpuSimBackend(Backend):
    """Offers every capability in gemmcheck.backends: ExploresSchedules, ReportsLaunches,
    ChecksAddresses, TracksShared (declared here, at class level, so they can be asked
    for before a backend is built)."""

    name = "cpu-sim"
    simulated = True
    schedules: tuple[str, ...] = ("forward",)
    track_shared: bool = True
    last_launch_report: "LaunchReport | None" = None

    def __init__(self) -> None:
        try:
            self._cxx = build.compiler()
            self._worker = wk.Worker(build.worker())
        except build.BuildError as exc:
            raise BackendUnavailable(f"--gemm-backend cpu-sim: {exc}") from None
        # A build unit is (source, -D macros): one g++ run builds all its wanted instantiations.
        self._wanted: dict[tuple, set[Instance]] = defaultdict(set)
        self._module_of: dict[tuple, build.Module] = {}       # (unit, name expression) -> module
        self._failed: dict[tuple, KernelCompileError] = {}    # (unit, name expression) -> why
        self.build_seconds: dict[str, float] = {}   # source name -> g++ seconds (cache misses only)

    def describe(self) -> str:
        return f"cpu-sim ({self._cxx[1]}; fibers, one block at a time; small shapes only)"

    # -- building ----------------------------------------------------------------------

    def prepare(self, instances: Iterable[Instance]) -> dict[tuple, build.BuildTimeout]:
        """Build what `instances` need, one g++ per build unit. A build that outlived its
        deadline (a tool failure, not the kernel's) is not kept: it is returned by key, and the
        next use of such an instantiation builds it again (once more: then it is raised)."""
        new: set[tuple] = set()
        for inst in instances:
            if inst.spec.gpu_only or _key(inst) in self._module_of or _key(inst) in self._failed:
                continue
            self._wanted[inst.build_unit].add(inst)
            new.add(inst.build_unit)

        def one(unit):
            source, defines = unit
            wanted = {i.name_expression: i for i in self._wanted[unit]
                      if (unit, i.name_expression) not in self._failed}
            try:
                module = build.module(source, list(wanted.values()), defines)
                return unit, {name: module for name in wanted}
            except build.BuildTimeout as exc:
                return unit, {name: exc for name in wanted}
            except build.BuildError as exc:
                if len(wanted) == 1:
                    return unit, {name: _build_failure(inst, exc) for name, inst in wanted.items()}
            # One broken instantiation must not take the others of the same file down: each is
            # built alone, with the file's other kernels left out.
            results = {}
            for name, inst in wanted.items():
                try:
                    results[name] = build.module(source, [inst], defines)
                except build.BuildError as exc:
                    results[name] = _build_failure(inst, exc)
                except build.BuildTimeout as exc:
                    results[name] = exc
            return unit, results

        # One g++ per build unit, units side by side (g++ is single-threaded).
        timed_out: dict[tuple, build.BuildTimeout] = {}
        with ThreadPoolExecutor(max_workers=max(1, min(len(new), os.cpu_count() or 1))) as pool:
            for unit, results in pool.map(one, sorted(new, key=repr)):
                for name, result in results.items():
                    if isinstance(result, build.BuildTimeout):
                        timed_out[(unit, name)] = result
                        continue
                    if isinstance(result, KernelCompileError):
                        result.source = unit[0]   # names the build test that shows the errors
                        self._failed[(unit, name)] = result
                        continue
                    self._module_of[(unit, name)] = result
                    if result.build_seconds is not None:
                        self.build_seconds[unit[0].name] = result.build_seconds
        return timed_out

    def build_error(self, instance: Instance) -> KernelCompileError | None:
        if instance.spec.gpu_only:
            return None
        try:
            self._module(instance)
        except KernelCompileError as exc:
            return exc
        return None

    def _build(self, instance: Instance) -> None:
        key = _key(instance)
        if key not in self._module_of and key not in self._failed:
            timed_out = self.prepare([instance])
            if key in timed_out:
                raise timed_out[key]

    def _module(self, instance: Instance) -> build.Module:
        if instance.spec.gpu_only:
            raise NotSimulated(f"{instance.id}: {instance.spec.simulator_skip_reason()}")
        key = _key(instance)
        if key not in self._module_of and key not in self._failed:
            retry_once(lambda: self._build(instance))   # a g++ that timed out: once more, then raised
        if key in self._failed:
            # A fresh exception each time: re-raising the stored one would grow its traceback
            # (and hypothesis' notes) with every launch.
            stored = self._failed[key]
            error = type(stored).__new__(type(stored))   # a fresh one: same type, message and fields
            error.args = stored.args
            error.__dict__.update({k: v for k, v in vars(stored).items() if k != "__notes__"})
            raise error from None
        module = self._module_of[key]
        shared = build.static_shared_bytes(module, instance.name_expression)
        if shared > MAX_STATIC_SHARED_BYTES:
            # What the GPU refuses, the simulator refuses too (it has no such limit of its own).
            error = KernelCompileError(
                f"{instance.id}: {instance.name_expression} declares {shared} bytes of static shared memory; "
                f"CUDA allows {MAX_STATIC_SHARED_BYTES} (use dynamic shared memory above 48 KB)")
            error.source = instance.spec.source
            raise error
        return module

    # -- memory ------------------------------------------------------------------------

    def to_device(self, bits: np.ndarray):
        return wk.shared_array(bits)

    def to_host(self, buffer) -> np.ndarray:
        return np.array(buffer, copy=True)

    def copy(self, buffer):
        return wk.shared_array(buffer)

    def same(self, a, b) -> bool:
        return bool(np.array_equal(a, b))

    def address_of(self, buffer) -> int:
        # this process's address: the worker puts its own in for it in every array of pointers
        # it is given (runtime.cpp, relocate_pointer_arrays), and back after the launch
        return int(buffer.ctypes.data)

    # -- launching ---------------------------------------------------------------------

    @contextlib.contextmanager
    def using_schedules(self, schedules: Sequence[str]):
        """Run launches inside the block under these schedules; restore the old ones after."""
        for s in schedules:
            parse_schedule(s)
        old, self.schedules = self.schedules, tuple(schedules)
        try:
            yield self
        finally:
            self.schedules = old

    @timed("launch")
    def launch(self, instance: Instance, launch: Launch) -> None:
        module = self._module(instance)
        grid, block = tuple(int(g) for g in launch.grid), tuple(int(b) for b in launch.block)
        why = check_block(block)
        if why:
            raise launch_error(instance, grid, block, ValueError(why))
        if launch.shared_bytes:
            raise NotSimulated(f"{instance.id}: asks for {launch.shared_bytes} bytes of dynamic shared memory "
                               "(extern __shared__), which cpu-sim does not model; run it on a GPU")
        schedules = tuple(self.schedules) or ("forward",)
        by_role = {**dict(zip(instance.spec.roles, launch.args)), **dict(launch.reached)}
        names = buffer_names(instance)
        pointers = [by_role[name] for name in names]   # A, B, C, then D and the scales it takes
        arguments = build.argument_bytes(instance, launch.args)
        report = LaunchReport(instance.id, grid, block, schedules)
        locate = _element_locator(instance, by_role)
        report.buffer_names = names
        self.last_launch_report = report
        request = self._request(module, instance, grid, block, pointers, arguments, names)
        roots = [wk.root_of(p) for p in pointers]
        distinct = list({id(buf): (buf, whole) for buf, whole in roots}.values())
        before = [whole.copy() for _, whole in distinct] if len(schedules) > 1 else None
        first_after = None
        for index, name in enumerate(schedules):
            if index > 0:
                for (_, whole), saved in zip(distinct, before):
                    whole[...] = saved
            request.schedule, request.seed = parse_schedule(name)
            run = self._run_one(module, instance, grid, block, request, [buf.fd for buf, _ in roots],
                                name, report, locate)
            report.runs.append(run)
            if len(schedules) == 1:
                continue
            after = [whole.copy() for _, whole in distinct]
            if index == 0:
                first_after = after
                continue
            for p, (buf, _) in enumerate(roots):
                k = next(i for i, (b, _) in enumerate(distinct) if b is buf)
                differ = int(np.count_nonzero(after[k] != first_after[k]))
                if differ:
                    run.differs[names[p]] = differ
        if first_after is not None:
            for (_, whole), saved in zip(distinct, first_after):
                whole[...] = saved

    def _request(self, module, instance, grid, block, pointers, arguments: bytes, names=()) -> wk.Request:
        if len(pointers) > wk.MAX_POINTERS or len(arguments) > wk.MAX_ARGUMENT_BYTES:
            raise launch_error(instance, grid, block, ValueError("too many kernel arguments"))
        rq = wk.Request()
        rq.module = str(module.path).encode()
        rq.kernel = module.index(instance.name_expression)
        rq.npointers, rq.nbytes = len(pointers), len(arguments)
        ctypes.memmove(rq.arguments, arguments, len(arguments))
        for i, p in enumerate(pointers):
            buf, _ = wk.root_of(p)
            offset = p.ctypes.data - buf.address
            rq.pointer_offset[i] = offset
            rq.pointer_length[i] = len(buf) - offset
            rq.pointer_host_base[i] = buf.address
            if i < len(names) and is_pointer_array(names[i]):
                rq.pointer_arrays |= 1 << i
        rq.grid[:] = grid
        rq.block[:] = block
        arrays = module.shared[:wk.MAX_RANGES]
        rq.nranges = len(arrays)
        rq.track = 1 if self.track_shared else 0
        for i, arr in enumerate(arrays):
            rq.range_start[i], rq.range_size[i] = arr.start, arr.size
        return rq

    def _run_one(self, module, instance, grid, block, request, fds, schedule, report, locate=None) -> ScheduleRun:
        try:
            status, error = self._worker.run(request, fds, self.hang_timeout_s)
        except wk.WorkerDied as died:
            r = died.report
            what = (f"signal {died.signal_number}" if died.signal_number else f"exit code {died.exit_code}")
            where = (f"block {tuple(r.cur_block)}, thread {_thread(r.cur_thread, block)}")
            address = f" at address {r.fault_address:#x}" if r.signal else ""
            report.outcome = "crash"
            why = r.message.decode(errors="replace")
            report.failure = (f"{instance.id}: the kernel crashed the simulator ({what}{address}) in {where} "
                              f"[{schedule}]" + (f": {why}" if why else ""))
            self._collect(module, report, r, schedule, block, locate)
            raise SimulatedCrash(report.failure) from None
        except wk.WorkerStalled as stalled:
            r = stalled.report
            report.outcome = "hang"
            report.failure = (f"{instance.id}: no progress for {stalled.seconds:.1f} s; last running: block "
                              f"{tuple(r.cur_block)}, thread {_thread(r.cur_thread, block)} [{schedule}]")
            self._collect(module, report, r, schedule, block, locate)
            raise SimulatedHang(report.failure) from None
        if status == wk.STATUS_MODULE_NOT_LOADED:
            raise ModuleNotLoaded(instance, error)
        if status != wk.STATUS_DONE:
            raise launch_error(instance, grid, block, RuntimeError(f"cpu-sim worker: {error}"))
        return self._collect(module, report, wk.Report.from_buffer_copy(self._worker.report), schedule, block,
                             locate)

    def _collect(self, module, report: LaunchReport, r: wk.Report, schedule, block, locate=None) -> ScheduleRun:
        """`locate`: (buffer, byte offset) -> element (_element_locator), for global races."""
        counts = {name: int(r.counts[k]) for k, name in wk.KIND_NAMES.items()}
        for c in r.conflicts[:r.nconflicts]:
            array, offset = module.array_at(int(c.address))
            other = None if c.thread_b == 0xFFFF else _thread(c.thread_b, block)
            report.conflicts.append(SharedConflict(
                wk.KIND_NAMES[c.kind], schedule, tuple(c.block), int(c.interval), _thread(c.thread_a, block),
                other, array, offset))
        for d in r.divergences[:r.ndivergent]:
            sites = tuple(BarrierSite(s.file.decode(errors="replace"), int(s.line), int(s.count),
                                      _thread(s.first_thread, block)) for s in d.sites[:d.nsites])
            what = wk.DIVERGENCE_KINDS.get(int(d.what), "barrier")
            warp = {} if what == "barrier" else {
                "warp": int(d.warp), "call": wk.WARP_CALLS[d.op] if d.op < len(wk.WARP_CALLS) else f"call {d.op}",
                "mask": int(d.mask), "lanes": tuple(lane for lane in range(32) if d.lanes >> lane & 1)}
            report.divergences.append(DivergentBarrier(
                schedule, tuple(d.block), int(d.interval), sites, int(d.exited),
                _thread(d.first_exited, block) if d.exited else None, what, **warp))
        counts["global"] = int(r.global_races)
        counts["warp"] = int(r.bad_warp_calls)
        names = report.buffer_names
        for g in r.global_[:r.nglobal]:
            name = names[g.buffer] if g.buffer < len(names) else f"pointer {g.buffer}"
            report.global_conflicts.append(GlobalRace(
                schedule, wk.GLOBAL_ACCESS[g.earlier], tuple(g.earlier_block), wk.GLOBAL_ACCESS[g.later],
                tuple(g.later_block), name, int(g.byte_offset),
                locate(name, int(g.byte_offset)) if locate else None))
        return ScheduleRun(schedule, counts, int(r.divergent))

    # -- AddressSanitizer ----------------------------------------------------------------

    def address_check(self, instance: Instance, A: np.ndarray, B: np.ndarray, *,
                      timeout_s: float = 120.0, batch: int = 1, groups: tuple = (),
                      masked: int = 0) -> AddressReport:
        """One launch of an AddressSanitizer build on exact-size buffers, in a child process;
        `batch` products stacked by rows (A, B) stored back to back; `groups` (rows per group,
        in `masked` slots of that many rows, or contiguous) with their offsets or counts."""
        from gemmcheck.contract import dtypes as dt

        self._module(instance)
        # The kernel's own instantiations only: an ASan build is slow and cached per kernel.
        wanted = [i for i in instance.spec.instances()]
        if instance not in wanted:
            wanted.append(instance)
        try:
            runner, names = build.asan_runner(instance.spec.source, [i for i in wanted if i.defines == instance.defines],
                                              instance.defines)
        except build.BuildError as exc:
            raise KernelCompileError(str(exc)) from None
        (M, K), N = (A.shape[0] // batch, A.shape[1]), B.shape[1]
        types, slots = instance.types, buffer_names(instance)
        # exact-size buffers: A and B, C and D poisoned, scale factors of 1 (what is read where
        # is the question here, not the values)
        contents = {"A": dt.to_bits(A, types.A), "B": dt.to_bits(B, types.B)}
        rows_out = batch * M
        if instance.grouped and not groups:   # one group of every row
            groups, masked = (A.shape[0],), A.shape[0] if instance.grouped == "masked" else 0
        if groups:
            M = masked or sum(groups)
            K = B.shape[0] // len(groups)
            rows_out = len(groups) * masked if masked else M
            if masked:   # each group's slot of `masked` rows, the counted ones first
                contents["A"] = np.zeros((rows_out, A.shape[1]), dtype=types.A.storage)
            role, table = group_table(groups, bool(masked))
            contents[role] = table.astype(table_type(instance, role).numpy)
        for role in ("C", "D"):
            contents[role] = np.full((rows_out, N), types.of(role).poison_bits, dtype=types.of(role).storage)
        for scale in types.scales:
            rows, cols = (M, K) if scale.operand == "A" else (K, N)
            contents[scale.role] = dt.to_bits(np.ones(scale.shape(rows, cols)), scale.type)
        epilogue = types.epilogue
        if epilogue.bias:
            contents["bias"] = np.zeros(M if epilogue.bias == "row" else N, dtype=types.of("bias").storage)
        if epilogue.residual:
            contents["residual"] = np.zeros((M, N), dtype=types.of("residual").storage)
        for role, value in (("alpha", 1), ("beta", 0), ("output_scale", 1.0)):   # taken through pointers
            if role in slots:
                contents[role] = dt.to_bits(np.full(1, float(value)), scalar_pointee(instance, role))
        products = len(groups) or batch
        contents.update(scratch_contents(instance, M, N, K, batch, len(groups) or 1))   # as callers leave it
        for operand in instance.pointer_arrays:   # one pointer per product, into its storage here
            storage = np.ascontiguousarray(contents[operand])
            contents[operand] = storage
            contents[f"{operand}_array"] = product_pointers(storage.ctypes.data, storage.nbytes // products, products)
        buffers = [contents[name] for name in slots]
        values = {**dict.fromkeys(slots), "M": M, "N": N, "K": K, "alpha": 1, "beta": 0, "output_scale": 1.0,
                  **{s.role: 1.0 for s in types.scales if s.role not in slots},
                  **tight_leading_dimensions(instance.spec.layouts, M, N, K), **tight_batch_strides(M, N, K, batch),
                  "groups": len(groups) or 1}
        planned = plan(instance, values)
        grid, block = planned.grid, planned.block
        arguments = build.argument_bytes(instance, planned.args)
        output = "D" if "D" in slots else "C"
        with tempfile.TemporaryDirectory(prefix="gemmcheck-asan-") as tmp:
            paths, arrays = [], sum(1 << i for i, name in enumerate(slots) if is_pointer_array(name))
            for name, bits in zip(slots, buffers):
                path = Path(tmp) / f"{name}.bin"
                path.write_bytes(np.ascontiguousarray(bits).tobytes())
                paths += [str(path), str(bits.nbytes), str(bits.ctypes.data)]
            cmd = [str(runner), str(names.index(instance.name_expression)), *map(str, grid), *map(str, block),
                   arguments.hex(), str(len(buffers)), str(arrays), *paths]
            env = {"ASAN_OPTIONS": "detect_leaks=0:halt_on_error=1:abort_on_error=0:"
                                   "detect_stack_use_after_return=0:allocator_may_return_null=1"}
            try:
                out = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=timeout_s,
                                     env=env)   # a kernel's printf may print any bytes
            except subprocess.TimeoutExpired as exc:
                log = (exc.stderr or b"").decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
                return AddressReport(instance.id, [], None, log, hung=True)
            C_bits = None
            if out.returncode == 0:
                C_bits = np.fromfile(Path(tmp) / f"{output}.bin", dtype=types.of(output).storage).reshape(rows_out, N)
        return AddressReport(instance.id, parse_asan(out.stderr, slots), out.returncode, out.stderr, C_bits)

    def close(self) -> None:
        self._worker.stop()


def _key(instance: Instance) -> tuple:
    return (instance.build_unit, instance.name_expression)
