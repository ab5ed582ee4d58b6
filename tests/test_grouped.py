"""Grouped GEMMs: problems, the guarded layout (offsets, counts, masked rows) and the twins named."""

import numpy as np
import pytest

from gemmcheck.judge.oracle import judge
from gemmcheck.problems.harness import GuardedGemm, run_problem
from gemmcheck.problems.problem import Problem, split_rows, stacked_matmul
from simulator import catalog_fixtures, first_instances

CATALOG = "examples/grouped/catalog.toml"

kernels, backend = catalog_fixtures(CATALOG)


def test_groups_stack_their_own_rows_and_count_their_flops():
    problem = Problem(6, 4, 5, "float32", "exact", 2, groups=(2, 0, 1, 3))
    A, B = problem.operands()
    assert A.shape == (6, 5) and B.shape == (4 * 5, 4)
    assert [a.shape[0] for a in split_rows(A, problem.groups)] == [2, 0, 1, 3]
    assert stacked_matmul(A, B, problem.groups).shape == (6, 4)
    assert problem.flops() == 2 * 6 * 4 * 5


@pytest.mark.parametrize("bad", [dict(groups=(2, 2)), dict(groups=(7,), masked=True), dict(groups=(-1, 7))])
def test_groups_that_do_not_fit_m_are_refused(bad):
    with pytest.raises(ValueError, match="groups"):
        Problem(6, 4, 5, "float32", **bad)


def test_contiguous_groups_get_their_offsets_and_one_block_of_b_each(kernels, backend):
    gemm = GuardedGemm.for_problem(backend, kernels["moe_grouped_gemm"],
                                   Problem(6, 4, 5, "float32", "exact", 2, groups=(2, 0, 1, 3)))
    offsets = gemm.group_buffers[0]
    assert offsets.name == "group_offsets"
    assert list(offsets.matrix(offsets.bits).view(np.int32)[0]) == [0, 2, 2, 3, 6]
    values = gemm.role_values()
    assert values["groups"] == 4 and values["M"] == 6 and values["stride_B"] == 5 * 4
    assert gemm.grid[2] == 4


def test_masked_rows_hold_the_guard_pattern_and_a_write_there_is_named_by_group(kernels, backend):
    problem = Problem(5, 4, 3, "float32", "exact", 2, groups=(5, 0, 2), masked=True)
    gemm = GuardedGemm.for_problem(backend, kernels["moe_masked_gemm"], problem)
    assert gemm.A.copies == 3 and gemm.A.batch_stride == 5 * 3      # slots back to back, as the kernel computes
    assert gemm.C.guard_cells(gemm.C.bits).size == 2 * gemm.C.guard + (5 + 3) * 4
    # A's masked rows hold ones: a tail computed from them is finite, never the guard's bits
    for guard_bits in (None, 0):
        run = run_problem(backend, kernels["broken_masked_tail_computed"], problem, guard_bits=guard_bits)
        assert run.guard_damage["C, in group 1's masked rows"] == 5 * 4, guard_bits
    assert run.guard_damage["C, in group 1's masked rows"] == 5 * 4
    assert run.guard_damage["C, in group 2's masked rows"] == 3 * 4


def test_one_group_is_a_plain_gemm_for_every_other_claim(kernels, backend):
    problem = Problem(9, 7, 13, "float32", "exact", 2)
    for name in ("moe_grouped_gemm", "moe_masked_gemm"):
        run = run_problem(backend, kernels[name], problem)
        assert run.groups == (9,) and run.products == ("", (9,))
        assert judge(run, *problem.operands()[:2], exact=True, problem=problem).ok


def test_a_group_end_one_row_too_far_writes_past_c(kernels, backend):
    problem = Problem(6, 4, 0, "float32", "exact", 2, groups=(2, 0, 1, 3))   # K = 0: see above
    run = run_problem(backend, kernels["broken_grouped_offset_off_by_one"], problem)
    assert run.guard_damage["C"] == 4          # the last group's extra row, past C
    assert not judge(run, *problem.operands()[:2], exact=True, problem=problem).ok


@pytest.mark.parametrize("catalog, twin, declared", [
    (CATALOG, "broken_masked_tail_computed", "out_of_bounds_write"),
    ("examples/batched/catalog.toml", "broken_batched_c_stride_packed", "out_of_bounds_write"),
    ("examples/epilogue/catalog.toml", "broken_bias_on_wrong_axis", "wrong_values"),
])
def test_runs_in_an_isolated_child_come_back_with_their_groups_batch_and_epilogue(catalog, twin, declared):
    from gemmcheck.judge import hazards, isolation

    instance = first_instances(catalog)[twin]
    steps = [isolation.Step.of(n, instance, problem, purpose=purpose)
             for n, (purpose, problem) in enumerate(hazards.exposing_problems(instance, ())) if n < 2]
    outcomes, _ = isolation.run_steps(steps, backend="cpu-sim", step_timeout=120)
    for outcome in outcomes.values():
        observation = isolation.observation(outcome)
        assert hazards.classify(hazards.detect(observation)).defect.value == declared


def test_a_table_declared_int64_is_written_as_int64_and_a_float_table_is_refused(kernels, backend, tmp_path):
    """The offsets go in the integer type the kernel declares (torch.cumsum's int64 here): read
    as int32 pairs they would put every group in the wrong rows."""
    from gemmcheck.contract import launch
    from gemmcheck.contract.catalog import CatalogError, load

    instance = kernels["moe_linear"]
    assert launch.table_type(instance, "group_offsets").name == "int64"
    assert launch.table_type(kernels["moe_grouped_gemm"], "group_offsets").name == "int32"
    problem = Problem(20, 9, 13, "float32", "exact", 1, groups=(7, 0, 1, 12))
    gemm = GuardedGemm.for_problem(backend, instance, problem)
    (table,) = gemm.group_buffers
    assert table.bits.dtype == np.uint64 and list(table.matrix(table.bits).view(np.int64).ravel()) == [0, 7, 7, 8, 20]
    judgement = judge(run_problem(backend, instance, problem), *problem.operands()[:2], exact=True, problem=problem)
    assert judgement.ok, judgement.message()
    source = open("examples/grouped/moe_linear.cu").read().replace("const int64_t *expert_offsets",
                                                                   "const float *expert_offsets")
    (tmp_path / "k.cu").write_text(source)
    entry = open(CATALOG).read()
    entry = entry[entry.index('[[kernel]]\nname = "moe_linear"'):].replace('"moe_linear.cu"', '"k.cu"')
    (tmp_path / "c.toml").write_text(entry)
    with pytest.raises(CatalogError, match="a pointer to float; the suite writes group_offsets as 32- or 64-bit"):
        load(tmp_path / "c.toml")
