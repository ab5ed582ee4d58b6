"""The compile suite's builds, made at once: every build unit (source and -D macros) of the
selected instantiations compiles side by side on the host's cores before the first claim
reads its report (gemmcheck.compile.compiler.build_many); each test then finds its unit's
build in the cache, as the GPU backend does."""

import pytest

from gemmcheck.compile import compiler, resources


@pytest.fixture(scope="session", autouse=True)
def units_built(gemm):
    units: dict[tuple, set] = {}
    for inst in gemm.instances("any_kernel"):
        units.setdefault((inst.spec.source, inst.defines), set()).add(inst.name_expression)
    compiler.build_many((source, sorted(names), resources.DEFAULT_ARCH, defines)
                        for (source, defines), names in units.items())
