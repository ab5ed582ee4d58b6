"""Claims about every catalog instantiation that need no GPU: it compiles for
sm_90 with NVRTC, and ptxas's resource report matches what the catalog says.
"""

import pytest

from gemmcheck import resources


def _report(gemm, instance):
    names = tuple(sorted({i.name_expression for i in gemm.instances("any_kernel")
                          if i.spec.source == instance.spec.source}))
    try:
        return resources.compile_report(instance.spec.source, names)[instance.name_expression]
    except resources.CompileFailed as exc:
        pytest.fail(str(exc), pytrace=False)


def test_compiles_for_sm90(gemm, any_kernel):
    found = _report(gemm, any_kernel)
    gemm.resource_rows.append((any_kernel, found))
    assert found.arch == resources.DEFAULT_ARCH


def test_reference_kernels_do_not_spill_or_use_a_stack_frame(gemm, reference):
    found = _report(gemm, reference)
    assert (found.spills, found.stack_frame) == (0, 0), (
        f"{reference.id}: {found.spill_stores} B spill stores, {found.spill_loads} B spill loads, "
        f"{found.stack_frame} B stack frame on {found.arch}; a reference kernel must keep "
        "everything in registers")


def test_shared_memory_is_what_the_catalog_declares(gemm, any_kernel):
    declared = any_kernel.spec.shared_bytes(any_kernel.dtype, any_kernel.tile)
    if declared is None:
        pytest.skip(f"{any_kernel.spec.name}: the catalog declares no shared_tiles")
    found = _report(gemm, any_kernel)
    assert found.shared_bytes == declared, (
        f"{any_kernel.id}: ptxas reports {found.shared_bytes} B of static shared memory; "
        f"the catalog declares shared_tiles={any_kernel.spec.shared_tiles} x TILE {any_kernel.tile} "
        f"x (TILE + {any_kernel.spec.shared_pad}) x {any_kernel.dt.itemsize} B = {declared} B")
