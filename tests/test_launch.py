"""The one launch path: geometry expressions, the safe evaluator, and plan()."""

from pathlib import Path

import numpy as np
import pytest

from gemmcheck.contract import catalog, launch
from gemmcheck.contract.launch import POLICIES, Expression, ExpressionError, Geometry, plan

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "catalog.toml"


@pytest.mark.parametrize("policy, M, N, K, tile, grid", [
    ("seed", 4, 4, 4, 2, (2, 2, 1)),          # the seed's N=4, TILE=2: 4 blocks
    ("seed", 1000, 1000, 1000, 32, (31, 31, 1)),  # floor: the last 8 rows/cols get no block
    ("tile2d", 1000, 1000, 1000, 32, (32, 32, 1)),
    ("tile2d", 33, 17, 65, 16, (2, 3, 1)),    # x runs over N (columns), y over M (rows)
    ("floor2d", 33, 17, 65, 16, (1, 2, 1)),
    ("naive", 33, 17, 65, 16, (2, 3, 1)),
])
def test_grid(policy, M, N, K, tile, grid):
    got_grid, block = POLICIES[policy].shape(M, N, K, tile)
    assert got_grid == grid
    assert block == (tile, tile, 1)


def test_threads_per_block_is_tile_squared():
    assert POLICIES["tile2d"].threads_per_block(32) == 1024


@pytest.mark.parametrize("text, env, value", [
    ("ceil(N / BN)", {"N": 129, "BN": 64}, 3),
    ("floor(N / BN)", {"N": 129, "BN": 64}, 2),
    ("N // BN", {"N": 129, "BN": 64}, 2),
    ("BM * BN / (TM * TN)", {"BM": 128, "BN": 128, "TM": 8, "TN": 8}, 256),   # exact: allowed
    ("min(M, 64) + max(K, 1) - 1", {"M": 100, "K": 0}, 64),
    ("(BM + BN) * BK * 4 % 7", {"BM": 2, "BN": 3, "BK": 1}, 6),
    ("-K + 10", {"K": 3}, 7),
])
def test_expressions_evaluate_exactly(text, env, value):
    assert Expression(text).integer(env) == value


def test_constraints_combine_with_and_or_not():
    claim = Expression("M % BM == 0 and not (K < BK or N % BN != 0)")
    assert claim.holds({"M": 128, "N": 64, "K": 8, "BM": 64, "BN": 64, "BK": 8})
    assert not claim.holds({"M": 127, "N": 64, "K": 8, "BM": 64, "BN": 64, "BK": 8})
    assert not claim.holds({"M": 128, "N": 64, "K": 4, "BM": 64, "BN": 64, "BK": 8})


@pytest.mark.parametrize("text, env, message", [
    ("N / BN", {"N": 129, "BN": 64}, "is 129/64 with BN=64, N=129, not a whole number; write ceil(a / b)"),
    ("N / (BM - BM)", {"N": 4, "BM": 2}, "divides by zero"),
    ("N % 0", {"N": 4}, "divides by zero"),
    ("ceil(N / BX)", {"N": 4}, "unknown name 'BX'; known: N"),
])
def test_evaluation_errors_say_what_and_how_to_fix(text, env, message):
    with pytest.raises(ExpressionError, match=None) as info:
        Expression(text).integer(env)
    assert message in str(info.value)


@pytest.mark.parametrize("text", [
    "__import__('os').system('true')", "N.bit_length()", "N ** 2", "N if M else K", "1.5 * N",
    "[N]", "lambda: N", "eval('1')", "ceil(N, M)", "N; M", "", "N <<< 2", "open('x')",
])
def test_anything_beyond_the_whitelist_is_rejected_at_parse(text):
    with pytest.raises(ExpressionError):
        Expression(text)


def test_geometry_pads_to_three_dimensions():
    geometry = Geometry.of(["ceil(N / BN)", "ceil(M / BM)"], ["BM * BN / (TM * TN)"], "BM * 4")
    env = {"M": 100, "N": 300, "K": 1, "BM": 64, "BN": 128, "TM": 8, "TN": 8}
    assert geometry.evaluate(env) == ((3, 2, 1), (128, 1, 1), 256)


@pytest.mark.parametrize("block, message", [
    ((0, 1, 1), "has 0 threads; every dimension must be >= 1"),
    ((64, 32, 1), "2048 threads per block (max 1024)"),
    ((1, 1, 128), "dimension z is 128 (max 64)"),
])
def test_blocks_cuda_refuses_are_named(block, message):
    assert message in launch.check_block(block)


def test_tight_leading_dimensions_follow_the_layouts():
    assert launch.tight_leading_dimensions({}, 3, 5, 7) == {"lda": 7, "ldb": 5, "ldc": 5, "ldd": 5}
    cols = {"A": "col", "B": "col", "C": "col", "D": "col"}
    assert launch.tight_leading_dimensions(cols, 3, 5, 7) == {"lda": 3, "ldb": 7, "ldc": 3, "ldd": 3}


@pytest.fixture(scope="module")
def examples():
    return {s.name: s for s in catalog.load(EXAMPLES)}


def _values(M, N, K, **extra):
    return {"A": "bufA", "B": "bufB", "C": "bufC", "M": M, "N": N, "K": K,
            "lda": K, "ldb": N, "ldc": N, "alpha": 2, "beta": -1, **extra}


def test_plan_orders_arguments_by_the_kernels_roles(examples):
    (inst, *_) = examples["sgemm"].instances()          # BM16_BN16_BK4_TM2_TN2
    planned = plan(inst, _values(33, 40, 7))
    assert planned.args == (33, 40, 7, 2.0, "bufA", "bufB", -1.0, "bufC")
    assert [type(a) for a in planned.args[:4]] == [np.int32, np.int32, np.int32, np.float32]
    assert planned.grid == (3, 3, 1) and planned.block == (64, 1, 1) and planned.shared_bytes == 0


def test_plan_passes_leading_dimensions_and_scalars_of_the_accumulator_type(examples):
    double = next(i for i in examples["gemm_colmajor"].instances() if i.dtype == "float64")
    planned = plan(double, _values(5, 6, 7, lda=9, ldb=10, ldc=11))
    assert planned.args == (5, 6, 7, 2.0, "bufA", 9, "bufB", 10, -1.0, "bufC", 11)
    assert type(planned.args[3]) is np.float64
    assert planned.grid == (1, 1, 1) and planned.block == (8, 8, 1)


def test_the_seeds_published_kernel_gets_its_four_arguments(examples):
    (inst,) = examples["seed_published"].instances()
    planned = plan(inst, _values(4, 4, 4))
    assert planned.args == ("bufA", "bufB", "bufC", 4)
    assert planned.grid == (2, 2, 1) and planned.block == (2, 2, 1)


def test_integer_literals_in_args_are_passed_as_int32(tmp_path):
    (tmp_path / "k.cu").write_text("__global__ void k(float *A, float *B, float *C, int n, int flag) {}\n")
    (tmp_path / "c.toml").write_text(
        '[[kernel]]\nname = "k"\nsource = "k.cu"\nentry = "k"\ntemplate_args = ""\n'
        'args = ["A", "B", "C", "N", 1]\npolicy = "tile2d"\ntiles = [4]\ndtypes = ["float32"]\n'
        'shapes = "square-tile-multiple"\nexpect = "correct"\n')
    (spec,) = catalog.load(tmp_path / "c.toml")
    planned = plan(spec.instances()[0], _values(8, 8, 8))
    assert planned.args[3:] == (8, 1) and all(type(a) is np.int32 for a in planned.args[3:])


def test_plan_names_a_missing_value(examples):
    (inst, *_) = examples["sgemm"].instances()
    values = _values(4, 4, 4)
    del values["beta"]
    with pytest.raises(launch.LaunchError, match="sgemm-float32-BM16_BN16_BK4_TM2_TN2: no value for beta"):
        plan(inst, values)


def test_plan_refuses_a_block_that_depends_on_the_problem_and_is_too_big(tmp_path):
    (tmp_path / "k.cu").write_text("template <typename T> __global__ void k(T *A, T *B, T *C, int M, int N, int K) {}\n")
    (tmp_path / "c.toml").write_text(
        '[[kernel]]\nname = "k"\nsource = "k.cu"\nentry = "k"\ntemplate_args = "{T}"\nsignature = "mnk"\n'
        'grid = ["1"]\nblock = ["N"]\ntiles = [4]\ndtypes = ["float32"]\nexpect = "correct"\n')
    (spec,) = catalog.load(tmp_path / "c.toml")
    assert plan(spec.instances()[0], _values(4, 1024, 4)).block == (1024, 1, 1)
    with pytest.raises(launch.LaunchError, match=r"k-float32-TILE4 at M=4 N=1025 K=4: block \(1025, 1, 1\) "
                                                 r"has 1025 threads per block \(max 1024\)"):
        plan(spec.instances()[0], _values(4, 1025, 4))
