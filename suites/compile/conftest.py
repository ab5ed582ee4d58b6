"""The compile suite's builds, made at once: every build unit (source and -D macros) of the
selected instantiations compiles side by side on the host's cores before the first claim
reads its report (gemmcheck.compile.compiler.build_many), with each device compiler the
suite checks; each test then finds its unit's build in the cache, as the GPU backend does.

The compilers checked: every one installed here under ``--gemm-compiler auto`` (NVRTC, and
nvcc where it is found), else the one named."""

from pathlib import Path

import pytest

from gemmcheck.compile import choice, compiler, resources
from gemmcheck.pytest_plugin.session import instances_of


def checked_compilers() -> tuple[str, ...]:
    return choice.installed() if choice.requested() == "auto" else (choice.requested(),)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "device_compiler" in metafunc.fixturenames:
        metafunc.parametrize("device_compiler", checked_compilers())


@pytest.fixture(scope="session", autouse=True)
def units_built(gemm, request):
    """The units of the instantiations this session's compile tests name (a shard's, not the
    catalog's), each with every selected instantiation of its unit, as the tests build them."""
    here = Path(__file__).parent
    named = {i.build_unit for item in request.session.items if here in Path(item.path).parents
             for i in instances_of(item)}
    selected = [i for i in gemm.instances("any_kernel") if i.build_unit in named]
    # every compiler's units in one pool: the slowest build of either, not of each in turn
    # (ci under auto on an H200: each worker's first compile test waited 12.5 s, 4.8 s with nvcc alone)
    units = {}
    for device_compiler in checked_compilers():
        units.update(compiler.units_of(selected, resources.DEFAULT_ARCH, device_compiler))
    compiler.build_many(compiler.unit_jobs(units))
