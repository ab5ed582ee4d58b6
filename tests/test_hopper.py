"""Hopper kernels end to end, where they can run here: NVRTC builds them for sm_90a (no GPU
needed) and ptxas reports their resources; the build cache keeps targets apart; the CPU
simulator skips them with one reason; a GPU of another architecture skips them naming the
need; the draft reads their CUtensorMap parameters, clusters and wgmma; the launch packs
their parameters. On a GPU: the example runs with its tensor maps and cluster, and agrees
with numpy."""

import ctypes
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

from gemmcheck import draft
from gemmcheck.backends import NotSupported, device, extended_launch
from gemmcheck.compile import compiler, resources
from gemmcheck.contract import catalog
from gemmcheck.contract import dtypes as dt
from gemmcheck.problems.harness import run_once
from gemmcheck.problems.problem import Problem

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "hopper" / "catalog.toml"

# The three pieces of a Hopper GEMM a tutorial writes in inline PTX: an mbarrier, a TMA load
# completing on it, and a wgmma (sm_90a only) on the loaded tiles.
HOPPER_PTX = r"""
#include <cuda.h>
__global__ void pieces(const __grid_constant__ CUtensorMap map, float* out)
{
    __shared__ alignas(1024) unsigned short tile[64 * 64];
    __shared__ alignas(8) unsigned long long barrier;
    unsigned t = static_cast<unsigned>(__cvta_generic_to_shared(tile));
    unsigned b = static_cast<unsigned>(__cvta_generic_to_shared(&barrier));
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(b));
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], 8192;" :: "r"(b) : "memory");
        asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                     " [%0], [%1, {0, 0}], [%2];"
                     :: "r"(t), "l"(reinterpret_cast<unsigned long long>(&map)), "r"(b) : "memory");
    }
    __syncthreads();
    asm volatile("{\n.reg .pred p;\nW:\nmbarrier.try_wait.parity.shared::cta.b64 p, [%0], 0;\n@!p bra W;\n}"
                 :: "r"(b) : "memory");
    unsigned long long desc = (unsigned long long)((t & 0x3FFFF) >> 4);
    float d0 = 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f;
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
    asm volatile("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0, %1, %2, %3}, %4, %5, 0, 1, 1, 0, 0;"
                 : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) : "l"(desc), "l"(desc));
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    out[threadIdx.x] = d0 + d1 + d2 + d3;
}
"""


@pytest.fixture(scope="module")
def example():
    return catalog.load(EXAMPLE)


@pytest.fixture(scope="module")
def hopper():
    """The GPU backend on a Hopper GPU (the examples are built for sm_90a); skips elsewhere."""
    from gemmcheck.backends.cupy_backend import CupyBackend

    ok, why = device.cuda_device()
    if not ok:
        pytest.skip(why)
    backend = CupyBackend()
    if backend.arch != "sm_90":
        pytest.skip(f"the example needs sm_90a; this GPU is {backend.arch}")
    return backend


def test_nvrtc_builds_a_tma_mbarrier_wgmma_kernel_for_sm_90a_without_a_gpu_and_not_for_sm_90(tmp_path):
    source = tmp_path / "pieces.cu"
    source.write_text(HOPPER_PTX)
    built = compiler.compile_source(source, ("pieces",), "sm_90a")
    assert built.cubin and built.arch == "sm_90a"
    (found,) = resources.parse_ptxas(built.log, {m: n for n, m in built.mangled.items()}).values()
    assert found.arch == "sm_90a" and found.spills == 0
    with pytest.raises(compiler.CompileError, match="wgmma"):
        compiler.compile_source(source, ("pieces",), "sm_90")   # wgmma needs the "a" target


def test_every_example_instantiation_builds_for_its_catalogs_arch_and_ptxas_reports_it(example):
    for spec in example:
        instances = spec.instances()
        assert {resources.arch_of(i) for i in instances} == {"sm_90a"}
        names = tuple(i.name_expression for i in instances)
        report = resources.compile_report(spec.source, names, "sm_90a")
        for inst in instances:
            found = report[inst.name_expression]
            assert found.arch == "sm_90a" and (found.spills, found.stack_frame) == (0, 0), found
            # two stages of A and B tiles (64 x 64 2-byte elements each) and two 8-byte barriers,
            # and the output's 64 x 64 tile where a TMA store writes it (aligned to 128 bytes)
            staged = "tensor_map_D" in spec.roles
            assert found.shared_bytes == 2 * 2 * 64 * 64 * 2 + (128 if staged else 16) + staged * 64 * 64 * 2


def test_the_build_units_and_the_cache_keep_targets_apart(example):
    spec = example[0]
    units = compiler.build_units_of(spec.instances(), "sm_80")
    assert {arch for _, _, arch, *_ in units} == {"sm_90a"}      # the catalog's arch wins
    plain = next(s for s in catalog.load(catalog.BUILTIN) if s.name == "matmul_tiled_guarded")
    name = plain.instances()[0].name_expression
    for_90 = compiler.compile_source(plain.source, (name,), "sm_90")
    for_90a = compiler.compile_source(plain.source, (name,), "sm_90a")
    assert (for_90.arch, for_90a.arch) == ("sm_90", "sm_90a") and "sm_90a" in for_90a.log
    assert compiler.compile_source(plain.source, (name,), "sm_90").log == for_90.log   # its own entry


def test_the_cpu_simulator_skips_every_test_of_them_with_one_reason(example, tmp_path):
    reasons = {spec.simulator_skip_reason() for spec in example}
    assert reasons == {f"{spec.name} uses TMA tensor maps / thread-block clusters / the sm_90a compile target, "
                       "which the CPU simulator does not model; run it with --gemm-backend cupy on a GPU"
                       for spec in example}
    assert all(spec.gpu_only for spec in example)
    run = subprocess.run([sys.executable, "-m", "pytest", "suites/correctness/test_exact_results.py",
                          f"--gemm-catalog={EXAMPLE}", "--gemm-backend", "cpu-sim", "-q", "-rs",
                          "-p", "no:cacheprovider", "-p", "no:xdist", "--gemm-kernels", "tma_gemm",
                          f"--gemm-verdicts={tmp_path / 'verdicts.json'}", f"--alluredir={tmp_path / 'allure'}"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    skips = [line for line in run.stdout.splitlines() if line.startswith("SKIPPED")]
    # exit 5: every test that runs kernels skipped, so none was checked (the suite says so)
    assert run.returncode == 5 and skips and "no kernel was checked" in run.stdout, run.stdout[-2000:]
    assert {line.split(": ", 1)[1] for line in skips} == {example[0].simulator_skip_reason()}


def test_a_gpu_of_another_architecture_skips_them_naming_the_need(example):
    from gemmcheck.backends.cupy_backend import CupyBackend

    backend = object.__new__(CupyBackend)       # no device here: only the decision
    backend._failed, backend._kernels, backend._capability, backend.arch = {}, {}, (8, 0), "sm_80"
    inst = example[0].instances()[0]
    backend.prepare([inst])
    error = backend.build_error(inst)
    assert isinstance(error, NotSupported)
    assert str(error) == (f"{inst.id} needs sm_90a (its catalog's arch); this GPU is sm_80 (compute capability 8.0)")
    backend._capability, backend.arch = (9, 0), "sm_90"
    assert backend._cannot_run(inst) is None
    backend._capability = (10, 0)
    assert "needs sm_90a" in backend._cannot_run(inst)        # "a" code runs on its own GPU only


def test_the_draft_reads_tensor_maps_clusters_and_wgmma(tmp_path):
    source = tmp_path / "h.cu"
    source.write_text(HOPPER_PTX.replace("__global__ void pieces(const __grid_constant__ CUtensorMap map,",
                                         "__global__ void __cluster_dims__(2, 1, 1) pieces(int M, int N, int K, "
                                         "const __grid_constant__ CUtensorMap tmap_a, "
                                         "const __grid_constant__ CUtensorMap tensorMapB,"))
    text = draft.draft_source(source, tmp_path)
    (entry,) = tomllib.loads(text)["kernel"]
    assert entry["args"][:5] == ["M", "N", "K", "tensor_map_A", "tensor_map_B"]
    assert set(entry["tensor_maps"]) == {"A", "B"} and entry["cluster"] == [2, 1, 1] and entry["arch"] == "sm_90a"
    assert "TODO: tensor_maps: box = [inner, outer]" in text


def test_the_draft_reads_a_tensor_map_of_d_beside_c_as_a_separate_output_stored_by_tma(tmp_path):
    source = tmp_path / "h.cu"
    source.write_text("#include <cuda.h>\n__global__ void store_d(int M, int N, int K, const __grid_constant__ CUtensorMap "
                      "tmap_a, const __grid_constant__ CUtensorMap tmap_b, float beta, const float* C, "
                      "const __grid_constant__ CUtensorMap tmap_d) {}\n")
    (entry,) = tomllib.loads(draft.draft_source(source, tmp_path))["kernel"]
    assert entry["args"] == ["M", "N", "K", "tensor_map_A", "tensor_map_B", "beta", "C", "tensor_map_D"]
    assert set(entry["tensor_maps"]) == {"A", "B", "D"}


def test_an_extended_launch_passes_each_parameter_by_address():
    class Buffer:
        __cuda_array_interface__ = {"data": (0xDEAD00, False)}
    keep, pointers = extended_launch.parameters((np.int32(7), np.float32(2.5), Buffer(), np.float64(-1)))
    assert ctypes.c_int32.from_address(pointers[0]).value == 7
    assert ctypes.c_float.from_address(pointers[1]).value == 2.5
    assert ctypes.c_void_p.from_address(pointers[2]).value == 0xDEAD00
    assert ctypes.c_double.from_address(pointers[3]).value == -1


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape", [(128, 128, 64), (100, 130, 72), (1, 257, 8)], ids=lambda s: "x".join(map(str, s)))
def test_on_a_hopper_gpu_the_example_runs_with_tensor_maps_and_a_cluster_and_agrees_with_numpy(example, hopper, dtype, shape):
    inst = next(i for i in example[0].instances() if i.dtype == dtype)
    A, B = Problem(*shape, dtype, "exact", 3).operands()
    run = run_once(hopper, inst, A, B)
    expected = dt.from_bits(dt.to_bits(A @ B, inst.dt), inst.dt).astype(np.float64)
    assert run.launched and not run.unwritten.any() and run.guard_damage == {"A": 0, "B": 0, "C": 0}
    np.testing.assert_array_equal(run.C.astype(np.float64), expected)
    assert np.abs(expected).sum() > 0


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape", [(128, 128, 64), (100, 136, 72), (1, 264, 8)], ids=lambda s: "x".join(map(str, s)))
def test_on_a_hopper_gpu_a_tma_store_writes_d_inside_its_edges_and_c_is_only_read(example, hopper, dtype, shape):
    spec = next(s for s in example if s.name == "tma_gemm_store_d")
    inst = next(i for i in spec.instances() if i.dtype == dtype)
    M, N, K = shape
    A, B = Problem(M, N, K, dtype, "exact", 3).operands()
    C0 = np.arange(M * N, dtype=np.float64).reshape(M, N) % 7 - 3   # small integers: exact in both types
    run = run_once(hopper, inst, A, B, C0, alpha=1.0, beta=2.0)
    expected = dt.from_bits(dt.to_bits(A @ B + 2.0 * C0, inst.dt), inst.dt).astype(np.float64)
    assert run.output == "D" and run.launched and not run.unwritten.any()
    assert run.guard_damage == {"A": 0, "B": 0, "C": 0, "D": 0} and run.inputs_changed["C"] == 0
    np.testing.assert_array_equal(run.C.astype(np.float64), expected)
