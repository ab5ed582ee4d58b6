"""The catalog loader accepts good files and rejects bad ones with one-line, actionable errors."""

import textwrap

import pytest

from gemmcheck import catalog

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
