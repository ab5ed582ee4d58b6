"""Arguments in the types the kernel declares: each parameter's C type read from its
declaration (after preprocessing and template substitution), every role packed in it by
launch.plan, and a role that cannot fit its parameter refused when the catalog loads."""

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from gemmcheck.contract import catalog, launch, parameters
from gemmcheck.contract.launch import LaunchError, plan
from gemmcheck.contract.parameters import FLOATING, INTEGER, OTHER, POINTER, TENSOR_MAP, UNKNOWN, read_type

DECLARED = Path(__file__).resolve().parent / "data" / "declared_types" / "catalog.toml"


@pytest.mark.parametrize("written, spelling, kind, size, signed", [
    ("int", "int", INTEGER, 4, True),
    ("const int", "int", INTEGER, 4, True),
    ("unsigned", "unsigned int", INTEGER, 4, False),
    ("unsigned int", "unsigned int", INTEGER, 4, False),
    ("long", "long", INTEGER, 8, True),
    ("long int", "long", INTEGER, 8, True),
    ("long long", "long long", INTEGER, 8, True),
    ("unsigned long long int", "unsigned long long", INTEGER, 8, False),
    ("short", "short", INTEGER, 2, True),
    ("unsigned char", "unsigned char", INTEGER, 1, False),
    ("size_t", "unsigned long", INTEGER, 8, False),
    ("std::size_t", "unsigned long", INTEGER, 8, False),
    ("const size_t", "unsigned long", INTEGER, 8, False),
    ("int64_t", "long", INTEGER, 8, True),
    ("cuda::std::int64_t", "long", INTEGER, 8, True),
    ("uint32_t", "unsigned int", INTEGER, 4, False),
    ("uint", "unsigned int", INTEGER, 4, False),
    ("ptrdiff_t", "long", INTEGER, 8, True),
    ("float", "float", FLOATING, 4, True),
    ("double", "double", FLOATING, 8, True),
    ("__half", "__half", FLOATING, 2, True),
    ("half", "__half", FLOATING, 2, True),
    ("nv_bfloat16", "__nv_bfloat16", FLOATING, 2, True),
    ("const float *__restrict__", "float *", POINTER, 8, False),
    ("float const*", "float *", POINTER, 8, False),
    ("const __grid_constant__ CUtensorMap", "CUtensorMap", TENSOR_MAP, 128, True),
    ("CUtensorMap_st", "CUtensorMap", TENSOR_MAP, 128, True),
    ("Dims", "Dims", OTHER, None, True),
    ("const int &", "int &", OTHER, None, True),
    ("typename Traits<T>::type", "Traits<T>type", UNKNOWN, None, True),
])
def test_a_type_reads_as_the_compiler_lays_it_out(written, spelling, kind, size, signed):
    assert read_type(written) == parameters.CType(spelling, kind, size, signed)


def test_template_parameters_and_the_files_typedefs_are_put_in():
    names = {"T": "__half", "index_t": "long long", "real": "T"}
    assert read_type("T", names) == parameters.floating("__half")
    assert read_type("const T *", names).kind == POINTER
    assert read_type("index_t", names) == parameters.CType("long long", INTEGER, 8, True)
    assert read_type("real", names) == parameters.floating("__half")     # a typedef of a parameter
    assert parameters.typedefs("typedef long long index_t;\nusing real = float;\ntypedef struct { int a; } S;\n") \
        == {"index_t": "long long", "real": "float"}


def test_a_parameter_list_reads_names_types_and_arrays():
    found = parameters.declared_parameters(
        "const T *__restrict__ A, size_t M, unsigned, float B[], T alpha = 1, "
        "const __grid_constant__ CUtensorMap tmap_a, __attribute__((unused)) long long ld")
    assert [(p.name, p.type, p.pointer) for p in found] == [
        ("A", "const T *__restrict__", True), ("M", "size_t", False), ("", "unsigned", False),
        ("B", "float []", True), ("alpha", "T", False), ("tmap_a", "const __grid_constant__ CUtensorMap", False),
        ("ld", "long long", False)]
    assert parameters.template_parameters("template <typename T, int TILE = 4, class... Rest> __global__ void") == [
        ("type", "T", None), ("value", "TILE", "4"), ("pack", "Rest", None)]


@pytest.fixture(scope="module")
def declared():
    return {i.id: i for s in catalog.load(DECLARED) for i in s.instances()}


def test_an_instantiation_records_each_parameter_in_its_own_type(declared):
    half = declared["tutorial-float16"]
    assert [str(p.type) for p in half.parameters] == [
        "unsigned long", "unsigned long", "unsigned long", "__half", "__half *", "unsigned long", "__half *",
        "unsigned long", "__half", "__half *", "unsigned long"]
    assert half.parameters[3].describe() == "parameter 4 'T alpha' (__half)"
    assert str(declared["tutorial-float64"].parameters[3].type) == "double"
    assert [str(t) for t in launch.packed_types(declared["mixed_integers-float32"])][3:] == \
        ["unsigned int", "unsigned int", "long long"]     # unsigned, uint32_t, the file's index_t


def _values(M=5, N=6, K=7, **extra):
    return {"A": "bufA", "B": "bufB", "C": "bufC", "M": M, "N": N, "K": K, "lda": K, "ldb": N, "ldc": N,
            "alpha": 2, "beta": -1, **extra}


def test_plan_packs_sizes_and_scalars_in_the_declared_types(declared):
    # fails on the code that packed every size as int32 and alpha/beta as float
    args = plan(declared["tutorial-float16"], _values()).args
    assert [np.asarray(a).dtype for a in args] == [
        np.uint64, np.uint64, np.uint64, np.float16, np.dtype("<U4"), np.uint64, np.dtype("<U4"), np.uint64,
        np.float16, np.dtype("<U4"), np.uint64]
    assert args[:4] == (5, 6, 7, 2.0) and args[8] == -1.0 and args[3].tobytes() == np.float16(2).tobytes()
    bf16 = plan(declared["tutorial-bfloat16"], _values()).args
    assert type(bf16[3]) is ml_dtypes.bfloat16 and bf16[3].tobytes() == np.array(2, ml_dtypes.bfloat16).tobytes()
    col = plan(declared["int64_leading_dimensions-float32"], _values()).args
    assert [type(col[i]) for i in (0, 3, 5, 7, 10)] == [np.int32, np.float32, np.int64, np.int64, np.int64]
    mixed = plan(declared["mixed_integers-float32"], _values()).args
    assert [type(a) for a in mixed[3:]] == [np.uint32, np.uint32, np.int64]


def test_plan_refuses_a_value_the_declared_type_cannot_hold(declared, tmp_path):
    with pytest.raises(OverflowError, match=r"argument 'M' = -1 does not fit the kernel's unsigned int \(0 to 4294967295\)"):
        plan(declared["mixed_integers-float32"], _values(M=-1))
    with pytest.raises(LaunchError, match=r"alpha = 0.1 is 0.0999755859375 in the kernel's __half; pass a value"):
        plan(declared["tutorial-float16"], _values(alpha=0.1))


def _load(tmp_path, source: str, args: list, **fields):
    (tmp_path / "k.cu").write_text(source)
    extra = "".join(f"{k} = {v}\n" for k, v in fields.items())
    (tmp_path / "catalog.toml").write_text(
        f'[[kernel]]\nname = "k"\nsource = "k.cu"\nentry = "k"\nargs = {args!r}\n'.replace("'", '"')
        + 'grid = ["ceil(N / 16)", "ceil(M / 16)"]\nblock = [16, 16]\n'
        # a template's T takes both; a kernel of floats is a float32 one (the loader checks pointees)
        + f'dtypes = {["float32", "float16"] if "typename" in source else ["float32"]}\n'.replace("'", '"')
        + 'expect = "correct"\n' + extra)
    return catalog.load(tmp_path / "catalog.toml")


MNK = ["A", "B", "C", "M", "N", "K"]


@pytest.mark.parametrize("params, args, message", [
    ("float *A, float *B, float *C, int M, int N, int K", ["M", "B", "C", "A", "N", "K"],
     "args: role 'M' is parameter 1 'float *A' of k, a pointer; M is passed as an integer; list the roles in the "
     "order the kernel declares its parameters"),
    ("float *A, float *B, size_t M, float *C, int N, int K", MNK,
     "args: role 'C' is parameter 3 'size_t M' of k (unsigned long), an integer; C is passed as a pointer; list "
     "the roles"),
    ("float *A, float *B, float *C, unsigned char M, int N, int K", MNK,
     "args: role 'M' is parameter 4 'unsigned char M' of k, which holds at most 255; the suite passes M up to "
     "8200: declare it int (or wider)"),
    # (alpha declared int is taken, as cuBLAS's int8 GEMM declares it, and through a pointer to a
    # number, as its pointer mode device passes it; through a pointer to pointers it is not)
    ("float *A, float *B, float *C, int M, int N, int K, const float **alpha", [*MNK, "alpha"],
     "args: role 'alpha' is parameter 7 'const float **alpha' of k, a pointer to pointers; alpha is passed as a "
     "number, or through a pointer to one of float, double, __half, __nv_bfloat16, int"),
    ("float *A, float *B, float *C, int M, int N, int K, unsigned flag", [*MNK, -1],
     "args: the literal -1 is parameter 7 'unsigned flag' of k (unsigned int), which holds 0 to 4294967295"),
    ("float *A, float *B, float *C, Dims d, int N, int K", MNK,
     "args: role 'M' is parameter 4 'Dims d' of k, a Dims by value, which the suite cannot pack; M is passed as "
     "an integer"),
    # (a pointer-array batch, as cuBLAS's gemmBatched takes: role A on it would hand the kernel a
    # matrix whose elements it reads as addresses; and the converse, A_array on a pointer to elements)
    ("const float *const *A, const float *const *B, float **C, int M, int N, int K, int batch", [*MNK, "batch"],
     "args: role 'A' is parameter 1 'const float *const *A' of k, an array of pointers (a "
     "pointer-array batch: one pointer per product); give it the role A_array"),
    ("const float *const A[], const float *B, float *C, int M, int N, int K, int batch", [*MNK, "batch"],
     "args: role 'A' is parameter 1 'const float *const A[]' of k (float * *), an array of pointers"),
    ("const float *A, const float *const *B, float *const *C, int M, int N, int K, int batch",
     ["A_array", "B_array", "C_array", "M", "N", "K", "batch"],
     "args: role 'A_array' is parameter 1 'const float *A' of k, a pointer to elements; A_array is passed as an "
     "array of pointers, one per product (declared like const float *const *A_array); give the parameter the "
     "role A for one matrix, or a strided batch's"),
    ("const float *const *A, const float *const *B, float *const *C, int M, int N, int K",
     ["A_array", "B_array", "C_array", "M", "N", "K"],
     "args lists A_array, B_array, C_array but no batch, and the grid does not name batch: a pointer-array batch "
     "is told its number of products (the role batch, cuBLAS's batchCount), or launched with one block per product "
     "along a grid dimension"),
    ("const float *const *A, const float *B, long long sB, float *const *C, int M, int N, int K, int batch",
     ["A_array", "B", "stride_B", "C_array", "M", "N", "K", "batch"], None),
    ("const float *const *A, const float *A2, const float *B, float *C, int M, int N, int K, int batch",
     ["A_array", "A", "B", "C", "M", "N", "K", "batch"],
     "args lists A_array and A; an operand is passed one way: an array of pointers to its products (A_array), "
     "or A itself (a strided batch's with stride_A)"),
    ("float *A, float *B, float *C, int M, int N", MNK,
     "args lists 6 parameters, but k (k.cu:1) declares 5: (float *A, float *B, float *C, int M, int N); give one "
     "role per parameter, in order"),
])
def test_a_role_that_does_not_fit_its_parameter_is_refused_at_load_in_one_line(tmp_path, params, args, message):
    if message is None:   # fits: arrays of pointers for some operands, a strided other one
        assert _load(tmp_path, f"__global__ void k({params}) {{}}\n", args)
        return
    with pytest.raises(catalog.CatalogError) as caught:
        _load(tmp_path, f"__global__ void k({params}) {{}}\n", args)
    assert message in str(caught.value) and "\n" not in str(caught.value)
    assert str(caught.value).startswith(f"{tmp_path / 'catalog.toml'}: kernel 'k': ")


def test_a_pointer_array_batch_without_its_count_is_launched_a_block_per_product_along_the_grid(tmp_path):
    source = "__global__ void k(const float *const *A, const float *const *B, float *const *C, int M, int N, int K) {}\n"
    with pytest.raises(catalog.CatalogError, match="but no batch, and the grid does not name batch"):
        _load(tmp_path, source, ["A_array", "B_array", "C_array", "M", "N", "K"])
    (tmp_path / "catalog.toml").write_text((tmp_path / "catalog.toml").read_text().replace(
        'grid = ["ceil(N / 16)", "ceil(M / 16)"]', 'grid = ["ceil(N / 16)", "ceil(M / 16)", "batch"]'))
    (spec,) = catalog.load(tmp_path / "catalog.toml")
    assert spec.instances()[0].batched and spec.instances()[0].pointer_arrays == ("A", "B", "C")


def test_a_template_parameter_type_is_checked_in_each_instantiation(tmp_path):
    # T alpha is a float in float32 and a __half in float16: both fit; T as a size fits neither
    source = "template <typename T> __global__ void k(const T *A, const T *B, T *C, int M, int N, int K, T alpha) {}\n"
    assert _load(tmp_path, source, [*MNK, "alpha"], template_args='"{T}"')
    with pytest.raises(catalog.CatalogError, match=r"role 'M' is parameter 4 'T M' of k<float> \(float\), a "
                                                   r"floating-point value"):
        _load(tmp_path, source.replace("int M", "T M"), [*MNK, "alpha"], template_args='"{T}"')


def test_a_tensor_map_role_on_a_pointer_is_refused(tmp_path):
    with pytest.raises(catalog.CatalogError) as caught:
        _load(tmp_path, "__global__ void k(int M, int N, int K, const float *A, const float *B, float *C) {}\n",
              ["M", "N", "K", "tensor_map_A", "B", "C"], tensor_maps='{ A = { box = [16, 16] } }',
              arch='"sm_90a"')
    assert ("args: role 'tensor_map_A' is parameter 4 'const float *A' of k, a pointer; tensor_map_A is passed "
            "as a CUtensorMap by value (const __grid_constant__ CUtensorMap, 128 bytes); declare it const "
            "__grid_constant__ CUtensorMap, or give the role A") in str(caught.value)


def test_short_and_wider_sizes_load(tmp_path):
    # short holds 32767: every size the suite passes (LARGEST_DIMENSION) fits
    (spec,) = _load(tmp_path, "__global__ void k(float *A, float *B, float *C, short M, long N, unsigned K) {}\n",
                    MNK)
    assert [str(t) for t in launch.packed_types(spec.instances()[0])][3:] == ["short", "long", "unsigned int"]


def test_largest_dimension_holds_every_size_the_profiles_pass():
    from gemmcheck.problems.harness import padded_leading_dimension
    from gemmcheck.problems.profiles import PROFILES

    largest = max(max(p.max_dim, *p.race_sizes, *p.perf_sizes, *(d for s in p.large_shapes for d in s))
                  for p in PROFILES.values())
    assert padded_leading_dimension(largest) <= launch.LARGEST_DIMENSION


def test_without_a_readable_declaration_the_roles_keep_their_default_types(tmp_path):
    source = tmp_path / "gone.cu"
    spec = catalog.KernelSpec(name="gone", source=source, entry="gone", signature="mnk", policy="tile2d",
                              tiles=(4,), dtypes=("float16",), roles=(*MNK, "alpha"))
    (inst,) = spec.instances()
    assert inst.parameters is None
    assert [str(t) for t in launch.packed_types(inst)][3:] == ["int", "int", "int", "float"]


# -- the compiler's view -------------------------------------------------------------------

# NVRTC's symbol for gemm<__half, 32> of SOURCE: the mangled name spells each parameter's type
SYMBOL = "_Z4gemmI6__halfLi32EEvPKT_S3_PS1_mijS1_S1_xsh"
SOURCE = ("typedef long long idx_t;\ntemplate <typename T, int TILE>\n__global__ void gemm(const T* __restrict__ A, "
          "const T* B, T* C, size_t M, const int N, unsigned K, T alpha, T beta, idx_t lda, short s, unsigned char u) "
          "{}\n")
ROLES = '["A", "B", "C", "M", "N", "K", "alpha", "beta", "lda", 1, 2]'


def _half_instance(tmp_path, source=SOURCE):
    (spec,) = _load_roles(tmp_path, source)
    return spec.instances()[0]


def _load_roles(tmp_path, source):
    (tmp_path / "k.cu").write_text(source)
    (tmp_path / "catalog.toml").write_text(
        f'[[kernel]]\nname = "k"\nsource = "k.cu"\nentry = "gemm"\nargs = {ROLES}\ntemplate_args = "{{T}}, {{TILE}}"\n'
        'tiles = [32]\npolicy = "tile2d"\ndtypes = ["float16"]\nexpect = "correct"\n')
    return catalog.load(tmp_path / "catalog.toml")


def test_the_compilers_symbol_names_each_parameters_type(tmp_path):
    text, types = parameters.compiled_types(SYMBOL)
    assert text == ("void gemm<__half, 32>(__half const*, __half const*, __half*, unsigned long, int, unsigned int, "
                    "__half, __half, long long, short, unsigned char)")
    assert [t.kind for t in types[:4]] == [POINTER, POINTER, POINTER, INTEGER] and types[6] == parameters.floating("__half")
    assert launch.compiler_disagreement(_half_instance(tmp_path), SYMBOL) is None
    assert parameters.compiled_types("gemm_extern_c") is None            # extern "C": no types to compare


def test_a_packing_that_differs_from_the_compilers_is_named(tmp_path):
    # as the launch path packed before: M as an int where the compiler declares an unsigned long
    wrong = _half_instance(tmp_path, SOURCE.replace("size_t M", "int M"))
    assert launch.compiler_disagreement(wrong, SYMBOL) == (
        "parameter 4 (M) is packed as int (integer, 4 bytes); the compiler's void gemm<__half, 32>(__half const*, "
        "__half const*, __half*, unsigned long, int, unsigned int, __half, __half, long long, short, unsigned char) "
        "declares unsigned long (integer, 8 bytes)")


def test_a_type_spelled_through_a_trait_is_packed_as_the_roles_default_and_not_compared(tmp_path):
    # typename accumulator<T>::type alpha: neither the declaration nor the symbol gives its size here;
    # it goes as the role's default (float) and the CPU simulator's build asserts that size
    (tmp_path / "k.cu").write_text(
        "template <typename T> struct accumulator { typedef float type; };\n"
        "template <typename T, int TILE>\n__global__ void broken_reads_c_at_beta_zero(const T *A, const T *B, T *C, "
        "int M, int N, int K, typename accumulator<T>::type alpha, typename accumulator<T>::type beta) {}\n")
    (tmp_path / "catalog.toml").write_text(
        '[[kernel]]\nname = "k"\nsource = "k.cu"\nentry = "broken_reads_c_at_beta_zero"\n'
        'args = ["A", "B", "C", "M", "N", "K", "alpha", "beta"]\ntiles = [16]\npolicy = "tile2d"\n'
        'dtypes = ["float32"]\nexpect = "correct"\n')
    (inst,) = catalog.load(tmp_path / "catalog.toml")[0].instances()
    assert inst.parameters[6].type.kind == UNKNOWN and str(launch.packed_types(inst)[6]) == "float"
    symbol = "_Z27broken_reads_c_at_beta_zeroIfLi16EEvPKT_S2_PS0_iiiN11accumulatorIS0_E4typeES6_"
    assert parameters.compiled_types(symbol)[1][6].kind == UNKNOWN
    assert launch.compiler_disagreement(inst, symbol) is None
