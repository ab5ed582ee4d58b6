"""Judging kernels with a type per operand: inputs made in each operand's type, scale factors,
the exact premise and the forward error bound per type, D apart from C, the output's
conversion (saturating or not), and the CPU simulator's 8-bit floats and integer dot products
bit for bit against CUDA's own headers. Stand-in kernels (numpy, through the real harness and
oracle) show each check firing on a defect and silent without it."""

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from gemmcheck.contract import catalog, operand_types
from gemmcheck.contract import dtypes as dt
from gemmcheck.judge.oracle import Bound, InexactProblem, exact_reference, judge
from gemmcheck.problems.harness import never_written, run_once
from gemmcheck.problems.problem import EXACT_SCALE_EXPONENTS, Problem, exact_range, scaled_operands
from gemmcheck.verdict import Defect

from fakes import RoleBackend

ROOT = Path(__file__).resolve().parents[1]
SPECS = {s.name: s for path in (catalog.BUILTIN, ROOT / "examples" / "mixed" / "catalog.toml")
         for s in catalog.load(path)}
CUDA_INCLUDE = Path("/usr/local/cuda/include")
SIM_INCLUDE = ROOT / "gemmcheck" / "backends" / "cpu_sim" / "include"


def instance(name):
    return SPECS[name].instances()[0]


# -- inputs in each operand's type ------------------------------------------------------------

@pytest.mark.parametrize("kind", ["exact", "normal", "uniform", "wide"])
def test_each_operand_is_made_in_its_own_type(kind):
    A, B, C0 = Problem(9, 7, 33, "f16f16f32", kind, 3, 2, -1).operands()
    half, single = dt.get("float16"), dt.get("float32")
    for X, d in ((A, half), (B, half), (C0, single)):
        assert np.array_equal(dt.from_bits(dt.to_bits(X, d), d).astype(np.float64), X)
    if kind != "exact":   # C0 is drawn in float32: finer than float16 could hold
        with np.errstate(over="ignore"):
            assert not np.array_equal(dt.from_bits(dt.to_bits(C0, half), half).astype(np.float64), C0)
    A, B = Problem(9, 7, 33, "u8s8s32", kind, 3).operands()
    assert A.min() >= 0 and B.min() < 0 and (A == np.rint(A)).all() and B.min() >= -128
    assert A.max() > 100 and B.max() > 100   # integers draw over the range K allows, whatever the kind


def test_exact_scales_are_powers_of_two_and_a_tensor_pair_never_cancels():
    for seed in range(40):
        scales = Problem(4, 5, 6, "e4m3e4m3bf16 scale_A=tensor scale_B=tensor", "exact", seed).scale_operands()
        a, b = scales["scale_A"].item(), scales["scale_B"].item()
        assert {np.log2(a), np.log2(b)} <= set(EXACT_SCALE_EXPONENTS) and a * b != 1
    blocks = Problem(5, 300, 260, "e4m3e4m3bf16 scale_A=1x128/col scale_B=128x128", "normal", 1).scale_operands()
    assert blocks["scale_A"].shape == (5, 3) and blocks["scale_B"].shape == (3, 3)
    assert (0.5 <= blocks["scale_B"]).all() and (blocks["scale_B"] < 2).all()


@pytest.mark.parametrize("spelling", ["e4m3e4m3bf16 scale_A=tensor scale_B=tensor",
                                      "e5m2e4m3f32 scale_A=1x128 scale_B=128x128", "s8s8s32", "bf16bf16f32"])
@pytest.mark.parametrize("K", [1, 65, 300, 4160])
def test_the_exact_range_keeps_every_scaled_sum_exact_in_the_worst_case(spelling, K):
    types = operand_types.of(spelling)
    r = exact_range(types, K)
    A, B = np.full((2, K), float(r)), np.full((K, 2), float(r))
    A[1] *= -1   # the largest magnitudes, then the finest steps next to them
    scales = {}
    for scale in types.scales:
        shape = scale.shape(*((2, K) if scale.operand == "A" else (K, 2)))
        exponents = np.resize(np.array([max(EXACT_SCALE_EXPONENTS), min(EXACT_SCALE_EXPONENTS)]), int(np.prod(shape)))
        scales[scale.role] = np.exp2(exponents.reshape(shape))
    A2, B2 = scaled_operands(types, A, B, scales)
    exact_reference(A2, B2, types, unscaled=(A, B) if scales else None)   # raises InexactProblem if not
    if r < min(types.A.exact_limit, types.B.exact_limit) and not types.A.is_integer and not types.scales:
        with pytest.raises(InexactProblem):    # one more and the premise breaks
            A3, B3 = scaled_operands(types, A * (r + 1) / r, B * (r + 1) / r, scales)
            exact_reference(A3, B3, types)


def test_a_saturating_output_gets_results_past_its_range():
    inst = instance("fp8_e4m3_out")
    p = Problem(9, 7, 65, inst.types, "exact", 1)
    A, B = p.operands()
    A2, B2 = scaled_operands(inst.types, A, B, p.scale_operands())
    ref = exact_reference(A2, B2, inst.types)
    assert np.abs(ref).max() > 448 and (np.abs(ref) < 448).any()


# -- stand-in kernels through the harness and the oracle ---------------------------------------

def operand(v, types, role, shape, major="row"):
    """An operand's values, read from its flat buffer as a kernel reads it (tight, row- or
    column-major)."""
    d = types.of(role)
    flat = dt.from_bits(np.asarray(v[role])[:shape[0] * shape[1]], d).astype(np.float64)
    return flat.reshape(shape) if major == "row" else flat.reshape(shape[::-1]).T


def in_float32(A, B):
    """A @ B with every product and partial sum rounded to float32, k in order."""
    acc = np.zeros((A.shape[0], B.shape[1]), np.float32)
    for k in range(A.shape[1]):
        acc = (acc + (A[:, k:k + 1].astype(np.float32) * B[k:k + 1, :].astype(np.float32))).astype(np.float32)
    return acc.astype(np.float64)


def in_half(A, B):
    acc = np.zeros((A.shape[0], B.shape[1]), np.float16)
    with np.errstate(over="ignore"):
        for k in range(A.shape[1]):
            acc = (acc + A[:, k:k + 1].astype(np.float16) * B[k:k + 1, :].astype(np.float16)).astype(np.float16)
    return acc.astype(np.float64)


def stand_in(name, compute, *, into="D", read_c=None):
    """A RoleBackend running `compute(types, A, B, scales) -> float64 result` for the catalog
    kernel `name`, storing the result (plus beta C) rounded to the output's type in `into`."""
    inst = instance(name)

    def kernel(instance, v):
        types = instance.types
        M, N, K = v["M"], v["N"], v["K"]
        layout = instance.spec.layouts
        A = operand(v, types, "A", (M, K), layout.get("A", "row"))
        B = operand(v, types, "B", (K, N), layout.get("B", "row"))
        scales = {s.role: operand(v, types, s.role, s.shape(*((M, K) if s.operand == "A" else (K, N))), s.major)
                  for s in types.scales}
        result = compute(types, A, B, scales) * float(v.get("alpha", 1))
        beta = float(v.get("beta", 0))
        if beta != 0 or read_c:
            result = result + beta * operand(v, types, "C", (M, N))
        out = np.asarray(v[into])
        out[:M * N] = dt.to_bits(result, types.D, saturate=types.saturate).reshape(-1)
    return inst, RoleBackend({inst.spec.entry: kernel})


def judged(name, problem, compute, **kw):
    inst, backend = stand_in(name, compute, **kw)
    A, B, *C0 = problem.operands()
    with np.errstate(invalid="ignore", over="ignore"):
        run = run_once(backend, inst, A, B, *C0, alpha=problem.alpha, beta=problem.beta,
                       scales=problem.scale_operands() or None)
        return judge(run, A, B, exact=problem.exact, problem=problem)


def scaled_float32(types, A, B, scales):
    return in_float32(*scaled_operands(types, A, B, scales))


@pytest.mark.parametrize("kind", ["exact", "normal", "wide"])
def test_half_inputs_summed_in_float_pass_and_summed_in_half_fail_the_declared_float_accumulator(kind):
    problem = Problem(33, 17, 65, instance("mixed_f16_f32").types, kind, 2, 2, -1)
    right = judged("mixed_f16_f32", problem, lambda t, A, B, s: in_float32(A, B))
    assert right.ok, right.message()
    wrong = judged("mixed_f16_f32", problem, lambda t, A, B, s: in_half(A, B))
    assert wrong.defects == {Defect.WRONG_VALUES}
    if kind == "normal":   # (exact and wide sums pass half's 65504: Inf)
        assert {f.detector for f in wrong.findings} == {"error-bound"} and wrong.ratio > 1


def test_a_finding_says_when_its_errors_fit_sums_in_the_input_type_and_stays_silent_when_they_do_not():
    problem = Problem(33, 17, 65, instance("mixed_f16_f32").types, "normal", 2, 2, -1)
    in_half_sums = judged("mixed_f16_f32", problem, lambda t, A, B, s: in_half(A, B))
    assert 'declare accumulator = "float16"' in in_half_sums.message(), in_half_sums.message()
    off = judged("mixed_f16_f32", problem, lambda t, A, B, s: 1.5 * in_float32(A, B))
    assert not off.ok and "accumulator" not in off.message(), off.message()


def test_a_separate_d_leaves_c_an_input_read_only_at_nonzero_beta():
    problem = Problem(9, 7, 5, instance("mixed_f16_f32").types, "exact", 1)
    into_c = judged("mixed_f16_f32", problem, lambda t, A, B, s: in_float32(A, B), into="C")
    assert into_c.defects == {Defect.UNWRITTEN_OUTPUT, Defect.INPUT_MUTATION}
    assert never_written("D") in into_c.message() and "first D[0, 0]" in into_c.message()
    assert "elements of C" in into_c.message()
    reads_c = judged("mixed_f16_f32", problem, lambda t, A, B, s: in_float32(A, B), read_c=True)
    assert not reads_c.ok   # C holds NaN at beta = 0: D comes out NaN (or C's poison bits)


def test_a_d_computed_from_cs_poison_is_written_not_never_written():
    """C and D are float32 alike, so D = acc + 0 * C at beta = 0 carries C's poison payload:
    D's own poison's bits. On the second launch D holds the second poison and C still the
    first, so D shows the first again: written, with NaN where none belongs."""
    problem = Problem(9, 7, 5, instance("mixed_f16_f32").types, "exact", 1)
    inst, backend = stand_in("mixed_f16_f32", lambda t, A, B, s: in_float32(A, B), read_c=True)
    with np.errstate(invalid="ignore"):
        run = run_once(backend, inst, *problem.operands())
    assert (run.C_bits == inst.types.D.poison_bits).all() and backend.launches == 2
    assert not run.unwritten.any()
    assert judge(run, *problem.operands(), exact=True, problem=problem).defects == {Defect.WRONG_VALUES}


def leaves_last_row(name, compute, into="D"):
    """The stand-in of `name` that leaves the last row of its output as it found it."""
    inst, backend = stand_in(name, compute, into=into)
    whole = backend.kernels[inst.spec.entry]

    def kernel(instance, v):
        out, M, N = np.asarray(v[into]), v["M"], v["N"]
        kept = out[(M - 1) * N:M * N].copy()
        whole(instance, v)
        out[(M - 1) * N:M * N] = kept
    return inst, RoleBackend({inst.spec.entry: kernel})


@pytest.mark.parametrize("name, into, compute", [
    ("mixed_f16_f32", "D", lambda t, A, B, s: in_float32(A, B)),   # float32 D: a NaN poison
    ("fp8_e4m3_out", "D", scaled_float32),                          # e4m3 D: -2^-9, a value
    ("dp4a_s8s32", "C", lambda t, A, B, s: A @ B),                  # int32 C: a value
], ids=["f32-D", "e4m3-D", "s32-C"])
def test_an_output_never_written_is_proven_by_a_second_poison_of_its_type(name, into, compute):
    problem = Problem(9, 7, 65, instance(name).types, "exact", 1)
    inst, backend = leaves_last_row(name, compute, into)
    A, B = problem.operands()
    run = run_once(backend, inst, A, B, scales=problem.scale_operands() or None)
    out = inst.types.D
    assert backend.launches == 2 and run.output == into
    assert run.unwritten[-1].all() and run.unwritten.sum() == 7
    assert (run.C_bits[-1] == out.poison_bits).all()
    judgement = judge(run, A, B, exact=True, problem=problem)
    assert judgement.defects == {Defect.UNWRITTEN_OUTPUT}, judgement.message()
    assert never_written(into) in judgement.message()


@pytest.mark.parametrize("kind", ["exact", "normal"])
def test_per_tensor_scales_are_part_of_the_product(kind):
    problem = Problem(33, 17, 65, instance("mixed_fp8_tensor_scaled").types, kind, 4)
    right = judged("mixed_fp8_tensor_scaled", problem, scaled_float32)
    assert right.ok, right.message()
    left_out = judged("mixed_fp8_tensor_scaled", problem,
                      lambda t, A, B, s: in_float32(A, B) * s["scale_A"].item())
    assert left_out.defects == {Defect.WRONG_VALUES}


def test_block_scales_apply_per_block_and_the_transposed_index_is_caught():
    types = instance("fp8_block_scaled").types
    problem = Problem(5, 257, 257, types, "exact", 1)

    def transposed(t, A, B, s):
        sb = s["scale_B"]
        return scaled_float32(t, A, B, {**s, "scale_B": sb.T.reshape(sb.shape)})
    assert judged("fp8_block_scaled", problem, scaled_float32).ok
    assert judged("fp8_block_scaled", problem, transposed).defects == {Defect.WRONG_VALUES}


def test_a_saturating_output_is_judged_saturated_and_an_overflowing_one_wrong():
    problem = Problem(9, 7, 65, instance("fp8_e4m3_out").types, "exact", 1)
    right = judged("fp8_e4m3_out", problem, scaled_float32)
    assert right.ok, right.message()
    assert (right.C == 448).any() and "saturated to its finite range" in right.bound_text

    def overflows(t, A, B, s):   # __NV_NOSAT: past 448 an e4m3 NaN
        exact = scaled_float32(t, A, B, s)
        return np.where(np.abs(exact) > 464, np.nan, exact)
    wrong = judged("fp8_e4m3_out", problem, overflows)
    assert wrong.defects == {Defect.WRONG_VALUES}   # NaN where none belongs, not "unwritten"
    assert "guard payload" not in wrong.message()


def test_integer_inputs_are_judged_exactly_on_every_kind():
    problem = Problem(17, 9, 300, instance("dp4a_s8s32").types, "normal", 1)
    assert judged("dp4a_s8s32", problem, lambda t, A, B, s: A @ B, into="C").ok
    wrapped = lambda t, A, B, s: ((A @ B).astype(np.int64) + 2 ** 15) % 2 ** 16 - 2 ** 15   # int16 sums
    in_int16 = judged("dp4a_s8s32", problem, wrapped, into="C")
    assert in_int16.defects == {Defect.WRONG_VALUES}


def dequantized(types, A, B, scales):
    """W8A8's epilogue: the int32 sum, converted to float32, times the row's and column's scales in float32."""
    acc = (A @ B).astype(np.float32)
    return (acc * scales["scale_A"].astype(np.float32) * scales["scale_B"].astype(np.float32)).astype(np.float64)


def test_integer_sums_dequantized_into_a_float_output_go_through_float32():
    types = instance("w8a8").types
    assert (types.accumulator.name, types.arithmetic.name, types.scalar.name, types.D.name) == \
        ("int32", "float32", "float32", "bfloat16") and types.dequantizes
    with pytest.raises(operand_types.TypesError, match="both int32, or both floating-point"):
        operand_types.of("s8s8s32bf16")
    # exact inputs keep every scaled value within float32's 24 bits, not only int32's 31
    r = exact_range(types, 4096)
    spread = 8 ** 2   # two scaled operands: 2^2 largest over 2^-1 finest
    assert spread * 4096 * r * r <= 2 ** 24 < spread * 4096 * (r + 1) ** 2
    assert Bound.for_types(types, 4096).gamma_acc < 4 * 2.0 ** -24 * 1.01   # a few float32 roundings, not K


@pytest.mark.parametrize("kind", ["exact", "normal", "wide"])
def test_a_dequantized_int8_gemm_is_right_in_float32_and_wrong_through_half_or_without_a_scale(kind):
    for name in ("w8a8", "w8a8_f32"):
        problem = Problem(33, 17, 132, instance(name).types, kind, 3)
        right = judged(name, problem, dequantized)
        assert right.ok, right.message()
        left_out = judged(name, problem, lambda t, A, B, s: dequantized(t, A, B, {**s, "scale_B": 1 + 0 * s["scale_B"]}))
        assert left_out.defects == {Defect.WRONG_VALUES}, name
    # the int32 sum rounded to half's 11 bits on the way: far outside a float32 output's roundings (within a
    # bfloat16 output's own 8 bits, so not a defect there)
    problem = Problem(33, 17, 132, instance("w8a8_f32").types, kind, 3)
    via_half = judged("w8a8_f32", problem, lambda t, A, B, s: dequantized(t, (A @ B).astype(np.float16).astype(
        np.float64), np.eye(B.shape[1]), s))
    assert via_half.defects == {Defect.WRONG_VALUES}, via_half.message()


def test_tf32_math_has_its_own_bound_which_float32_would_not_allow():
    def truncated(t, A, B, s):
        cut = lambda X: (X.astype(np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
        return in_float32(cut(A), cut(B))
    problem = Problem(33, 17, 65, instance("tf32_simt").types, "normal", 5)
    assert judged("tf32_simt", problem, truncated, into="C").ok
    tf32, single = Bound.for_types("tf32", 65), Bound.for_types("float32", 65)
    assert tf32.gamma_acc > 8 * single.gamma_acc and tf32.u_in == 2.0 ** -10
    # the same results held to float32's bound: TF32's rounding of the inputs is far outside it
    A, B = problem.operands()
    got, ref = truncated(None, A, B, {}), A @ B
    assert (np.abs(got - ref) > single.evaluate(np.abs(A) @ np.abs(B), ref)).any()


def test_the_bound_is_stated_per_operand_type():
    f16 = Bound.for_types("f16f16f32", 100)
    assert (f16.u_acc, f16.u_out, f16.accumulator) == (2.0 ** -24, 0.0, "float32")   # float32 out: no rounding
    bf16 = Bound.for_types("f16f16bf16", 100)
    assert (bf16.u_out, bf16.eta_out) == (2.0 ** -8, 2.0 ** -134)
    ints = Bound.for_types("s8s8s32", 100)
    assert (ints.u_acc, ints.u_out, ints.gamma_acc) == (0.0, 0.0, 0.0)
    scaled = Bound.for_types("e4m3e4m3bf16 scale_A=tensor scale_B=tensor", 100)
    assert scaled.scaled == 2 and scaled.gamma_acc == Bound.for_types("f32f32f32", 102).gamma_acc


# -- the simulator's 8-bit floats and dot products, against CUDA's headers ---------------------

CONVERSIONS = r"""
#include <cuda_fp8.h>
#include <cstdio>
#include <cstring>
int main()
{
    double x;
    while (scanf("%lf", &x) == 1)
    {
        float f = (float)x;
        printf("%u %u %u %u %u %u\n", __nv_cvt_float_to_fp8(f, __NV_NOSAT, __NV_E4M3),
               __nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E4M3), __nv_cvt_float_to_fp8(f, __NV_NOSAT, __NV_E5M2),
               __nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E5M2), __nv_cvt_double_to_fp8(x, __NV_NOSAT, __NV_E4M3),
               __nv_cvt_double_to_fp8(x, __NV_SATFINITE, __NV_E5M2));
    }
    for (int b = 0; b < 256; b++)
    {
        __nv_fp8_e4m3 e4;
        __nv_fp8_e5m2 e5;
        e4.__x = e5.__x = (unsigned char)b;
        float f4 = float(e4), f5 = float(e5);
        unsigned u4, u5;
        memcpy(&u4, &f4, 4);
        memcpy(&u5, &f5, 4);
        printf("%u %u\n", f4 != f4 ? 0x7fffffffu : u4, f5 != f5 ? 0x7fffffffu : u5);
    }
}
"""


def fp8_values(n=20000, seed=1) -> np.ndarray:
    """Floats around every 8-bit float: each one, the midpoints between neighbours (ties),
    a hair either side, past the largest, subnormals, zeros, infinities, NaN, random ones."""
    grid = np.concatenate([np.arange(256, dtype=np.uint8).view(d.numpy).astype(np.float64)
                           for d in (dt.get("float8_e4m3fn"), dt.get("float8_e5m2"))])
    grid = np.unique(grid[np.isfinite(grid)])
    mids = (grid[1:] + grid[:-1]) / 2
    rng = np.random.default_rng(seed)
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, 448, 464, 465, 480, 57344, 61440, 61439, 1e6, -1e6,
               2.0 ** -10, 2.0 ** -17, 3 * 2.0 ** -11]
    hair = np.concatenate([mids * (1 + 2.0 ** -20), mids * (1 - 2.0 ** -20)])
    random = rng.standard_normal(n) * np.exp2(rng.uniform(-20, 18, n))
    values = np.concatenate([grid, mids, hair, special, random]).astype(np.float32).astype(np.float64)
    return values


def _run_program(tmp_path, include: Path, stdin: str) -> list[list[int]]:
    source = tmp_path / "conversions.cpp"
    source.write_text(CONVERSIONS)
    exe = tmp_path / f"conversions-{include.parent.name}"
    subprocess.run(["g++", "-std=c++17", "-O1", f"-I{include}", str(source), "-o", str(exe)], check=True,
                   capture_output=True)
    out = subprocess.run([str(exe)], input=stdin, capture_output=True, text=True, check=True).stdout
    return [[int(w) for w in line.split()] for line in out.splitlines()]


def test_8_bit_floats_convert_alike_on_the_fast_paths_and_through_the_rounding():
    """Arrays of values the type holds skip the rounding (the performance suite's input sets),
    and draws within its range round through ml_dtypes: the same bits as the rounding gives."""
    for d in (dt.get("float8_e4m3fn"), dt.get("float8_e5m2")):
        bits = np.arange(256, dtype=np.uint8)
        held = bits.view(d.numpy).astype(np.float64)
        kept = ~np.isnan(held)
        direct = dt.to_bits(held[kept], d)
        rounded = dt.to_bits(np.append(held[kept], 0.1), d)[:-1]   # 0.1 it does not hold: all rounded
        assert np.array_equal(direct, bits[kept]) and np.array_equal(rounded, bits[kept]), d.name
        # random draws within the finite range (ties and subnormals among them) round to the
        # same neighbours through ml_dtypes as through the rounding
        draws = fp8_values()
        draws = draws[np.abs(draws) <= d.largest]
        assert np.array_equal(dt.round_draws(draws, d), dt.from_bits(dt.to_bits(draws, d), d).astype(np.float64))


@pytest.mark.skipif(not (CUDA_INCLUDE / "cuda_fp8.hpp").is_file() or shutil.which("g++") is None,
                    reason="needs CUDA's cuda_fp8.hpp (its host conversions are the device's) and g++")
def test_the_simulator_and_the_oracle_convert_8_bit_floats_as_cuda_does(tmp_path):
    values = fp8_values()
    stdin = "\n".join(repr(float(v)) for v in values) + "\n"
    cuda = _run_program(tmp_path, CUDA_INCLUDE, stdin)
    sim = _run_program(tmp_path, SIM_INCLUDE, stdin)
    assert cuda == sim, next((values[i] if i < len(values) else i, a, b)
                             for i, (a, b) in enumerate(zip(cuda, sim)) if a != b)
    # the oracle's rounding (from float64, once) agrees with CUDA's on every float
    got = np.array(cuda[:len(values)])
    e4, e5 = dt.get("float8_e4m3fn"), dt.get("float8_e5m2")
    finite = ~np.isnan(values)
    for column, d, saturate in ((0, e4, False), (1, e4, True), (2, e5, False), (3, e5, True)):
        ours = dt.to_bits(values, d, saturate=saturate).astype(np.int64)
        mismatch = finite & (ours != got[:, column])
        assert not mismatch.any(), (d.name, saturate, values[mismatch][:5], ours[mismatch][:5],
                                    got[mismatch, column][:5])
        assert (got[~finite, column] & 0x7F == 0x7F).all() and (ours[~finite] & 0x7F == 0x7F).all()


DOT = r"""
#include <cudasim.h>
#include <cstdio>
int main()
{
    int a, b, c;
    while (scanf("%d %d %d", &a, &b, &c) == 3)
        printf("%d %u %d %d %u\n", __dp4a(a, b, c), __dp4a((unsigned)a, (unsigned)b, (unsigned)c), __dp2a_lo(a, b, c),
               __dp2a_hi(a, b, c), __dp2a_hi((unsigned)a, (unsigned)b, (unsigned)c));
}
"""


def test_the_simulators_integer_dot_products_are_ptx_dp4a_and_dp2a(tmp_path):
    rng = np.random.default_rng(3)
    words = rng.integers(-2 ** 31, 2 ** 31, (500, 3))
    words[:3] = [[0x7F7F7F7F, 0x7F7F7F7F, 2 ** 31 - 1], [-1, -1, -2 ** 31], [0x80808080 - 2 ** 32, 0x7F7F7F7F, 5]]
    source = tmp_path / "dot.cpp"
    source.write_text(DOT)
    exe = tmp_path / "dot"
    subprocess.run(["g++", "-std=c++17", f"-I{SIM_INCLUDE}", str(source), "-o", str(exe)], check=True,
                   capture_output=True)
    out = subprocess.run([str(exe)], input="\n".join(" ".join(map(str, w)) for w in words) + "\n",
                         capture_output=True, text=True, check=True).stdout.splitlines()

    def lanes(word, width, signed):
        u = int(word) % 2 ** 32
        parts = [(u >> (width * i)) % 2 ** width for i in range(32 // width)]
        return [p - 2 ** width if signed and p >= 2 ** (width - 1) else p for p in parts]

    def wrap(x, signed):
        x %= 2 ** 32
        return x - 2 ** 32 if signed and x >= 2 ** 31 else x
    for (a, b, c), line in zip(words, out):
        got = [int(w) for w in line.split()]
        s8a, s8b, u8a, u8b = lanes(a, 8, True), lanes(b, 8, True), lanes(a, 8, False), lanes(b, 8, False)
        s16a, u16a = lanes(a, 16, True), lanes(a, 16, False)
        want = [wrap(sum(x * y for x, y in zip(s8a, s8b)) + c, True),
                wrap(sum(x * y for x, y in zip(u8a, u8b)) + c % 2 ** 32, False),
                wrap(s16a[0] * s8b[0] + s16a[1] * s8b[1] + c, True),
                wrap(s16a[0] * s8b[2] + s16a[1] * s8b[3] + c, True),
                wrap(u16a[0] * u8b[2] + u16a[1] * u8b[3] + c % 2 ** 32, False)]
        assert got == want, (a, b, c, got, want)


def test_in_place_d_is_c_and_a_kernel_that_reads_c_after_writing_d_is_caught():
    inst = instance("mixed_f16_f32")
    assert inst.spec.d_aliases_c
    problem = Problem(9, 7, 5, inst.types, "exact", 1, 2, -1)
    A, B, C0 = problem.operands()

    def kernel(reads_after_writing):
        def run(instance, v):
            types, (M, N, K) = instance.types, (v["M"], v["N"], v["K"])
            P = v["alpha"] * in_float32(operand(v, types, "A", (M, K)), operand(v, types, "B", (K, N)))
            if reads_after_writing:   # D first, then C: in place, C is gone by then
                np.asarray(v["D"])[:M * N] = dt.to_bits(P, types.D).reshape(-1)
            C = operand(v, types, "C", (M, N))
            np.asarray(v["D"])[:M * N] = dt.to_bits(P + v["beta"] * C, types.D).reshape(-1)
        return RoleBackend({inst.spec.entry: run})
    for reads_after_writing, ok in ((False, True), (True, False)):
        separate = run_once(kernel(reads_after_writing), inst, A, B, C0, alpha=2, beta=-1)
        in_place = run_once(kernel(reads_after_writing), inst, A, B, C0, alpha=2, beta=-1, in_place=True)
        assert separate.output == "D" and in_place.output == "C"
        assert judge(separate, A, B, exact=True).ok
        assert judge(in_place, A, B, exact=True).ok == ok


def test_the_performance_suite_times_a_type_per_operand_and_warms_up_its_combination():
    import types as namespaces

    from gemmcheck.perf import warm
    from gemmcheck.pytest_plugin import perf_plugin

    params = {perf_plugin.TIMED: instance("mixed_f16_f32")}
    item = namespaces.SimpleNamespace(callspec=namespaces.SimpleNamespace(params=params),
                                      get_closest_marker=lambda name: None)
    assert perf_plugin.pytest_gemm_skip_reason(None, item) is None
    assert warm.kinds_of([instance("mixed_f16_f32")]) == [("f16f16f32", ()), ("float32", ())]


def test_e5m2_operands_are_judged_bit_for_bit_and_e5m2_bytes_read_as_e4m3_are_caught():
    """The simulator's e5m2 against the oracle's: an e4m3 x e5m2 kernel (fp8 training's hybrid
    recipe) is right on exact problems, and its twin reading B's bytes as e4m3 is wrong."""
    from gemmcheck.problems.harness import run_problem
    from simulator import simulator

    right, twin = (SPECS[name].instances()[0] for name in ("fp8_hybrid", "fp8_hybrid_b_read_as_e4m3"))
    assert (right.types.A.name, right.types.B.name, right.types.D.name) == ("float8_e4m3fn", "float8_e5m2",
                                                                             "bfloat16")
    problem = Problem(33, 17, 65, right.types, "exact", 3)
    with simulator([right, twin]) as backend:
        for inst, correct in ((right, True), (twin, False)):
            judgement = judge(run_problem(backend, inst, problem), *problem.operands()[:2], exact=True,
                              problem=problem)
            assert judgement.ok == correct, judgement.message()
            assert correct or judgement.defects == {Defect.WRONG_VALUES}


def test_an_int8_gemm_with_cublas_int32_alpha_and_beta_is_packed_and_judged_and_its_c_can_be_finite(tmp_path):
    """cuBLAS's int8 GEMM takes int alpha and beta (CUBLAS_COMPUTE_32I): the suite's alpha and
    beta are integers, packed as the kernel's int; the beta = 0 probe's finite C for an int32 C
    lies above every judged result."""
    from gemmcheck.problems.harness import finite_garbage, run_problem
    from simulator import simulator

    garbage = finite_garbage(4, 5, dt.get("int32"))
    assert (np.abs(garbage) > 2 ** 30).all() and (np.abs(garbage) <= 2 ** 31 - 1).all()
    (tmp_path / "k.cu").write_text(
        "__global__ void k(int M, int N, int K, int alpha, const signed char *A, const signed char *B, int beta, "
        "int *C) {\n  int r = blockIdx.y * blockDim.y + threadIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (r < M && c < N) { int s = 0; for (int k = 0; k < K; ++k) s += A[r * K + k] * B[k * N + c];\n"
        "    C[r * N + c] = alpha * s + (beta == 0 ? 0 : beta * C[r * N + c]); } }\n")
    (tmp_path / "c.toml").write_text(
        '[[kernel]]\nname = "k"\nsource = "k.cu"\nentry = "k"\nargs = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]\n'
        'grid = ["ceil(N / 8)", "ceil(M / 8)"]\nblock = [8, 8]\ndtypes = ["s8s8s32"]\nexpect = "correct"\n')
    (spec,) = catalog.load(tmp_path / "c.toml")
    inst = spec.instances()[0]
    problem = Problem(9, 11, 21, inst.types, "exact", 1, 2, -1)
    with simulator() as backend:
        judgement = judge(run_problem(backend, inst, problem), *problem.operands()[:2], exact=True, problem=problem)
    assert judgement.ok, judgement.message()
