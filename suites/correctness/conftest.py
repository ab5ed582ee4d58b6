"""Fixtures of the correctness suite: run-and-judge, scope and profile gates.

A failure at beta = 0 that a read of C explains (gemmcheck.judge.beta_zero, established
once per instantiation by test_blas_rules.py) names that read in its first line.

Logic lives in gemmcheck.problems.problem / oracle / strategies; these only wire it to tests.
"""

import pytest

from gemmcheck.backends import KernelCompileError, KernelLaunchError
from gemmcheck import containment
from gemmcheck.pytest_plugin import scope_plugin
from gemmcheck.problems.harness import fitted_variant, run_problem
from gemmcheck.judge import beta_zero
from gemmcheck.judge.oracle import assert_judgement, current_test, judge
from gemmcheck.verdict import Verdict

PROBES = pytest.StashKey[dict]()


@pytest.fixture
def beta_zero_probe(backend, request):
    """beta_zero_probe(instance) -> gemmcheck.judge.beta_zero.Probe: whether the instantiation
    reads C at beta = 0, launched once per instantiation in this process. A probe whose
    launches fail establishes nothing (the checks record those failures themselves)."""
    cache = request.config.stash.setdefault(PROBES, {})

    def probe(instance) -> beta_zero.Probe:
        if instance.id not in cache:
            try:
                containment.refuse_lost(request.config, instance)
                cache[instance.id] = beta_zero.probe(backend, instance)
            except (KernelCompileError, KernelLaunchError):
                cache[instance.id] = beta_zero.Probe(None)
        return cache[instance.id]
    return probe


def _fail_explained(verdicts, instance, judgement, verified: str) -> None:
    """Record and fail a check whose failure the read of C at beta = 0 explains: the first line
    names the defect and the check that established it, the check's own story follows."""
    __tracebackhide__ = True
    assert_judgement(judgement, verdicts, explained=beta_zero.explanation(instance, judgement.findings, verified))


@pytest.fixture
def check(backend, verdicts, request, beta_zero_probe):
    """check(instance, problem, record=True, leading_dimensions='tight', in_place=False) -> Judgement:
    run the problem (its alpha, beta and C0 too; with in_place, D is C's buffer) once, judge it,
    record the verdict and fail with the oracle's message if anything is wrong.
    With record=False (property tests: one verdict per example would flood the log)
    only a failing judgement is recorded.
    A launch that does not build, crashes or hangs records compile_error / crash / hang
    (never not_checked) and raises: gemmcheck.containment makes it one failure per
    instantiation and skips its other tests; once lost, it is not launched again."""
    def check(instance, problem, *, record: bool = True, leading_dimensions: str = "tight", in_place: bool = False):
        __tracebackhide__ = True
        operands = problem.operands()     # made once, for the run and the judgement
        A, B = operands[:2]
        try:
            containment.refuse_lost(request.config, instance)
            run = run_problem(backend, instance, problem, operands=operands,
                              leading_dimensions=leading_dimensions, in_place=in_place)
        except (KernelCompileError, KernelLaunchError) as exc:
            if instance.id not in containment.containment(request.config).lost:
                containment.lose(request.config, instance, exc, request.node.nodeid)
                verdicts.record(containment.unfinished_verdict(instance, exc, request.node.nodeid))
            # one type from one line: a hypothesis search that replays it sees the same error
            raise containment.uniform(exc) from None
        judgement = judge(run, A, B, exact=problem.exact, problem=problem)
        informational = scope_plugin.OUT_OF_SCOPE in request.node.stash   # not the kernel's claim
        if (not judgement.ok and not informational and problem.beta == 0
                and beta_zero.explains(beta_zero_probe(instance), instance, problem, judgement.findings)):
            # Verified here, not assumed: the same launch with C finite instead of NaN.
            again = run_problem(backend, instance, problem, operands=operands,
                                leading_dimensions=leading_dimensions, c_fill="finite", in_place=in_place)
            if judge(again, A, B, exact=problem.exact, problem=problem).ok:
                _fail_explained(verdicts, instance, judgement,
                                "launched again with C holding finite values instead of NaN, this check passes")
        assert_judgement(judgement, verdicts if (record or not judgement.ok) and not informational else None)
        return judgement
    return check


@pytest.fixture
def assert_judged(verdicts, beta_zero_probe):
    """assert_judged(judgement): oracle.assert_judgement for a test that launched on its own,
    naming reads_c_at_beta_zero first when that read explains its findings (beta_zero.explains)."""
    def assert_judged(judgement) -> None:
        __tracebackhide__ = True
        instance, run = judgement.instance, judgement.run
        if (not judgement.ok and run is not None and run.beta == 0 and beta_zero.takes_beta(instance)
                and beta_zero.explains(beta_zero_probe(instance), instance, run, judgement.findings)):
            _fail_explained(verdicts, instance, judgement, "C held NaN at beta = 0 here too")
        assert_judgement(judgement, verdicts)
    return assert_judged


@pytest.fixture
def require_in_scope(request):
    """require_in_scope(instance, M, N, K): skip, reported as out of scope, a shape the
    kernel does not claim (or run it as information: --gemm-out-of-scope). Never a silent pass."""
    return lambda instance, M, N, K: scope_plugin.require_in_scope(request, instance, M, N, K)


@pytest.fixture
def require_variant():
    """require_variant(instance, variant) -> the harness.OperandVariant as the kernel takes it
    (alpha and beta where it takes them: alpha 2, beta 0 for a kernel with alpha only); a
    variant it cannot take (padded ld without lda/ldb/ldc) or that adds nothing skips, with why."""
    def require_variant(instance, variant):
        fitted, why = fitted_variant(instance.spec, variant)
        if why:
            pytest.skip(f"does not apply: {why}")
        return fitted
    return require_variant


@pytest.fixture
def searched(reference, profile):
    """The reference instantiation, if the profile has hypothesis search it (TILE >= property_min_tile)."""
    if reference.tile < profile.property_min_tile:
        pytest.skip(f"profile {profile.name} searches shapes at TILE >= {profile.property_min_tile} "
                    f"only; this TILE gets the TILE-derived fixed shapes (--gemm-profile nightly "
                    f"searches every TILE)")
    return reference


@pytest.fixture
def conclude(verdicts, beta_zero_probe):
    """conclude(instance, problem, finding): record the verdict; fail with the finding if there is one.
    A finding of the kind a read of C at beta = 0 leaves, on an instantiation that reads C
    there, names that defect first (beta_zero.explains)."""
    def conclude(instance, problem, finding=None) -> None:
        __tracebackhide__ = True
        if (finding and not instance.spec.reads_c_at_beta_zero and beta_zero.takes_beta(instance)
                and beta_zero.explains(beta_zero_probe(instance), instance, problem, [finding])):
            explained = beta_zero.explanation(instance, [finding], "C held NaN at beta = 0 here too")
            verdicts.record(Verdict.for_instance(instance, problem.label, [explained], current_test()))
            pytest.fail(f"{explained.defect.value}: {explained.summary}\n\n{finding.defect.value}: "
                        f"{instance.id} ({instance.name_expression}) on {problem.label}: {finding.summary}",
                        pytrace=False)
        verdicts.record(Verdict.for_instance(instance, problem.label, [finding] if finding else []))
        if finding:
            pytest.fail(f"{finding.defect.value}: {instance.id} ({instance.name_expression}) on "
                        f"{problem.label}: {finding.summary}", pytrace=False)
    return conclude
