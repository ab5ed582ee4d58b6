"""The performance suite for kernels with a type per operand, without a GPU: which library GEMM
is each combination's ceiling (gemmcheck.perf.library), which unit a kernel computes on and its
peak (gemmcheck.perf.units, the tensor-core table of gemmcheck.perf.roofline), the bytes of the
roofline per operand type, and the timing path end to end on a fake GPU (numpy for CuPy, a fake
cuBLASLt): a mixed kernel timed in turn with its library GEMM, judged by its types' bound."""

import sys

import numpy as np
import pytest

from gemmcheck import perf
from gemmcheck.contract import catalog
from gemmcheck.contract import dtypes as dt
from gemmcheck.contract import operand_types
from gemmcheck.perf import library, roofline, session as perf_session, summary, units
from test_perf_gpu_path import fake_device

H200 = perf.Device("NVIDIA H200", (9, 0), 132, 1.98e9, 60 * 2**20)
MIXED = "examples/mixed/catalog.toml"


def spec_named(name, path=catalog.BUILTIN):
    return next(s for s in catalog.load(path) if s.name == name)


# -- which library GEMM stands for each combination ------------------------------------------------

@pytest.mark.parametrize("spelling, name, compute, nearest", [
    ("f16f16f32", "f16f16f32", "COMPUTE_32F", ""),
    ("bf16bf16bf16", "bf16bf16bf16", "COMPUTE_32F", ""),
    ("float32", "f32f32f32", "COMPUTE_32F", ""),
    ("float64", "f64f64f64", "COMPUTE_64F", ""),
    ("tf32", "tf32tf32f32", "COMPUTE_32F_FAST_TF32", ""),
    ("s8s8s32", "s8s8s32", "COMPUTE_32I", ""),
    ("e4m3e4m3bf16 scale_A=tensor scale_B=tensor", "e4m3e4m3bf16 scale_A=tensor scale_B=tensor", "COMPUTE_32F", ""),
    ("e4m3e5m2f32 scale_A=tensor scale_B=tensor", "e4m3e5m2f32 scale_A=tensor scale_B=tensor", "COMPUTE_32F", ""),
    ("e4m3e4m3e4m3 scale_A=tensor scale_B=tensor saturate", "e4m3e4m3e4m3 C=bfloat16 scale_A=tensor scale_B=tensor",
     "COMPUTE_32F", ""),
    ("e4m3e4m3bf16 scale_A=row scale_B=col", "e4m3e4m3bf16 scale_A=outer-vector scale_B=outer-vector",
     "COMPUTE_32F", ""),
    ("u8u8s32", "s8s8s32", "COMPUTE_32I", "int8 inputs and int32 output: cuBLASLt has no uint8 x uint8 -> int32 GEMM"),
    ("s8s8bf16 scale_A=row scale_B=col", "s8s8s32", "COMPUTE_32I",
     "int8 inputs and int32 output (the same int32 sums, not dequantized): cuBLASLt has no int8 x int8 -> bfloat16 GEMM"),
    ("e5m2e5m2bf16", "e4m3e5m2bf16 scale_A=tensor scale_B=tensor", "COMPUTE_32F",
     "A in e4m3: cuBLASLt has no e5m2 x e5m2 GEMM"),
    ("f16f16f32bf16", "f16f16f32", "COMPUTE_32F", "a float32 output: cuBLASLt has no float16 -> bfloat16 GEMM"),
    ("f16f16f32f16", "f16f16f16", "COMPUTE_32F", "C in float16: cuBLASLt reads C in D's type, not float32"),
])
def test_each_combination_is_timed_as_the_library_gemm_that_stands_for_it(spelling, name, compute, nearest):
    gemm = library.library_gemms(spelling)[0]   # the first asked of the library
    assert (gemm.name, gemm.compute, gemm.nearest) == (name, compute, nearest)
    assert gemm.label == f"cuBLASLt {name}" + (f" (nearest library GEMM: {nearest})" if nearest else "")


def test_block_scales_are_asked_of_the_library_first_and_per_tensor_scales_are_the_named_nearest():
    types = spec_named("fp8_block_scaled", MIXED).types_of("e4m3e4m3bf16")
    own, nearest = library.library_gemms(types)
    assert own.scales == (("A", "VEC128_32F"), ("B", "BLK128x128_32F")) and own.nearest == ""
    assert nearest.scales == (("A", "SCALAR_32F"), ("B", "SCALAR_32F"))
    assert nearest.label == ("cuBLASLt e4m3e4m3bf16 scale_A=tensor scale_B=tensor (nearest library GEMM: "
                             "per-tensor scales (the library found no algorithm for e4m3e4m3bf16 "
                             "scale_A=1x128 scale_B=128x128 on this device))")


def test_a_scale_the_library_has_no_mode_for_gives_per_tensor_scales_named_as_such():
    [gemm] = library.library_gemms("e4m3e4m3bf16 scale_A=64x64 scale_B=tensor")
    assert gemm.scales == (("A", "SCALAR_32F"), ("B", "SCALAR_32F"))
    assert gemm.nearest == ("per-tensor scales: cuBLASLt has no scale mode for scale_A: one per 64 x 64 block "
                            "of A (float32)")


def test_the_first_library_gemm_with_an_algorithm_here_is_the_ceiling_and_each_refusal_is_said(monkeypatch):
    tried = []

    class Lt:
        def __init__(self, gemm, M, N, K, batch=1):
            tried.append(gemm.name)
            if gemm.scales[0][1] != "SCALAR_32F":
                raise library.NoAlgorithm(f"cuBLASLt has no algorithm for {gemm.name} here")

    monkeypatch.setattr(library, "LtGemm", Lt)
    types = spec_named("fp8_block_scaled", MIXED).types_of("e4m3e4m3bf16")
    gemm, label = library.planned(types, 4096, 4096, 4096)
    assert tried == ["e4m3e4m3bf16 scale_A=1x128 scale_B=128x128", "e4m3e4m3bf16 scale_A=tensor scale_B=tensor"]
    assert isinstance(gemm, Lt) and "nearest library GEMM: per-tensor scales" in label
    monkeypatch.setattr(library, "LtGemm", lambda *a, **k: (_ for _ in ()).throw(library.NoAlgorithm("none")))
    assert library.planned("f16f16f32", 64, 64, 64) == (None, "none")


def test_the_library_module_loads_nvmath_only_when_a_gemm_is_planned():
    # CI's CPU machines import every perf module; nvmath-python is needed only on the GPU.
    import subprocess

    code = "import sys, gemmcheck.perf, gemmcheck.perf.library, gemmcheck.perf.units; print('nvmath' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# -- the unit a kernel computes on, and its peak -----------------------------------------------------

def test_the_dense_tensor_core_peaks_follow_the_whitepapers():
    h100 = (132, 1.83e9, (9, 0))
    assert roofline.tensor_peak_tflops(*h100, "float16") == pytest.approx(989.4, abs=0.1)
    assert roofline.tensor_peak_tflops(*h100, "bfloat16") == pytest.approx(989.4, abs=0.1)
    assert roofline.tensor_peak_tflops(*h100, "tf32") == pytest.approx(494.7, abs=0.1)
    assert roofline.tensor_peak_tflops(*h100, "float32") == pytest.approx(494.7, abs=0.1)   # as TF32
    assert roofline.tensor_peak_tflops(*h100, "float8_e4m3fn") == pytest.approx(1978.9, abs=0.1)
    assert roofline.tensor_peak_tflops(*h100, "int8") == pytest.approx(1978.9, abs=0.1)
    assert roofline.tensor_peak_tflops(108, 1.41e9, (8, 0), "int8") == pytest.approx(623.8, abs=0.1)
    assert roofline.tensor_peak_tflops(108, 1.41e9, (8, 0), "float8_e5m2") is None   # A100: no fp8
    assert roofline.tensor_peak_tflops(100, 1e9, (12, 0), "float16") is None         # not in the table


@pytest.mark.parametrize("catalog_path, name, dtype, unit, peak", [
    (catalog.BUILTIN, "matmul_tiled", "float32", "FP32 SIMT", 66.9),
    (catalog.BUILTIN, "mixed_fp8_tensor_scaled", "e4m3e4m3bf16", "FP32 SIMT", 66.9),
    ("kernels/ladder_catalog.toml", "ladder_warptiled", "float32", "FP32 SIMT", 66.9),
    ("kernels/ladder_catalog.toml", "ladder_wmma", "float16", "tensor cores float16", 1070.5),
    ("kernels/ladder_catalog.toml", "ladder_mma", "float16", "tensor cores float16", 1070.5),
    ("kernels/ladder_catalog.toml", "ladder_wgmma", "float16", "tensor cores float16", 1070.5),
    (MIXED, "wmma_sample", "f16f16f32", "tensor cores float16", 1070.5),
    (MIXED, "dp4a_s8s32", "s8s8s32", "FP32 SIMT", 66.9),
    (MIXED, "w8a8", "s8s8bf16", "FP32 SIMT", 66.9),
    (MIXED, "tf32_simt", "tf32", "FP32 SIMT", 66.9),
])
def test_a_kernel_is_a_share_of_the_peak_of_the_unit_its_code_uses(catalog_path, name, dtype, unit, peak):
    spec = spec_named(name, catalog_path)
    instance = next(i for i in spec.instances() if i.dtype == dtype)
    got = units.unit_of(instance, H200)
    assert (got.name, round(got.peak_tflops, 1)) == (unit, peak), got.why


def test_a_tensor_core_instruction_counts_only_in_code_the_kernel_reaches(tmp_path):
    (tmp_path / "helpers.cuh").write_text(
        '__device__ void tile_mma(float *d) { asm volatile("wgmma.mma_async.sync.aligned.m64n64k16 ..." ::); }\n')
    source = tmp_path / "two.cu"
    source.write_text(
        '#include "helpers.cuh"\n'
        "// not a use: wmma::mma_sync in a comment\n"
        "__global__ void simt(float *d) { /* mma.sync */ d[0] = 1.0f; }\n"
        "__device__ void step(float *d) { tile_mma(d); }\n"
        "__global__ void tensor(float *d) { step(d); }\n")
    assert units._instruction(source, "simt") is None
    assert units._instruction(source, "tensor") == "wgmma.mma_async"


def test_a_tensor_core_kernel_whose_type_the_table_lacks_has_an_unknown_peak_never_the_fp32_one():
    instance = next(i for i in spec_named("ladder_wmma", "kernels/ladder_catalog.toml").instances()
                    if i.dtype == "float16")
    ada = perf.Device("Made-up Ada", (8, 9), 128, 2.5e9, 72 * 2**20)
    got = units.unit_of(instance, ada)
    assert got.name == "tensor cores float16" and got.peak_tflops is None
    assert got.label == "tensor cores float16 (peak unknown)" and "TENSOR_FLOP_PER_CLOCK_PER_SM" in got.why


def test_the_impossible_time_bound_of_an_input_type_is_its_tensor_core_peak():
    assert roofline.peak_tflops(132, 1.83e9, (9, 0), "float8_e4m3fn") == pytest.approx(1978.9, abs=0.1)
    assert roofline.peak_tflops(132, 1.83e9, (9, 0), "tf32") == pytest.approx(494.7, abs=0.1)
    assert roofline.peak_tflops(80, 1.53e9, (7, 0), "float32") == pytest.approx(15.7, abs=0.1)   # V100: SIMT


# -- the roofline per operand type -----------------------------------------------------------------

def test_the_least_traffic_counts_each_operand_in_its_own_type():
    fp8 = catalog.Instance(spec_named("mixed_fp8_tensor_scaled"), "e4m3e4m3bf16", 16)
    # A and B one byte an element, D two, and the two per-tensor scales four each
    assert perf_session.min_bytes(fp8, 4096) == 4096**2 * (1 + 1 + 2) + 8
    assert roofline.operand_bytes(2, 3, 4, a=2, b=2, out=4) == 8 * 2 + 12 * 2 + 6 * 4
    assert summary.input_itemsize(fp8) == 1


# -- timed on a fake GPU: in turn with the library GEMM, judged by its types ------------------------

N = 64


class MixedBackend:
    """Launches the fp8 kernel on the fake GPU: D = sA sB A B in bfloat16, or without B's
    scale (the twin that leaves a scale out)."""

    name = "cupy"

    def __init__(self, gpu, behaviour):
        self.gpu, self.behaviour = gpu, behaviour

    def enqueue(self, instance, planned):
        t = instance.types
        by_role = dict(zip(instance.spec.roles, planned.args))
        A = dt.from_bits(by_role["A"], t.A).astype(np.float64)
        B = dt.from_bits(by_role["B"], t.B).astype(np.float64)
        sA = float(dt.from_bits(by_role["scale_A"], t.scale("A").type).ravel()[0])
        sB = float(dt.from_bits(by_role["scale_B"], t.scale("B").type).ravel()[0])
        scale = sA * sB if self.behaviour == "honest" else sA
        by_role["D"][...] = dt.to_bits(scale * (A @ B), t.D)
        self.gpu.log.append("kernel")
        self.gpu.now += 2 * N**3 / 20e12

    launch = enqueue

    def wait(self, instance, grid, block, event, *, spin_s=0.0):
        event.synchronize()

    def launch_failure(self, instance, grid, block, exc):
        return None


@pytest.fixture
def mixed_timer(monkeypatch):
    gpu = fake_device(monkeypatch, 3 * N * N)
    planned = []

    class FakeLt:   # cuBLASLt's GEMM: 600 TFLOP/s on the fake clock (noisy: 600 and 300 by turns)
        launches = 0

        def __init__(self, gemm, M=N, N_=N):
            self.gemm, self.m, self.n = gemm, M, N_

        def launch(self, A, B, D):
            assert A.dtype == np.uint8 and B.dtype == np.uint8 and D.dtype == np.uint16   # raw bits
            D[...] = 0x7FC0          # not the kernel's product: it must land in an output of its own
            gpu.log.append("cublasLt")
            FakeLt.launches += 1
            gpu.now += 2 * N**3 / (300e12 if noisy and FakeLt.launches % 2 else 600e12)

    def plan(types, M, N_, K, batch=1):
        [gemm] = library.library_gemms(types)
        planned.append((gemm.name, M, N_, K, batch))
        return FakeLt(gemm, M, N_), gemm.label_for(batch)

    monkeypatch.setattr(library, "planned", plan)

    noisy = False

    def make(behaviour, noisy_library=False):
        nonlocal noisy
        noisy = noisy_library
        timer = perf.GpuTimer(MixedBackend(gpu, behaviour), perf.Timing(warmup=1, max_samples=40))
        s = perf.PerfSession(timer, repeats=6)
        s._copy = perf.Measurement("copy", 2**30, (0.5e-3,) * 5, bytes_moved=2 * 2**30)
        return s, gpu, planned
    return make


def fp8_instance():
    return catalog.Instance(spec_named("mixed_fp8_tensor_scaled"), "e4m3e4m3bf16", 16)


def test_a_mixed_kernel_is_timed_in_turn_with_its_library_gemm_and_shown_against_its_ceiling_and_unit(mixed_timer):
    session, gpu, planned = mixed_timer("honest")
    rate = perf.timed_rate(session, fp8_instance(), N)
    row = session.rows[(fp8_instance().id, N)]
    assert rate == pytest.approx(20, rel=1e-6) and row.cublas.tflops == pytest.approx(600, rel=1e-6)
    assert row.cublas.label == "cuBLASLt e4m3e4m3bf16 scale_A=tensor scale_B=tensor"
    assert planned == [("e4m3e4m3bf16 scale_A=tensor scale_B=tensor", N, N, N, 1)]
    timed = [e for e in gpu.log if e != "hold"]
    assert timed[timed.index("cublasLt") + 1:][:4] == ["cublasLt", "kernel", "cublasLt", "kernel"]
    header, rows, foot = summary.summary_rows(session)
    cells = dict(zip(header, next(r for r in rows if r[0] == fp8_instance().id)))
    assert cells["% ceiling"] == "3.3" and cells["ceiling"] == "cuBLASLt e4m3e4m3bf16 scale_A=tensor scale_B=tensor"
    assert cells["unit (peak TFLOP/s)"] == "FP32 SIMT 66.9" and cells["% unit peak"] == "29.9"
    ceiling_row = next(r for r in rows if r[0].startswith("cuBLASLt"))
    assert ceiling_row[0] == "cuBLASLt e4m3e4m3bf16 scale_A=tensor scale_B=tensor"
    best = next(line for line in foot if line.startswith("best mixed_fp8_tensor_scaled e4m3e4m3bf16 N=64"))
    assert best.endswith("20.00 TFLOP/s, 3.3% of cuBLASLt e4m3e4m3bf16 scale_A=tensor scale_B=tensor"), best


def test_the_library_samples_after_the_kernels_last_one_leave_the_output_it_is_judged_by_alone(mixed_timer):
    # The kernel's series converges at once; the library's, noisy, goes on sampling every set.
    session, gpu, _ = mixed_timer("honest", noisy_library=True)
    perf.timed_rate(session, fp8_instance(), N)
    row = session.rows[(fp8_instance().id, N)]
    assert len(row.cublas.times) > len(row.measurement.times) and row.last.ok


def test_a_mixed_kernel_that_leaves_a_scale_out_is_refused_before_timing(mixed_timer):
    session, gpu, _ = mixed_timer("scale_left_out")
    with pytest.raises(perf.WrongOutput, match="output fails the check before timing"):
        perf.timed_rate(session, fp8_instance(), N)
    assert "cublasLt" not in gpu.log


def test_the_ceiling_of_any_shape_is_one_call_named_by_its_library_gemm(mixed_timer):
    session, gpu, planned = mixed_timer("honest")
    m = session.library_ceiling("e4m3e4m3bf16 scale_A=tensor scale_B=tensor", 128, 64, 32, batch=2)
    assert m.label == "cuBLASLt e4m3e4m3bf16 scale_A=tensor scale_B=tensor strided-batched x2"
    assert planned == [("e4m3e4m3bf16 scale_A=tensor scale_B=tensor", 128, 64, 32, 2)]
    assert m.flops == 2 * 2 * 128 * 64 * 32 and m.tflops > 0
    assert session.library_ceiling(operand_types.of("e4m3e4m3bf16 scale_A=tensor scale_B=tensor"),
                                   128, 64, 32, batch=2) is m        # measured once a session


# -- the cuBLASLt calls, against nvmath-python's real bindings (their library faked) ----------------

class _Buffer:
    def __init__(self, n, dtype=np.uint8):
        self.host = np.zeros(n, dtype)
        self.data = type("Pointer", (), {"ptr": self.host.ctypes.data})()
        self.dtype = self.host.dtype


def _fake_cupy():
    import types as module_types

    cp = module_types.ModuleType("cupy")
    cp.float32, cp.uint8 = np.float32, np.uint8
    cp.ones = cp.zeros = cp.empty = lambda n, dtype=np.uint8: _Buffer(n, dtype)
    stream = type("Stream", (), {"ptr": 0})()
    cp.cuda = module_types.SimpleNamespace(get_current_stream=lambda: stream)
    return cp


def fake_cublaslt(monkeypatch) -> list:
    """nvmath-python's cuBLASLt bindings with their library calls recorded, not made (and CuPy
    faked): the list of (call, arguments) they receive."""
    pytest.importorskip("nvmath", reason="needs nvmath-python (pyproject's dependency)")
    import ctypes

    from nvmath.bindings import cublasLt

    calls = []

    def record(name, result=None):
        return lambda *args: calls.append((name, args)) or result

    def setter(name):   # (object, attribute, pointer, size, the value's bytes as passed)
        return lambda *args: calls.append((name, (*args, ctypes.string_at(args[2], args[3]))))

    def heuristic(handle, desc, a, b, c, d, preference, requested, results, found):
        ctypes.c_int32.from_address(found).value = 1
        calls.append(("heuristic", (a, b, c, d)))

    for name in ("matmul_desc_set_attribute", "matrix_layout_set_attribute", "matmul_preference_set_attribute"):
        monkeypatch.setattr(cublasLt, name, setter(name))
    for name in ("matmul_preference_destroy", "matmul"):
        monkeypatch.setattr(cublasLt, name, record(name))
    monkeypatch.setattr(cublasLt, "create", record("create", 1))
    monkeypatch.setattr(cublasLt, "matmul_desc_create", record("matmul_desc_create", 2))
    monkeypatch.setattr(cublasLt, "matmul_preference_create", record("matmul_preference_create", 3))
    layouts = iter(range(10, 20))
    monkeypatch.setattr(cublasLt, "matrix_layout_create", lambda *args: calls.append(("layout", args)) or next(layouts))
    monkeypatch.setattr(cublasLt, "matmul_algo_get_heuristic", heuristic)
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy())
    library._handle.cache_clear()
    return calls


@pytest.mark.parametrize("types", ["e4m3e4m3bf16 scale_A=1x128 scale_B=128x128", "s8s8s32", "tf32", "float64",
                                   "e4m3e4m3e4m3 scale_A=tensor scale_B=tensor saturate"])
def test_a_library_gemm_is_described_to_cublaslt_with_the_bindings_own_names(types, monkeypatch):
    calls = fake_cublaslt(monkeypatch)
    import nvmath
    from nvmath.bindings import cublas, cublasLt

    gemm = library.library_gemms(types)[0]
    lt = library.LtGemm(gemm, 256, 128, 512, batch=2)
    A, B, D = _Buffer(1), _Buffer(1), _Buffer(1)
    lt.launch(A, B, D)
    compute, scale_type = dict(calls)["matmul_desc_create"]
    assert compute == int(getattr(cublas.ComputeType, gemm.compute))
    assert scale_type == int(getattr(nvmath.CudaDataType, gemm.scale_type))
    shapes = [args[1:] for name, args in calls if name == "layout"]
    assert shapes == [(512, 256, 512), (512, 128, 512), (256, 128, 256), (256, 128, 256)]   # TN: K x M, K x N, M x N
    assert [args[0] for name, args in calls if name == "layout"][3] == int(
        getattr(nvmath.CudaDataType, library.DATA_TYPE[gemm.d]))
    set_desc = [args[1] for name, args in calls if name == "matmul_desc_set_attribute"]
    attr = cublasLt.MatmulDescAttribute
    assert set_desc[:2] == [attr.TRANSA, attr.TRANSB]
    assert (attr.A_SCALE_POINTER in set_desc) == bool(gemm.scales)
    [(_, matmul)] = [c for c in calls if c[0] == "matmul"]
    assert matmul[3] == A.data.ptr and matmul[5] == B.data.ptr and matmul[10] == D.data.ptr
    assert (matmul[8] == D.data.ptr) == (gemm.c == gemm.d)   # an fp8 D reads a C of its own type
