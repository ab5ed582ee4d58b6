"""Published CUDA sources build as nvcc builds them for the device: host headers left out as
the compiler reports them, the prelude's glibc / CUDA runtime names, CCCL from its wheel,
headers beside the source and in include_dirs, kernels found after preprocessing."""

from pathlib import Path

import pytest

from gemmcheck.compile import compiler, device_includes, toolkit
from gemmcheck.contract import catalog, cuda_source

ROOT = Path(__file__).resolve().parent.parent
PUBLISHED = ROOT / "examples" / "published"

TUTORIAL_STYLE = """#include <cublas_v2.h>
#include <cstdio>
#include <cassert>
#include <iostream>

__global__ void k(float *out, uint n)
{
    const uint i = threadIdx.x;
    if (i < n) out[i] = CUDART_PI_F;
}

void run(float *out, uint n)
{
    std::cout << "launching" << std::endl;
    k<<<1, 32>>>(out, n);
}
"""


@pytest.fixture(autouse=True)
def nvrtc(monkeypatch):
    """These are claims about the NVRTC build; nvcc's are in tests/test_nvcc.py."""
    monkeypatch.setenv("GEMMCHECK_COMPILER", "nvrtc")


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMMCHECK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(compiler, "_DECISIONS", device_includes.Decisions(lambda: tmp_path / "cache" / "includes"))


def write(tmp_path, name, text):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_tutorial_style_file_builds_with_its_host_headers_uint_and_cudart_constants(tmp_path):
    source = write(tmp_path, "tutorial.cu", TUTORIAL_STYLE)
    built = compiler.compile_source(source, ("k",), "sm_90")
    assert built.cubin and list(built.mangled) == ["k"]


def test_the_prelude_is_what_gives_uint_and_cudart_constants(tmp_path, monkeypatch):
    source = write(tmp_path, "tutorial.cu", TUTORIAL_STYLE)
    empty = write(tmp_path, "empty_prelude.h", "#pragma once\n")
    monkeypatch.setattr(compiler, "PRELUDE", empty)
    with pytest.raises(compiler.CompileError, match='identifier "uint" is undefined'):
        compiler.compile_source(source, ("k",), "sm_90")


def test_the_headers_left_out_are_the_ones_nvrtc_cannot_open_and_lines_are_kept(tmp_path):
    source = write(tmp_path, "tutorial.cu", TUTORIAL_STYLE + "__global__ void bad(float *a) { a[0] = nope; }\n")
    with pytest.raises(compiler.CompileError) as info:
        compiler.compile_source(source, ("k", "bad"), "sm_90")
    text = str(info.value)
    assert f'{source}(17): error: identifier "nope" is undefined' in text   # the user's line
    # what was left out, each with NVRTC's own reason; nothing NVRTC can open (cuda headers) is named
    for line, header in ((1, "cublas_v2.h"), (2, "cstdio"), (3, "cassert"), (4, "iostream")):
        assert f'line {line}: <{header}>: {source}({line}): catastrophic error: cannot open source file "{header}"' in text


def test_a_header_the_device_code_needs_fails_with_the_compilers_original_error(tmp_path):
    source = write(tmp_path, "needs.cu", '#include "not_there.cuh"\n__global__ void k(float *a) { a[0] = helper(); }\n')
    with pytest.raises(compiler.CompileError) as info:
        compiler.compile_source(source, ("k",), "sm_90")
    text = str(info.value)
    assert 'identifier "helper" is undefined' in text
    assert 'cannot open source file "not_there.cuh"' in text and "include_dirs" in text


def test_a_project_header_with_host_code_gives_the_device_its_device_functions(tmp_path, monkeypatch):
    # helpers.cuh has host includes, a host function using them, and the device function the
    # kernel needs: compiled as nvcc would, its host parts are left out, not the whole header.
    helpers = write(tmp_path, "helpers.cuh", "#pragma once\n#include <cstdio>\n#include <vector>\n"
                                             "inline void report(int x) { std::vector<int> v{x}; printf(\"%d\", v[0]); }\n"
                                             "__device__ inline float twice(float x) { return 2 * x; }\n")
    source = write(tmp_path, "uses.cu", '#include <cstdio>\n#include "helpers.cuh"\n'
                                        "__global__ void k(float *a) { a[0] = twice(a[0]); }\n")
    seen = []
    original = device_includes.DeviceFiles.next_left_out
    monkeypatch.setattr(device_includes.DeviceFiles, "next_left_out",
                        lambda self, *a: seen.append(original(self, *a)) or seen[-1])
    assert compiler.compile_source(source, ("k",), "sm_90").cubin
    assert [(Path(l.file).name if l.file else "", l.line, l.spelled) for l in seen] == [
        ("", 1, "<cstdio>"), ("helpers.cuh", 2, "<cstdio>"), ("helpers.cuh", 3, "<vector>")]
    assert f'{helpers}(2): catastrophic error: cannot open source file "cstdio"' in seen[1].reason


def test_a_project_header_two_levels_down_is_read_through_its_own_device_copy(tmp_path, monkeypatch):
    # kernels.cuh -> kernels/k.cuh (host code, <cublas_v2.h>) -> twice.cuh beside it: the
    # nested header's host parts are left out, as the source's and kernels.cuh's are.
    write(tmp_path, "kernels/twice.cuh", "#pragma once\n__device__ inline float twice(float x) { return 2 * x; }\n")
    nested = write(tmp_path, "kernels/k.cuh", '#pragma once\n#include <cublas_v2.h>\n#include "twice.cuh"\n'
                                              "void host_side(cublasHandle_t h);\n"
                                              "__global__ void k(float *a) { a[0] = twice(a[0]); }\n"
                                              "inline void run(cublasHandle_t h) { cublasDestroy(h); }\n")
    write(tmp_path, "kernels.cuh", '#pragma once\n#include "kernels/k.cuh"\n')
    source = write(tmp_path, "main.cu", '#include "kernels.cuh"\nint main() { return 0; }\n')
    seen = []
    original = device_includes.DeviceFiles.next_left_out
    monkeypatch.setattr(device_includes.DeviceFiles, "next_left_out",
                        lambda self, *a: seen.append(original(self, *a)) or seen[-1])
    assert compiler.compile_source(source, ("k",), "sm_90").cubin
    assert [(l.file, l.line, l.spelled) for l in seen] == [(str(nested), 2, "<cublas_v2.h>")]


def test_an_error_in_a_project_header_names_the_users_file_and_line(tmp_path):
    helpers = write(tmp_path, "helpers.cuh", "#include <cstdio>\n__device__ inline float twice(float x) { return nope; }\n")
    source = write(tmp_path, "uses.cu", '#include "helpers.cuh"\n__global__ void k(float *a) { a[0] = twice(a[0]); }\n')
    with pytest.raises(compiler.CompileError) as info:
        compiler.compile_source(source, ("k",), "sm_90")
    assert f'{helpers}(2): error: identifier "nope" is undefined' in str(info.value)
    assert 'helpers.cuh line 1: <cstdio>' in str(info.value)


def test_a_failure_deep_in_a_library_header_is_attributed_to_the_include_that_pulls_it_in(tmp_path, monkeypatch):
    # NVRTC opens hostlib.h (in include_dirs) but not the <stdint.h> it includes, as with a
    # system cuBLAS: the #include <hostlib.h> line of the user's header is what is left out.
    write(tmp_path, "lib/hostlib.h", "#include <stdint.h>\ntypedef int64_t handle_t;\n")
    write(tmp_path, "helpers.cuh", "#include <hostlib.h>\n__device__ inline float twice(float x) { return 2 * x; }\n")
    source = write(tmp_path, "uses.cu", '#include "helpers.cuh"\n__global__ void k(float *a) { a[0] = twice(a[0]); }\n')
    cuda_source.declare_include_dirs(source, [tmp_path / "lib"])
    seen = []
    original = device_includes.DeviceFiles.next_left_out
    monkeypatch.setattr(device_includes.DeviceFiles, "next_left_out",
                        lambda self, *a: seen.append(original(self, *a)) or seen[-1])
    assert compiler.compile_source(source, ("k",), "sm_90").cubin
    assert [(Path(l.file).name, l.line, l.spelled) for l in seen] == [("helpers.cuh", 1, "<hostlib.h>")]
    assert 'hostlib.h(1): catastrophic error: cannot open source file "stdint.h"' in seen[0].reason


def test_the_decision_is_made_once_per_source_and_options(tmp_path, monkeypatch):
    source = write(tmp_path, "tutorial.cu", TUTORIAL_STYLE.replace("__global__ void k(", "template <int X> __global__ void k("))
    compiles = []
    real = compiler._compile
    monkeypatch.setattr(compiler, "_compile", lambda *a: compiles.append(a[2]) or real(*a))
    compiler.compile_source(source, ("k<1>",), "sm_90")
    first = len(compiles)
    assert first == 5   # the first try, then one more per header NVRTC cannot open
    compiler.compile_source(source, ("k<2>",), "sm_90")   # another unit of the same source
    assert len(compiles) == first + 1


def test_a_header_beside_the_source_is_found(tmp_path):
    write(tmp_path, "my_helpers.cuh", "#pragma once\n__device__ inline float twice(float x) { return 2 * x; }\n")
    source = write(tmp_path, "k.cu", '#include "my_helpers.cuh"\n__global__ void k(float *a) { a[0] = twice(a[0]); }\n')
    assert compiler.compile_source(source, ("k",), "sm_90").cubin


def test_cccl_comes_from_its_wheel_and_barrier_and_cooperative_groups_build(tmp_path):
    cccl = toolkit.cccl_include_dir()
    assert cccl and "site-packages" in cccl and (Path(cccl) / "cuda" / "barrier").is_file()
    assert toolkit.include_dirs()[0] == cccl
    source = write(tmp_path, "k.cu", "#include <cooperative_groups.h>\n#include <cuda/barrier>\n"
                                     "#include <cuda/std/type_traits>\n"
                                     "__global__ void k(float *a) { auto b = cooperative_groups::this_thread_block();\n"
                                     "  __shared__ cuda::barrier<cuda::thread_scope_block> bar;\n"
                                     "  if (b.thread_rank() == 0) init(&bar, b.size()); b.sync(); bar.arrive_and_wait(); }\n")
    assert compiler.compile_source(source, ("k",), "sm_90").cubin


CATALOG_ENTRY = """
[[kernel]]
name = "k"
source = "src/k.cu"
entry = "k"
args = ["A", "B", "C", "M", "N", "K"]
grid = ["ceil(N / 16)", "ceil(M / 16)"]
block = [16, 16]
dtypes = ["float32"]
expect = "correct"
"""


def test_include_dirs_and_defines_reach_the_compile(tmp_path):
    write(tmp_path, "common/scale.cuh", "#pragma once\n__device__ inline float scaled(float x) { return SCALE * x; }\n")
    write(tmp_path, "src/k.cu", '#include "scale.cuh"\n__global__ void k(const float *A, const float *B, float *C, '
                                "int M, int N, int K) { C[0] = scaled(A[0]); }\n")
    path = write(tmp_path, "catalog.toml", CATALOG_ENTRY + 'include_dirs = ["common"]\ndefines = { SCALE = 2 }\n')
    (spec,) = catalog.load(path)
    (inst,) = spec.instances()
    assert inst.defines == (("SCALE", 2),) and spec.include_dirs == ((tmp_path / "common").resolve(),)
    assert compiler.compile_source(spec.source, (inst.name_expression,), "sm_90", defines=inst.defines).cubin


@pytest.mark.parametrize("field, value, message", [
    ("include_dirs", '["nowhere"]', "include_dirs: 'nowhere' is not a directory"),
    ("include_dirs", '"common"', "'include_dirs' must be a list of directories"),
    ("defines", '{ "1X" = 2 }', "defines: '1X' is not a macro name"),
    ("defines", '{ X = 1.5 }', "defines: X = 1.5; give an integer, true/false or a one-line string"),
])
def test_bad_include_dirs_and_defines_are_named(tmp_path, field, value, message):
    write(tmp_path, "src/k.cu", "__global__ void k(const float *A, const float *B, float *C, int M, int N, int K) {}\n")
    path = write(tmp_path, "catalog.toml", CATALOG_ENTRY + f"{field} = {value}\n")
    with pytest.raises(catalog.CatalogError, match=f"kernel 'k': {message}"):
        catalog.load(path)


def test_kernels_are_found_after_preprocessing():
    text = (PUBLISHED / "07_macro_kernel.cu").read_text()
    found = cuda_source.find_kernels(text, "07_macro_kernel.cu")
    assert [k.name for k in found] == ["sgemm_macro"]          # through KERNEL; not the #if 0 one
    assert found[0].is_template and found[0].line == 15          # the user's line
    assert "__launch_bounds__(BM * BM)" in found[0].head
    assert cuda_source.missing_kernel(text, "sgemm_macro_old", "07_macro_kernel.cu") == (
        "entry 'sgemm_macro_old' is defined at 07_macro_kernel.cu:11 inside `#if 0` (line 10): the compiler "
        "never sees it")
    assert cuda_source.missing_kernel(text, "sgemm_macro_new", "07_macro_kernel.cu") == (
        "entry 'sgemm_macro_new' is not a __global__ function of 07_macro_kernel.cu; it declares "
        "sgemm_macro; did you mean 'sgemm_macro'?")


def test_the_preprocessor_sees_the_device_compiles_macros_and_the_catalogs_defines():
    text = ("#ifdef __CUDACC__\n__global__ void device_one(float *a) {}\n#endif\n"
            "#if USE_FAST\n__global__ void fast(float *a) {}\n#else\n__global__ void slow(float *a) {}\n#endif\n")
    assert cuda_source.kernels(text) == ["device_one", "slow"]
    assert cuda_source.kernels(text, defines=(("USE_FAST", 1),)) == ["device_one", "fast"]


def test_a_macro_declared_kernel_is_device_code_not_host_code():
    text = (PUBLISHED / "07_macro_kernel.cu").read_text()
    assert "__shared__ float As[BM][BM];" in cuda_source.device_part(text, compiler="nvrtc")


def test_for_a_host_compiler_includes_are_guarded_and_lines_kept():
    text = "#include <cublas_v2.h>\n#include \"mine.cuh\"\n__global__ void k(uint *a) { a[0] = 1; }\n"
    out = cuda_source.device_part(text, compiler="host")
    assert out.startswith(f'#include "{cuda_source.PRELUDE}"\n#line 1\n')
    assert "#if __has_include(<cublas_v2.h>)\n#include <cublas_v2.h>\n#else\n" in out
    assert "#endif\n#line 2\n#if __has_include(\"mine.cuh\")" in out and "#endif\n#line 3\n__global__" in out


def test_the_published_examples_build_on_the_cpu_simulator_with_their_host_headers():
    from gemmcheck.backends.cpu_sim import build

    try:
        build.compiler()
    except build.BuildError as exc:
        pytest.skip(str(exc))
    (spec,) = [s for s in catalog.load(PUBLISHED / "catalog.toml") if s.name == "naive"]
    module = build.module(spec.source, spec.instances())
    assert module.names == ("sgemm_naive",)


def test_a_kernel_without_a_tile_is_cataloged_with_grid_and_block_expressions():
    specs = {s.name: s for s in catalog.load(PUBLISHED / "catalog.toml")}
    naive = specs["naive"]
    assert not naive.has_tile and [i.id for i in naive.instances()] == ["naive-float32"]
    (inst,) = naive.instances()
    assert inst.tile == catalog.DEFAULT_SHAPE_EDGE and inst.params == {}
    assert inst.launch_shape(33, 65, 7) == ((2, 3, 1), (32, 32, 1))
    assert catalog.Instance(naive, "float32", catalog.DEFAULT_SHAPE_EDGE) == inst


@pytest.mark.parametrize("extra, message", [
    ('policy = "tile2d"', "no value for the tile parameter TILE"),
    ('shapes = "tile-multiple"\ngrid = ["1"]\nblock = [1]', "no value for the tile parameter TILE"),
])
def test_a_tile_is_still_required_where_something_uses_it(tmp_path, extra, message):
    write(tmp_path, "src/k.cu", "__global__ void k(const float *A, const float *B, float *C, int M, int N, int K) {}\n")
    entry = "\n".join(line for line in CATALOG_ENTRY.splitlines() if not line.startswith(("grid", "block")))
    path = write(tmp_path, "catalog.toml", entry + "\n" + extra + "\n")
    with pytest.raises(catalog.CatalogError, match=message):
        catalog.load(path)


def test_the_compile_suite_builds_gpu_only_kernels_with_nvrtc_on_the_cpu_simulator_too(tmp_path):
    # NVRTC needs no device: a gpu_only kernel is still compiled (and its resources read) under
    # --gemm-backend cpu-sim, so `pytest suites/compile` checks every example here.
    import os
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-m", "pytest", "suites/compile/test_resources.py", "-q",
                          "-p", "no:cacheprovider", "--gemm-backend=cpu-sim", "--gemm-compiler=nvrtc",
                          f"--gemm-catalog={PUBLISHED / 'catalog.toml'}", "-k", "compiles_for_sm90 and warptiling",
                          f"--alluredir={tmp_path / 'allure'}"],
                         cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, "GEMMCHECK_CACHE_DIR": str(tmp_path / "cache")})
    assert "2 passed" in run.stdout, run.stdout[-2000:]


def test_a_header_of_host_prototypes_and_nested_kernel_headers_build_with_nvrtc(tmp_path):
    # A tutorial project: the launcher includes its header of host prototypes (NVRTC rejects a
    # host function's declaration) and a header that includes each kernel's header, which
    # includes <cublas_v2.h> and cuda_profiler_api.h (a toolkit header whose host API NVRTC rejects).
    write(tmp_path, "runner.cuh", "#pragma once\n#include <cuda_runtime.h>\n"
                                  "void cudaCheck(cudaError_t error, const char *file, int line);\n"
                                  "void run_naive(int M, float *A);\n")
    write(tmp_path, "kernels/naive.cuh", "#pragma once\n#include <cublas_v2.h>\n#include <cuda_profiler_api.h>\n"
                                         "template <int BM> __global__ void naive(float *A) { A[0] = BM; }\n"
                                         "template __global__ void naive<32>(float *);\n")
    write(tmp_path, "kernels.cuh", '#pragma once\n#include "kernels/naive.cuh"\n')
    source = write(tmp_path, "launcher.cu", '#include <cstdio>\n#include "kernels.cuh"\n#include "runner.cuh"\n'
                                            "void run_naive(int M, float *A) { naive<32><<<1, 1>>>(A); }\n")
    built = compiler.compile_source(source, ("naive<32>",), "sm_90")
    assert list(built.mangled) == ["naive<32>"]


def test_the_projects_catalog_is_its_draft_with_only_the_todos_filled():
    from gemmcheck.draft import draft_source

    project = PUBLISHED / "project"
    drafted = draft_source(project / "launcher.cu", None).split("\n")
    committed = (project / "catalog.toml").read_text().split("\n")
    # what the TODOs asked: a description each (filled in), the shapes claim and beta = 0 (kept as drafted)
    kept = [line for line in drafted if not line.startswith(("# TODO", "# reads_c_at_beta_zero"))]
    assert [l for l in kept if not l.startswith("description = ")] == \
        [l for l in committed if not l.startswith("description = ")]
    assert sum(l.startswith("description = ") and l != 'description = ""' for l in committed) == 2


def test_a_tensor_core_kernel_not_declared_gpu_only_is_still_compiled_for_sm90_on_the_cpu_simulator(tmp_path):
    # The simulator finds the WMMA fragment itself and skips the kernel's simulated tests, saying
    # so; compiling for sm_90 needs neither it nor a GPU, so the compile claims still run.
    import subprocess
    import sys

    from child_env import child_env

    (tmp_path / "wmma.cu").write_text(
        "#include <mma.h>\nusing namespace nvcuda;\n"
        "__global__ void wmma_naive(const half *A, const half *B, half *C, int M, int N, int K) {\n"
        "  wmma::fragment<wmma::accumulator, 16, 16, 16, half> c;\n  wmma::fill_fragment(c, 0.0f);\n"
        "  wmma::store_matrix_sync(C + blockIdx.y * 16 * N + blockIdx.x * 16, c, N, wmma::mem_row_major);\n}\n")
    (tmp_path / "catalog.toml").write_text(
        '[[kernel]]\nname = "wmma_naive"\nsource = "wmma.cu"\nentry = "wmma_naive"\nsignature = "mnk"\n'
        'grid = ["N // 16", "M // 16"]\nblock = [32]\ndtypes = ["float16"]\naccumulator = "float16"\n'
        'shapes = "M % 16 == 0 and N % 16 == 0"\nexpect = "correct"\n')
    run = subprocess.run([sys.executable, "-m", "pytest", "suites/compile", "-q", "-rs", "-p", "no:cacheprovider",
                          "--gemm-backend=cpu-sim", "--gemm-compiler=nvrtc", f"--gemm-catalog={tmp_path / 'catalog.toml'}",
                          f"--alluredir={tmp_path / 'allure'}"],
                         cwd=ROOT, capture_output=True, text=True, env=child_env(GEMMCHECK_CACHE_DIR=str(tmp_path / "cache")))
    assert "2 passed" in run.stdout and "cpu-sim does not model tensor cores" in run.stdout, run.stdout[-3000:]
