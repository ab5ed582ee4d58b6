"""Kernels in namespaces, as libraries declare them: found with their namespaces, named in the
catalog plainly or qualified, instantiated by their qualified names by every compiler (the
simulator, NVRTC, nvcc: tests/data/scalar_pointers runs one of each kind)."""

import pytest

from gemmcheck.contract import catalog, cuda_source

TEXT = """
namespace { __global__ void anonymous(const float *A, const float *B, float *C) {} }
namespace lib::detail {
inline namespace v2 { template <int N> __global__ void nested(const float *A, const float *B, float *C) { if (N) { } } }
struct S { void f() {} };
__global__ void after_a_struct(const float *A, const float *B, float *C) {}
}
extern "C" { __global__ void c_linkage(const float *A, const float *B, float *C) {} }
__global__ void file_scope(const float *A, const float *B, float *C) {}
"""


def test_each_kernel_is_found_with_the_named_namespaces_it_is_declared_in():
    assert {k.name: k.qualified for k in cuda_source.find_kernels(TEXT)} == {
        "anonymous": "anonymous", "nested": "lib::detail::v2::nested", "after_a_struct": "lib::detail::after_a_struct",
        "c_linkage": "c_linkage", "file_scope": "file_scope"}


def entry(tmp_path, name):
    (tmp_path / "k.cu").write_text(TEXT)
    (tmp_path / "catalog.toml").write_text(
        f'[[kernel]]\nname = "k"\nsource = "k.cu"\nentry = "{name}"\ntemplate_args = "{{TILE}}"\ntiles = [16]\n'
        'args = ["A", "B", "C"]\ngrid = [1]\nblock = [1]\ndtypes = ["float32"]\nexpect = "correct"\n')
    return tmp_path / "catalog.toml"


@pytest.mark.parametrize("written", ["nested", "lib::detail::v2::nested", "::lib::detail::v2::nested"])
def test_an_entry_is_named_plainly_or_qualified_and_instantiated_qualified(tmp_path, written):
    (spec,) = catalog.load(entry(tmp_path, written))
    assert (spec.entry, spec.namespace) == ("nested", "lib::detail::v2")
    assert spec.instances()[0].name_expression == "lib::detail::v2::nested<16>"


def test_a_wrong_qualification_names_the_kernels_own(tmp_path):
    with pytest.raises(catalog.CatalogError, match=r"entry 'lib::nested': nested is declared as lib::detail::v2::nested "
                                                   r"\(k.cu:4\); write entry = 'lib::detail::v2::nested' \(or 'nested'\)"):
        catalog.load(entry(tmp_path, "lib::nested"))
