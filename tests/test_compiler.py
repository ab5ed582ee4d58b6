"""gemmcheck.compile.compiler: one NVRTC build, cached on disk, IEEE subnormals kept."""

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from gemmcheck.compile import compiler, toolkit

SOURCE = Path(__file__).resolve().parent.parent / "kernels" / "reference_tiled.cu"
NAMES = ("matmul_tiled_guarded<float, 16>",)


@pytest.fixture(autouse=True)
def nvrtc(monkeypatch):
    """These are claims about the NVRTC build; nvcc's are in tests/test_nvcc.py."""
    monkeypatch.setenv("GEMMCHECK_COMPILER", "nvrtc")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMMCHECK_CACHE_DIR", str(tmp_path))
    return tmp_path / "cubin"


def test_a_build_is_cached_and_a_broken_cache_entry_is_rebuilt(cache):
    first = compiler.compile_source(SOURCE, NAMES, "sm_90")
    assert first.cubin and "matmul_tiled_guarded<float, 16>" in first.mangled
    (meta,) = cache.rglob("meta.json")
    assert compiler.compile_source(SOURCE, NAMES, "sm_90") == first  # the log too: from disk
    meta.write_text("{not json")
    rebuilt = compiler.compile_source(SOURCE, NAMES, "sm_90")
    assert (rebuilt.cubin, rebuilt.mangled) == (first.cubin, first.mangled)
    assert json.loads(meta.read_text())["mangled"] == first.mangled   # rebuilt in place


def counting_builds(monkeypatch, pause_s: float = 0.0) -> list:
    """The NVRTC builds made from here on (each its name expressions), each taking `pause_s` longer."""
    builds, real = [], compiler._compile_device_part

    def counted(source, files, names, *rest):
        builds.append(tuple(names))
        time.sleep(pause_s)
        return real(source, files, names, *rest)
    monkeypatch.setattr(compiler, "_compile_device_part", counted)
    return builds


def test_processes_asking_for_one_unit_at_once_build_it_once(cache, monkeypatch):
    # pytest-xdist's workers each ask for every unit of the compile suite at its start: one
    # builds, the others wait for it (the build lock) and read its build
    builds = counting_builds(monkeypatch, pause_s=0.5)
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda _: compiler.compile_source(SOURCE, NAMES, "sm_90"), range(4)))
    assert builds == [NAMES]
    assert all(g.cubin == got[0].cubin for g in got)


def test_a_build_of_a_units_instantiations_serves_a_process_that_asks_for_some_of_them(cache, monkeypatch):
    builds = counting_builds(monkeypatch)
    whole = compiler.compile_source(SOURCE, ("matmul_tiled_guarded<float, 16>", "matmul_tiled_guarded<double, 16>"), "sm_90")
    one = compiler.compile_source(SOURCE, ("matmul_tiled_guarded<double, 16>",), "sm_90")
    assert len(builds) == 1 and one.mangled == whole.mangled
    compiler.compile_source(SOURCE, ("matmul_tiled_guarded<float, 32>",), "sm_90")   # in no build: built
    assert len(builds) == 2


def test_every_build_carries_ptxas_report_also_when_nvrtc_built_the_program_before(tmp_path, monkeypatch):
    """NVRTC >= 12.9 serves a program it built before from its own cache, without ptxas -v's
    report; on the H200 a pytest-xdist worker's resource check then read nothing for a
    kernel the other worker had just built. Two cold gemmcheck caches, one program."""
    major, minor = (int(p) for p in compiler.nvrtc_version().split("."))
    if (major, minor) >= (12, 9):
        assert compiler._no_nvrtc_cache() == {"no_cache": True}
    from gemmcheck.compile import resources

    for run in ("first", "second"):
        monkeypatch.setenv("GEMMCHECK_CACHE_DIR", str(tmp_path / run))
        built = compiler.compile_source(SOURCE, NAMES, "sm_90")
        # what the resource check reads from the log, not ptxas's wording
        found = resources.parse_ptxas(built.log, {m: n for n, m in built.mangled.items()})
        assert list(found) == list(NAMES) and found[NAMES[0]].registers > 0, (run, built.log)


def test_a_compile_error_names_the_source_and_instantiation(cache, tmp_path):
    bad = tmp_path / "bad.cu"
    bad.write_text("template <typename T, int TILE> __global__ void k() { undefined_thing; }\n")
    with pytest.raises(compiler.CompileError, match=r"bad.cu: NVRTC could not compile k<float, 8> for sm_90"):
        compiler.compile_source(bad, ("k<float, 8>",), "sm_90")


def test_float32_arithmetic_is_built_without_flush_to_zero():
    # CuPy's own compile adds -ftz=true (fma.rn.ftz.f32); ours must not. The same
    # options, to PTX through the raw NVRTC API (cuda.core's PTX path wants a driver).
    from cuda.bindings import nvrtc
    from cuda.core import ProgramOptions

    options = ProgramOptions(arch="sm_90", include_path=[toolkit.include_dir()], **compiler.BASE_OPTIONS)
    flags = [b"-arch=compute_90" if o.startswith(b"-arch") else o
             for o in options.as_bytes("nvrtc") if not o.startswith(b"--ptxas")]
    err, program = nvrtc.nvrtcCreateProgram(SOURCE.read_bytes(), b"reference_tiled.cu", 0, [], [])
    nvrtc.nvrtcAddNameExpression(program, NAMES[0].encode())
    (err,) = nvrtc.nvrtcCompileProgram(program, len(flags), flags)
    assert err == nvrtc.nvrtcResult.NVRTC_SUCCESS
    err, size = nvrtc.nvrtcGetPTXSize(program)
    ptx = b" " * size
    nvrtc.nvrtcGetPTX(program, ptx)
    text = ptx.decode()
    assert b"--ftz=false" in flags
    assert "fma.rn.f32" in text and ".ftz." not in text


EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_the_seeds_published_file_with_host_code_compiles_for_the_device(cache):
    # <stdio.h>, <cuda_runtime.h> and a host main with cudaMalloc: NVRTC gets the device part only.
    built = compiler.compile_source(EXAMPLES / "tiled_matmuls.cu", ("matmul_tiled",), "sm_90")
    assert list(built.mangled) == ["matmul_tiled"] and built.cubin


def test_errors_point_at_the_users_file_and_line_and_stop_early(cache, tmp_path):
    bad = tmp_path / "mine.cu"
    bad.write_text("#include <stdio.h>\n\n__global__ void k(float *a)\n{\n    a[0] = nope;\n}\n"
                   "int main() { printf(\"%d\", 1); return 0; }\n")
    with pytest.raises(compiler.CompileError) as info:
        compiler.compile_source(bad, ("k",), "sm_90")
    text = str(info.value)
    # the user's path and line (ours); NVRTC's wording after "error:" is its own
    assert any(line.startswith(f"{bad}(5): error: ") and "nope" in line for line in text.splitlines()), text
    assert "default_program" not in text and len(text.splitlines()) <= compiler.MAX_ERROR_LINES + 2


def test_macros_are_passed_as_defines(cache, tmp_path):
    source = tmp_path / "m.cu"
    source.write_text("__global__ void k(float *a) { __shared__ float s[BM]; s[threadIdx.x] = 1; a[0] = s[0]; }\n")
    from gemmcheck.compile import resources
    assert compiler.compile_source(source, ("k",), "sm_90", defines=(("BM", 64),)).cubin
    with pytest.raises(compiler.CompileError, match=r"m\.cu\(1\): error: .*\bBM\b"):
        compiler.compile_source(source, ("k",), "sm_90")
    report = resources.compile_report(source, ("k",), defines=(("BM", 64),))
    assert report["k"].shared_bytes == 256


def test_the_resources_table_aligns_numbers_right_in_the_order_given():
    from gemmcheck.compile.resources import Resources, table

    rows = [Resources("matmul_tiled<float, 32>", "sm_90", 40, 8192, 0, 0, 0, 1),
            Resources("matmul_tiled<float, 8>", "sm_90", 128, 512, 16, 4, 4, 1)]
    assert table(rows) == [
        "instantiation            arch   regs  smem B  stack B  spill B  barriers",
        "matmul_tiled<float, 32>  sm_90    40    8192        0        0         1",
        "matmul_tiled<float, 8>   sm_90   128     512       16        8         1"]


def test_threads_that_build_at_once_each_find_nvrtc_whole():
    """cuda.core fills its package from its versioned module while it is imported, so a thread
    importing it at once with another could find it half filled (``cannot import name
    'ProgramOptions' from 'cuda.core.cu13'``, about one process in six with four threads): the
    compiler imports it one thread at a time. Each process is fresh: only a first import races."""
    import subprocess
    import sys

    from child_env import ROOT, child_env

    code = ("from concurrent.futures import ThreadPoolExecutor\n"
            "from gemmcheck.compile import compiler\n"
            "with ThreadPoolExecutor(4) as pool:\n"
            "    list(pool.map(lambda _: compiler._cuda_core().ProgramOptions, range(4)))\n")
    runs = [subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=child_env(), stderr=subprocess.PIPE,
                             text=True) for _ in range(24)]
    failed = [err for err in (r.communicate()[1] for r in runs) if err.strip()]
    assert not failed, f"{len(failed)} of 24 processes: {failed[0][-300:]}"
