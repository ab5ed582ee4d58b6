"""Claim: every instantiation the catalog selects builds on the backend that runs it.

One test per source file: a source that does not compile fails here once, with the
compiler's first errors at the user's file and line; every other test of its
instantiations is skipped with `not compiled: see <this test>` (gemmcheck.pytest_plugin.build_plugin).
"""

import pytest

from gemmcheck import containment


def test_every_instantiation_of_the_source_builds(backend, kernel_source, verdicts, request):
    failed = containment.failures(backend, kernel_source)
    for verdict in containment.verdicts_for(failed, request.node.nodeid):
        verdicts.record(verdict)
    if failed:
        pytest.fail(containment.describe(kernel_source[0].spec.source, failed, len(kernel_source)),
                    pytrace=False)
    unsupported = containment.unsupported(backend, kernel_source)
    if len(unsupported) == len(kernel_source):
        pytest.skip(str(unsupported[0][1]).splitlines()[0])
