"""Strided batches: problems, guarded layout, per-product judging, and the twins caught (cpu-sim)."""

import numpy as np
import pytest

from gemmcheck.judge.oracle import judge
from gemmcheck.problems.harness import GuardedGemm, run_problem
from gemmcheck.problems.problem import Problem, product_rows, stacked_matmul
from gemmcheck.verdict import Defect
from simulator import catalog_fixtures, simulator

CATALOG = "examples/batched/catalog.toml"

kernels, backend = catalog_fixtures(CATALOG)


def test_product_zero_of_a_batch_is_the_unbatched_problem_and_the_others_differ():
    one = Problem(5, 6, 7, "float32", "exact", 3).operands()
    batch = Problem(5, 6, 7, "float32", "exact", 3, batch=3).operands()
    for X, Xs in zip(one, batch):
        assert np.array_equal(product_rows(Xs, 0, 3), X)
        assert not np.array_equal(product_rows(Xs, 1, 3), X)


def test_a_broadcast_operand_is_product_zeros_in_every_product_and_c0_still_changes():
    A, B, C0 = Problem(5, 6, 7, "float32", "exact", 3, alpha=2, beta=-1, batch=4, broadcast="B").operands()
    assert all(np.array_equal(product_rows(B, b, 4), product_rows(B, 0, 4)) for b in range(4))
    assert not np.array_equal(product_rows(A, 1, 4), product_rows(A, 0, 4))
    assert (2 * stacked_matmul(A, B, (5,) * 4) - C0 != C0).all()


def test_flops_count_every_product():
    assert Problem(4, 5, 6, "float32", batch=7).flops() == 2 * 4 * 5 * 6 * 7


@pytest.mark.parametrize("bad", [dict(batch=0), dict(batch=2, broadcast="C")])
def test_a_bad_batch_is_refused_naming_the_field(bad):
    with pytest.raises(ValueError, match="batch|broadcast"):
        Problem(4, 4, 4, "float32", **bad)


def test_strides_leave_a_guard_band_between_products_and_zero_for_a_broadcast(kernels, backend):
    instance = kernels["gemm_strided_batched"]
    problem = Problem(5, 6, 7, "float32", "exact", 1, batch=3, broadcast="A")
    gemm = GuardedGemm.for_problem(backend, instance, problem)
    values = gemm.role_values()
    assert values["batch"] == 3 and values["stride_A"] == 0
    assert values["stride_B"] == 7 * 6 + gemm.B.guard and values["stride_C"] == 5 * 6 + gemm.C.guard
    assert gemm.grid[2] == 3
    assert (gemm.C.guard_cells(gemm.C.bits) == gemm.C.bits[0]).all()   # bands and gaps: the guard pattern


def test_a_correct_batched_kernel_is_right_in_every_product(kernels, backend):
    problem = Problem(9, 7, 13, "float32", "exact", 2, batch=3)
    judgement = judge(run_problem(backend, kernels["gemm_strided_batched"], problem), *problem.operands()[:2],
                      exact=True, problem=problem)
    assert judgement.ok, judgement.message()
    assert judgement.C.shape == (27, 7)


def test_a_product_written_into_the_gap_is_an_out_of_bounds_write_naming_both_batches(kernels, backend):
    problem = Problem(9, 7, 13, "float32", "exact", 2, batch=3)
    judgement = judge(run_problem(backend, kernels["broken_batched_c_stride_packed"], problem),
                      *problem.operands()[:2], exact=True, problem=problem)
    oob = [f for f in judgement.findings if f.defect == Defect.OUT_OF_BOUNDS_WRITE]
    assert oob and "C's guards between batch 0 and batch 1" in oob[0].summary, judgement.message()
    assert any(f.summary.startswith("batch 2: ") and f.details["batch"] == 2 for f in judgement.findings)
    # batch 1 (one product, the strides of one matrix) hides the defect: what the batched problems are for
    one = Problem(9, 7, 13, "float32", "exact", 2)
    assert judge(run_problem(backend, kernels["broken_batched_c_stride_packed"], one), *one.operands()[:2],
                 exact=True, problem=one).ok


def test_a_product_never_launched_is_unwritten_in_its_batch(kernels, backend):
    problem = Problem(33, 17, 20, "float32", "exact", 2, batch=3)   # grid x 2: product 2 never runs
    judgement = judge(run_problem(backend, kernels["broken_batched_index_from_x"], problem),
                      *problem.operands()[:2], exact=True, problem=problem)
    assert [(f.defect, f.details["batch"]) for f in judgement.findings] == [(Defect.UNWRITTEN_OUTPUT, 2)]


def test_an_operand_the_kernel_finds_itself_is_packed_and_never_broadcast(kernels, backend):
    """A kernel given no stride (a + b * M * K) gets its products back to back; sharing one
    would need a stride of 0 it never reads, so a broadcast is refused in one line."""
    instance = kernels["bmm_packed"]
    gemm = GuardedGemm.for_problem(backend, instance, Problem(5, 6, 7, "float32", "exact", 1, batch=3))
    assert (gemm.A.batch_stride, gemm.B.batch_stride, gemm.C.batch_stride) == (5 * 7, 7 * 6, 5 * 6)
    problem = Problem(9, 7, 13, "float32", "exact", 2, batch=3)
    judgement = judge(run_problem(backend, instance, problem), *problem.operands()[:2], exact=True, problem=problem)
    assert judgement.ok, judgement.message()
    with pytest.raises(ValueError, match="takes neither stride_A nor A_array"):
        GuardedGemm.for_problem(backend, instance, Problem(5, 6, 7, "float32", "exact", 1, batch=3, broadcast="A"))


def test_a_packed_b_without_its_batch_offset_is_wrong_past_product_zero(kernels, backend):
    problem = Problem(9, 7, 13, "float32", "exact", 2, batch=3)
    judgement = judge(run_problem(backend, kernels["broken_bmm_b_without_batch_offset"], problem),
                      *problem.operands()[:2], exact=True, problem=problem)
    assert {(f.defect, f.details["batch"]) for f in judgement.findings} == {
        (Defect.WRONG_VALUES, 1), (Defect.WRONG_VALUES, 2)}, judgement.message()


# -- pointer-array batches (cuBLAS's gemmBatched: one pointer per product) ---------------------

def test_a_pointer_array_holds_each_products_address_a_guard_band_apart_and_one_for_a_broadcast(kernels, backend):
    problem = Problem(5, 6, 7, "float32", "exact", 1, batch=3, broadcast="B")
    gemm = GuardedGemm.for_problem(backend, kernels["gemm_batched"], problem)
    values = gemm.role_values()
    a, b, c = (backend.to_host(values[f"{X}_array"]).tolist() for X in "ABC")
    step = (5 * 7 + gemm.A.guard) * 4
    assert a == [backend.address_of(values["A"]) + i * step for i in range(3)]
    assert b == [backend.address_of(values["B"])] * 3               # one matrix every product reads
    assert c[1] - c[0] == (5 * 6 + gemm.C.guard) * 4
    # the guard pattern around an array is an address that faults, not one of the products'
    bands = gemm.pointer_array_buffers[0].guard_cells(gemm.pointer_array_buffers[0].bits)
    assert len(bands) and (bands == 0xDEADBEEF_DEADBEE0).all()


def test_a_correct_pointer_array_kernel_is_right_in_every_product_and_its_arrays_are_left_as_given(kernels, backend):
    problem = Problem(9, 7, 13, "float32", "exact", 2, alpha=2, beta=-1, batch=3)
    run = run_problem(backend, kernels["gemm_batched"], problem)
    judgement = judge(run, *problem.operands()[:2], exact=True, problem=problem)
    assert judgement.ok, judgement.message()
    # the simulator's worker puts its own addresses in for the launch and this process's back
    assert {name: run.inputs_changed[name] for name in ("A_array", "B_array", "C_array")} == dict.fromkeys(
        ("A_array", "B_array", "C_array"), 0)


def test_a_kernel_that_finds_a_product_from_product_zeros_pointer_writes_the_gap_naming_both_batches(kernels,
                                                                                                    backend):
    # Product 1 reads A's and B's gaps too: under NaN guards it writes the guard's own NaN into C's
    # gap (no visible damage; its products read as never written). Zero guards and operands larger
    # than a band, as the kill matrix's guard-band detector runs, make what it writes there finite.
    problem = Problem(64, 64, 64, "float32", "exact", 2, batch=3)
    judgement = judge(run_problem(backend, kernels["broken_batched_arrays_assumed_packed"], problem, guard_bits=0),
                      *problem.operands()[:2], exact=True, problem=problem)
    oob = [f for f in judgement.findings if f.defect == Defect.OUT_OF_BOUNDS_WRITE]
    assert oob and "C's guards between batch 0 and batch 1" in oob[0].summary, judgement.message()


@pytest.mark.parametrize("broadcast, caught", [("", True), ("B", False)])
def test_every_product_multiplied_by_product_zeros_b_is_wrong_unless_b_is_broadcast(kernels, backend, broadcast,
                                                                                   caught):
    problem = Problem(9, 7, 13, "float32", "exact", 2, batch=3, broadcast=broadcast)
    judgement = judge(run_problem(backend, kernels["broken_batched_b_from_product_0"], problem),
                      *problem.operands()[:2], exact=True, problem=problem)
    assert judgement.ok != caught, judgement.message()
    if caught:
        assert {f.details.get("batch") for f in judgement.findings} == {1, 2}


def test_a_kernel_that_writes_into_its_array_of_pointers_mutates_an_input(tmp_path):
    """The arrays are inputs like A: a kernel that clears its product's pointer after use is
    caught (input_mutation), with every product right; the simulator's worker leaves an entry
    the kernel overwrote as the kernel left it."""
    from gemmcheck.contract import catalog

    (tmp_path / "k.cu").write_text(
        "__global__ void gemm_clears_c_array(int M, int N, int K, const float *const *A, const float *const *B,\n"
        "                                    float **C, int batch)\n{\n"
        "    int b = blockIdx.z;\n"
        "    for (int i = 0; i < M; i++)\n"
        "        for (int j = 0; j < N; j++) {\n"
        "            float s = 0.0f;\n"
        "            for (int k = 0; k < K; k++) s += A[b][i * K + k] * B[b][k * N + j];\n"
        "            C[b][i * N + j] = s;\n"
        "        }\n"
        "    C[b] = nullptr;   // done with it\n}\n")
    (tmp_path / "catalog.toml").write_text(
        '[[kernel]]\nname = "gemm_clears_c_array"\nsource = "k.cu"\nentry = "gemm_clears_c_array"\n'
        'args = ["M", "N", "K", "A_array", "B_array", "C_array", "batch"]\ngrid = [1, 1, "batch"]\nblock = [1]\n'
        'dtypes = ["float32"]\nexpect = "input_mutation"\n')
    (spec,) = catalog.load(tmp_path / "catalog.toml")
    instance = spec.instances()[0]
    problem = Problem(5, 6, 7, "float32", "exact", 2, batch=3)
    with simulator([instance]) as backend:
        run = run_problem(backend, instance, problem)
    judgement = judge(run, *problem.operands()[:2], exact=True, problem=problem)
    assert judgement.defects == {Defect.INPUT_MUTATION}, judgement.message()
    assert run.inputs_changed["C_array"] == 3 and run.inputs_changed["A_array"] == 0


def test_a_batch_with_an_output_scale_is_judged_per_product_and_one_with_a_bias_is_refused_at_load(
        kernels, backend, tmp_path):
    """An epilogue that acts element by element (the output scale of attention scores) goes with a
    batch; a bias or residual, which a batch would share or stack, is refused in one line."""
    from gemmcheck.contract.catalog import CatalogError, load

    problem = Problem(9, 9, 13, kernels["attention_scores"].types, "exact", 2, batch=3)
    judgement = judge(run_problem(backend, kernels["attention_scores"], problem), *problem.operands()[:2],
                      exact=True, problem=problem)
    assert judgement.ok, judgement.message()
    twin = judge(run_problem(backend, kernels["broken_attention_scores_divided"], problem), *problem.operands()[:2],
                 exact=True, problem=problem)
    assert {f.defect for f in twin.findings} == {Defect.WRONG_VALUES}
    (tmp_path / "k.cu").write_text("__global__ void k(const float *A, const float *B, float *C, const float *bias, "
                                   "int batch, int M, int N, int K) {}\n")
    (tmp_path / "c.toml").write_text(
        '[[kernel]]\nname = "k"\nsource = "k.cu"\nentry = "k"\nargs = ["A", "B", "C", "bias", "batch", "M", "N", "K"]\n'
        'grid = ["N", "M", "batch"]\nblock = [1]\ndtypes = ["float32"]\nepilogue = { bias = "col" }\n'
        'expect = "correct"\n')
    with pytest.raises(CatalogError, match="a batch of products with a fused bias or residual"):
        load(tmp_path / "c.toml")
