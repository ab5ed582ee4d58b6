"""Kernels that take their arguments in a struct by value (``gemm(const GemmParams p)``): the
catalog lists one role per member, the suite packs each at the member's offset, and the
simulator's build checks every offset and the size against g++'s (tests/data/struct_params)."""

from pathlib import Path

import numpy as np
import pytest

from child_env import judge_catalog
from gemmcheck import draft
from gemmcheck.backends.cpu_sim import build
from gemmcheck.contract import catalog, launch, parameters, structs

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "struct_params"
SPECS = {s.name: s for s in catalog.load(DATA / "catalog.toml")}


def test_a_struct_is_read_member_by_member_as_written():
    code = """
    struct GemmParams {
        const float *A, *B;
        float *C;
        int M, N, K;
        float alpha = 1.0f, beta{0};
        __device__ int rows() const { return M; }
        static constexpr int tile = 32;
      public:
        size_t lda;
        void reset();
    };"""
    found = structs.definitions(code)["GemmParams"]
    assert found.unpackable == "" and not found.packed
    assert [(m.name, m.type) for m in found.members] == [
        ("A", "const float *"), ("B", "const float *"), ("C", "float *"), ("M", "int"), ("N", "int"), ("K", "int"),
        ("alpha", "float"), ("beta", "float"), ("lda", "size_t")]


@pytest.mark.parametrize("code, why", [
    ("template <typename T> struct P { T *a; };\ntemplate <> struct P<int> { long a; };", "specializations"),
    ("struct P : Base { int a; };", "derived from another"),
    ("struct P { int dims[3]; };", "an array member"),
    ("struct P { int a : 3; };", "a bit-field"),
    ("struct P { struct { int x; } inner; };", "a struct member"),
    ("struct __align__(16) P { int a; };", "declared with an alignment"),
    ("struct P { int a; } __attribute__((aligned(16)));", "declared with an alignment"),
    ("#pragma pack(push, 1)\nstruct P { int a; double b; };", "declared under #pragma pack"),
])
def test_a_struct_the_suite_cannot_lay_out_says_why(code, why):
    assert structs.definitions(code)["P"].unpackable == why


def _members(instance):
    return [(p.name, p.offset, str(p.type)) for p in instance.parameters]


def test_members_lie_where_an_lp64_compiler_puts_them():
    params = SPECS["struct_params"].instances()[0]
    assert _members(params) == [("A", 0, "float *"), ("B", 8, "float *"), ("C", 16, "float *"), ("M", 24, "int"),
                                ("N", 28, "int"), ("K", 32, "int"), ("alpha", 36, "float"), ("beta", 40, "float")]
    assert params.parameters[0].member_of.type.size == 48   # 44 bytes of members, rounded to the pointers' 8
    half = SPECS["struct_typedef_half"].instances()[0]   # typedef struct { ... } HgemmArgs
    assert _members(half)[3:] == [("M", 24, "unsigned long"), ("N", 32, "int"), ("K", 36, "int"),
                                  ("alpha", 40, "__half"), ("beta", 42, "__half")]
    assert half.parameters[0].member_of.type.size == 48
    packed = SPECS["struct_packed"].instances()[0]   # __attribute__((packed)): no padding
    assert [offset for _, offset, _ in _members(packed)] == [0, 4, 12, 20, 28, 32]
    assert packed.parameters[0].member_of.type.size == 36
    half_args = next(i for i in SPECS["struct_template"].instances() if i.dtype == "float16")
    assert str(half_args.parameters[0].member_of.type) == "Args<__half>"   # template <typename T> struct Args
    assert _members(half_args)[5:] == [("K", 32, "int"), ("alpha", 36, "__half"), ("beta", 38, "__half")]
    assert half_args.parameters[0].member_of.type.size == 40
    sizes = SPECS["struct_sizes_then_pointers"].instances()[0]   # a struct, then plain parameters
    assert [(p.position, p.member_of is not None) for p in sizes.parameters] == [
        (0, True), (0, True), (0, True), (1, False), (2, False), (3, False)]


def test_a_launch_passes_the_struct_with_every_member_at_its_offset():
    instance = SPECS["struct_sizes_then_pointers"].instances()[0]
    buffers = {role: object() for role in ("A", "B", "C")}
    planned = launch.plan(instance, {"M": 5, "N": 6, "K": 7, **buffers})
    assert planned.extended   # cuLaunchKernelEx takes the struct's bytes (CuPy's call cannot)
    struct, *pointers = planned.parameters
    assert pointers == [buffers["A"], buffers["B"], buffers["C"]]
    assert struct.packed(lambda buffer: 0) == np.array([5, 6, 7], np.int32).tobytes()

    instance = SPECS["struct_params"].instances()[0]
    address = {id(b): 0x1000 * (i + 1) for i, b in enumerate(buffers.values())}
    planned = launch.plan(instance, {"M": 5, "N": 6, "K": 7, "alpha": 2, "beta": 0.5, **buffers})
    (struct,) = planned.parameters
    data = struct.packed(lambda buffer: address[id(buffer)])
    assert len(data) == 48
    assert np.frombuffer(data[:24], np.uint64).tolist() == [0x1000, 0x2000, 0x3000]
    assert np.frombuffer(data[24:36], np.int32).tolist() == [5, 6, 7]
    assert np.frombuffer(data[36:44], np.float32).tolist() == [2.0, 0.5]


def test_too_few_roles_for_the_members_is_refused_with_the_struct_shown(tmp_path):
    (tmp_path / "kernels.cu").write_text((DATA / "kernels.cu").read_text())
    (tmp_path / "catalog.toml").write_text(
        '[[kernel]]\nname = "short"\nsource = "kernels.cu"\nentry = "sizes_struct_gemm"\n'
        'args = ["M", "N", "A", "B", "C"]\ngrid = ["ceil(N / 16)", "ceil(M / 16)"]\nblock = [16, 16]\n'
        'dtypes = ["float32"]\nexpect = "correct"\n')
    with pytest.raises(catalog.CatalogError) as error:
        catalog.load(tmp_path / "catalog.toml")
    assert ("declares 6 with its struct members: (Sizes s {int M; int N; int K}, const float *A, const float *B, "
            "float *C); give one role per parameter, in order, and one per member of a struct it takes by value"
            in str(error.value))


def test_a_struct_it_cannot_lay_out_is_refused_with_the_reason(tmp_path):
    (tmp_path / "kernels.cu").write_text("struct Dims { int shape[3]; };\n"
                                         "__global__ void k(Dims d, const float *A, const float *B, float *C) {}\n")
    (tmp_path / "catalog.toml").write_text(
        '[[kernel]]\nname = "dims"\nsource = "kernels.cu"\nentry = "k"\nargs = ["M", "A", "B", "C"]\n'
        'grid = [1, 1]\nblock = [16, 16]\ndtypes = ["float32"]\nexpect = "correct"\n')
    with pytest.raises(catalog.CatalogError, match=r"role 'M' is parameter 1 'Dims d' of k, a Dims by value, which "
                                                   r"the suite cannot pack \(struct Dims has an array member\); M is "
                                                   r"passed as an integer$"):
        catalog.load(tmp_path / "catalog.toml")


def test_the_simulator_build_refuses_a_layout_g_plus_plus_does_not_share(monkeypatch):
    """The detector of a wrong reading: were the suite to lay GemmParams out packed, g++'s own
    offsets and size would disagree, and the build says which member, before any launch."""
    monkeypatch.setattr(structs, "aligned", lambda offset, size: offset)
    misread = catalog.load(DATA / "catalog.toml")[0].instances()[0]
    assert [p.offset for p in misread.parameters][3] == 24   # three pointers, then M: the same
    assert misread.parameters[0].member_of.type.size == 44   # but no padding at the end
    with pytest.raises(build.BuildError, match=r"gemmcheck lays out parameter 1 \(GemmParams\) in 44 bytes, but g\+\+ "
                                               r"gives it another size"):
        build.module(misread.spec.source, [misread])
    monkeypatch.undo()
    read = catalog.load(DATA / "catalog.toml")[0].instances()[0]
    assert build.module(read.spec.source, [read]).names == (read.name_expression,)


def test_the_draft_gives_each_member_its_role():
    text = draft.draft_source(DATA / "kernels.cu")
    assert 'args = ["A", "B", "C", "M", "N", "K", "alpha", "beta"]' in text
    assert 'args = ["M", "N", "K", "A", "B", "C"]' in text
    assert "A, B, C, M, N, K, alpha, beta: the members of 'const GemmParams p', one role each in the order " \
           "GemmParams declares them" in text
    assert "the members of 'const Args<T> args'" in text   # a template struct, read with the kernel's T
    assert "TODO: args" not in text


def test_the_references_pass_and_the_twin_is_caught_on_the_simulator(tmp_path):
    out, instances = judge_catalog(DATA / "catalog.toml", tmp_path)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert {r["instance"]: (r["verdict"], r["status"]) for r in instances} == {
        "struct_params-float32": ("correct", "as_expected"),
        "struct_params_beta_dropped-float32": ("defective", "as_expected"),
        "struct_typedef_half-float16": ("correct", "as_expected"),
        "struct_sizes_then_pointers-float32": ("correct", "as_expected"),
        "struct_packed-float32": ("correct", "as_expected"),
        "struct_template-float32": ("correct", "as_expected"), "struct_template-float16": ("correct", "as_expected")}


def test_a_traits_template_is_no_struct_taken_by_value():
    """``scalar_t<T> alpha`` through ``template <typename T> struct traits { using type = ...; }``
    (the ladder's kernels): a type read from the compiled kernel, never a struct to lay out."""
    code = ("template <typename T> struct traits { using type = float; };\n"
            "template <> struct traits<double> { using type = double; };\n"
            "template <typename T> struct Args { const T *A; int M; };\n")
    found = structs.definitions(code)
    unknown = lambda spelling: parameters.CType(spelling, parameters.UNKNOWN)
    assert parameters.struct_of(unknown("traits<float>float<float>"), found, {})[0] is None   # an alias's ::type
    assert parameters.struct_of(unknown("traits<float>"), found, {})[0] is None               # no data members
    definition, names = parameters.struct_of(unknown("Args<__half>"), found, {})
    assert definition.name == "Args" and names == {"T": "__half"}
    ladder = catalog.load(ROOT / "kernels" / "ladder_catalog.toml")   # loads, each alpha as compiled
    assert all(p.member_of is None for s in ladder for i in s.instances()[:1] for p in i.parameters or ())
