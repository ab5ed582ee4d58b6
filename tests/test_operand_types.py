"""A type per operand: how a catalog names a combination, what the record resolves to, and the
errors a bad one gets; one-type kernels keep their records, ids and packed types."""

import re
import textwrap

import numpy as np
import pytest

from gemmcheck.backends.cpu_sim import build
from gemmcheck.backends.cpu_sim.locating import buffer_names
from gemmcheck.contract import catalog, launch, operand_types
from gemmcheck.contract import dtypes as dt

SOURCE = """
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cstdint>
template <typename TA, typename TC, int TILE>
__global__ void mixed(const TA *A, const TA *B, const TC *C, TC *D, int M, int N, int K, float alpha, float beta) {}
template <int TILE>
__global__ void scaled(const __nv_fp8_e4m3 *A, const __nv_fp8_e4m3 *B, __nv_bfloat16 *D, const float *scale_a,
                       float scale_b, int M, int N, int K) {}
template <int TILE>
__global__ void blocked(const __nv_fp8_e4m3 *A, const __nv_fp8_e4m3 *B, __nv_bfloat16 *D, const float *sfa,
                        const float *sfb, int M, int N, int K) {}
"""

MIXED = """
[[kernel]]
name = "mixed"
source = "k.cu"
entry = "mixed"
template_args = "{A}, {C}, {TILE}"
args = ["A", "B", "C", "D", "M", "N", "K", "alpha", "beta"]
tiles = [16]
policy = "tile2d"
dtypes = ["f16f16f32", "bf16bf16f32"]
expect = "correct"

[[kernel]]
name = "scaled"
source = "k.cu"
entry = "scaled"
template_args = "{TILE}"
args = ["A", "B", "D", "scale_A", "scale_B", "M", "N", "K"]
tiles = [16]
policy = "tile2d"
dtypes = ["e4m3e4m3bf16"]
scales = { A = "tensor", B = "tensor" }
expect = "correct"

[[kernel]]
name = "blocked"
source = "k.cu"
entry = "blocked"
template_args = "{TILE}"
args = ["A", "B", "D", "scale_A", "scale_B", "M", "N", "K"]
tiles = [16]
policy = "tile2d"
dtypes = ["e4m3e4m3bf16"]
scales = { A = { block = [1, 128] }, B = { block = [128, 128], major = "col" } }
saturates_output = true
expect = "correct"
"""


@pytest.fixture
def write(tmp_path):
    (tmp_path / "k.cu").write_text(SOURCE)

    def _write(text):
        path = tmp_path / "catalog.toml"
        path.write_text(textwrap.dedent(text))
        return path
    return _write


@pytest.fixture
def specs(write):
    return {s.name: s for s in catalog.load(write(MIXED))}


@pytest.mark.parametrize("name", list(dt.DTYPES))
def test_a_one_type_name_resolves_to_one_type_for_every_operand_and_its_own_accumulator(name):
    types = operand_types.of(name)
    d = dt.get(name)
    assert (types.A, types.B, types.C, types.D) == (d, d, d, d) and types.uniform
    assert types.accumulator == dt.get(d.accumulator) == types.scalar
    assert types.spelling == name


@pytest.mark.parametrize("name, a, b, c, d, accumulator", [
    ("f16f16f32", "float16", "float16", "float32", "float32", "float32"),
    ("bf16bf16bf16", "bfloat16", "bfloat16", "bfloat16", "bfloat16", "float32"),
    ("s8s8s32", "int8", "int8", "int32", "int32", "int32"),
    ("u8s8s32", "uint8", "int8", "int32", "int32", "int32"),
    ("e4m3e5m2bf16", "float8_e4m3fn", "float8_e5m2", "bfloat16", "bfloat16", "float32"),
    ("f16f16f32bf16", "float16", "float16", "float32", "bfloat16", "float32"),
    ("tf32", "tf32", "tf32", "float32", "float32", "float32"),
    ("f64f64f64", "float64", "float64", "float64", "float64", "float64"),
])
def test_a_combination_lists_a_b_and_the_output_with_the_accumulator_its_inputs_need(name, a, b, c, d, accumulator):
    types = operand_types.of(name)
    assert [t.name for t in (types.A, types.B, types.C, types.D, types.accumulator)] == [a, b, c, d, accumulator]


def test_a_spelling_rebuilds_the_record_it_came_from():
    types = operand_types.resolve("e4m3e4m3bf16", accumulator="float32", scalar="float32",
                                  scales=(operand_types.parse_scale("A", "1x128"),
                                          operand_types.parse_scale("B", "128x128/col")), saturate=True)
    assert types.spelling == "e4m3e4m3bf16 scale_A=1x128 scale_B=128x128/col saturate"
    assert operand_types.of(types.spelling) == types
    assert eval(repr(types), {"operand_types": operand_types}) == types


@pytest.mark.parametrize("spelling, message", [
    ("f16s8f32", "integer and floating-point inputs do not mix"),
    ("s8s8s8", "an output of int32 sums is int32, or one of float32, float16, bfloat16 (dequantized)"),
    ("f16f16s32", "is a floating-point type"),
    ("f16f16", "unknown dtype 'f16f16'"),
    ("f16f16f32 accumulator=int32", "need a floating-point accumulator"),
    ("f16f16f32 colour=red", "cannot read 'colour=red'"),
    ("f16f16f32 scale_A=diagonal", "use tensor, row, col or a block RxC"),
])
def test_a_combination_the_suite_cannot_judge_is_refused_saying_why(spelling, message):
    with pytest.raises(operand_types.TypesError, match=re.escape(message)):
        operand_types.of(spelling)


def test_a_scale_covers_its_block_of_the_operand():
    per_block = operand_types.parse_scale("A", "1x4")
    assert per_block.shape(3, 9) == (3, 3)
    expanded = per_block.expanded(np.arange(9.0).reshape(3, 3), 3, 9)
    assert expanded[1].tolist() == [3, 3, 3, 3, 4, 4, 4, 4, 5]
    per_column = operand_types.parse_scale("B", "col")
    assert per_column.shape(5, 7) == (1, 7) and per_column.granularity == "col"
    assert per_column.expanded(np.arange(7.0)[None, :], 5, 7)[4].tolist() == list(range(7))
    assert operand_types.parse_scale("A", "tensor").shape(5, 7) == (1, 1)


def test_a_mixed_catalog_resolves_each_instantiation_once(specs):
    inst = specs["mixed"].instances()[0]
    assert inst.id == "mixed-f16f16f32-TILE16"
    assert inst.name_expression == "mixed<__half, float, 16>"
    assert inst.types.describe() == "A float16, B float16, C float32, D float32, accumulator float32"
    with pytest.raises(TypeError, match="a type per operand; read Instance.types"):
        inst.dt
    blocked = specs["blocked"].instances()[0]
    assert [s.spelling for s in blocked.types.scales] == ["1x128", "128x128/col"] and blocked.types.saturate
    assert blocked.spec.declared_conventions() == ("saturates_output = true",)


def test_pointers_get_their_element_type_from_the_record_and_a_per_tensor_scale_may_be_a_value(specs):
    inst = specs["scaled"].instances()[0]
    packed = dict(zip(inst.spec.roles, launch.packed_types(inst)))
    assert packed["scale_A"].kind == launch.POINTER and packed["scale_B"].spelling == "float"
    assert launch.by_value(inst, "scale_B") and not launch.by_value(inst, "scale_A")
    defaults = {role: launch.default_type(inst, role).spelling for role in ("A", "D", "scale_A")}
    assert defaults == {"A": "__nv_fp8_e4m3 *", "D": "__nv_bfloat16 *", "scale_A": "float *"}
    assert buffer_names(inst) == ("A", "B", "D", "scale_A")


def test_the_simulator_passes_each_pointer_from_its_slot_as_the_kernel_declares_it(specs):
    inst = specs["mixed"].instances()[0]
    text = build.launcher_source(inst.spec.source, [inst])
    assert "(P::at<3>)p[3]" in text and "(P::at<2>)p[2]" in text   # D in slot 3, C in slot 2
    assert buffer_names(inst) == ("A", "B", "C", "D")


@pytest.mark.parametrize("change, message", [
    (('scales = { A = "tensor", B = "tensor" }', 'scales = { A = "tensor" }'),
     "scales.B and the role scale_B go together: args lists scale_B"),
    (('scales = { A = "tensor", B = "tensor" }', 'scales = { A = "tensor", B = "tensor", C = "tensor" }'),
     "scales: 'C'; scale factors apply to A or B"),
    (('scales = { A = "tensor", B = "tensor" }', 'scales = { A = "tensor", B = "row" }'),
     "args: scale_B is parameter 5 'float scale_b' of scaled<16>, a value, but scales.B is row"),
    (('scales = { A = "tensor", B = "tensor" }', 'scales = { A = { block = [0, 128] }, B = "tensor" }'),
     "scales.A.block = [0, 128]; give [rows, cols]"),
    (('dtypes = ["f16f16f32", "bf16bf16f32"]', 'dtypes = ["f16f16s32"]'), "dtypes: f16f16s32: C is int32; an output of float32 sums is a floating-point type"),
    (('dtypes = ["f16f16f32", "bf16bf16f32"]', 'dtypes = ["f16f16f32", "f16f16f32"]'), "lists a dtype twice"),
    (('args = ["A", "B", "D", "scale_A", "scale_B", "M", "N", "K"]\ntiles = [16]\npolicy = "tile2d"\n'
      'dtypes = ["e4m3e4m3bf16"]\nscales = { A = "tensor", B = "tensor" }',
      'args = ["A", "B", "M", "scale_A", "scale_B", "N", "K", 0]\ntiles = [16]\npolicy = "tile2d"\n'
      'dtypes = ["e4m3e4m3bf16"]\nscales = { A = "tensor", B = "tensor" }'),
     "args: no C; a GEMM kernel takes the pointers A, B and C, or A, B and D"),
    (('template_args = "{A}, {C}, {TILE}"', 'template_args = "{TILE}, {C}, {TILE}"'),
     "argument 1 {TILE} is a value where TA is a type"),
])
def test_bad_type_fields_fail_in_one_line_naming_the_field_and_the_fix(write, change, message):
    assert change[0] in MIXED
    with pytest.raises(catalog.CatalogError) as info:
        catalog.load(write(MIXED.replace(*change, 1)))
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_one_type_kernels_keep_their_ids_names_and_packed_types():
    for spec in catalog.load(catalog.BUILTIN):
        if not set(spec.dtypes) <= set(dt.DTYPES):
            continue   # the kernels with a type per operand (kernels/mixed.cu)
        for inst in spec.instances():
            assert inst.types.uniform and inst.dt.name == inst.dtype
            assert inst.id.startswith(f"{spec.name}-{inst.dtype}")
            assert buffer_names(inst) == ("A", "B", "C")
