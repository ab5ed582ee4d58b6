"""Catalog entries of Hopper kernels: tensor_map_ roles with tensor_maps, cluster and arch; the
tensor map each problem gets (dims, stride, box, the matrix's first element); the encoding
rules said as what to claim instead; cluster launches that do not divide the grid."""

import dataclasses
import textwrap

import numpy as np
import pytest

from gemmcheck.contract import catalog, launch, tensor_map
from gemmcheck.contract.catalog import Instance
from gemmcheck.problems.harness import GuardedGemm

HOPPER = """
[[kernel]]
name = "tma"
source = "k.cu"
entry = "tma_gemm"
template_args = "{T}, {BM}, {BN}, {BK}"
args = ["M", "N", "K", "alpha", "tensor_map_A", "tensor_map_B", "beta", "C"]
layout = { A = "row", B = "col", C = "row" }
tensor_maps = { A = { box = ["BK", "BM"], swizzle = "128B" }, B = { box = ["BK", "BN"], swizzle = "128B" } }
params = { BM = [64], BN = [128], BK = [64] }
tile = "BM"
grid = ["2 * ceil(N / (2 * BN))", "ceil(M / BM)"]
block = [256]
cluster = [2, 1, 1]
arch = "sm_90a"
dtypes = ["float16", "bfloat16"]
shapes = "K % 8 == 0 and K > 0"
expect = "correct"
"""


@pytest.fixture
def write(tmp_path):
    (tmp_path / "k.cu").write_text("template <typename T, int BM, int BN, int BK> __global__ void tma_gemm() {}\n")

    def _write(text=HOPPER, *changes):
        for old, new in changes:
            assert old in text, old
            text = text.replace(old, new)
        path = tmp_path / "catalog.toml"
        path.write_text(textwrap.dedent(text))
        return path
    return _write


def test_a_hopper_entry_loads_with_its_tensor_maps_cluster_and_arch(write):
    (spec,) = catalog.load(write())
    assert spec.arch == "sm_90a" and [e.text for e in spec.cluster] == ["2", "1", "1"]
    assert spec.tensor_maps["A"].swizzle == "128B"
    assert spec.tensor_maps["B"].box_at({"BM": 64, "BN": 128, "BK": 64}) == (64, 128)
    assert spec.gpu_only and spec.unsimulated_features == (
        "TMA tensor maps", "thread-block clusters", "the sm_90a compile target")


@pytest.mark.parametrize("changes, message", [
    ([('swizzle = "128B" }, B', 'swizzle = "96B" }, B')], "tensor_maps.A: unknown swizzle '96B'"),
    ([('box = ["BK", "BM"]', 'box = ["BK"]')], "tensor_maps.A: box must be [inner, outer]"),
    ([('box = ["BK", "BM"]', 'box = ["BK", "BQ"]')], "box 'BQ' names BQ, which is not a parameter"),
    ([('box = ["BK", "BM"]', 'box = ["BK", 512]')], "box [64, 512] must have every extent between 1 and 256"),
    ([('box = ["BK", "BM"], swizzle = "128B"', 'box = [128, "BM"], swizzle = "128B"')],
     "inner extent is 256 bytes, more than the 128B swizzle's span; at most 64 elements"),
    ([('box = ["BK", "BM"]', 'box = [4, "BM"]')], "inner extent is 8 bytes, not a multiple of 16"),
    ([('grid = ["2 * ceil(N / (2 * BN))"', 'grid = ["ceil(N / BN)"')],
     "grid (1, 1, 1) is not a multiple of cluster (2, 1, 1) in every dimension; round the grid up"),
    ([("cluster = [2, 1, 1]", "cluster = [4, 4, 1]")], "cluster (4, 4, 1) has 16 blocks; gemmcheck launches "
                                                        "portable clusters only (at most 8 blocks)"),
    ([("cluster = [2, 1, 1]", "cluster = 2")], "'cluster' must be a list of 1 to 3 cluster dimensions"),
    ([(', B = { box = ["BK", "BN"], swizzle = "128B" }', "")],
     "args lists tensor_map_B but tensor_maps has no B"),
    ([('"tensor_map_B", "beta", "C"]', '"B", "beta", "C"]')],
     "tensor_maps gives B, but args has no tensor_map_B"),
    ([('arch = "sm_90a"', 'arch = "hopper"')], "'arch' must be a compile target such as \"sm_90a\""),
])
def test_a_bad_hopper_entry_is_one_line_naming_the_field_and_the_fix(write, changes, message):
    with pytest.raises(catalog.CatalogError) as caught:
        catalog.load(write(HOPPER, *changes))
    assert message in str(caught.value) and "kernel 'tma'" in str(caught.value)
    assert "\n" not in str(caught.value)


class Device(list):
    """A stand-in device buffer: a numpy array with the address a CuPy view would have."""


class HostBuffers:
    """A stand-in backend whose device buffers are the host arrays themselves."""

    def to_device(self, bits):
        return bits

    def copy(self, buffer):
        return buffer.copy()


def instance(write, dtype="float16", *changes):
    (spec,) = catalog.load(write(HOPPER, *changes))
    return Instance(spec, dtype, params={"BM": 64, "BN": 128, "BK": 64})


def test_the_tensor_maps_describe_each_operand_as_it_lies_in_memory(write):
    inst = instance(write)
    values = {"M": 100, "N": 70, "K": 48, "alpha": 1, "beta": 0, "A": "a", "B": "b", "C": "c",
              **launch.tight_leading_dimensions(inst.spec.layouts, 100, 70, 48)}
    planned = launch.plan(inst, values)
    assert planned.cluster == (2, 1, 1) and planned.grid == (2, 2, 1) and planned.extended
    a, b = planned.tensor_maps
    # A row-major M x K: K contiguous; B column-major K x N: K contiguous too (K-major "TN")
    assert (a.operand, a.dims, a.ld, a.stride_bytes, a.box, a.swizzle, a.buffer) == \
        ("A", (48, 100), 48, 96, (64, 64), "128B", "a")
    assert (b.operand, b.dims, b.ld, b.stride_bytes, b.box, b.buffer) == ("B", (48, 70), 48, 96, (64, 128), "b")
    assert planned.args[4] is a and planned.args[5] is b and planned.args[7] == "c"


def test_a_padded_leading_dimension_is_the_stride_and_a_single_line_needs_no_aligned_stride(write):
    inst = instance(write)
    req = tensor_map.request(inst, "A", inst.spec.tensor_maps["A"], 3, 5, 40, 56)
    assert (req.dims, req.stride_bytes) == ((40, 3), 112)
    single = tensor_map.request(inst, "A", inst.spec.tensor_maps["A"], 1, 5, 12, None)
    assert single.stride_bytes == 32 and tensor_map.encoding_problem(single) is None
    col_c = tensor_map.request(instance(write, "float16", ('C = "row"', 'C = "col"')), "C",
                               inst.spec.tensor_maps["A"], 9, 5, 8, None)
    assert col_c.dims == (9, 5) and col_c.contiguous == "M"


def test_the_guarded_buffers_matrix_is_what_the_map_points_at_and_it_starts_16_byte_aligned(write):
    inst = instance(write)
    A, B = np.ones((33, 24)), np.ones((24, 17))
    for guard in (None, 0):
        gemm = GuardedGemm(HostBuffers(), inst, A, B, guard=guard)
        planned = launch.plan(inst, gemm.role_values())
        a = planned.tensor_maps[0]
        assert a.buffer.base is gemm.A.device or a.buffer is gemm.A.device
        offset = (a.buffer.__array_interface__["data"][0] - gemm.A.device.__array_interface__["data"][0])
        assert offset == gemm.A.guard * 2 and offset % 16 == 0


@pytest.mark.parametrize("M, N, K, ld, message", [
    (16, 16, 17, None, "tensor map for A: row stride 34 bytes (lda 17 x 2 bytes) is not a multiple of 16; "
                       "claim shapes with K % 8 == 0"),
    (16, 16, 0, None, "tensor map for A: K = 0 gives an empty dimension, which a tensor map cannot describe; "
                      "claim shapes with K > 0"),
    (16, 16, 16, 20, "row stride 40 bytes (lda 20 x 2 bytes) is not a multiple of 16; claim shapes with "
                     "K % 8 == 0 and leading dimensions that are multiples of 8"),
])
def test_a_problem_tma_cannot_encode_fails_saying_which_operand_rule_value_and_what_to_claim(write, M, N, K, ld, message):
    inst = instance(write)
    values = {"M": M, "N": N, "K": K, "alpha": 1, "beta": 0, "A": "a", "B": "b", "C": "c",
              **launch.tight_leading_dimensions(inst.spec.layouts, M, N, K)}
    if ld is not None:
        values["lda"] = ld
    with pytest.raises(launch.LaunchError) as caught:
        launch.plan(inst, values)
    assert message in str(caught.value) and str(caught.value).startswith(inst.id)


def test_a_misaligned_address_is_named_with_the_operand():
    req = tensor_map.TensorMapRequest("k", "B", "float16", 2, "col", (64, 64), 64, (64, 64), "128B")
    assert tensor_map.encoding_problem(req, 0x10000) is None
    assert tensor_map.encoding_problem(req, 0x10006) == (
        "tensor map for B: global address 0x10006 is not 16-byte aligned (it is 6 bytes past a multiple of 16)")


def test_a_launch_whose_grid_is_not_whole_clusters_is_an_error_naming_the_kernel_grid_and_cluster(write):
    # the catalog refuses such a grid at load (above); a plan made without the catalog's check
    # refuses the launch itself
    loaded = instance(write)
    spec = dataclasses.replace(loaded.spec, geometry=launch.Geometry.of(["ceil(N / BN) + 2", "ceil(M / BM)"], ["256"]))
    inst = Instance(spec, "float16", params=loaded.params)
    values = {"M": 64, "N": 128, "K": 64, "alpha": 1, "beta": 0, "A": "a", "B": "b", "C": "c",
              **launch.tight_leading_dimensions(inst.spec.layouts, 64, 128, 64)}
    with pytest.raises(launch.LaunchError, match=r"tma-float16-BM64_BN128_BK64 at M=64 N=128 K=64: grid \(3, 1, 1\) "
                                                 r"is not a multiple of cluster \(2, 1, 1\)"):
        launch.plan(inst, values)


def test_a_plain_kernel_plans_as_before_no_cluster_no_tensor_map():
    spec = next(s for s in catalog.load(catalog.BUILTIN) if s.name == "matmul_tiled_guarded")
    inst = spec.instances()[0]
    planned = launch.plan(inst, {"A": 1, "B": 2, "C": 3, "M": 8, "N": 8, "K": 8})
    assert planned.cluster is None and planned.tensor_maps == () and not planned.extended


FP8_CHANGES = (('args = ["M", "N", "K", "alpha", "tensor_map_A", "tensor_map_B", "beta", "C"]',
                'args = ["M", "N", "K", "tensor_map_A", "tensor_map_B", "scale_A", "scale_B", "D"]'),
               ('dtypes = ["float16", "bfloat16"]', 'dtypes = ["e4m3e4m3bf16"]\nscales = { A = "tensor", B = "tensor" }'),
               ("BK = [64]", "BK = [128]"), ("K % 8 == 0", "K % 16 == 0"))


def test_an_e4m3_operands_tensor_map_counts_bytes_and_its_matrix_starts_16_byte_aligned(write):
    # 1-byte elements: a 128-element box row is the 128-byte swizzle's span, rows are K bytes apart
    (inst,) = catalog.load(write(HOPPER, *FP8_CHANGES))[0].instances()
    with pytest.raises(catalog.CatalogError, match="inner extent is 256 bytes, more than the 128B swizzle's span; "
                                                   "at most 128 elements"):
        catalog.load(write(HOPPER, *FP8_CHANGES[:2], ("BK = [64]", "BK = [256]")))

    A, B = np.ones((33, 48)), np.ones((48, 17))
    for guard in (None, 0):
        gemm = GuardedGemm(HostBuffers(), inst, A, B, guard=guard)
        a, b = launch.plan(inst, gemm.role_values()).tensor_maps
        assert (a.dtype, a.itemsize, a.dims, a.stride_bytes, a.box) == ("float8_e4m3fn", 1, (48, 33), 48, (128, 64))
        assert (b.dims, b.stride_bytes, b.box) == ((48, 17), 48, (128, 128))
        offset = a.buffer.__array_interface__["data"][0] - gemm.A.device.__array_interface__["data"][0]
        assert offset == gemm.A.guard and offset % 16 == 0
    with pytest.raises(launch.LaunchError, match="row stride 40 bytes \\(lda 40 x 1 bytes\\) is not a multiple of 16; "
                                                 "claim shapes with K % 16 == 0"):
        launch.plan(inst, {"M": 16, "N": 16, "K": 40, "A": "a", "B": "b", "D": "d", "scale_A": "s", "scale_B": "t"})


# A separate output written by a TMA store: tensor_map_D, in D's own element type.
D_STORE = (('"beta", "C"]', '"beta", "C", "tensor_map_D"]'),
           ('B = { box = ["BK", "BN"], swizzle = "128B" } }',
            'B = { box = ["BK", "BN"], swizzle = "128B" }, D = { box = [32, "BM"] } }'),
           ('dtypes = ["float16", "bfloat16"]', 'dtypes = ["f16f16f32bf16"]'))


def test_a_separate_output_stored_by_tma_gets_a_map_of_d_in_its_own_type_over_its_guarded_buffer(write):
    (inst,) = catalog.load(write(HOPPER, *D_STORE))[0].instances()
    assert inst.spec.tensor_maps["D"].swizzle == "none"
    A, B = np.ones((33, 24)), np.ones((24, 24))
    for guard in (None, 0):
        gemm = GuardedGemm(HostBuffers(), inst, A, B, guard=guard, beta=0.5, C0=np.ones((33, 24)))
        assert gemm.output == "D"
        planned = launch.plan(inst, gemm.role_values())
        a, b, d = planned.tensor_maps
        # D row-major M x N in bfloat16: N contiguous, rows ldd x 2 bytes apart; C (float) stays a pointer
        assert (d.operand, d.dtype, d.itemsize, d.dims, d.ld, d.stride_bytes, d.box) == \
            ("D", "bfloat16", 2, (24, 33), 24, 48, (32, 64))
        assert planned.args[-1] is d and planned.args[-2].dtype == np.uint32   # C: float32 bits, read
        address = lambda a: a.__array_interface__["data"][0]   # noqa: E731
        assert address(planned.args[-2]) - address(gemm.C.device) == gemm.C.guard * 4
        offset = address(d.buffer) - address(gemm.D.device)
        assert offset == gemm.D.guard * 2 and offset % 16 == 0
    with pytest.raises(launch.LaunchError, match="tensor map for D: row stride 38 bytes \\(ldd 19 x 2 bytes\\) "
                                                 "is not a multiple of 16; claim shapes with N % 8 == 0"):
        launch.plan(inst, {**gemm.role_values(), "N": 19, "ldd": 19})


def test_tensor_maps_name_d_among_the_operands_and_want_its_role(write):
    with pytest.raises(catalog.CatalogError, match="tensor_maps: 'E' is not an operand; use A, B, C, D"):
        catalog.load(write(HOPPER, (D_STORE[1][0], D_STORE[1][1].replace("D =", "E ="))))
    with pytest.raises(catalog.CatalogError, match="args lists tensor_map_D but tensor_maps has no D"):
        catalog.load(write(HOPPER, D_STORE[0]))
