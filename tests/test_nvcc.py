"""nvcc as the device compiler: a source built as its author's build compiles it, each name
expression found among the kernels it built, ptxas's report read as NVRTC's, errors in the
same form as NVRTC's, builds cached and rebuilt when a file they read changes, the
catalog's pin and the run's choice, device code linked from other sources."""

import subprocess
from pathlib import Path

import pytest

from gemmcheck.compile import choice, compiler, device_includes, nvcc_build, nvcc_tool, resources, symbols
from gemmcheck.contract import catalog
from test_published_sources import CATALOG_ENTRY, write

ROOT = Path(__file__).resolve().parent.parent
PROJECT = ROOT / "examples" / "published" / "project"

needs_nvcc = pytest.mark.skipif(nvcc_tool.find() is None, reason="needs nvcc (nvidia-cuda-nvcc or a CUDA toolkit); not found")


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMMCHECK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(compiler, "_DECISIONS", device_includes.Decisions(lambda: tmp_path / "cache" / "includes"))
    monkeypatch.setattr(nvcc_build, "_MISSING", {})
    resources._compile_report.cache_clear()


# -- which symbol is which name expression (no nvcc needed) ----------------------------------

def test_a_marker_names_the_exact_symbol_of_its_name_expression():
    names = ("k<float, 16>", "plain", "g<float, 64>", "q")
    built = ["_Z25gemmcheck_name_expressionILi0EXadL_Z1kIfLi16EEvPT_EEEvv", "_Z1kIfLi16EEvPT_", "_Z1kIfLi8EEvPT_",
             "_Z25gemmcheck_name_expressionILi1EXadL_Z5plainPfEEEvv", "plain",   # extern "C": its plain name
             # g<float, 64> is g<float, 64, 0> (a defaulted argument), g<float, 64, 1> is built too
             "_Z25gemmcheck_name_expressionILi2EXadL_Z1gIfLi64ELi0EEvPT_EEEvv", "_Z1gIfLi64ELi0EEvPT_",
             "_Z1gIfLi64ELi1EEvPT_",
             # substitutions are numbered within the whole name: S1_ in the marker is S0_ in the kernel's
             "_Z25gemmcheck_name_expressionILi3EXadL_Z1qPKfS1_PfiEEEvv", "_Z1qPKfS0_Pfi"]
    assert symbols.from_markers(names, built) == {
        "k<float, 16>": "_Z1kIfLi16EEvPT_", "plain": "plain", "g<float, 64>": "_Z1gIfLi64ELi0EEvPT_",
        "q": "_Z1qPKfS0_Pfi"}
    assert symbols.readable(built)[:3] == ["k<float, 16>", "k<float, 8>", "plain"]


def test_a_marker_of_a_namespaced_kernel_that_is_not_a_template_names_it_by_its_qualified_name():
    """The demangler writes such a marker's argument as the name alone (&mylib::kernels::h), no
    declaration in parentheses (as nvcc 13 built tests/data/scalar_pointers)."""
    built = ["_ZN5mylib7kernels18hgemm_half_scalarsEPK6__halfS3_S3_S3_PS1_iii",
             "_Z25gemmcheck_name_expressionILi0EXadL_ZN5mylib7kernels18hgemm_half_scalarsEPK6__halfS4_S4_S4_PS2_iiiEEEvv"]
    assert symbols.from_markers(("mylib::kernels::hgemm_half_scalars",), built) == {
        "mylib::kernels::hgemm_half_scalars": built[0]}


# -- building ---------------------------------------------------------------------------------

SOURCE = """#include <cstdio>
#include <vector>
void cudaCheck(cudaError_t error, const char *file, int line);
template <typename T, int TILE, int SPLIT = 0> __global__ void k(T *a) { a[threadIdx.x] = TILE + SPLIT; }
namespace ns { template <unsigned BM> __global__ void u(float *a) { a[0] = BM; } }
extern "C" __global__ void plain(float *a) { a[0] = 1; }
__global__ void naive(float *a, int n) { if (threadIdx.x < n) a[threadIdx.x] = 2; }
void run(float *a) { std::vector<int> v{1}; k<float, 8><<<1, 1>>>(a); printf("%d", v[0]); }
"""
NAMES = ("k<float, 16>", "k<__half, 32>", "k<__half, 32, 1>", "ns::u<128>", "plain", "naive")


@needs_nvcc
def test_nvcc_builds_the_source_as_written_and_finds_every_name_expression(tmp_path):
    source = write(tmp_path, "mine.cu", "#include <cuda_fp16.h>\n" + SOURCE)
    built = compiler.compile_source(source, NAMES, "sm_90", compiler="nvcc")
    assert set(built.mangled) == set(NAMES) and built.cubin.startswith(b"\x7fELF")
    assert built.mangled["plain"] == "plain" and built.mangled["k<float, 16>"] == "_Z1kIfLi16ELi0EEvPT_"
    assert built.mangled["k<__half, 32, 1>"] == "_Z1kI6__halfLi32ELi1EEvPT_"
    # ptxas's report, read by the same code as NVRTC's: every name expression, with registers
    report = resources.compile_report(source, NAMES, "sm_90", compiler_name="nvcc")
    assert set(report) == set(NAMES) and all(r.registers > 0 and r.arch == "sm_90" for r in report.values())
    # the log reports the source's kernels (the one its host code launches too), not gemmcheck's markers
    assert symbols.MARKER not in built.log and "_Z1kIfLi8ELi0EEvPT_" in built.log


@needs_nvcc
def test_nvcc_and_nvrtc_build_the_same_kernels_under_the_same_symbols():
    source = ROOT / "kernels" / "reference_tiled.cu"
    names = ("matmul_tiled_guarded<float, 16>", "matmul_tiled<__half, 32>", "matmul_naive<double>")
    by_nvcc = compiler.compile_source(source, names, "sm_90", compiler="nvcc")
    by_nvrtc = compiler.compile_source(source, names, "sm_90", compiler="nvrtc")
    assert by_nvcc.mangled == by_nvrtc.mangled
    nvcc_report = resources.parse_ptxas(by_nvcc.log, {m: n for n, m in by_nvcc.mangled.items()})
    nvrtc_report = resources.parse_ptxas(by_nvrtc.log, {m: n for n, m in by_nvrtc.mangled.items()})
    assert {n: nvcc_report[n].shared_bytes for n in names} == {n: nvrtc_report[n].shared_bytes for n in names}


@needs_nvcc
def test_a_name_expression_nvcc_did_not_build_is_named_with_what_it_built(tmp_path):
    source = write(tmp_path, "mine.cu", SOURCE)
    with pytest.raises(compiler.CompileError) as info:
        compiler.compile_source(source, ("naive", "missing_kernel"), "sm_90", compiler="nvcc")
    text = str(info.value)
    assert f"{source}: name expression missing_kernel: error: identifier \"missing_kernel\" is undefined" in text
    assert "gemmcheck_unit" not in text


@needs_nvcc
def test_the_project_builds_with_host_prototypes_nested_headers_and_an_explicit_instantiation():
    (naive, tiled) = catalog.load(PROJECT / "catalog.toml")
    for spec in (naive, tiled):
        (inst,) = spec.instances()
        built = compiler.compile_source(spec.source, (inst.name_expression,), "sm_90", compiler="nvcc")
        assert list(built.mangled) == [inst.name_expression]


# -- errors: one form, whichever compiler ran ----------------------------------------------------

def _first_error(source, names, device_compiler):
    with pytest.raises(compiler.CompileError) as info:
        compiler.compile_source(source, names, "sm_90", compiler=device_compiler)
    return next(line for line in str(info.value).splitlines() if ": error: " in line)


@needs_nvcc
@pytest.mark.parametrize("text, names", [
    ("#include <cstdio>\n\n__global__ void k(float *a)\n{\n    a[0] = nope;\n}\nint main() { printf(\"x\"); }\n", ("k",)),
    ("template <int X> __global__ void k(float *a) { a[0] = X; }\n", ("kk<1>",)),   # a bad name expression
])
def test_an_error_reads_the_same_from_nvcc_and_nvrtc(tmp_path, text, names):
    source = write(tmp_path, "mine.cu", text)
    by_nvcc, by_nvrtc = _first_error(source, names, "nvcc"), _first_error(source, names, "nvrtc")
    assert by_nvcc == by_nvrtc and by_nvcc.startswith(str(source)), (by_nvcc, by_nvrtc)


@needs_nvcc
def test_an_error_in_a_nested_header_names_that_header_and_line(tmp_path):
    write(tmp_path, "kernels/inner.cuh", "#pragma once\n\n__device__ float twice(float x) { return nope; }\n")
    write(tmp_path, "kernels.cuh", '#pragma once\n#include "kernels/inner.cuh"\n')
    source = write(tmp_path, "launcher.cu", '#include "kernels.cuh"\n__global__ void k(float *a) { a[0] = twice(1); }\n')
    line = _first_error(source, ("k",), "nvcc")
    assert line == f'{tmp_path / "kernels" / "inner.cuh"}(3): error: identifier "nope" is undefined'
    assert _first_error(source, ("k",), "nvrtc") == line


@needs_nvcc
def test_a_header_nvcc_cannot_open_is_given_empty_and_named_when_the_kernel_needs_it(tmp_path):
    ok = write(tmp_path, "ok.cu", "#include <not_installed_here.h>\n__global__ void k(float *a) { a[0] = 1; }\n")
    assert compiler.compile_source(ok, ("k",), "sm_90", compiler="nvcc").cubin
    needs = write(tmp_path, "needs.cu", '#include "not_there.cuh"\n__global__ void k(float *a) { a[0] = helper(); }\n')
    with pytest.raises(compiler.CompileError) as info:
        compiler.compile_source(needs, ("k",), "sm_90", compiler="nvcc")
    text = str(info.value)
    assert f'{needs}(2): error: identifier "helper" is undefined' in text
    assert "given to nvcc as empty headers" in text
    assert f'line 1: "not_there.cuh": {needs}(1): catastrophic error: cannot open source file "not_there.cuh"' in text


@needs_nvcc
def test_host_code_that_needs_a_missing_library_header_does_not_stop_the_kernels(tmp_path):
    # cuBLAS is not installed here: the launcher's host code cannot compile, its kernels can
    source = write(tmp_path, "runner.cu", "#include <not_installed_blas.h>\n"
                                          "__global__ void k(float *a) { a[0] = 1; }\n"
                                          "void run(blasHandle_t h) { blasSgemm(h); }\n")
    assert list(compiler.compile_source(source, ("k",), "sm_90", compiler="nvcc").mangled) == ["k"]


@needs_nvcc
def test_a_header_of_host_prototypes_that_names_a_missing_librarys_types_does_not_stop_the_kernels(tmp_path):
    write(tmp_path, "runner.cuh", "#pragma once\n#include <not_installed_blas.h>\n"
                                  "void run_blas(blasHandle_t handle, int M, float *A);\n")
    write(tmp_path, "kernels/k.cuh", "#pragma once\n#include <not_installed_blas.h>\n"
                                     "template <int BM> __global__ void k(float *a) { a[0] = BM; }\n")
    source = write(tmp_path, "runner.cu", '#include "kernels/k.cuh"\n#include "runner.cuh"\n'
                                          "void run_blas(blasHandle_t handle, int M, float *A) { blasSgemm(handle); }\n"
                                          "void run(float *a) { k<32><<<1, 1>>>(a); }\n")
    assert list(compiler.compile_source(source, ("k<32>",), "sm_90", compiler="nvcc").mangled) == ["k<32>"]


# -- caching ----------------------------------------------------------------------------------

@needs_nvcc
def test_a_build_is_cached_and_rebuilt_when_a_header_it_read_changes(tmp_path, monkeypatch):
    header = write(tmp_path, "deep/inner.cuh", "#pragma once\n#define VALUE 1\n")
    write(tmp_path, "outer.cuh", '#pragma once\n#include "deep/inner.cuh"\n')
    source = write(tmp_path, "k.cu", '#include "outer.cuh"\n__global__ void k(float *a) { a[0] = VALUE; }\n')
    runs = []
    real = subprocess.run
    monkeypatch.setattr(nvcc_build.subprocess, "run", lambda *a, **kw: runs.append(a[0]) or real(*a, **kw))
    first = compiler.compile_source(source, ("k",), "sm_90", compiler="nvcc")
    assert len(runs) == 1
    assert compiler.compile_source(source, ("k",), "sm_90", compiler="nvcc") == first and len(runs) == 1
    header.write_text("#pragma once\n#define VALUE 2\n")   # two headers deep
    rebuilt = compiler.compile_source(source, ("k",), "sm_90", compiler="nvcc")
    assert len(runs) == 2 and rebuilt.cubin != first.cubin
    (meta,) = (tmp_path / "cache" / "cubin").rglob("meta.json")
    meta.write_text("{not json")
    assert compiler.compile_source(source, ("k",), "sm_90", compiler="nvcc").cubin == rebuilt.cubin
    assert len(runs) == 3


def test_a_build_of_a_units_instantiations_serves_a_process_that_asks_for_some_of_them(tmp_path, monkeypatch):
    # An isolated child or a kill-matrix row asks for one instantiation of a source the session
    # built whole: nvcc does not run again (under compute-sanitizer it would run instrumented).
    source = write(tmp_path, "k.cu", "template <int V> __global__ void k(float *a) { a[0] = V; }\n")
    runs = []
    real = subprocess.run
    monkeypatch.setattr(nvcc_build.subprocess, "run", lambda *a, **kw: runs.append(a[0]) or real(*a, **kw))
    whole = compiler.compile_source(source, ("k<1>", "k<2>"), "sm_90", compiler="nvcc")
    one = compiler.compile_source(source, ("k<2>",), "sm_90", compiler="nvcc")
    assert len(runs) == 1 and one.mangled["k<2>"] == whole.mangled["k<2>"]
    compiler.compile_source(source, ("k<3>",), "sm_90", compiler="nvcc")   # not in any build: built
    assert len(runs) == 2


# -- choosing the compiler -------------------------------------------------------------------

ENTRY = CATALOG_ENTRY.replace('"src/k.cu"', '"k.cu"')
KERNEL = ("__device__ float twice(float x);\n"
          "__global__ void k(const float *A, const float *B, float *C, int M, int N, int K) { C[0] = twice(A[0]); }\n")


def test_an_entry_that_pins_a_compiler_is_built_with_it_whatever_the_run_chooses(tmp_path, monkeypatch):
    write(tmp_path, "k.cu", KERNEL)
    (pinned,) = catalog.load(write(tmp_path, "pinned.toml", ENTRY + 'compiler = "nvrtc"\n'))
    (free,) = catalog.load(write(tmp_path, "free.toml", ENTRY.replace('"k"\nsource', '"k2"\nsource')))
    for run_choice in ("nvcc", "nvrtc"):
        assert choice.of(pinned.instances()[0], run_choice) == "nvrtc"
        assert choice.of(free.instances()[0], run_choice) == run_choice
    monkeypatch.setattr(nvcc_tool, "find", lambda: None)
    assert choice.resolve(run_choice="auto") == "nvrtc" and choice.installed() == ("nvrtc",)


@pytest.mark.parametrize("extra, message", [
    ('compiler = "clang"\n', "compiler = 'clang'; use \"nvcc\" or \"nvrtc\""),
    ('sources = ["nowhere.cu"]\n', "sources: 'nowhere.cu' not found"),
    ('sources = ["helpers.cu"]\ncompiler = "nvrtc"\n', "'sources' links device code from other files, which NVRTC"),
])
def test_a_bad_compiler_or_sources_field_is_named(tmp_path, extra, message):
    write(tmp_path, "k.cu", KERNEL)
    write(tmp_path, "helpers.cu", "__device__ float twice(float x) { return 2 * x; }\n")
    with pytest.raises(catalog.CatalogError, match=f"kernel 'k': {message}"):
        catalog.load(write(tmp_path, "c.toml", ENTRY + extra))


@pytest.fixture
def fresh_lookup():
    nvcc_tool.find.cache_clear()
    nvcc_tool._probe.cache_clear()
    yield
    nvcc_tool.find.cache_clear()
    nvcc_tool._probe.cache_clear()


def test_nvcc_is_looked_for_where_it_is_named_and_missing_it_says_so(tmp_path, monkeypatch, fresh_lookup):
    monkeypatch.setenv(nvcc_tool.ENVIRONMENT, str(tmp_path / "no-nvcc"))
    assert nvcc_tool.find() is None
    assert "no-nvcc does not run" in nvcc_tool.why_missing() and "pip install nvidia-cuda-nvcc" in nvcc_tool.why_missing()
    with pytest.raises(compiler.CompileError, match="nvcc: .*no-nvcc"):
        compiler.compile_source(write(tmp_path, "k.cu", KERNEL), ("k",), "sm_90", compiler="nvcc")


@needs_nvcc
def test_nvcc_without_a_host_compiler_is_not_used(monkeypatch, fresh_lookup):
    path = nvcc_tool.find().path
    nvcc_tool._probe.cache_clear()
    monkeypatch.setenv("NVCC_CCBIN", "no-such-host-compiler")
    assert "'no-such-host-compiler' is not on PATH" in nvcc_tool._probe(path)


# -- device code in other sources --------------------------------------------------------------

@needs_nvcc
def test_a_kernel_whose_device_functions_live_in_another_file_is_linked_into_one_cubin(tmp_path):
    write(tmp_path, "k.cu", KERNEL)
    write(tmp_path, "helpers.cu", "__device__ float twice(float x) { return 2 * x; }\n")
    (spec,) = catalog.load(write(tmp_path, "c.toml", ENTRY + 'sources = ["helpers.cu"]\n'))
    (inst,) = spec.instances()
    assert choice.of(inst, "nvrtc") == "nvcc" and spec.gpu_only   # the CPU simulator builds one file
    built = compiler.compile_source(spec.source, ("k",), "sm_90", linked=compiler.linked_sources(inst))
    assert list(built.mangled) == ["k"]
    assert b"_Z5twicef" in built.cubin   # the helper's code is in the linked cubin
    report = resources.compile_report(spec.source, ("k",), linked=compiler.linked_sources(inst))
    assert report["k"].registers > 0
    with pytest.raises(compiler.CompileError, match="NVRTC cannot link them"):
        compiler.compile_source(spec.source, ("k",), "sm_90", compiler="nvrtc", linked=spec.sources)


@pytest.mark.gpu
@needs_nvcc
def test_a_linked_cubin_loads_into_cupy_and_computes_the_product():
    import cupy
    import numpy as np

    (spec,) = catalog.load(ROOT / "examples" / "multifile" / "catalog.toml")
    inst = next(i for i in spec.instances() if i.tile == 16)
    arch = f"sm_{cupy.cuda.Device().compute_capability}"
    built = compiler.compile_source(spec.source, (inst.name_expression,), arch, compiler="nvcc", linked=spec.sources)
    module = cupy.cuda.function.Module()
    module.load(built.cubin)
    kernel = module.get_function(built.mangled[inst.name_expression])
    M, N, K = 37, 29, 45   # ragged: the guards of tile_math.cu's load_or_zero
    rng = np.random.default_rng(1)
    A, B = (cupy.asarray(rng.integers(-4, 5, shape).astype(np.float32)) for shape in ((M, K), (K, N)))
    C = cupy.full((M, N), np.nan, dtype=np.float32)   # beta = 0: never read
    kernel(((N + 15) // 16, (M + 15) // 16, 1), (16, 16, 1),
           (np.int32(M), np.int32(N), np.int32(K), np.float32(1), A, B, np.float32(0), C))
    np.testing.assert_array_equal(cupy.asnumpy(C), cupy.asnumpy(A) @ cupy.asnumpy(B))


@pytest.mark.gpu
@needs_nvcc
def test_the_gpu_against_the_simulator_skips_linked_device_code_the_simulator_does_not_run(tmp_path):
    """The simulator does not run a kernel linked from other sources: comparing the GPU's bits
    with its bits skips, naming why, instead of reading the simulator's refusal as a crash."""
    import sys

    (spec,) = catalog.load(ROOT / "examples" / "multifile" / "catalog.toml")
    run = subprocess.run([sys.executable, "-m", "pytest", "suites/correctness/test_backends_agree.py",
                          f"--gemm-catalog={ROOT / 'examples' / 'multifile' / 'catalog.toml'}", "-q", "-rs",
                          "-p", "no:cacheprovider", "-p", "no:xdist", "--gemm-compiler", "nvcc",
                          f"--gemm-verdicts={tmp_path / 'verdicts.json'}", f"--alluredir={tmp_path / 'allure'}"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    skips = [line for line in run.stdout.splitlines() if line.startswith("SKIPPED")]
    assert run.returncode == 5 and "failed" not in run.stdout.splitlines()[-1], run.stdout[-2000:]
    assert skips and {line.split(": ", 1)[1] for line in skips} == {spec.simulator_skip_reason()}
