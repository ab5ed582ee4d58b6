"""Claims about every catalog instantiation that need no GPU: it compiles for
sm_90 with each device compiler installed (nvcc and NVRTC), and ptxas's resource report
of the build the run uses matches what the catalog says.

A source that does not compile fails once, at the first selected instantiation
of its build unit (source and -D macros); the others skip and name that test.
Local memory (spills, a stack frame) is judged only where the catalog claims
``resources`` (gemmcheck's own reference kernels claim ``no-stack-frame``); for any
other kernel it is information: the report's resource note and the resources table.
"""

import pytest

from gemmcheck import report
from gemmcheck.compile import choice, compiler, resources

COMPILES_TEST = "suites/compile/test_resources.py::test_compiles_for_sm90"

# Compiling needs neither a GPU nor the simulator: gpu_only kernels are compiled here on any backend.
pytestmark = pytest.mark.nvrtc


def _unit(gemm, instance):
    return [i for i in gemm.instances("any_kernel") if i.build_unit == instance.build_unit]


def _compile(instance, names, device_compiler):
    return resources.compile_report(instance.spec.source, tuple(names), resources.arch_of(instance),
                                    defines=instance.defines, compiler_name=device_compiler,
                                    linked=compiler.linked_sources(instance))


def _report(gemm, instance, device_compiler=None, *, fail_here: bool = False):
    """ptxas's report of `instance` built with `device_compiler` (None: the run's choice for it)."""
    device_compiler = choice.of(instance, device_compiler)
    unit = [i for i in _unit(gemm, instance) if resources.arch_of(i) == resources.arch_of(instance)
            and choice.of(i, device_compiler) == device_compiler]
    try:
        return _compile(instance, sorted({i.name_expression for i in unit}), device_compiler)[instance.name_expression]
    except resources.CompileFailed:
        pass
    # One broken instantiation must not hide the others: compile each alone (cached).
    try:
        return _compile(instance, [instance.name_expression], device_compiler)[instance.name_expression]
    except resources.CompileFailed as exc:
        why = exc
    first = next(i for i in unit + [instance] if _fails_alone(i, device_compiler))
    if fail_here and first == instance:
        pytest.fail(str(why), pytrace=False)
    pytest.skip(f"not compiled for {resources.arch_of(instance)} with {device_compiler}: "
                f"see {COMPILES_TEST}[{device_compiler}-{first.id}]")


def _fails_alone(instance, device_compiler) -> bool:
    try:
        _compile(instance, [instance.name_expression], device_compiler)
        return False
    except resources.CompileFailed:
        return True


def test_compiles_for_sm90(gemm, any_kernel, device_compiler):
    pinned = choice.of(any_kernel, device_compiler)
    if pinned != device_compiler:
        pytest.skip(f"{any_kernel.spec.name} is built with {pinned} only ("
                    + (f'compiler = "{pinned}" in its catalog)' if any_kernel.spec.compiler else
                       "its device code links other sources)"))
    found = _report(gemm, any_kernel, device_compiler, fail_here=True)
    if choice.of(any_kernel) == device_compiler:   # the build the run's backend uses
        gemm.resource_rows.append((any_kernel, found))
        report.attach_text("ptxas resources",
                           "\n".join(resources.table([found]) + resources.notes([(any_kernel, found)])))
    assert found.arch == resources.arch_of(any_kernel)


@pytest.mark.instances.with_args(lambda instance: instance.spec.resources is not None)
def test_kernels_keep_the_resources_their_catalog_claims(gemm, any_kernel):
    claim = any_kernel.spec.resources
    found = _report(gemm, any_kernel)
    broken = resources.claim_broken(found, claim)
    if broken:
        pytest.fail(f"{any_kernel.id} ({any_kernel.name_expression}): {broken}, on {found.arch} built by "
                    f"{_built_by(any_kernel)}; its catalog claims resources = '{claim}' (ptxas's register "
                    "choices change between versions)", pytrace=False)


def _built_by(instance) -> str:
    from gemmcheck.compile import nvcc_tool

    if choice.of(instance) == "nvcc":
        return nvcc_tool.find().describe() if nvcc_tool.find() else "nvcc"
    return f"NVRTC {compiler.nvrtc_version()}"


def test_shared_memory_is_what_the_catalog_declares(gemm, any_kernel):
    declared = any_kernel.spec.shared_bytes(any_kernel.dtype, any_kernel.tile)
    if declared is None:
        pytest.skip(f"{any_kernel.spec.name}: the catalog declares no shared_tiles")
    found = _report(gemm, any_kernel)
    assert found.shared_bytes == declared, (
        f"{any_kernel.id}: ptxas reports {found.shared_bytes} B of static shared memory; "
        f"the catalog declares shared_tiles={any_kernel.spec.shared_tiles} x TILE {any_kernel.tile} "
        f"x (TILE + {any_kernel.spec.shared_pad}) x {any_kernel.types.A.itemsize} B = {declared} B")
