"""Fused epilogues: the record, the catalog's field, the reference's order and the bound."""

import numpy as np
import pytest

from gemmcheck.contract import epilogue as ep
from gemmcheck.contract import operand_types
from gemmcheck.contract.catalog import CatalogError, load
from gemmcheck.judge.oracle import judge
from gemmcheck.problems.harness import run_problem
from gemmcheck.problems.problem import Problem, exact_range
from simulator import first_instances, simulator

CATALOG = "examples/epilogue/catalog.toml"


@pytest.fixture(scope="module")
def kernels():
    return first_instances(CATALOG)


def test_an_epilogue_survives_its_spelling_in_the_problem():
    types = operand_types.of("float16 epilogue=bias:col/float32,act:gelu_tanh,residual,scale")
    assert types.epilogue == ep.Epilogue("col", operand_types.dt.get("float32"), "gelu_tanh", True, True)
    assert Problem(3, 4, 5, types).types == types and types.of("bias").name == "float32"


def test_the_reference_applies_bias_activation_residual_and_scale_in_that_order():
    e = ep.Epilogue("row", None, "relu", True, True)
    z = np.array([[-3.0, 1.0], [2.0, -1.0]])
    values = {"bias": np.array([1.0, -4.0]), "residual": np.array([[1.0, 2.0], [3.0, 4.0]]), "output_scale": 0.5}
    assert np.array_equal(e.apply(z, values), [[0.5, 2.0], [1.5, 2.0]])


def test_exact_inputs_leave_room_for_the_bias_and_the_residual():
    plain = operand_types.of("float32")
    fused = operand_types.of("float32 epilogue=bias:row,residual")
    assert exact_range(fused, 4096) < exact_range(plain, 4096)


@pytest.mark.parametrize("x", [np.linspace(-8, 8, 101)])
@pytest.mark.parametrize("activation", ep.ACTIVATIONS)
def test_an_activation_moves_an_error_by_at_most_its_lipschitz_constant(activation, x):
    e = ep.Epilogue(activation=activation)
    h = 1e-6
    slope = np.abs(e.activate(x + h) - e.activate(x - h)) / (2 * h)
    assert slope.max() <= ep.LIPSCHITZ[activation] * (1 + 1e-6)   # a difference quotient's own error


def test_a_catalog_epilogue_needs_its_roles(tmp_path):
    source = tmp_path / "k.cu"
    source.write_text("__global__ void k(const float *A, const float *B, float *D, int M, int N, int K) {}\n")
    (tmp_path / "c.toml").write_text(
        '[[kernel]]\nname = "k"\nsource = "k.cu"\nentry = "k"\nargs = ["A", "B", "D", "M", "N", "K"]\n'
        'grid = ["N", "M"]\nblock = [1]\ndtypes = ["float32"]\nexpect = "correct"\n'
        'epilogue = { bias = "row" }\n')
    with pytest.raises(CatalogError, match="epilogue declares it, but args lists no bias"):
        load(tmp_path / "c.toml")


def test_gelu_on_exact_inputs_is_judged_by_the_bound_and_the_twins_are_caught(kernels):
    with simulator() as backend:
        problem = Problem(33, 17, 65, kernels["gemm_bias_gelu_tanh_residual"].types, "exact", 1, alpha=2, beta=-1)
        judgement = judge(run_problem(backend, kernels["gemm_bias_gelu_tanh_residual"], problem),
                          *problem.operands()[:2], exact=True, problem=problem)
        assert judgement.ok and not judgement.exact and "Lipschitz" in judgement.bound_text, judgement.message()
        for twin in ("broken_bias_on_wrong_axis", "broken_activation_before_alpha_beta",
                     "broken_splitk_bias_in_every_slice"):
            problem = Problem(33, 17, 65, kernels[twin].types, "normal", 2)
            judgement = judge(run_problem(backend, kernels[twin], problem), *problem.operands()[:2], exact=False,
                              problem=problem)
            assert not judgement.ok and judgement.ratio > 10, twin


def test_a_bias_only_epilogue_is_judged_on_nan_and_inf_and_a_kernel_that_skips_zero_inputs_is_caught(tmp_path):
    """A bias keeps IEEE's NaN and Inf rules, so the special kind applies (an activation's does not);
    skipping a zero input drops 0 * Inf = NaN, which only that kind shows."""
    from gemmcheck.problems.problem import special_values_missing

    text = open(CATALOG.rsplit("/", 1)[0] + "/matmul_forward.cu").read()
    skipping = text.replace("val += inp_bt[i] * wrow[i];", "if (inp_bt[i] != 0.0f) val += inp_bt[i] * wrow[i];")
    assert skipping != text
    (tmp_path / "skip.cu").write_text(skipping)
    catalog_text = open(CATALOG).read()
    entry = catalog_text[catalog_text.index('[[kernel]]\nname = "matmul_forward_bias"'):]
    (tmp_path / "c.toml").write_text(entry.replace('"matmul_forward.cu"', '"skip.cu"'))
    correct = first_instances(CATALOG)["matmul_forward_bias"]
    (skips,) = first_instances(tmp_path / "c.toml").values()
    assert special_values_missing(correct.types) is None
    assert special_values_missing(operand_types.of("float32 epilogue=bias:col,act:relu"))
    with simulator() as backend:
        verdicts = {}
        for name, instance in (("correct", correct), ("skips", skips)):
            problem = Problem(33, 17, 34, instance.types, "special", 5)
            verdicts[name] = judge(run_problem(backend, instance, problem), *problem.operands()[:2], exact=True,
                                   problem=problem)
    assert verdicts["correct"].ok, verdicts["correct"].message()
    assert not verdicts["skips"].ok and "NaN" in verdicts["skips"].message()
