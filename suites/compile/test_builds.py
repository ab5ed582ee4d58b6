"""Claim: every instantiation the catalog selects builds on the backend that runs it.

One test per source file: a source that does not compile fails here once, with the
compiler's first errors at the user's file and line; every other test of its
instantiations is skipped with `not compiled: see <this test>` (gemmcheck.pytest_plugin.build_plugin).
"""

import pytest

from gemmcheck.pytest_plugin import build_plugin


def test_every_instantiation_of_the_source_builds(backend, kernel_source, verdicts, request):
    failed = build_plugin.failures(backend, kernel_source)
    for verdict in build_plugin.verdicts_for(failed, request.node.nodeid):
        verdicts.record(verdict)
    if failed:
        pytest.fail(build_plugin.describe(kernel_source[0].spec.source, failed, len(kernel_source)),
                    pytrace=False)
    unsupported = build_plugin.unsupported(backend, kernel_source)
    if len(unsupported) == len(kernel_source):
        pytest.skip(str(unsupported[0][1]).splitlines()[0])
