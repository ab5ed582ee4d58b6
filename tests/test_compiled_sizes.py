"""A kernel whose sizes are compiled in (a course's ``#define N 64``, ``template <int M, int N,
int K>`` instantiated once) takes no size argument: ``sizes = { M = ..., N = ..., K = ... }``
says the one shape it computes, and every check runs there; the broken twins of such a kernel
are caught with their defects (tests/data/compiled_sizes)."""

import json
from pathlib import Path

import pytest
from hypothesis import given, settings

from child_env import judge_catalog
from gemmcheck.contract import catalog
from gemmcheck.judge.hazards import exposing_problems
from gemmcheck.problems import profiles
from gemmcheck.problems.problem import claimed_shape
from gemmcheck.problems.strategies import supported_shapes
from gemmcheck.pytest_plugin.scope_plugin import why_out_of_scope

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "compiled_sizes"


def entry(tmp_path, **fields):
    (tmp_path / "k.cu").write_text("__global__ void fixed(const float *A, const float *B, float *C) {}\n")
    lines = [f"{k} = {v}" for k, v in {
        "name": '"fixed"', "source": '"k.cu"', "entry": '"fixed"', "args": '["A", "B", "C"]',
        "grid": '["N // 16", "M // 16"]', "block": "[16, 16]", "dtypes": '["float32"]', "expect": '"correct"',
        "sizes": "{ M = 64, N = 32, K = 48 }", **fields}.items() if v is not None]
    path = tmp_path / "catalog.toml"
    path.write_text("[[kernel]]\n" + "\n".join(lines) + "\n")
    return path


def test_sizes_claim_that_one_shape_and_every_shape_generator_gives_it(tmp_path):
    (spec,) = catalog.load(entry(tmp_path))
    (inst,) = spec.instances()
    assert spec.sizes == (64, 32, 48) and not spec.square_only
    assert inst.supports(64, 32, 48) and not inst.supports(64, 64, 64) and not inst.supports(32, 32, 32)
    # the tile-derived shapes, the searched shapes and the hazards' problems all land on it
    assert claimed_shape(inst, 1, 1, 1) == claimed_shape(inst, 300, 300, 300) == (64, 32, 48)
    assert profiles.PROFILES["dev"].search_max_dim(inst) >= 64
    assert [(p, (q.M, q.N, q.K)) for p, q in exposing_problems(inst)] == [("compiled sizes", (64, 32, 48))]
    assert "declares sizes = { M = 64, N = 32, K = 48 }" in why_out_of_scope(inst, 16, 16, 16)

    @settings(max_examples=5, database=None)
    @given(supported_shapes(instance=inst, max_dim=160))
    def searched(shape):
        assert shape == (64, 32, 48)
    searched()


@pytest.mark.parametrize("fields, message", [
    ({"args": '["A", "B", "C", "M", "N", "K"]'}, "'sizes' is for a kernel that takes no size argument (its sizes are "
     "compiled in), but args lists M, N, K"),
    ({"shapes": '"any"'}, "'sizes' fixes the one shape the kernel computes; drop 'shapes'"),
    ({"sizes": "{ M = 64, N = 64 }"}, "'sizes' must give M, N and K as positive integers"),
    ({"sizes": "{ M = 64, N = 0, K = 64 }"}, "'sizes' must give M, N and K as positive integers"),
    ({"sizes": "64"}, "'sizes' must give M, N and K as positive integers"),
])
def test_a_bad_sizes_declaration_is_named(tmp_path, fields, message):
    with pytest.raises(catalog.CatalogError, match="kernel 'fixed': " + message.replace("(", r"\(").replace(")", r"\)")):
        catalog.load(entry(tmp_path, **fields))


def test_without_sizes_a_kernel_that_takes_no_size_still_takes_square_tile_multiples(tmp_path):
    (spec,) = catalog.load(entry(tmp_path, sizes=None, tiles="[16]", policy='"tile2d"', grid=None, block=None,
                                 template_args='""'))
    assert spec.square_only and spec.shapes == "square-tile-multiple" and spec.instances()[0].supports(32, 32, 32)


def test_the_twins_are_caught_at_the_compiled_sizes_and_the_references_pass_there(tmp_path):
    """Green only when the two references are correct at their one shape and each twin is
    caught with its declared defect (the missing second barrier by the simulator's race
    detector, B read transposed by the values), every check at that shape."""
    out, instances = judge_catalog(DATA / "catalog.toml", tmp_path)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    rows = {r["kernel"]: r for r in instances}   # one instantiation each
    assert {k: (r["verdict"], r["status"]) for k, r in rows.items()} == {
        "fixed": ("correct", "as_expected"), "template_sizes": ("correct", "as_expected"),
        "fixed_missing_second_barrier": ("defective", "as_expected"),
        "fixed_b_read_transposed": ("defective", "as_expected")}
    # the race shows in the values too; the barrier's twin is named for the race
    assert "shared_memory_race" in rows["fixed_missing_second_barrier"]["defects"]
    assert list(rows["fixed_b_read_transposed"]["defects"]) == ["wrong_values"]
    assert rows["fixed"]["checks"] >= 5 and rows["template_sizes"]["checks"] >= 5
    assert "M64xN64xK64" in json.dumps(rows["fixed_b_read_transposed"]["causes"])


def test_compiled_sizes_too_large_for_the_simulator_skip_there_with_one_reason_and_the_kernel_is_not_checked(tmp_path):
    """A course's #define N 1024 computes 1024^3 and cannot shrink: the simulator does not take
    minutes a launch; its tests skip saying why, and no claim about it passes unchecked."""
    (tmp_path / "twins.cu").write_text((DATA / "twins.cu").read_text())
    (tmp_path / "catalog.toml").write_text(
        '[[kernel]]\nname = "big"\nsource = "twins.cu"\nentry = "matmul_template_sizes"\nargs = ["A", "B", "C"]\n'
        'template_args = "1024, 1024, 1024"\ngrid = ["ceil(N / 16)", "ceil(M / 16)"]\nblock = [16, 16]\n'
        'dtypes = ["float32"]\nsizes = { M = 1024, N = 1024, K = 1024 }\nexpect = "correct"\n')
    out, instances = judge_catalog(tmp_path / "catalog.toml", tmp_path, "suites/correctness/test_exact_results.py",
                                   "suites/correctness/test_error_bound.py")
    # exit 5: nothing was checked, and the run says so rather than pass
    assert out.returncode == 5 and "gemmcheck: no kernel was checked" in out.stdout, out.stdout[-2000:]
    assert ("big computes M x N x K = 1024 x 1024 x 1024 only (the sizes compiled into it), more than the CPU "
            "simulator runs") in out.stdout
    assert all(r["verdict"] != "correct" for r in instances)
