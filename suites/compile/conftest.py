"""The compile suite's builds, made at once: every build unit (source and -D macros) of the
selected instantiations compiles side by side on the host's cores before the first claim
reads its report (gemmcheck.compile.compiler.build_many); each test then finds its unit's
build in the cache, as the GPU backend does."""

from pathlib import Path

import pytest

from gemmcheck.compile import compiler, resources
from gemmcheck.pytest_plugin.session import instances_of


@pytest.fixture(scope="session", autouse=True)
def units_built(gemm, request):
    """The units of the instantiations this session's compile tests name (a shard's, not the
    catalog's), each with every selected instantiation of its unit, as the tests build them."""
    here = Path(__file__).parent
    named = {i.build_unit for item in request.session.items if here in Path(item.path).parents
             for i in instances_of(item)}
    compiler.build_units_of((i for i in gemm.instances("any_kernel") if i.build_unit in named),
                            resources.DEFAULT_ARCH)
