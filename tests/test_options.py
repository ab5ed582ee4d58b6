"""The --gemm-* options parse, narrow the matrix and reject bad values with the cause."""

from pathlib import Path

import pytest

from gemmcheck.contract import catalog

PROBE = """
def test_probe(any_kernel):
    pass
"""


@pytest.fixture
def probe(pytester):
    # The project's conftest loads the plugin when it is not installed (PYTHONPATH=.).
    pytester.makeconftest((Path(__file__).parent.parent / "conftest.py").read_text())
    pytester.makepyfile(test_probe=PROBE)
    return pytester


def collected(result):
    return sorted(line.split("[", 1)[1].rstrip("]") for line in result.outlines
                  if "test_probe[" in line)


def test_filters_narrow_kernels_tiles_and_dtypes(probe):
    result = probe.runpytest("--co", "-q", "--gemm-kernels", "matmul_tiled_guarded,matmul_naive",
                             "--gemm-tiles", "16,32", "--gemm-dtypes", "float16")
    assert collected(result) == [
        "matmul_naive-float16-TILE16", "matmul_naive-float16-TILE32",
        "matmul_tiled_guarded-float16-TILE16", "matmul_tiled_guarded-float16-TILE32"]


@pytest.mark.parametrize("args, message", [
    (["--gemm-tiles", "16,x"], "'16,x' is not a list of integers"),
    (["--gemm-tiles", "0"], "every TILE must be >= 1"),
    (["--gemm-dtypes", "float8"], "unknown dtype 'float8'"),
    (["--gemm-profile", "weekly"], "unknown profile 'weekly'"),
    (["--gemm-backend", "opencl"], "unknown backend 'opencl'"),
    (["--gemm-kernels", "nope"], "no kernel named 'nope'"),
    (["--gemm-tiles", "64"], "no kernel declares these"),
    (["--gemm-catalog", "missing.toml"], "catalog file not found"),
    (["--gemm-shard", "5/4"], "'5/4': need 1 <= i <= n"),
    (["--gemm-shard", "two"], "'two' is not i/n"),
    (["--gemm-gpus", "a,b"], "'a,b' is neither a GPU count nor a list of ordinals"),
    (["--gemm-shard", "1/2", "--gemm-shard-durations=nope.json"], "nope.json: cannot read recorded durations"),
])
def test_bad_values_are_quoted_in_the_error(probe, args, message):
    result = probe.runpytest("--co", *args)
    assert result.ret != 0
    assert message in result.stderr.str() + result.stdout.str()


def test_a_user_catalog_replaces_ours_and_builtin_adds_it_back(probe, tmp_path):
    (tmp_path / "k.cu").write_text("template <typename T, int TILE> __global__ void mine() {}\n")
    cat = tmp_path / "mine.toml"
    cat.write_text('[[kernel]]\nname = "mine"\nsource = "k.cu"\nentry = "mine"\nsignature = "mnk"\n'
                   'policy = "tile2d"\ntiles = [8]\ndtypes = ["float32"]\nexpect = "correct"\n')
    # --gemm-catalog=PATH: a bare "--gemm-catalog PATH" is read as a test path by pytest's
    # first pass when the plugin is not installed (PYTHONPATH=. runs), missing the conftest.
    assert collected(probe.runpytest("--co", "-q", f"--gemm-catalog={cat}")) == ["mine-float32-TILE8"]
    both = collected(probe.runpytest("--co", "-q", "--gemm-catalog=builtin", f"--gemm-catalog={cat}"))
    assert "mine-float32-TILE8" in both and "matmul_tiled-float32-TILE32" in both


def test_header_names_profile_backend_and_device(probe):
    result = probe.runpytest("--co", "--gemm-profile", "ci")
    result.stdout.fnmatch_lines(["gemmcheck: profile ci;*", "gemmcheck: backend auto; device: *"])


def test_every_builtin_instantiation_is_collected_once(probe):
    ids = collected(probe.runpytest("--co", "-q"))
    expected = sorted(i.id for s in catalog.load(catalog.BUILTIN) for i in s.instances())
    assert ids == expected
