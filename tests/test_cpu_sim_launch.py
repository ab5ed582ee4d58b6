"""cpu-sim runs kernels through the one launch path: arguments by role (ints, alpha and
beta, literals), host code ignored, a broken instantiation isolated from good ones of the
same file, and what a GPU refuses refused here too."""

from pathlib import Path

import numpy as np
import pytest

from gemmcheck.contract import catalog
from gemmcheck.contract import dtypes as dt
from gemmcheck.backends import KernelCompileError
from gemmcheck.problems.harness import run_once
from gemmcheck.contract.launch import Geometry, plan
from simulator import simulator

cpu_sim = pytest.importorskip("gemmcheck.backends.cpu_sim")
EXAMPLES = {s.name: s for s in catalog.load(Path(__file__).resolve().parent.parent / "examples" / "catalog.toml")}


@pytest.fixture(scope="module")
def sim():
    with simulator() as backend:
        yield backend


def test_sgemm_gets_alpha_and_beta_by_role_and_reads_C(sim):
    inst = EXAMPLES["sgemm"].instances()[0]                     # BM16_BN16_BK4_TM2_TN2
    M, N, K = 19, 35, 6                                         # ragged in every dimension
    rng = np.random.default_rng(3)
    A, B, C0 = (rng.integers(-3, 4, shape).astype(np.float32) for shape in ((M, K), (K, N), (M, N)))
    buffers = {name: sim.to_device(x.reshape(-1).view(np.uint32)) for name, x in (("A", A), ("B", B), ("C", C0))}
    values = {**buffers, "M": M, "N": N, "K": K, "lda": K, "ldb": N, "ldc": N, "alpha": 2, "beta": -3}
    sim.launch(inst, plan(inst, values))
    got = sim.to_host(buffers["C"]).view(np.float32).reshape(M, N)
    np.testing.assert_array_equal(got, 2 * (A.astype(np.float64) @ B) - 3 * C0)


def test_the_seeds_published_file_runs_its_worked_example(sim):
    (inst,) = EXAMPLES["seed_published"].instances()
    A = np.arange(1, 17, dtype=np.float64).reshape(4, 4)
    run = run_once(sim, inst, A, A)
    np.testing.assert_array_equal(run.C, [[90, 100, 110, 120], [202, 228, 254, 280],
                                          [314, 356, 398, 440], [426, 484, 542, 600]])


def _spec(tmp_path, text, entry, **fields):
    source = tmp_path / f"{entry}.cu"
    source.write_text(text)
    return catalog.KernelSpec(name=entry, source=source, entry=entry, signature="mnk", policy="naive",
                              tiles=(4,), dtypes=("float32",), **fields)


GOOD_AND_BAD = (Path(__file__).parent / "cpu_sim_kernels" / "good_and_bad.cu").read_text()


def test_a_broken_instantiation_does_not_stop_good_kernels_of_the_same_file(sim, tmp_path):
    good = catalog.Instance(_spec(tmp_path, GOOD_AND_BAD, "good"), "float32", 4)
    bad_spec = catalog.KernelSpec(name="bad", source=good.spec.source, entry="bad", signature="mnk",
                                  policy="naive", tiles=(4,), dtypes=("float32",))
    bad = catalog.Instance(bad_spec, "float32", 4)
    sim.prepare([good, bad])
    error = sim.build_error(bad)
    assert isinstance(error, KernelCompileError)
    assert f"{good.spec.source}:15:" in str(error) and "no_such_member" in str(error)
    assert sim.build_error(good) is None
    A = np.arange(12.0).reshape(3, 4)
    np.testing.assert_array_equal(run_once(sim, good, A, np.eye(4)).C, A)
    with pytest.raises(KernelCompileError):
        run_once(sim, bad, A, np.eye(4))


def test_static_shared_memory_over_48k_is_refused_as_the_gpu_would(sim, tmp_path):
    # The array sits in a device function the kernel calls, as the builtin kernels' do.
    text = ("template <typename T> __device__ void body(const T *A, T *C)\n"
            "{ __shared__ float s[13000]; s[threadIdx.x] = A[0]; __syncthreads(); C[0] = s[0]; }\n"
            "template <typename T, int TILE>\n__global__ void big(const T *A, const T *B, T *C, int M, int N, int K)\n"
            "{ body<T>(A, C); }\n")
    inst = catalog.Instance(_spec(tmp_path, text, "big"), "float32", 4)
    error = sim.build_error(inst)
    assert error is not None and "declares 52000 bytes of static shared memory; CUDA allows 49152" in str(error)
    small = catalog.Instance(_spec(tmp_path, text.replace("13000", "12288").replace("big(", "fits("), "fits"),
                             "float32", 4)
    assert sim.build_error(small) is None


def test_kernels_with_dynamic_shared_memory_are_not_simulated():
    spec = catalog.KernelSpec(name="dyn", source=catalog.BUILTIN, entry="dyn", signature="mnk",
                              tiles=(4,), dtypes=("float32",), policy=None,
                              geometry=Geometry.of(["1"], ["TILE"], "TILE * 4"))
    assert spec.gpu_only


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_column_major_example_honours_padded_leading_dimensions(sim, dtype):
    inst = next(i for i in EXAMPLES["gemm_colmajor"].instances() if i.dtype == dtype and i.tile == 8)
    M, N, K, lda, ldb, ldc = 11, 9, 13, 16, 15, 12            # every ld larger than its operand's rows
    rng = np.random.default_rng(5)
    A, B, C0 = (rng.integers(-3, 4, shape).astype(np.float64) for shape in ((M, K), (K, N), (M, N)))
    d = dt.get(dtype)

    def column_major(x, ld):                                    # x[i, j] at i + j * ld, NaN in the padding
        flat = np.full(ld * x.shape[1], np.nan)
        for j in range(x.shape[1]):
            flat[j * ld: j * ld + x.shape[0]] = x[:, j]
        return sim.to_device(dt.to_bits(flat, d))

    buffers = {"A": column_major(A, lda), "B": column_major(B, ldb), "C": column_major(C0, ldc)}
    values = {**buffers, "M": M, "N": N, "K": K, "lda": lda, "ldb": ldb, "ldc": ldc, "alpha": -2, "beta": 3}
    sim.launch(inst, plan(inst, values))
    flat = dt.from_bits(sim.to_host(buffers["C"]), d).astype(np.float64)
    got = np.stack([flat[j * ldc: j * ldc + M] for j in range(N)], axis=1)
    np.testing.assert_array_equal(got, -2 * (A @ B) + 3 * C0)
    padding = np.concatenate([flat[j * ldc + M:(j + 1) * ldc] for j in range(N)])
    assert np.isnan(padding).all()                              # nothing written between columns


def test_the_simulator_attributes_shared_memory_as_ptxas_does_for_the_builtin_kernels(sim):
    from gemmcheck.backends.cpu_sim import build
    builtin = [i for s in catalog.load(catalog.BUILTIN) if s.shared_tiles is not None and not s.gpu_only
               for i in s.instances()]
    sim.prepare(builtin)
    found = {i.id: build.static_shared_bytes(sim._module(i), i.name_expression) for i in builtin}
    assert found == {i.id: i.spec.shared_bytes(i.dtype, i.tile) for i in builtin}


def test_an_argument_packed_in_another_size_than_gplusplus_declares_stops_the_build_naming_it(sim, tmp_path):
    # M's type comes through a trait the declaration does not spell plainly: it is packed as an
    # int (4 bytes), and g++, which sees a long (8), refuses to build the launcher
    text = ("template <typename T> struct wide { typedef long type; };\n"
            "template <typename T, int TILE>\n__global__ void traits(const T *A, const T *B, T *C, "
            "typename wide<T>::type M, int N, int K) {}\n")
    inst = catalog.Instance(_spec(tmp_path, text, "traits"), "float32", 4)
    error = sim.build_error(inst)
    assert error is not None and ("traits<float, 4>: gemmcheck packs parameter 4 (M) as int, 4 bytes, but g++ "
                                  "declares it another size") in str(error)
    plain = catalog.Instance(_spec(tmp_path, text.replace("typename wide<T>::type M", "long M")
                                   .replace("traits(", "plain("), "plain"), "float32", 4)
    assert sim.build_error(plain) is None    # read as a long, packed in 8 bytes


def test_a_literal_role_is_passed_as_is_and_the_simulator_locates_the_rest_by_name(sim, tmp_path):
    """args = [..., 4]: the literal reaches the kernel, and nothing keyed by role names trips on it."""
    from gemmcheck.judge.oracle import judge
    from gemmcheck.problems.harness import run_problem
    from gemmcheck.problems.problem import Problem

    (tmp_path / "k.cu").write_text(
        "__global__ void k(const float *A, const float *B, float *C, int M, int N, int K, int splits) {\n"
        "  int r = blockIdx.y * blockDim.y + threadIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (r < M && c < N) { float s = 0; for (int k = 0; k < K; ++k) s += A[r * K + k] * B[k * N + c];\n"
        "    C[r * N + c] = splits * s; } }\n")
    (tmp_path / "c.toml").write_text('[[kernel]]\nname = "k"\nsource = "k.cu"\nentry = "k"\n'
                                     'args = ["A", "B", "C", "M", "N", "K", 1]\ngrid = ["ceil(N / 8)", "ceil(M / 8)"]\n'
                                     'block = [8, 8]\ndtypes = ["float32"]\nexpect = "correct"\n')
    (spec,) = catalog.load(tmp_path / "c.toml")
    problem = Problem(9, 11, 5, "float32", "exact", 1)
    judgement = judge(run_problem(sim, spec.instances()[0], problem), *problem.operands()[:2], exact=True,
                      problem=problem)
    assert judgement.ok, judgement.message()
