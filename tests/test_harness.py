"""The harness lays out guards and poison so unwritten outputs, out-of-bounds
writes and input mutation are visible in the bits."""

import numpy as np
import pytest

from gemmcheck.contract import launch
from gemmcheck.contract import catalog
from gemmcheck.contract import dtypes as dt
from gemmcheck.problems import harness
from gemmcheck.problems.harness import GuardedGemm, guard_elements, run_once

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


def skips_last_row(instance, grid, block, A, B, C, M, N, K):
    before = C[(M - 1) * N:].copy()
    correct_product(instance, grid, block, A, B, C, M, N, K)
    C[(M - 1) * N:] = before   # the last row left as it was: never written


def test_unwritten_elements_keep_the_poison_bits_and_a_second_poison_on_a_launch_with_it():
    backend = NumpyBackend({"matmul_tiled_guarded": skips_last_row})
    run = run_once(backend, inst(), *operands(5, 7, 3))
    assert run.unwritten.sum() == 7 and run.unwritten[-1].all()
    assert (run.C_bits[-1] == inst().dt.poison_bits).all()   # what the run shows: its own launch's C
    assert backend.launches == 2                              # the one confirming launch


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_an_element_written_with_the_poisons_payload_is_written_not_unwritten(dtype):
    """A race that reads stale shared memory which held the poison computes NaN + x: the NaN
    keeps its payload (on the CPU, and in a GPU's float64), so the element holds the poison's
    bits. Launched again with C filled with the second poison, it holds the first again: it was
    written (wrong), not left unwritten. Stood in for by writing the payload itself."""
    def writes_the_payload(instance, grid, block, A, B, C, M, N, K):
        correct_product(instance, grid, block, A, B, C, M, N, K)
        C[:N] = instance.dt.poison_bits
    backend = NumpyBackend({"matmul_tiled_guarded": writes_the_payload})
    run = run_once(backend, inst(dtype=dtype), *operands(5, 7, 3))
    assert (run.C_bits[0] == run.instance.dt.poison_bits).all() and not run.unwritten.any()
    assert backend.launches == 2


def test_a_kernel_that_writes_every_element_is_launched_once():
    backend = NumpyBackend({"matmul_tiled_guarded": correct_product})
    run_once(backend, inst(), *operands(5, 7, 3))
    assert backend.launches == 1


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_the_second_poison_is_a_quiet_nan_of_its_own(dtype):
    d = dt.get(dtype)
    second = harness.confirming_poison(d, d.poison_bits, d.guard_bits)
    value = float(np.array([second], dtype=d.storage).view(d.numpy)[0])
    canonical = int(np.array([np.nan], dtype=d.numpy).view(d.storage)[0])
    assert np.isnan(value) and second not in (d.poison_bits, d.guard_bits, canonical)


@pytest.mark.parametrize("dtype", list(dt.ELEMENT_TYPES))
def test_the_second_poison_is_of_the_first_ones_kind_and_no_value_arithmetic_makes(dtype):
    """A NaN for a NaN poison (e5m2's 0x7D with its last bit cleared is Inf), a value for a
    value poison (e4m3's -2^-9, the integers'), never zero (e4m3's 0x81 ^ 1 is -0), the guard,
    or a NaN a conversion makes."""
    d = dt.get(dtype)
    second = harness.confirming_poison(d, d.poison_bits, d.guard_bits)
    values = dt.from_bits(np.array([d.poison_bits, second], dtype=d.storage), d).astype(np.float64)
    assert second not in (d.poison_bits, d.guard_bits, (1 << (8 * d.itemsize - 1)) - 1)
    assert np.isnan(values[0]) == np.isnan(values[1]) and not np.isinf(values[1]) and values[1] != 0
    if not d.is_integer:
        assert second != int(np.array([np.nan], dtype=d.numpy).view(d.storage)[0])


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


class Counting(NumpyBackend):
    """Counts what is copied back; copies and compares 'on the device', as the GPU does."""
    copied_back = 0

    def to_host(self, buffer):
        Counting.copied_back += 1
        return super().to_host(buffer)

    def copy(self, buffer):
        return np.array(buffer, copy=True)

    def same(self, a, b):
        return bool(np.array_equal(a, b))


def test_a_run_copies_back_only_C_unless_an_operand_changed(monkeypatch):
    """A and B are compared where they live (Backend.same) and copied back only when they
    differ: at the nightly's race sizes each is up to 32 MB, read back ten times a row."""
    monkeypatch.setattr(harness, "DEVICE_COMPARE_BYTES", 0)     # every buffer counts as large
    def scribbles_on_B_guard(instance, grid, block, A, B, C, M, N, K):
        correct_product(instance, grid, block, A, B, C, M, N, K)
        B.base[0] ^= 1
    for kernel, copies, damage in ((correct_product, 1, {"A": 0, "B": 0, "C": 0}),
                                   (scribbles_on_B_guard, 2, {"A": 0, "B": 1, "C": 0})):
        gemm = GuardedGemm(Counting({"matmul_tiled_guarded": kernel}), inst(), *operands(5, 7, 3))
        Counting.copied_back = 0
        run = gemm.run()
        assert Counting.copied_back == copies and run.guard_damage == damage
        assert run.inputs_changed == {"A": 0, "B": 0}


def test_a_run_that_leaves_the_last_runs_bits_shares_its_arrays_instead_of_reading_C_back(monkeypatch):
    """Compared on the device first: the same bits are not read back (16 MB a launch at the
    race sizes); different bits are, and get arrays of their own. Shared arrays are read-only."""
    monkeypatch.setattr(harness, "DEVICE_COMPARE_BYTES", 0)     # every buffer counts as large
    launches = []

    def alternates(instance, grid, block, A, B, C, M, N, K):   # right, right, then one element off
        correct_product(instance, grid, block, A, B, C, M, N, K)
        launches.append(1)
        if len(launches) == 3:
            C[0] ^= 1
    gemm = GuardedGemm(Counting({"matmul_tiled_guarded": alternates}), inst(), *operands(5, 7, 3))
    Counting.copied_back = 0
    first, second, third = gemm.run(), gemm.run(), gemm.run()
    assert Counting.copied_back == 2                      # the first and the third C
    assert second.C_bits is first.C_bits and second.unwritten is first.unwritten
    assert third.C_bits is not first.C_bits and np.count_nonzero(third.C_bits != first.C_bits) == 1
    with pytest.raises(ValueError, match="read-only"):
        first.C_bits[0, 0] = 0


def test_small_buffers_are_read_back_without_comparing_on_the_device():
    """Below DEVICE_COMPARE_BYTES a compare costs more than the copy (and compiles CuPy
    kernels on first use): A, B and C are read back, never compared there."""
    class NeverCompares(Counting):
        def same(self, a, b):
            raise AssertionError("compared on the device")

    gemm = GuardedGemm(NeverCompares({"matmul_tiled_guarded": correct_product}), inst(), *operands(5, 7, 3))
    Counting.copied_back = 0
    first, second = gemm.run(), gemm.run()
    assert Counting.copied_back == 6 and np.array_equal(first.C_bits, second.C_bits)


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


# -- layouts, leading dimensions, alpha and beta (kernels that take arguments by role) ------

from functools import partial  # noqa: E402

from gemmcheck.problems.harness import padded_leading_dimension, run_problem  # noqa: E402
from gemmcheck.judge.oracle import judge  # noqa: E402
from gemmcheck.problems.problem import BETA_SCALING, DEFAULT_SCALING, Problem  # noqa: E402
from gemmcheck.verdict import Defect  # noqa: E402

from fakes import SGEMM_ROLES, RoleBackend, RoleSpec, role_gemm  # noqa: E402

LAYOUT_CASES = {"rrr": {}, "ccc": {"A": "col", "B": "col", "C": "col"}, "crc": {"A": "col", "C": "col"},
                "rcr": {"B": "col"}}


def role_instance(layouts=None, roles=SGEMM_ROLES, dtype="float32", tile=4):
    return catalog.Instance(RoleSpec("sgemm", roles, layouts), dtype, tile)


def judged_role(kernel, instance, problem, leading_dimensions="tight"):
    backend = RoleBackend({"sgemm": kernel})
    run = run_problem(backend, instance, problem, leading_dimensions=leading_dimensions)
    A, B = problem.operands()[:2]
    return run, judge(run, A, B, exact=problem.exact, problem=problem)


def defects(judgement):
    return {f.defect for f in judgement.findings}


@pytest.mark.parametrize("scaling", [DEFAULT_SCALING, BETA_SCALING], ids=lambda s: f"alpha{s[0]}-beta{s[1]}")
@pytest.mark.parametrize("leading_dimensions", ["tight", "padded"])
@pytest.mark.parametrize("layouts", LAYOUT_CASES, ids=str)
@pytest.mark.parametrize("values", ["exact", "normal"])
def test_a_correct_kernel_is_clean_in_every_layout_ld_and_scaling(layouts, leading_dimensions, scaling, values):
    problem = Problem(5, 6, 7, "float32", values, 3, *scaling)
    run, judgement = judged_role(role_gemm, role_instance(LAYOUT_CASES[layouts]), problem, leading_dimensions)
    assert judgement.ok, judgement.message()
    assert run.guard_damage == {"A": 0, "B": 0, "C": 0} and run.inputs_changed == {"A": 0, "B": 0}


@pytest.mark.parametrize("layouts", LAYOUT_CASES, ids=str)
def test_padded_leading_dimensions_exceed_the_width_and_their_padding_is_guarded(layouts):
    instance = role_instance(LAYOUT_CASES[layouts])
    A, B = Problem(5, 6, 7, "float32", "exact", 1).operands()
    gemm = GuardedGemm(RoleBackend({"sgemm": role_gemm}), instance, A, B, leading_dimensions="padded")
    values = gemm.role_values()
    for buf in (gemm.A, gemm.B, gemm.C):
        ld = values["ld" + buf.name.lower()]
        assert ld == padded_leading_dimension(buf.width) > buf.width
        assert ld == buf.ld and buf.width == (buf.cols if buf.layout == "row" else buf.rows)
        padding = buf.guard_cells(buf.bits)
        assert padding.size == 2 * buf.guard + buf.lines * (ld - buf.width)
        assert (padding == gemm.guard_bits).all()
    assert set(values) == {"A", "B", "C", "M", "N", "K", "lda", "ldb", "ldc", "alpha", "beta"}
    # A holds the matrix itself where the layout says: element (i, j) at i*lda + j or j*lda + i.
    a_flat = gemm.A.bits[gemm.A.guard:]
    i, j = 4, 6
    at = i * values["lda"] + j if gemm.A.layout == "row" else j * values["lda"] + i
    assert dt.from_bits(a_flat[at:at + 1], instance.dt)[0] == A[i, j]


@pytest.mark.parametrize("layouts", LAYOUT_CASES, ids=str)
@pytest.mark.parametrize("operands", ["ABC", "A", "B", "C"])
def test_a_kernel_that_assumes_ld_equals_the_width_is_caught_with_padded_ld_only(layouts, operands):
    kernel = partial(role_gemm, assumes_tight_ld=operands)
    instance = role_instance(LAYOUT_CASES[layouts])
    problem = Problem(5, 6, 7, "float32", "exact", 1)
    assert judged_role(kernel, instance, problem, "tight")[1].ok
    run, judgement = judged_role(kernel, instance, problem, "padded")
    found = defects(judgement)
    assert not judgement.ok and found - {Defect.OUT_OF_BOUNDS_WRITE} <= {Defect.WRONG_VALUES, Defect.UNWRITTEN_OUTPUT}
    if operands == "C":
        # Finite results written at i * N + j land in C's padding: out-of-bounds writes, which the
        # judgement names. (With A and B read as tight too, the NaNs written there are the guard's own.)
        assert run.guard_damage["C"] > 0 and Defect.OUT_OF_BOUNDS_WRITE in found, found
    elif operands != "ABC":
        assert run.guard_damage["C"] == 0 and Defect.OUT_OF_BOUNDS_WRITE not in found, found


SCALING_BUGS = {
    "ignores-beta": partial(role_gemm, beta=0),           # C = alpha A B
    "ignores-alpha": partial(role_gemm, alpha=1),         # C = A B + beta C
    "A@B+C0": partial(role_gemm, alpha=1, beta=1),        # C = A B + C0, whatever alpha and beta
}


@pytest.mark.parametrize("values", ["exact", "normal"])
@pytest.mark.parametrize("bug", SCALING_BUGS)
def test_a_kernel_that_ignores_alpha_or_beta_is_caught_at_beta_nonzero(bug, values):
    instance = role_instance()
    if bug != "A@B+C0":
        # At (1, 0) ignoring alpha or beta is invisible: the test's own control.
        assert judged_role(SCALING_BUGS[bug], instance, Problem(5, 6, 7, "float32", values, 3))[1].ok
    judgement = judged_role(SCALING_BUGS[bug], instance, Problem(5, 6, 7, "float32", values, 3, *BETA_SCALING))[1]
    assert Defect.WRONG_VALUES in defects(judgement), judgement.message()


def test_a_kernel_that_reads_C_when_beta_is_zero_is_caught():
    # BLAS: with beta = 0, C is not read. C starts as the poison NaN, so 1 * C shows
    # (as a NaN, or as the poison itself where the NaN payload propagates).
    judgement = judged_role(partial(role_gemm, beta=1), role_instance(), Problem(5, 6, 7, "float32", "exact", 3))[1]
    assert not judgement.ok and defects(judgement) <= {Defect.WRONG_VALUES, Defect.UNWRITTEN_OUTPUT}


@pytest.mark.parametrize("operand", ["A", "B"])
def test_a_column_major_operand_read_as_row_major_is_caught(operand):
    instance = role_instance({operand: "col"})
    problem = Problem(5, 7, 6, "float32", "exact", 2)   # M <= K <= N: misread indices stay inside
    assert judged_role(role_gemm, instance, problem)[1].ok
    judgement = judged_role(partial(role_gemm, layouts={operand: "row"}), instance, problem)[1]
    assert Defect.WRONG_VALUES in defects(judgement)


def test_with_beta_nonzero_an_unwritten_element_keeps_C0_and_is_unwritten_output():
    def skips_last_row(instance, v):
        C = v["C"].copy()
        role_gemm(instance, v)
        v["C"][(v["M"] - 1) * v["ldc"]:] = C[(v["M"] - 1) * v["ldc"]:]
    problem = Problem(5, 6, 7, "float32", "exact", 3, *BETA_SCALING)
    run, judgement = judged_role(skips_last_row, role_instance(), problem)
    assert run.unwritten.sum() == 6 and run.unwritten[-1].all()
    assert defects(judgement) == {Defect.UNWRITTEN_OUTPUT}
    assert "C0's bits" in judgement.message()


def test_operands_that_do_not_fit_the_kernel_are_refused():
    backend = RoleBackend({"sgemm": role_gemm})
    A, B, C0 = Problem(4, 4, 4, "float32", "exact", 1, *BETA_SCALING).operands()
    plain = role_instance(roles=("A", "B", "C", "M", "N", "K"))
    with pytest.raises(ValueError, match="takes no lda/ldb/ldc: padded leading dimensions do not apply"):
        GuardedGemm(backend, plain, A, B, leading_dimensions="padded")
    with pytest.raises(ValueError, match="takes no beta: beta = -1 does not apply"):
        GuardedGemm(backend, plain, A, B, C0, beta=-1)
    with pytest.raises(ValueError, match="takes no alpha: alpha = 2 does not apply"):
        GuardedGemm(backend, plain, A, B, alpha=2)
    with pytest.raises(ValueError, match="pass C0 exactly when beta != 0"):
        GuardedGemm(backend, role_instance(), A, B, beta=-1)
    with pytest.raises(ValueError, match="leading_dimensions='wide'"):
        GuardedGemm(backend, role_instance(), A, B, leading_dimensions="wide")


def test_arguments_follow_the_kernels_roles_with_alpha_and_beta_in_its_scalar_type():
    seen = {}
    instance = role_instance(dtype="float16")
    gemm = GuardedGemm(RoleBackend({"sgemm": lambda instance, v: seen.update(v)}), instance,
                       *Problem(4, 5, 6, "float16", "exact", 1, *BETA_SCALING).operands(), alpha=2, beta=-1)
    args = launch.plan(instance, gemm.role_values()).args
    assert [int(a) for a in args[:3]] == [4, 5, 6]
    # float16 kernels take float alpha and beta (they accumulate in float)
    assert args[3] == 2 and args[8] == -1 and np.asarray(args[3]).dtype == np.float32
    gemm.run()
    assert list(seen) == list(SGEMM_ROLES)


def test_the_failure_message_names_layouts_and_padded_leading_dimensions():
    problem = Problem(5, 6, 7, "float32", "exact", 1, *BETA_SCALING)
    run, judgement = judged_role(partial(role_gemm, beta=0), role_instance({"A": "col"}), problem, "padded")
    message = judgement.message()
    assert "A col-major lda 8 (padded), B row-major ldb 8 (padded), C row-major ldc 8 (padded)" in message
    assert "alpha = 2, beta = -1" in message and "alpha=2, beta=-1" in message   # bound text, reproduction
    assert judged_role(role_gemm, role_instance(), Problem(5, 6, 7, "float32", "exact", 1))[0].operands_text == ""
