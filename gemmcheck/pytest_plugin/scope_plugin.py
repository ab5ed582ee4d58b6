"""--gemm-out-of-scope: run shapes a kernel does not claim, and report what happens there
as information, never as a failure.

Without the option a test on an unclaimed shape is skipped with the kernel's claim as
the reason. With it the test runs; a failure there becomes an xfail ("out of scope,
for information: <what happened>") and a pass an xpass, so the summary counts both
and neither fails the run.
"""

from __future__ import annotations

import pytest

from gemmcheck.contract.catalog import Instance
from gemmcheck.problems.problem import claimed_shape

OUT_OF_SCOPE = pytest.StashKey[str]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gemmcheck")
    group.addoption("--gemm-out-of-scope", action="store_true", default=False,
                    help="also run shapes a kernel's 'shapes' does not claim; what happens there is "
                         "reported as information (xfail / xpass), never as a failure (default: skip them)")


def why_out_of_scope(instance: Instance, M: int, N: int, K: int) -> str | None:
    """None when the kernel claims the shape; else the reason, naming its claim."""
    if instance.supports(M, N, K):
        return None
    spec = instance.spec
    if spec.sizes is not None:
        return (f"out of scope: {spec.name} declares sizes = {{ M = {spec.sizes[0]}, N = {spec.sizes[1]}, "
                f"K = {spec.sizes[2]} }} (the one shape compiled into it); M={M} N={N} K={K} is another")
    params = ", ".join(f"{k}={v}" for k, v in instance.params.items())
    meaning = spec.describe_shapes()
    said = "; ".join(part for part in (meaning if meaning != spec.shapes else "", params) if part)
    return (f"out of scope: {spec.name} declares shapes = '{spec.shapes}'"
            f"{f' ({said})' if said else ''}; M={M} N={N} K={K} is not one")


def claimed_shape_or_skip(instance: Instance, M: int, N: int, K: int) -> tuple[int, int, int]:
    """problem.claimed_shape, or a skip naming the claim when the kernel claims no shape near
    (M, N, K) (a constraint no rounding of the sizes meets): never a crash of the test."""
    shape = claimed_shape(instance, M, N, K)
    if shape is None:
        pytest.skip(f"{instance.id} claims no shape near M{M}xN{N}xK{K} "
                    f"(its shapes: {instance.spec.describe_shapes()})")
    return shape


def require_in_scope(request: pytest.FixtureRequest, instance: Instance, M: int, N: int, K: int) -> None:
    """Skip an unclaimed shape with the reason, or, with --gemm-out-of-scope, run it as information."""
    why = why_out_of_scope(instance, M, N, K)
    if why is None:
        return
    if not request.config.getoption("gemm_out_of_scope"):
        pytest.skip(why)
    request.node.stash[OUT_OF_SCOPE] = why


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    why = item.stash.get(OUT_OF_SCOPE, None)
    if why is None or call.when != "call" or report.skipped:
        return
    if report.failed:
        crash = getattr(report.longrepr, "reprcrash", None)
        seen = (crash.message if crash else str(report.longrepr)).strip().splitlines()
        report.outcome = "skipped"
        report.wasxfail = f"{why}; for information, there: {seen[0][:300] if seen else 'failed'}"
    else:
        report.outcome = "passed"
        report.wasxfail = f"{why}; for information, there: correct"
