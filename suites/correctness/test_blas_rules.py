"""BLAS's rules for GEMM's edges: beta = 0 never reads C; K = 0 gives beta C0; M or N = 0
launches nothing.

- At beta = 0 C need not be initialized and must not be read (cuBLAS: "C does not have to
  be a valid input"). One check per instantiation that takes beta establishes a read
  (gemmcheck.judge.beta_zero: C holding NaN, then finite values; the output must not
  change). Every other check that fails only because of that read says so in its first
  line and points here. A kernel whose callers always initialize C declares
  ``reads_c_at_beta_zero = true``: then C is filled with finite values at beta = 0, and
  this check is a note, not a failure.
- K = 0: every element of C is written, with beta C0 (zeros at beta = 0).
- M = 0 or N = 0: there is nothing to compute; a zero grid is a launch error, so nothing
  is launched and C (with its guard bands) is left as it was.
- D separate from C: C is only read (every check compares it after the launch: a write into
  it is input mutation). A kernel declaring ``d_aliases_c = true`` is also run in place, D
  and C one buffer, as its callers may pass them.

Shapes a kernel does not claim are skipped with its claim (a `tile-multiple` kernel claims
0, a multiple of every TILE; a square-only kernel claims only the empty cube).
"""

import pytest

from gemmcheck import report
from gemmcheck.judge import beta_zero
from gemmcheck.judge.oracle import current_test
from gemmcheck.problems.harness import OPERAND_VARIANTS
from gemmcheck.problems.problem import BETA_SCALING, DEFAULT_SCALING, Problem
from gemmcheck.verdict import Verdict

SEED = 12
SCALINGS = tuple(dict.fromkeys((v.alpha, v.beta) for v in OPERAND_VARIANTS))


def degenerate_shapes(tile: int) -> dict[str, list[tuple[int, int, int]]]:
    """Per empty dimension, candidate shapes in order: ragged first, then whole tiles."""
    t = tile
    return {"K0": [(2 * t + 1, t + 1, 0), (2 * t, 2 * t, 0)],
            "M0": [(0, t + 1, t + 2), (0, 2 * t, 2 * t), (0, 0, 0)],
            "N0": [(t + 1, 0, t + 2), (2 * t, 0, 2 * t), (0, 0, 0)]}


def claimed_degenerate(instance, require_in_scope, empty: str) -> tuple[int, int, int]:
    """The first candidate the instantiation claims; none: skipped with its claim."""
    candidates = degenerate_shapes(instance.tile)[empty]
    shape = next((s for s in candidates if instance.supports(*s)), candidates[0])
    require_in_scope(instance, *shape)
    return shape


@pytest.mark.instances.with_args(beta_zero.takes_beta)
def test_beta_zero_never_reads_c(beta_zero_probe, reference, verdicts):
    probe = beta_zero_probe(reference)
    if probe.problem is None:
        pytest.skip(f"{reference.id}: no probe shape claimed, or its launches failed (the checks "
                    f"that launch it say why)")
    if reference.spec.reads_c_at_beta_zero:
        note = ("declared reads_c_at_beta_zero = true (its callers always initialize C; the suite "
                "fills C with finite values at beta = 0): "
                + (probe.finding.summary if probe.reads_c else "it does not read C at beta = 0 anyway"))
        verdicts.record(Verdict.for_instance(reference, probe.problem.label, [], current_test(), notes=[note]))
        report.attach_text("declared convention (information)", note)
        return
    verdicts.record(Verdict.for_instance(reference, probe.problem.label,
                                         [probe.finding] if probe.reads_c else [], current_test()))
    if probe.reads_c:
        pytest.fail(f"{probe.finding.defect.value}: {reference.id} ({reference.name_expression}) on "
                    f"{probe.problem.label}: {probe.finding.summary}", pytrace=False)


@pytest.mark.parametrize("scaling", SCALINGS, ids=lambda s: f"alpha{s[0]:g}-beta{s[1]:g}")
def test_K0_writes_beta_C0_everywhere(check, require_in_scope, require_variant, reference, scaling):
    variant = next(v for v in OPERAND_VARIANTS if (v.alpha, v.beta) == scaling)
    variant = require_variant(reference, variant)
    M, N, K = claimed_degenerate(reference, require_in_scope, "K0")
    judgement = check(reference, Problem(M, N, K, reference.types, "exact", SEED, variant.alpha, variant.beta))
    assert judgement.run.launched, f"{reference.id}: K = 0 with M = {M}, N = {N} was not launched"


@pytest.mark.parametrize("empty", ["M0", "N0"])
def test_M_or_N_zero_launches_nothing_and_leaves_C_untouched(check, require_in_scope, reference, empty):
    M, N, K = claimed_degenerate(reference, require_in_scope, empty)
    judgement = check(reference, Problem(M, N, K, reference.types, "exact", SEED))
    run = judgement.run
    assert not run.launched, f"{reference.id}: M = {M}, N = {N}: a launch was made (BLAS returns at once)"
    damaged = {k: v for k, v in run.guard_damage.items() if v}
    assert not damaged, f"{reference.id}: M = {M}, N = {N}: guard bands changed {damaged}"


@pytest.mark.instances.with_args(lambda instance: instance.spec.d_aliases_c)
def test_D_may_be_C_where_the_kernel_declares_it(check, require_in_scope, reference):
    t = reference.tile
    M, N, K = 2 * t + 1, t + 3, 2 * t + 2
    require_in_scope(reference, M, N, K)
    scaling = tuple(v if role in reference.spec.roles else neutral
                    for role, v, neutral in zip(("alpha", "beta"), BETA_SCALING, DEFAULT_SCALING))
    judgement = check(reference, Problem(M, N, K, reference.types, "exact", SEED, *scaling), in_place=True)
    assert judgement.run.output == "C", f"{reference.id}: in place, the result must be read from C"
