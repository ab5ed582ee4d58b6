"""What the catalog says is checked against what the source declares, when it loads: a
`defines` macro that is a template or tile parameter, template_args that do not match the
template's parameter list, an entry under a false #if. Each refused in one line naming the
file, the kernel and the fix (not a g++ error inside a generated file, not "no such kernel")."""

import pytest

from gemmcheck.contract import catalog

KERNEL = """\
#include <cuda_fp16.h>
template <typename T, int TILE>
__global__ void gemm(const T *A, const T *B, T *C, int M, int N, int K) {}

#if 0
// the old kernel, kept for reference
template <typename T, int TILE>
__global__ void old_gemm(const T *A, const T *B, T *C, int M, int N, int K) {}
#endif
"""
ENTRY = ('[[kernel]]\nname = "k"\nsource = "k.cu"\nentry = "gemm"\nsignature = "mnk"\npolicy = "tile2d"\n'
         'dtypes = ["float32"]\nexpect = "correct"\n')


def _load(tmp_path, fields: str, entry: str = ENTRY):
    (tmp_path / "k.cu").write_text(KERNEL)
    (tmp_path / "catalog.toml").write_text(entry + fields)
    return catalog.load(tmp_path / "catalog.toml")


def _refusal(tmp_path, fields: str, entry: str = ENTRY) -> str:
    with pytest.raises(catalog.CatalogError) as caught:
        _load(tmp_path, fields, entry)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{tmp_path / 'catalog.toml'}: kernel 'k': ")
    return message.split(": kernel 'k': ", 1)[1]


def test_the_good_entry_loads(tmp_path):
    (spec,) = _load(tmp_path, 'template_args = "{T}, {TILE}"\ntiles = [8]\n')
    assert spec.instances()[0].name_expression == "gemm<float, 8>"


def test_template_args_in_the_wrong_order_are_refused_naming_both(tmp_path):
    # before: a g++ error inside the simulator's generated launchers.cpp, or NVRTC's on the GPU
    assert _refusal(tmp_path, 'template_args = "{TILE}, {T}"\ntiles = [8]\n') == (
        "template_args '{TILE}, {T}' does not match template <typename T, int TILE> of gemm (k.cu:3): argument 1 "
        "{TILE} is a value where T is a type; argument 2 {T} is a type where TILE is a value; write "
        "template_args = '{T}, {TILE}'")


def test_template_args_of_the_wrong_count_are_refused(tmp_path):
    assert _refusal(tmp_path, 'template_args = "{T}"\ntiles = [8]\n') == (
        "template_args '{T}' does not match template <typename T, int TILE> of gemm (k.cu:3): it gives 1 "
        "argument(s) where the template takes 2; write template_args = '{T}, {TILE}'")


def test_a_define_that_is_a_template_parameter_is_refused(tmp_path):
    assert _refusal(tmp_path, 'template_args = "{T}, 8"\ngrid = ["1"]\nblock = ["1"]\ndefines = { TILE = 8 }\n',
                    ENTRY.replace('policy = "tile2d"\n', "")) == (
        "defines: TILE is a template parameter of gemm (k.cu:3); give its values in params (or tiles) and {TILE} "
        "in template_args, not as a macro")


def test_a_define_that_is_the_tile_parameter_is_refused(tmp_path):
    entry = ENTRY.replace('entry = "gemm"', 'entry = "plain"')
    (tmp_path / "k.cu").write_text("__global__ void plain(const float *A, const float *B, float *C, int M, int N, "
                                   "int K) { (void)TILE; }\n")
    (tmp_path / "catalog.toml").write_text(entry + "defines = { TILE = 16 }\n")
    with pytest.raises(catalog.CatalogError) as caught:
        catalog.load(tmp_path / "catalog.toml")
    assert str(caught.value).endswith(
        "kernel 'k': defines: TILE is the tile parameter; give its values as tiles = [...] (with macros = "
        "[\"TILE\"] to pass it as -D TILE=value), so the suite derives shapes and launches from it")


def test_an_entry_under_if_0_is_named_as_such(tmp_path):
    assert _refusal(tmp_path, 'template_args = "{T}, {TILE}"\ntiles = [8]\n',
                    ENTRY.replace('entry = "gemm"', 'entry = "old_gemm"')) == (
        "entry 'old_gemm' is defined at k.cu:8 inside `#if 0` (line 5): the compiler never sees it")


def test_an_accumulator_by_dtype_completes_those_dtypes_only(tmp_path):
    entry = ENTRY.replace('dtypes = ["float32"]', 'dtypes = ["float32", "float16"]')
    (f32, f16) = _load(tmp_path, 'template_args = "{T}, {TILE}"\ntiles = [8]\naccumulator = { float16 = "float16" }\n',
                       entry)[0].instances()
    assert (f32.types.accumulator.name, f16.types.accumulator.name) == ("float32", "float16")
    assert _refusal(tmp_path, 'template_args = "{T}, {TILE}"\ntiles = [8]\naccumulator = { bfloat16 = "float16" }\n',
                    entry).startswith("'accumulator' by dtype must map dtypes of the entry (float32, float16)")
