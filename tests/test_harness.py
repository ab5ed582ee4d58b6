"""The harness lays out guards and poison so unwritten outputs, out-of-bounds
writes and input mutation are visible in the bits."""

import numpy as np
import pytest

from gemmcheck import catalog
from gemmcheck.harness import GuardedGemm, guard_elements, run_once

from fakes import NumpyBackend, correct_product

GUARDED = next(s for s in catalog.load(catalog.BUILTIN) if s.name == "matmul_tiled_guarded")
SEED = next(s for s in catalog.load(catalog.BUILTIN) if s.name == "matmul_tiled")


def inst(spec=GUARDED, dtype="float32", tile=4):
    return catalog.Instance(spec, dtype, tile)


def operands(M, N, K, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(-3, 4, (M, K)).astype(np.float64), rng.integers(-3, 4, (K, N)).astype(np.float64)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_a_correct_kernel_leaves_no_trace(dtype):
    A, B = operands(5, 7, 3)
    run = run_once(NumpyBackend({"matmul_tiled_guarded": correct_product}), inst(dtype=dtype), A, B)
    assert not run.unwritten.any()
    assert run.guard_damage == {"A": 0, "B": 0, "C": 0}
    assert run.inputs_changed == {"A": 0, "B": 0}
    np.testing.assert_array_equal(run.C.astype(np.float64), A @ B)
    assert run.grid == (2, 2, 1) and run.block == (4, 4, 1)


def test_unwritten_elements_keep_the_poison_bits():
    def skips_last_row(instance, grid, block, A, B, C, M, N, K):
        correct_product(instance, grid, block, A, B, C, M, N, K)
        C[(M - 1) * N:] = instance.dt.poison_bits
    run = run_once(NumpyBackend({"matmul_tiled_guarded": skips_last_row}), inst(), *operands(5, 7, 3))
    assert run.unwritten.sum() == 7 and run.unwritten[-1].all()


def test_a_write_past_the_end_of_C_damages_its_guard():
    def writes_past_end(instance, grid, block, A, B, C, M, N, K):
        correct_product(instance, grid, block, A, B, C, M, N, K)
        C.base[C.base.size - guard_elements(M, N, K, instance.tile) + 3] = 0
    run = run_once(NumpyBackend({"matmul_tiled_guarded": writes_past_end}), inst(), *operands(5, 7, 3))
    assert run.guard_damage["C"] == 1


def test_input_mutation_is_counted():
    def scribbles_on_A(instance, grid, block, A, B, C, M, N, K):
        correct_product(instance, grid, block, A, B, C, M, N, K)
        A[0] = 0x3F800000 if A[0] != 0x3F800000 else 0
    run = run_once(NumpyBackend({"matmul_tiled_guarded": scribbles_on_A}), inst(), *operands(5, 7, 3))
    assert run.inputs_changed == {"A": 1, "B": 0}


def test_C_is_poisoned_again_before_every_run():
    calls = []

    def writes_only_once(instance, grid, block, A, B, C, M, N, K):
        if not calls:
            correct_product(instance, grid, block, A, B, C, M, N, K)
        calls.append(1)
    gemm = GuardedGemm(NumpyBackend({"matmul_tiled_guarded": writes_only_once}), inst(), *operands(5, 7, 3))
    assert not gemm.run().unwritten.any()
    assert gemm.run().unwritten.all()


def test_square_kernels_get_N_only_and_reject_non_square():
    seen = []

    def record(instance, grid, block, A, B, C, M, N, K):
        seen.append((M, N, K))
        correct_product(instance, grid, block, A, B, C, M, N, K)
    backend = NumpyBackend({"matmul_tiled": record})
    run_once(backend, inst(SEED, tile=2), *operands(4, 4, 4))
    assert seen == [(4, 4, 4)]
    with pytest.raises(ValueError, match="takes square problems only"):
        run_once(backend, inst(SEED, tile=2), *operands(4, 5, 4))


def test_guard_covers_a_tile_of_rows_past_the_end():
    assert guard_elements(1000, 1000, 1000, 32) >= 32 * 1000 + 32
    assert guard_elements(4, 4, 4, 2) == 1024


def test_guard_zero_gives_exact_size_allocations():
    seen = []

    def record(instance, grid, block, A, B, C, M, N, K):
        seen.append((A.size, B.size, C.size))
        correct_product(instance, grid, block, A, B, C, M, N, K)
    gemm = GuardedGemm(NumpyBackend({"matmul_tiled_guarded": record}), inst(), *operands(5, 7, 3), guard=0)
    run = gemm.run()
    assert seen == [(5 * 3, 3 * 7, 5 * 7)]
    assert run.guard_damage == {"A": 0, "B": 0, "C": 0} and not run.unwritten.any()
