"""Fixtures of the correctness suite: run-and-judge, scope and profile gates.

Logic lives in gemmcheck.problems.problem / oracle / strategies; these only wire it to tests.
"""

import pytest

from gemmcheck.backends import KernelCompileError, KernelLaunchError
from gemmcheck.contract import catalog
from gemmcheck.pytest_plugin import build_plugin, scope_plugin
from gemmcheck.problems.harness import run_problem
from gemmcheck.judge.oracle import assert_judgement, judge
from gemmcheck.verdict import Verdict


@pytest.fixture
def check(backend, verdicts, request):
    """check(instance, problem, record=True, leading_dimensions='tight') -> Judgement: run the
    problem (its alpha, beta and C0 too) once, judge it,
    record the verdict and fail with the oracle's message if anything is wrong.
    With record=False (property tests: one verdict per example would flood the log)
    only a failing judgement is recorded.
    A launch that does not build, crashes or hangs records compile_error / crash / hang
    (never not_checked) and raises: gemmcheck.pytest_plugin.build_plugin makes it one failure per
    instantiation and skips its other tests; once lost, it is not launched again."""
    def check(instance, problem, *, record: bool = True, leading_dimensions: str = "tight"):
        __tracebackhide__ = True
        operands = problem.operands()     # made once, for the run and the judgement
        A, B = operands[:2]
        try:
            build_plugin.refuse_lost(request.config, instance)
            run = run_problem(backend, instance, problem, operands=operands,
                              leading_dimensions=leading_dimensions)
        except (KernelCompileError, KernelLaunchError) as exc:
            if instance.id not in build_plugin.containment(request.config).lost:
                build_plugin.lose(request.config, instance, exc, request.node.nodeid)
                verdicts.record(build_plugin.unfinished_verdict(instance, exc, request.node.nodeid))
            # one type from one line: a hypothesis search that replays it sees the same error
            raise build_plugin.uniform(exc) from None
        judgement = judge(run, A, B, exact=problem.exact, problem=problem)
        informational = scope_plugin.OUT_OF_SCOPE in request.node.stash   # not the kernel's claim
        assert_judgement(judgement, verdicts if (record or not judgement.ok) and not informational else None)
        return judgement
    return check


@pytest.fixture
def require_in_scope(request):
    """require_in_scope(instance, M, N, K): skip, reported as out of scope, a shape the
    kernel does not claim (or run it as information: --gemm-out-of-scope). Never a silent pass."""
    return lambda instance, M, N, K: scope_plugin.require_in_scope(request, instance, M, N, K)


@pytest.fixture
def require_variant():
    """require_variant(instance, variant): skip a harness.OperandVariant the kernel cannot
    take (padded ld without lda/ldb/ldc roles, alpha/beta without those roles), with why."""
    def require_variant(instance, variant) -> None:
        why = variant.why_not(instance.spec)
        if why:
            pytest.skip(f"does not apply: {why}")
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
def conclude(verdicts):
    """conclude(instance, problem, finding): record the verdict; fail with the finding if there is one."""
    def conclude(instance, problem, finding=None) -> None:
        __tracebackhide__ = True
        verdicts.record(Verdict.for_instance(instance, problem.label, [finding] if finding else []))
        if finding:
            pytest.fail(f"{finding.defect.value}: {instance.id} ({instance.name_expression}) on "
                        f"{problem.label}: {finding.summary}", pytrace=False)
    return conclude
