"""fp8 tensor-core sums (operand_types ``sums = "tensor-core-fp8"``): the bound holds for a model
of the arithmetic (tests/tensor_core_model.py) where the float32 bound does not, wrong models
still fail it, exact judging keeps its premise, and the catalog declares each config's chain."""

import numpy as np
import pytest

from gemmcheck.contract import catalog, operand_types
from gemmcheck.judge.oracle import tensor_core_sums
from gemmcheck.judge.oracle.bound import Bound
from gemmcheck.judge.oracle.exactness import InexactProblem, exact_reference, exactness_violation
from gemmcheck.problems.problem import Problem, exact_range, scaled_operands
from tests import tensor_core_model

BASE = "e4m3e4m3bf16 scale_A=tensor scale_B=tensor"
CHAINS = {"p2": 64, "p1": 128, "p0": 0}     # rung 10's PARTIALS: 2 and 1 per 128 of K, 0 none


def _types(chain: int):
    return operand_types.of(f"{BASE} sums=tensor-core-fp8" + (f"/{chain}" if chain else ""))


def _ratios(types, M, K, values, seed, **model):
    """(error / new bound, error / float32 bound) per element of the model's D."""
    p = Problem(M, M, K, types, values, seed)
    A, B = p.operands()
    got = tensor_core_model.gemm(A, B, p.scale_operands(), types, **model)
    As, Bs = scaled_operands(types, A, B, p.scale_operands())
    ref, P = As @ Bs, np.abs(As) @ np.abs(Bs)
    err = np.abs(got - ref)
    new = Bound.for_types(types, K).evaluate(P, ref, np, (As, Bs))
    single = Bound.for_types(BASE, K).evaluate(P, ref, np)
    return err / new, err / single


@pytest.mark.parametrize("values", ["normal", "uniform", "wide"])
@pytest.mark.parametrize("config", list(CHAINS))
@pytest.mark.parametrize("K", [96, 320, 1024])
def test_the_bound_holds_for_the_model(values, config, K):
    # 14 bits cut toward zero as measured on Hopper; 13 (what the bound allows) cut either way
    for bits, how, seed in ((14, "trunc", 1), (13, "trunc", 2), (13, "floor", 3)):
        ratio, _ = _ratios(_types(CHAINS[config]), 40, K, values, seed, bits=bits, how=how)
        assert ratio.max() <= 1, (bits, how, ratio.max())


@pytest.mark.parametrize("values", ["normal", "uniform", "wide"])
@pytest.mark.parametrize("config", list(CHAINS))
def test_the_float32_bound_calls_the_model_wrong(values, config):
    # without the declaration a correct fp8 tensor-core kernel fails (as rung 10 did on an H200)
    ratio, float32_ratio = _ratios(_types(CHAINS[config]), 64, 96, values, 1, bits=14)
    assert float32_ratio.max() > 1 >= ratio.max()


@pytest.mark.parametrize("values", ["normal", "uniform", "wide"])
@pytest.mark.parametrize("config", list(CHAINS))
@pytest.mark.parametrize("wrong", [{"drop_step": 3}, {"scale_B": False}])
def test_a_wrong_model_still_fails_the_bound(values, config, wrong):
    types = _types(CHAINS[config])
    assert _ratios(types, 40, 320, values, 4, **wrong)[0].max() > 1


def test_a_running_sum_rounded_to_bfloat16_is_inside_the_bound():
    # The limit of a worst-case bound on these sums: a k-step may lose 33 cuts of 2^-12 of its
    # largest addend, more than one bfloat16 rounding (2^-9): such a kernel is not told apart.
    ratio, _ = _ratios(_types(0), 40, 1024, "uniform", 5, accumulate="bfloat16")
    assert ratio.max() <= 1


def test_the_error_term_is_within_its_worst_case_and_needs_the_operands_only_to_tighten_it():
    types = _types(128)
    p = Problem(24, 24, 640, types, "normal", 6)
    A, B = scaled_operands(types, *p.operands(), p.scale_operands())
    E = tensor_core_sums.error(A, B, types)
    assert (E > 0).all() and (E <= tensor_core_sums.worst_coefficient(types, 640) * (np.abs(A) @ np.abs(B))).all()
    b = Bound.for_types(types, 640)
    assert (b.evaluate(np.abs(A) @ np.abs(B), A @ B, np, (A, B)) <= b.evaluate(np.abs(A) @ np.abs(B), A @ B)).all()
    assert "fp8 tensor-core sums, 13 bits kept" in b.describe() and "5 float32 term(s)" in b.describe()


@pytest.mark.parametrize("config", list(CHAINS))
@pytest.mark.parametrize("K", [16, 128, 640, 4096])
def test_exact_problems_keep_every_tensor_core_sum_exact(config, K):
    types = _types(CHAINS[config])
    r = exact_range(types, K)
    assert types.chain_length(K) * r * r < 2 ** 13 and r >= 1
    p = Problem(32, 32, K, types, "exact", 7)
    A, B = p.operands()
    ref = exact_reference(*scaled_operands(types, A, B, p.scale_operands()), types, unscaled=(A, B))
    got = tensor_core_model.gemm(A, B, p.scale_operands(), types, bits=13)
    assert np.array_equal(got, tensor_core_model._round(ref, "bfloat16"))


def test_exactness_refuses_a_partial_sum_the_tensor_cores_cut():
    A = np.full((1, 96), 15.0)       # products of 225 (quantum 1): the third k-step adds to 14400 > 2^13
    B = np.full((96, 1), 15.0)
    assert exactness_violation(A, B, BASE) is None                 # exact in float32
    why = exactness_violation(A, B, _types(0))
    assert "more than 13 significant bits" in why
    assert exactness_violation(A, B, _types(32)) is None            # promoted every 32: sums below 7200
    with pytest.raises(InexactProblem):
        exact_reference(A, B, _types(0))


def test_the_spelling_and_its_errors():
    types = _types(64)
    assert types.spelling == f"{BASE} sums=tensor-core-fp8/64" and operand_types.of(types.spelling) == types
    assert types.sum_bits == 13 and _types(0).chain_length(640) == 640 and types.chain_length(32) == 32
    for spelling, words in ((f"f16f16f32 sums=tensor-core-fp8", "needs 8-bit float A and B"),
                            (f"{BASE} sums=tensor-core-fp8/48", "a multiple of 32"),
                            (f"{BASE} sums=tensor-cores", "use accumulator or tensor-core-fp8")):
        with pytest.raises(operand_types.TypesError, match=words):
            operand_types.of(spelling)


def test_rung_10_declares_each_configs_chain():
    specs = {s.name: s for s in catalog.load(catalog.LADDER)}
    for name in ("ladder_wgmma_fp8", "ladder_broken_wgmma_fp8_scale_left_out"):
        for inst in specs[name].instances():
            assert inst.types.chain == CHAINS[inst.config[-2:]], inst.config
            assert inst.types.tensor_core_sums


FP8_KERNEL = """\
#include <cuda_fp8.h>
template <int BK, int PARTIALS>
__global__ void gemm(const __nv_fp8_e4m3 *A, const __nv_fp8_e4m3 *B, __nv_bfloat16 *D, int M, int N, int K) {}
"""
FP8_ENTRY = ('[[kernel]]\nname = "k"\nsource = "k.cu"\nentry = "gemm"\nargs = ["A", "B", "D", "M", "N", "K"]\n'
             'grid = ["ceil(N / 16)", "ceil(M / 16)"]\nblock = ["16", "16"]\ndtypes = ["e4m3e4m3bf16"]\n'
             'expect = "correct"\ntemplate_args = "{BK}, {PARTIALS}"\n'
             'tile = "BK"\nconfigs = [{ name = "p2", BK = 128, PARTIALS = 2 }, { name = "p0", BK = 128, PARTIALS = 0 }]\n')


def _fp8_catalog(tmp_path, sums: str, dtypes: str = "e4m3e4m3bf16"):
    (tmp_path / "k.cu").write_text(FP8_KERNEL)
    (tmp_path / "catalog.toml").write_text(FP8_ENTRY.replace("e4m3e4m3bf16", dtypes) + f"sums = {sums}\n")
    return catalog.load(tmp_path / "catalog.toml")


def test_a_catalog_entry_declares_its_sums_and_each_configs_chain(tmp_path):
    (spec,) = _fp8_catalog(tmp_path, '{ unit = "tensor-core-fp8", chain = "min(PARTIALS, 1) * BK // max(PARTIALS, 1)" }')
    assert [(i.config, i.types.chain) for i in spec.instances()] == [("p2", 64), ("p0", 0)]
    (spec,) = _fp8_catalog(tmp_path, '"tensor-core-fp8"')
    assert all(i.types.tensor_core_sums and i.types.chain == 0 for i in spec.instances())


@pytest.mark.parametrize("sums, dtypes, words", [
    ('"tensor-cores"', "e4m3e4m3bf16", "sums = 'tensor-cores'; use \"tensor-core-fp8\""),
    ('{ unit = "tensor-core-fp8", chain = "BK // 3" }', "e4m3e4m3bf16", "a multiple of 32"),
    ('{ unit = "tensor-core-fp8", chain = "BN" }', "e4m3e4m3bf16", "unknown name 'BN'"),
    ('"tensor-core-fp8"', "f16f16f32", "needs 8-bit float A and B"),
])
def test_a_wrong_sums_declaration_is_refused_in_one_line(tmp_path, sums, dtypes, words):
    with pytest.raises(catalog.CatalogError) as caught:
        _fp8_catalog(tmp_path, sums, dtypes)
    message = str(caught.value)
    assert "\n" not in message and "kernel 'k'" in message and words in message, message


# The worst elements of rung 10's bound tests on an H200 judged as float32 sums: (config, M = N = K,
# values, seed, element, what the kernel wrote, the float64 reference, the float32 bound there).
H200_WORST = [("p2", 640, "wide", 2, (306, 639), 13.75, 15.958611172277017, 0.657062),
              ("p0", 640, "uniform", 2, (326, 483), 0.064453125, 0.05719924752193428, 0.00387855),
              ("p1", 640, "normal", 2, (443, 415), -0.054931640625, -0.042696509921196224, 0.0105555),
              ("p0", 640, "normal", 2, (189, 99), -0.2158203125, -0.19389845813231688, 0.0103485),
              ("p1", 640, "wide", 2, (11, 303), -0.365234375, -3.7606804423166977, 0.729761),
              ("p0", 640, "wide", 2, (276, 20), -36.25, -26.452557034746405, 0.986135),
              ("p2", 128, "normal", 0, (119, 7), -0.11474609375, -0.11883679677412062, 0.00139135),
              ("p1", 128, "normal", 0, (40, 74), 0.11474609375, 0.10939762147026799, 0.00127716)]


@pytest.mark.parametrize("config, n, values, seed, at, got, want, float32_bound", H200_WORST)
def test_the_h200s_worst_elements_are_within_the_tensor_cores_bound(config, n, values, seed, at, got, want,
                                                                     float32_bound):
    types = _types(CHAINS[config])
    p = Problem(n, n, n, types, values, seed)
    A, B = scaled_operands(types, *p.operands(), p.scale_operands())
    a, b = A[at[0]:at[0] + 1], B[:, at[1]:at[1] + 1]
    ref = a @ b
    assert ref[0, 0] == pytest.approx(want, rel=1e-12)
    err = abs(got - want)
    assert Bound.for_types(BASE, n).evaluate(np.abs(a) @ np.abs(b), ref)[0, 0] == pytest.approx(float32_bound, rel=1e-5)
    assert err > float32_bound
    assert err <= Bound.for_types(types, n).evaluate(np.abs(a) @ np.abs(b), ref, np, (a, b))[0, 0]
