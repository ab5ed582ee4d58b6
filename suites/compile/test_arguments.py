"""Claim: every argument is packed in the type the compiler gives its parameter.

gemmcheck reads each parameter's type from the kernel's declaration (after preprocessing and
template substitution, gemmcheck.contract.parameters) and packs every role in it
(gemmcheck.contract.launch.plan). The symbol of the instantiation (nvcc's or NVRTC's) spells the type of each
parameter as the compiler sees it, typedefs resolved: the two must agree, or a launch would
hand the kernel bytes of another size (a float for a __half, an int for a size_t).
"""

import pytest

from gemmcheck.compile import choice, compiler, resources
from gemmcheck.contract import launch

COMPILES_TEST = "suites/compile/test_resources.py::test_compiles_for_sm90"

# Compiling needs neither a GPU nor the simulator: gpu_only kernels are checked here on any backend.
pytestmark = pytest.mark.nvrtc


def _symbol(gemm, instance) -> str:
    """The mangled symbol of `instance` in its unit's build (or its own, when the unit fails)."""
    arch, used = resources.arch_of(instance), choice.of(instance)   # the build the run's backend uses
    unit = sorted({i.name_expression for i in gemm.instances("any_kernel")
                   if i.build_unit == instance.build_unit and resources.arch_of(i) == arch and choice.of(i) == used})
    for names in (unit, [instance.name_expression]):
        try:
            built = compiler.compile_source(instance.spec.source, tuple(names), arch, defines=instance.defines,
                                            compiler=used, linked=compiler.linked_sources(instance))
        except compiler.CompileError:
            continue
        return built.mangled[instance.name_expression]
    pytest.skip(f"not compiled for {arch}: see {COMPILES_TEST}[{used}-{instance.id}]")


def test_every_argument_is_packed_in_the_type_the_compiler_declares(gemm, any_kernel):
    symbol = _symbol(gemm, any_kernel)
    why = launch.compiler_disagreement(any_kernel, symbol)
    if why is None and not symbol.startswith("_Z"):
        pytest.skip(f"{any_kernel.spec.entry} is extern \"C\": its symbol names no parameter types, so its "
                    "declaration as read from the source is all there is")
    assert why is None, f"{any_kernel.id}: {why}"
