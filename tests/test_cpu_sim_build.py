"""The CPU simulator builds what nvcc builds, and a build it cannot load is its own failure:

- the worker defines every entry point g++'s thread instrumentation can emit (the list is
  the compiler's own), so no module misses one (a file with __threadfence() used to fail to
  load, every kernel of it a crash);
- a module that does not load (an undefined symbol, whatever the cause) is a ToolFailure
  naming the symbol: the test errors, no kernel is called crashed;
- explicit instantiations of __global__ templates, extern "C" kernels and static kernels
  build, alone or beside the file's other kernels, and device code behind `#if __CUDA_ARCH__`
  is built as the GPU's compile builds it (the macros of a device compile are defined);
- the project's own headers are read as device copies at any depth (host code blanked,
  headers g++ cannot open left out), and host prototypes and the toolkit's host API headers
  never stop a build;
- the catalog's include_dirs are searched by g++, and the headers a build reads (and the
  directories searched) are part of its cache key.
"""

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from gemmcheck.containment.tools import ToolFailure
from gemmcheck.contract import catalog, cuda_source
from gemmcheck.problems.harness import run_once
from simulator import exact_inputs, simulator

cpu_sim = pytest.importorskip("gemmcheck.backends.cpu_sim")
build = cpu_sim.build

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).parent / "data"


def exact_everywhere(sim, inst, M=19, N=21, K=23):
    A, B = exact_inputs(M, N, K)
    with sim.using_schedules(cpu_sim.RACE_SCHEDULES):
        run = run_once(sim, inst, A, B)
    assert np.array_equal(run.C, A @ B), inst.id
    report = sim.last_launch_report
    assert report.outcome == "ok" and not report.race and not report.divergent, report.summary()
    return run


# -- the thread instrumentation's entry points ---------------------------------------------------

def _defined_by_the_worker() -> set[str]:
    out = subprocess.run(["nm", "-D", "--defined-only", str(build.worker())], capture_output=True, text=True,
                         check=True).stdout
    return {line.split()[-1] for line in out.splitlines()}


def test_the_worker_defines_every_tsan_entry_point_the_compiler_can_emit():
    """g++ knows the functions its instrumentation calls by name: every __tsan_ name its
    cc1plus holds. The worker must define each (on any g++ version this runs on)."""
    cxx, version = build.compiler()
    cc1plus = Path(subprocess.run([cxx, "-print-prog-name=cc1plus"], capture_output=True, text=True,
                                  check=True).stdout.strip())
    if not cc1plus.is_file():
        pytest.skip(f"{version}: cc1plus not found ({cc1plus})")
    emitted = {m.decode() for m in re.findall(rb"__tsan_[A-Za-z0-9_]+", cc1plus.read_bytes())}
    assert "__tsan_atomic_thread_fence" in emitted and "__tsan_atomic128_compare_exchange_weak" in emitted
    assert emitted - _defined_by_the_worker() == set(), version


PROBE = r"""
#include <cstdint>
#include <cstring>
struct Base { virtual int f() { return 1; } virtual ~Base() {} };
struct __attribute__((packed)) Packed { char c; int i; long long l; };
template <typename U> U every_builtin(U *x, U v)
{
    U e = 0, r = 0;
    const int orders[] = {__ATOMIC_RELAXED, __ATOMIC_CONSUME, __ATOMIC_ACQUIRE, __ATOMIC_RELEASE, __ATOMIC_ACQ_REL,
                          __ATOMIC_SEQ_CST};
    for (int order : orders)
    {
        r += __atomic_load_n(x, order == __ATOMIC_RELEASE ? __ATOMIC_RELAXED : order);
        __atomic_store_n(x, v, order == __ATOMIC_ACQUIRE ? __ATOMIC_RELAXED : order);
        r += __atomic_exchange_n(x, v, order);
        r += __atomic_fetch_add(x, v, order) + __atomic_add_fetch(x, v, order);
        r += __atomic_fetch_sub(x, v, order) + __atomic_sub_fetch(x, v, order);
        r += __atomic_fetch_and(x, v, order) + __atomic_and_fetch(x, v, order);
        r += __atomic_fetch_or(x, v, order) + __atomic_or_fetch(x, v, order);
        r += __atomic_fetch_xor(x, v, order) + __atomic_xor_fetch(x, v, order);
        r += __atomic_fetch_nand(x, v, order) + __atomic_nand_fetch(x, v, order);
        r += __atomic_compare_exchange_n(x, &e, v, false, order, __ATOMIC_RELAXED);
        r += __atomic_compare_exchange_n(x, &e, v, true, order, __ATOMIC_RELAXED);
        __atomic_thread_fence(order);
        __atomic_signal_fence(order);
    }
    r += __sync_fetch_and_add(x, v) + __sync_sub_and_fetch(x, v) + __sync_val_compare_and_swap(x, e, v);
    r += __sync_bool_compare_and_swap(x, e, v) + __sync_lock_test_and_set(x, v);
    __sync_lock_release(x);
    __sync_synchronize();
    return r;
}
extern "C" long long probe(void *p, Base *b, Packed *q, volatile int *w, char *s, char *d, unsigned n)
{
    long long r = every_builtin((uint8_t *)p, (uint8_t)1) + every_builtin((uint16_t *)p, (uint16_t)1) +
                  every_builtin((uint32_t *)p, 1u) + every_builtin((uint64_t *)p, (uint64_t)1);
    r += (long long)every_builtin((unsigned __int128 *)p, (unsigned __int128)1);
    r += b->f() + q->i + q->l + *w;
    Base *made = new Base;   // a constructor stores the vptr
    r += made->f();
    *w = 3, q->l = 4;
    std::memcpy(d, s, n), std::memset(d, 0, n), std::memmove(d, s + 1, n);
    delete b;
    delete made;
    return r;
}
"""


def test_a_module_using_every_atomic_builtin_and_fence_needs_nothing_the_worker_lacks(tmp_path):
    """What the instrumentation emits in practice (atomic builtins of every width and order,
    fences, virtual calls, packed and volatile accesses, memcpy), compiled as a kernel module
    is: every __tsan_ / __ubsan_ function the object calls is the worker's."""
    cxx, _ = build.compiler()
    source, obj = tmp_path / "probe.cpp", tmp_path / "probe.o"
    source.write_text(PROBE)
    subprocess.run([cxx, *build.COMMON_FLAGS, *build.MODULE_FLAGS, "-c", str(source), "-o", str(obj)], check=True)
    out = subprocess.run(["nm", "-u", str(obj)], capture_output=True, text=True, check=True).stdout
    needed = {line.split()[-1] for line in out.splitlines() if re.search(r"\b__(tsan|ubsan)_", line)}
    assert {"__tsan_atomic_thread_fence", "__tsan_atomic128_fetch_nand", "__tsan_vptr_update"} <= needed
    assert needed - _defined_by_the_worker() == set()


# -- a module that does not load ------------------------------------------------------------------

UNDEFINED = """
extern "C" __device__ float gemmcheck_defined_nowhere(float x);

__global__ void calls_nowhere(const float *A, const float *B, float *C, int M, int N, int K)
{
    if (threadIdx.x == 0)
        C[0] = gemmcheck_defined_nowhere(A[0]);
}
"""
UNDEFINED_ENTRY = ('[[kernel]]\nname = "calls_nowhere"\nsource = "calls_nowhere.cu"\nentry = "calls_nowhere"\n'
                   'signature = "mnk"\ngrid = ["1"]\nblock = ["1"]\ntiles = [1]\ndtypes = ["float32"]\n'
                   'shapes = "any"\nexpect = "correct"\n')


def test_a_module_that_does_not_load_is_a_tool_failure_naming_the_symbol(tmp_path):
    (tmp_path / "calls_nowhere.cu").write_text(UNDEFINED)
    (tmp_path / "catalog.toml").write_text(UNDEFINED_ENTRY)
    (spec,) = catalog.load(tmp_path / "catalog.toml")
    (inst,) = spec.instances()
    with simulator([inst]) as sim:
        assert sim.build_error(inst) is None   # g++ builds it; the worker cannot load it
        with pytest.raises(ToolFailure) as caught:
            run_once(sim, inst, *exact_inputs(2, 2, 2))
    error = caught.value
    assert isinstance(error, cpu_sim.ModuleNotLoaded) and error.symbol == "gemmcheck_defined_nowhere"
    first = str(error).splitlines()[0]
    assert first.startswith("the CPU simulator's worker: calls_nowhere.cu: kernel calls_nowhere: the module built "
                            "for calls_nowhere-float32-TILE1 does not load (undefined symbol gemmcheck_defined_nowhere)")
    assert sim.last_launch_report.outcome != "crash"


def test_a_test_that_meets_a_module_that_does_not_load_errors_and_judges_no_kernel(pytester):
    pytester.makeconftest((ROOT / "conftest.py").read_text())
    (pytester.path / "calls_nowhere.cu").write_text(UNDEFINED)
    (pytester.path / "catalog.toml").write_text(UNDEFINED_ENTRY)
    verdicts = pytester.path / "verdicts.json"
    result = pytester.runpytest(
        str(ROOT / "suites" / "correctness" / "test_exact_results.py"), "-p", "no:cacheprovider", "-rE",
        "-k", "test_exact_inputs_give_the_exact_product_bit_for_bit", "--gemm-catalog=catalog.toml",
        "--gemm-backend=cpu-sim", f"--gemm-verdicts={verdicts}", f"--rootdir={pytester.path}")
    outcomes = result.parseoutcomes()
    assert outcomes.get("errors", 0) >= 1 and "failed" not in outcomes and "passed" not in outcomes, outcomes
    result.stdout.fnmatch_lines(["E *.ModuleNotLoaded: the CPU simulator's worker: calls_nowhere.cu: kernel "
                                 "calls_nowhere: *(undefined symbol gemmcheck_defined_nowhere)*",
                                 "ERROR *test_exact_inputs_give_the_exact_product_bit_for_bit?calls_nowhere-*"])
    assert "crash" not in verdicts.read_text()


# -- what nvcc builds: explicit instantiations, extern "C" and static kernels --------------------

TRUST = {s.name: s for s in catalog.load(DATA / "trust_sim" / "catalog.toml") if s.is_reference}
TRUST_INSTANCES = [i for s in TRUST.values() for i in s.instances()]


def test_explicit_instantiations_extern_c_and_static_kernels_build_and_run_in_one_build():
    with simulator(TRUST_INSTANCES) as sim:
        for inst in TRUST_INSTANCES:
            assert sim.build_error(inst) is None
            exact_everywhere(sim, inst)


@pytest.mark.parametrize("name", sorted(TRUST))
def test_each_of_them_builds_and_runs_alone(name):
    """Built alone, as after a failed build of the whole file: the kernels a build leaves
    out take their explicit instantiations with them."""
    inst = TRUST[name].instances()[-1]
    with simulator([inst]) as sim:
        assert sim.build_error(inst) is None
        exact_everywhere(sim, inst)


def test_a_build_leaves_out_the_explicit_instantiations_of_the_kernels_it_leaves_out():
    text = (DATA / "trust_sim" / "trust_sim.cu").read_text()
    device = cuda_source.device_part(text, compiler="nvrtc")
    only_static = cpu_sim.isolate.keep_kernels(device, {"naive_static"})
    assert "splitk_last_block" not in only_static   # its definition and both instantiations
    assert "naive_extern_c" not in only_static and "static __global__ void naive_static(" in only_static
    only_template = cpu_sim.isolate.keep_kernels(device, {"splitk_last_block"})
    assert "template __global__ void splitk_last_block<16>(const float *" in only_template
    assert "naive_static" not in only_template and "naive_extern_c" not in only_template
    assert only_template.count("\n") == text.count("\n")


# -- headers: nested, host prototypes, host API headers, include_dirs ------------------------------

def test_a_kernel_behind_nested_headers_that_include_host_headers_builds_and_runs():
    """launcher.cu includes cuda_runtime.h, cuda_profiler_api.h, cublas_v2.h, a header of host
    prototypes and kernels.cuh -> kernels/nested_tiled.cuh (a host function taking a
    cublasHandle_t, #include <cublas_v2.h>) -> tile_math.cuh beside it."""
    specs = catalog.load(DATA / "nested_headers" / "catalog.toml")
    instances = [i for s in specs for i in s.instances()]
    with simulator(instances) as sim:
        for inst in instances:
            assert sim.build_error(inst) is None
            exact_everywhere(sim, inst)


def _include_dirs_catalog(tmp_path: Path) -> Path:
    shutil.copytree(DATA / "include_dirs", tmp_path / "include_dirs")
    return tmp_path / "include_dirs" / "catalog.toml"


def test_a_header_found_through_include_dirs_builds_and_is_part_of_the_cache_key(tmp_path):
    path = _include_dirs_catalog(tmp_path)
    (inst,) = catalog.load(path)[0].instances()
    with simulator([inst]) as sim:
        assert sim.build_error(inst) is None
        exact_everywhere(sim, inst)
        first = sim._module(inst).path
    header = path.parent / "headers" / "gemm_helpers.cuh"
    header.write_text(header.read_text().replace("return sum;", "return sum + 1.0f;"))
    (inst,) = catalog.load(path)[0].instances()
    A, B = exact_inputs(7, 5, 3)
    with simulator([inst]) as sim:
        assert sim._module(inst).path != first   # a new build: the header changed
        assert np.array_equal(run_once(sim, inst, A, B).C, A @ B + 1)
