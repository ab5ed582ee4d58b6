"""Claims about every catalog instantiation that need no GPU: it compiles for
sm_90 with NVRTC, and ptxas's resource report matches what the catalog says.

A source that NVRTC cannot compile fails once, at the first selected instantiation
of its build unit (source and -D macros); the others skip and name that test.
"""

import pytest

from gemmcheck.compile import compiler, resources

COMPILES_TEST = "suites/compile/test_resources.py::test_compiles_for_sm90"

# NVRTC needs neither a GPU nor the simulator: gpu_only kernels are compiled here on any backend.
pytestmark = pytest.mark.nvrtc


def _unit(gemm, instance):
    return [i for i in gemm.instances("any_kernel") if i.build_unit == instance.build_unit]


def _compile(instance, names):
    return resources.compile_report(instance.spec.source, tuple(names), resources.arch_of(instance),
                                    defines=instance.defines)


def _report(gemm, instance, *, fail_here: bool = False):
    unit = [i for i in _unit(gemm, instance) if resources.arch_of(i) == resources.arch_of(instance)]
    try:
        return _compile(instance, sorted({i.name_expression for i in unit}))[instance.name_expression]
    except resources.CompileFailed:
        pass
    # One broken instantiation must not hide the others: compile each alone (cached).
    try:
        return _compile(instance, [instance.name_expression])[instance.name_expression]
    except resources.CompileFailed as exc:
        why = exc
    first = next(i for i in unit + [instance] if _fails_alone(i))
    if fail_here and first == instance:
        pytest.fail(str(why), pytrace=False)
    pytest.skip(f"not compiled for {resources.arch_of(instance)}: see {COMPILES_TEST}[{first.id}]")


def _fails_alone(instance) -> bool:
    try:
        _compile(instance, [instance.name_expression])
        return False
    except resources.CompileFailed:
        return True


def test_compiles_for_sm90(gemm, any_kernel):
    found = _report(gemm, any_kernel, fail_here=True)
    gemm.resource_rows.append((any_kernel, found))
    assert found.arch == resources.arch_of(any_kernel)


def test_reference_kernels_do_not_spill_or_use_a_stack_frame(gemm, reference):
    found = _report(gemm, reference)
    assert (found.spills, found.stack_frame) == (0, 0), (
        f"{reference.id}: {found.spill_stores} B spill stores, {found.spill_loads} B spill loads, "
        f"{found.stack_frame} B stack frame on {found.arch} with NVRTC {compiler.nvrtc_version()} (ptxas's "
        "register choices change between versions); a reference kernel must keep everything in registers")


def test_shared_memory_is_what_the_catalog_declares(gemm, any_kernel):
    declared = any_kernel.spec.shared_bytes(any_kernel.dtype, any_kernel.tile)
    if declared is None:
        pytest.skip(f"{any_kernel.spec.name}: the catalog declares no shared_tiles")
    found = _report(gemm, any_kernel)
    assert found.shared_bytes == declared, (
        f"{any_kernel.id}: ptxas reports {found.shared_bytes} B of static shared memory; "
        f"the catalog declares shared_tiles={any_kernel.spec.shared_tiles} x TILE {any_kernel.tile} "
        f"x (TILE + {any_kernel.spec.shared_pad}) x {any_kernel.types.A.itemsize} B = {declared} B")
