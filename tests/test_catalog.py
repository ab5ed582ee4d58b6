"""The catalog loader accepts good files and rejects bad ones with one-line, actionable errors."""

import re
import textwrap
from pathlib import Path

import pytest

from gemmcheck.contract import catalog

GOOD = """
[[kernel]]
name = "mine"
source = "k.cu"
entry = "my_gemm"
signature = "mnk"
policy = "tile2d"
tiles = [16, 32]
dtypes = ["float32", "float16"]
shapes = "any"
shared_tiles = 2
expect = "correct"
"""


@pytest.fixture
def write(tmp_path):
    (tmp_path / "k.cu").write_text("template <typename T, int TILE> __global__ void my_gemm() {}\n")

    def _write(text, name="catalog.toml"):
        path = tmp_path / name
        path.write_text(textwrap.dedent(text))
        return path
    return _write


def test_builtin_catalog_loads_and_declares_the_four_references():
    specs = catalog.load(catalog.BUILTIN)
    refs = {s.name for s in specs if s.is_reference}
    assert {"matmul_tiled", "matmul_tiled_guarded", "matmul_tiled_padded", "matmul_naive"} <= refs


def test_a_good_user_catalog_loads(write):
    (spec,) = catalog.load(write(GOOD))
    assert spec.name == "mine" and spec.tiles == (16, 32)
    assert spec.name_expression("float16", 32) == "my_gemm<__half, 32>"
    assert spec.shared_bytes("float32", 32) == 2 * 32 * 32 * 4
    assert [i.id for i in spec.instances()] == [
        "mine-float32-TILE16", "mine-float32-TILE32", "mine-float16-TILE16", "mine-float16-TILE32"]


@pytest.mark.parametrize("change, message", [
    (("policy = \"tile2d\"", "policy = \"diagonal\""), "unknown launch policy 'diagonal'"),
    (("dtypes = [\"float32\", \"float16\"]", "dtypes = [\"float8\"]"), "unknown dtype 'float8'"),
    (("source = \"k.cu\"", "source = \"missing.cu\""), "source 'missing.cu' not found"),
    (("entry = \"my_gemm\"", "entry = \"other_gemm\""), "entry 'other_gemm' is not a __global__ function of k.cu; it declares my_gemm"),
    (("tiles = [16, 32]", "tiles = [16, 64]"), "TILE 64 gives 4096 threads per block (max 1024)"),
    (("signature = \"mnk\"", "signature = \"nmk\""), "unknown signature 'nmk'"),
    (("expect = \"correct\"", "expect = \"slow\""), "unknown expect 'slow'"),
    (("shapes = \"any\"", "shapes = \"some\""), "unknown shapes 'some'"),
    (("tiles = [16, 32]", "tiles = []"), "'tiles' must be a non-empty list"),
    (("shared_tiles = 2", "shared_tiles = 2\ntemplate_args = \"{T}, {BLOCK}\""), "uses ['BLOCK']; only {T} and the parameters ['TILE']"),
    (("shared_tiles = 2", "shared_tiles = 2\ncolour = \"red\""), "unknown field(s) ['colour']"),
    (("entry = \"my_gemm\"\n", ""), "missing required field 'entry'"),
], ids=["policy", "dtype", "source", "entry", "threads", "signature", "expect", "shapes",
        "empty-tiles", "template-field", "unknown-field", "missing-field"])
def test_bad_entries_fail_with_file_kernel_and_cause(write, change, message):
    path = write(GOOD.replace(*change))
    with pytest.raises(catalog.CatalogError) as info:
        catalog.load(path)
    text = str(info.value)
    assert message in text
    assert str(path) in text and "kernel 'mine'" in text
    assert "\n" not in text


def test_static_shared_memory_over_48k_is_rejected(write):
    path = write(GOOD.replace('dtypes = ["float32", "float16"]', 'dtypes = ["float64"]')
                 .replace("tiles = [16, 32]", "tiles = [32]").replace("shared_tiles = 2", "shared_tiles = 8"))
    with pytest.raises(catalog.CatalogError, match=r"TILE 32 float64 needs 65536 bytes of static "
                                                   r"shared memory \(max 49152\)"):
        catalog.load(path)


def test_duplicate_names_are_rejected_across_files(write):
    first, second = write(GOOD, "a.toml"), write(GOOD, "b.toml")
    with pytest.raises(catalog.CatalogError, match="kernel 'mine': duplicate name"):
        catalog.load_all([first, second])


def test_not_toml_and_missing_file(write, tmp_path):
    with pytest.raises(catalog.CatalogError, match="not valid TOML"):
        catalog.load(write("[[kernel]\nname="))
    with pytest.raises(catalog.CatalogError, match="catalog file not found"):
        catalog.load(tmp_path / "nope.toml")


def test_empty_catalog_is_rejected(write):
    with pytest.raises(catalog.CatalogError, match="no \\[\\[kernel\\]\\] tables"):
        catalog.load(write("# nothing\n"))


@pytest.mark.parametrize("shapes, shape, tile, supported", [
    ("square-tile-multiple", (64, 64, 64), 32, True),
    ("square-tile-multiple", (65, 65, 65), 32, False),
    ("square-tile-multiple", (64, 32, 64), 32, False),
    ("tile-multiple", (64, 32, 96), 32, True),
    ("tile-multiple", (64, 33, 96), 32, False),
    ("any", (1, 17, 1000), 32, True),
])
def test_declared_shape_support(write, shapes, shape, tile, supported):
    text = GOOD.replace('shapes = "any"', f'shapes = "{shapes}"')
    (spec,) = catalog.load(write(text))
    assert spec.supports(*shape, tile) is supported


def test_expectations_match_the_defect_classes():
    from gemmcheck.verdict import Defect
    assert set(catalog.EXPECTATIONS[1:]) == {d.value for d in Defect}


# -- kernels as their authors write them ------------------------------------------------

SGEMM_SOURCE = """
// __global__ void only_in_a_comment(int)
template <int BM, int BN, int BK, int TM, int TN>
__global__ void sgemm(int M, int N, int K, float alpha, const float *A, const float *B, float beta, float *C) {}
template <int BM, int BN, int BK, int TM, int TN>
__global__ void sgemm_wide(int M, int N, int K, float alpha, const float *A, const float *B, float beta, float *C) {}
const char *s = "__global__ void only_in_a_string(";
"""

SGEMM = """
[[kernel]]
name = "sgemm"
source = "sgemm.cu"
entry = "sgemm"
args = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
template_args = "{BM}, {BN}, {BK}, {TM}, {TN}"
params = { BM = [64, 128], BN = [128], BK = [8], TM = [8], TN = [8] }
tile = "BM"
grid = ["ceil(N / BN)", "ceil(M / BM)"]
block = ["BM * BN / (TM * TN)"]
dtypes = ["float32"]
shapes = "M % BM == 0 and K % BK == 0"
expect = "correct"
"""


@pytest.fixture
def write_sgemm(tmp_path):
    (tmp_path / "sgemm.cu").write_text(SGEMM_SOURCE)

    def _write(text):
        path = tmp_path / "sgemm.toml"
        path.write_text(textwrap.dedent(text))
        return path
    return _write


def test_an_sgemm_entry_gives_one_instantiation_per_parameter_combination(write_sgemm):
    (spec,) = catalog.load(write_sgemm(SGEMM))
    assert spec.roles == ("M", "N", "K", "alpha", "A", "B", "beta", "C")
    assert [i.id for i in spec.instances()] == ["sgemm-float32-BM64_BN128_BK8_TM8_TN8",
                                                "sgemm-float32-BM128_BN128_BK8_TM8_TN8"]
    assert [i.name_expression for i in spec.instances()] == ["sgemm<64, 128, 8, 8, 8>", "sgemm<128, 128, 8, 8, 8>"]
    assert [i.tile for i in spec.instances()] == [64, 128] and spec.tiles == (64, 128)
    big = spec.instances()[1]
    assert big.launch_shape(256, 300, 16) == ((3, 2, 1), (256, 1, 1))
    assert big.supports(256, 3, 16) and not big.supports(200, 128, 16) and not big.supports(256, 128, 12)


def test_named_configs_name_their_instantiations(write_sgemm):
    text = SGEMM.replace('params = { BM = [64, 128], BN = [128], BK = [8], TM = [8], TN = [8] }',
                         'configs = [{ name = "big", BM = 128, BN = 128, BK = 8, TM = 8, TN = 8 },\n'
                         '           { BM = 64, BN = 64, BK = 8, TM = 4, TN = 4 }]')
    (spec,) = catalog.load(write_sgemm(text))
    assert [i.id for i in spec.instances()] == ["sgemm-float32-big", "sgemm-float32-BM64_BN64_BK8_TM4_TN4"]
    assert spec.instances()[0].params == {"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8}


def test_parameters_can_be_passed_as_macros(write_sgemm):
    text = SGEMM.replace('template_args = "{BM}, {BN}, {BK}, {TM}, {TN}"',
                         'template_args = "{BM}, {BN}, {BK}, {TM}, {TN}"\nmacros = ["BM", "TM"]')
    (spec,) = catalog.load(write_sgemm(text))
    assert spec.instances()[0].defines == (("BM", 64), ("TM", 8))


def test_old_style_instances_still_build_from_a_tile():
    spec = next(s for s in catalog.load(catalog.BUILTIN) if s.name == "matmul_tiled_guarded")
    inst = catalog.Instance(spec, "float32", 16)
    assert inst.id == "matmul_tiled_guarded-float32-TILE16" and inst.params == {"TILE": 16}
    assert inst == spec.instances()[4] and hash(inst) == hash(spec.instances()[4])
    assert inst.name_expression == "matmul_tiled_guarded<float, 16>"


@pytest.mark.parametrize("change, message", [
    (('args = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]', 'args = ["M", "N", "K", "gamma", "A", "B", "C"]'),
     "args: unknown role 'gamma'; use A, B, C, D, scale_A, scale_B, M, N, K, lda, ldb, ldc, ldd, batch, stride_A, stride_B, stride_C, stride_D, groups, alpha, beta, tensor_map_A, tensor_map_B, tensor_map_C, tensor_map_D, bias, residual, output_scale, group_offsets, group_counts, A_array, B_array, C_array, D_array, workspace, semaphores or an integer literal"),
    (('args = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]', 'args = ["M", "N", "K", "A", "B"]'),
     "args: no C; a GEMM kernel takes the pointers A, B and C"),
    (('args = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]', 'args = ["M", "N", "K", "alpha", "A", "A", "beta", "C"]'),
     "args: role(s) ['A'] listed twice; each pointer and scalar role is one kernel parameter"),
    (('args = ["M"', 'signature = "mnk"\nargs = ["M"'), "either as args = "),
    (('block = ["BM * BN / (TM * TN)"]', 'block = ["BM * BN / (TM * TN) * Q"]'),
     "block: 'BM * BN / (TM * TN) * Q' names Q, which is not M, N, K, batch, groups or a parameter (BK, BM, BN, TM, TN)"),
    (('block = ["BM * BN / (TM * TN)"]', 'block = ["BM * BN / (TM - TN)"]'), "divides by zero"),
    (('block = ["BM * BN / (TM * TN)"]', 'block = ["BM * BN / (TM * TN) - 128"]'),
     "has 0 threads; every dimension must be >= 1"),
    (('block = ["BM * BN / (TM * TN)"]', 'block = ["BM * BN / TM"]'), "2048 threads per block (max 1024)"),
    (('BM = [64, 128]', 'BM = []'), "params.BM must be a non-empty list of positive integers, got []; "
                                    "an empty list gives no instantiation"),
    (('tile = "BM"', 'tile = "BQ"'), "the tile parameter 'BQ' has no value in every instantiation"),
    (('template_args = "{BM}, {BN}, {BK}, {TM}, {TN}"', 'template_args = "{BM}, {BX}"'),
     "template_args '{BM}, {BX}' uses ['BX']"),
    (('grid = ["ceil(N / BN)", "ceil(M / BM)"]', 'grid = ["ceil(N / BN)", "open(M)"]'), "open(M) is not allowed"),
    (('shapes = "M % BM == 0 and K % BK == 0"', 'shapes = "M % BQ == 0"'),
     "unknown shapes 'M % BQ == 0': neither one of ['any', 'square-tile-multiple', 'tile-multiple'] nor a constraint"),
    (('entry = "sgemm"', 'entry = "sgem"'),
     "entry 'sgem' is not a __global__ function of sgemm.cu; it declares sgemm, sgemm_wide; did you mean 'sgemm'?"),
    (('entry = "sgemm"', 'entry = "only_in_a_comment"'), "entry 'only_in_a_comment' is not a __global__ function"),
    (('entry = "sgemm"', 'entry = "only_in_a_string"'), "entry 'only_in_a_string' is not a __global__ function"),
    (('entry = "sgemm"', 'entry = "sgemm_wdie"'), "did you mean 'sgemm_wide'?"),
    (('tile = "BM"', 'tile = "BM"\nlayout = { A = "diagonal" }'), "layout: A = 'diagonal'; use A, B, C or D"),
    (('tile = "BM"', 'tile = "BM"\nmacros = ["BZ"]'), "'macros' must list parameters"),
    (('grid = ["ceil(N / BN)", "ceil(M / BM)"]\nblock = ["BM * BN / (TM * TN)"]\n', ''),
     "give the launch geometry either as policy"),
], ids=["unknown-role", "missing-C", "role-twice", "args-and-signature", "unknown-symbol", "division-by-zero",
        "zero-threads", "too-many-threads", "empty-values", "unknown-tile-param", "template-field",
        "forbidden-call", "unknown-shapes-symbol", "entry-typo", "entry-in-comment", "entry-in-string",
        "entry-prefix", "bad-layout", "bad-macro", "no-geometry"])
def test_bad_new_fields_fail_in_one_line_naming_file_kernel_field_and_fix(write_sgemm, change, message):
    assert change[0] in SGEMM or change[0] in SGEMM_SOURCE
    path = write_sgemm(SGEMM.replace(*change))
    with pytest.raises(catalog.CatalogError) as info:
        catalog.load(path)
    text = str(info.value)
    assert message in text
    assert text.startswith(f"{path}: kernel 'sgemm': ") and "\n" not in text


SEED_PUBLISHED = """
[[kernel]]
name = "seed"
source = "tiled_matmuls.cu"
entry = "matmul_tiled"
args = ["A", "B", "C", "N"]
policy = "seed"
dtypes = ["float32"]
expect = "correct"
"""


@pytest.fixture
def write_seed(tmp_path):
    examples = Path(__file__).resolve().parent.parent / "examples"
    (tmp_path / "tiled_matmuls.cu").write_text((examples / "tiled_matmuls.cu").read_text())

    def _write(text):
        path = tmp_path / "seed.toml"
        path.write_text(textwrap.dedent(text))
        return path
    return _write


def test_a_define_in_the_source_gives_the_tile_and_a_plain_kernel_its_plain_name(write_seed):
    (spec,) = catalog.load(write_seed(SEED_PUBLISHED))
    (inst,) = spec.instances()
    assert inst.tile == 2 and inst.name_expression == "matmul_tiled" and inst.id == "seed-float32-TILE2"
    assert inst.supports(4, 4, 4) and not inst.supports(5, 5, 5) and not inst.supports(4, 4, 8)


def test_a_catalog_tile_that_disagrees_with_the_sources_define_is_one_line(write_seed):
    path = write_seed(SEED_PUBLISHED + "tiles = [4]\n")
    with pytest.raises(catalog.CatalogError) as info:
        catalog.load(path)
    assert str(info.value) == (f"{path}: kernel 'seed': the source defines TILE 2 but the catalog gives "
                               "TILE = [4]; drop TILE from the catalog or make it [2]")
    assert catalog.load(write_seed(SEED_PUBLISHED + "tiles = [2]\n"))[0].tiles == (2,)


def test_the_example_catalog_loads():
    specs = {s.name: s for s in catalog.load(Path(__file__).resolve().parent.parent / "examples" / "catalog.toml")}
    assert {"sgemm", "sgemm_aligned", "gemm_colmajor", "seed_published"} <= set(specs)
    assert specs["gemm_colmajor"].layouts == {"A": "col", "B": "col", "C": "col", "D": "row"}


def test_template_args_must_match_whether_the_entry_is_a_template(write_seed, write_sgemm):
    path = write_seed(SEED_PUBLISHED + 'template_args = "{T}, {TILE}"\n')
    with pytest.raises(catalog.CatalogError, match=r"kernel 'seed': entry 'matmul_tiled' is not a template in "
                                                   r"tiled_matmuls.cu, but template_args = '\{T\}, \{TILE\}'; "
                                                   r"drop template_args"):
        catalog.load(path)
    path = write_sgemm(SGEMM.replace('template_args = "{BM}, {BN}, {BK}, {TM}, {TN}"', 'template_args = ""'))
    with pytest.raises(catalog.CatalogError, match=r"kernel 'sgemm': entry 'sgemm' is a template in sgemm.cu; "
                                                   r"give its arguments in template_args"):
        catalog.load(path)


def test_replacing_tiles_or_policy_of_a_spec_changes_its_instantiations_and_geometry():
    from dataclasses import replace
    spec = next(s for s in catalog.load(catalog.BUILTIN) if s.name == "matmul_tiled_guarded")
    floor = replace(spec, policy="floor2d", tiles=(8,))
    assert [i.tile for i in floor.instances()] == [8] * len(spec.dtypes)
    assert floor.instances()[0].launch_shape(33, 17, 65) == ((2, 4, 1), (8, 8, 1))
    assert spec.instances()[0].launch_shape(33, 17, 65) == ((17, 33, 1), (1, 1, 1))


def test_an_out_of_scope_skip_says_the_claim_once_and_what_it_means_for_a_named_claim():
    from gemmcheck.pytest_plugin.scope_plugin import why_out_of_scope
    specs = {s.name: s for s in catalog.load(Path(__file__).resolve().parent.parent / "examples" / "catalog.toml")}
    constraint = specs["sgemm_aligned"].instances()[0]
    why = why_out_of_scope(constraint, 1, 1, 1)
    assert why.count(constraint.spec.shapes) == 1 and "; )" not in why and why.endswith("M=1 N=1 K=1 is not one")
    named = next(s for s in specs.values() if s.shapes == "square-tile-multiple").instances()[0]
    assert catalog.model.SHAPES["square-tile-multiple"] in why_out_of_scope(named, 3, 5, 7)


@pytest.mark.parametrize("declared, refused", [
    ("const __half *A", "a pointer to __half, but dtype 'float32' makes A float32 (float)"),
    ("const __nv_bfloat16 *A", "a pointer to __nv_bfloat16"),
    ("const float *A", None), ("const float4 *A", None), ("const int *A", None), ("const void *A", None),
])
def test_a_pointer_to_another_floating_type_than_the_dtype_gives_is_refused_naming_both(tmp_path, declared, refused):
    """A catalog whose dtypes do not say what the kernel reads would judge a correct kernel wrong;
    a pointer to integers or vectors packs elements and is left to the compilers."""
    (tmp_path / "k.cu").write_text("#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n"
                                   f"__global__ void k({declared}, const float *B, float *C, int M, int N, int K) {{}}\n")
    (tmp_path / "c.toml").write_text('[[kernel]]\nname = "k"\nsource = "k.cu"\nentry = "k"\n'
                                     'args = ["A", "B", "C", "M", "N", "K"]\ngrid = ["N", "M"]\nblock = [1]\n'
                                     'dtypes = ["float32"]\nexpect = "correct"\n')
    if refused is None:
        assert catalog.load(tmp_path / "c.toml")
    else:
        with pytest.raises(catalog.CatalogError, match=re.escape(refused)):
            catalog.load(tmp_path / "c.toml")
