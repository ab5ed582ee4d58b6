"""python -m gemmcheck draft: a catalog entry per kernel, read from the source, TODOs for the rest."""

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from child_env import judge_catalog
from gemmcheck import draft
from gemmcheck.contract import catalog

ROOT = Path(__file__).resolve().parent.parent
PUBLISHED = ROOT / "examples" / "published"


@pytest.mark.parametrize("declaration, role", [
    ("int in_features", "K"), ("int out_features", "N"), ("int batch_size", "M"), ("int BT", "M"),
    ("int C", "K"), ("int OC", "N"), ("int num_tokens", "M"), ("int M", "M"),
])
def test_a_linear_layers_sizes_are_read_by_its_names_only_in_a_kernel_that_takes_a_weight(declaration, role):
    """torch.nn.Linear's in_features / out_features, llm.c's BT, C, OC; its batch is M, the
    rows of its input, where elsewhere a batch is a batch of products."""
    (param,) = draft.parse_params(declaration)
    (weight,) = draft.parse_params("const float *weight")
    assert draft.role_of(param, set(draft.C_TYPES), kernel_names=draft.names_of_kernel([weight, param])) == role
    assert draft.role_of(param, set(draft.C_TYPES), kernel_names=draft.names_of_kernel([param])) in (None, "batch", "M")
    # beside the usual M (a batched layer: batch, M, N, K), a batch stays a batch of products
    beside = draft.parse_params("const float *weight, int batch, int M, int N, int K")
    assert [draft.role_of(p, set(draft.C_TYPES), kernel_names=draft.names_of_kernel(beside)) for p in beside] == \
        ["B", "batch", "M", "N", "K"]


def test_the_textbooks_m_n_p_pointers_are_a_b_c_when_the_kernel_takes_all_three(tmp_path):
    """Kirk and Hwu's MatrixMulKernel(float* M, float* N, float* P, int Width): M x N = P, one
    size; a pointer named M alone is no operand, and an int n stays N."""
    source = tmp_path / "pmpp.cu"
    source.write_text("#define TILE_WIDTH 16\n__global__ void MatrixMulKernel(float* M, float* N, float* P, "
                      "int Width) {}\nvoid run(float* M_d, float* N_d, float* P_d, int Width) {\n"
                      "    dim3 dimGrid(Width / TILE_WIDTH, Width / TILE_WIDTH);\n"
                      "    dim3 dimBlock(TILE_WIDTH, TILE_WIDTH);\n"
                      "    MatrixMulKernel<<<dimGrid, dimBlock>>>(M_d, N_d, P_d, Width);\n}\n")
    (entry,) = drafted(source, tmp_path)
    assert entry["args"] == ["A", "B", "C", "N"] and entry["shapes"] == "square-tile-multiple"
    m, n, k = draft.parse_params("float *M, int n, float *Q")
    assert draft.role_of(m, set(draft.C_TYPES), kernel_names=draft.names_of_kernel([m, n, k])) is None
    p, = draft.parse_params("float *P")
    assert draft.role_of(n, set(draft.C_TYPES), kernel_names=draft.names_of_kernel([m, n, p])) == "N"


@pytest.mark.parametrize("declaration, role", [
    ("const float *A", "A"), ("float* __restrict__ matC", "C"), ("const float* __restrict__ d_B", "B"),
    ("float *A_ptr", "A"), ("double *out", "C"), ("int m", "M"), ("const int N", "N"), ("int K", "K"),
    ("int lda", "lda"), ("const int ld_c", "ldc"), ("float alpha", "alpha"), ("T beta", "beta"),
    ("unsigned int size_k", "K"), ("int count", None), ("float *workspace", None), ("float scale", None),
    ("const float *dA", "A"), ("int ldda", "lda"), ("float const * const * dA_array", "A_array"),
    ("float *const Carray[]", "C_array"), ("const float **B", "B_array"), ("float **workspace", None),
    ("int numARows", "M"), ("int numAColumns", "K"), ("int numBColumns", "N"), ("int wA", "K"), ("int hA", "M"),
    ("int rows_c", "M"), ("int bh", None), ("const float *inp", "A"), ("const float *weight", "B"),
    ("const float *x", "A"), ("const float *w", "B"), ("float *y", "C"),
    ("const float *gmem_a", "A"), ("const half *lhs", "A"), ("const half *rhs", "B"), ("float *dst", "C"),
    ("const float *mat1", "A"), ("const float *mat2", "B"), ("float *c_out", "C"), ("const float *Bt", "B"),
    ("const float *B_T", "B"), ("const float *src", None),
])
def test_roles_are_read_from_parameter_names_in_the_common_spellings(declaration, role):
    (param,) = draft.parse_params(declaration)
    assert draft.role_of(param, set(draft.C_TYPES) | {"T"}) == role


def drafted(source: Path, tmp_path: Path) -> list[dict]:
    return tomllib.loads(draft.draft_source(source, tmp_path))["kernel"]


def drafted_text(tmp_path: Path, code: str, name: str = "k.cu") -> tuple[dict, str]:
    """The one entry of the draft of `code` (written to tmp_path / name) and the draft's text."""
    source = tmp_path / name
    source.write_text(code)
    text = draft.draft_source(source, tmp_path)
    (entry,) = tomllib.loads(text)["kernel"]
    return entry, text


def test_the_drafts_geometry_and_parameters_come_from_the_files_own_launches(tmp_path):
    (entry,) = drafted(PUBLISHED / "02_smem_blocking.cu", tmp_path)
    assert entry["args"] == ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
    assert (entry["template_args"], entry["params"], entry["tile"]) == ("{BLOCKSIZE}", {"BLOCKSIZE": [32]}, "BLOCKSIZE")
    assert entry["grid"] == ["ceil(N / BLOCKSIZE)", "ceil(M / BLOCKSIZE)"] and entry["block"] == ["BLOCKSIZE * BLOCKSIZE"]
    split = {e["name"]: e for e in drafted(PUBLISHED / "06_split_k.cu", tmp_path)}
    assert split["sgemm_split_k2"]["block"] == ["TILE", "TILE", 2]
    (naive,) = drafted(PUBLISHED / "01_naive.cu", tmp_path)
    assert "template_args" not in naive and "params" not in naive and naive["grid"] == ["ceil(M / 32)", "ceil(N / 32)"]


@pytest.mark.parametrize("source", sorted(PUBLISHED.glob("*.cu")), ids=lambda p: p.name)
def test_every_published_example_drafts_to_a_catalog_the_loader_accepts_once_the_todos_are_filled(source, tmp_path):
    text = draft.draft_source(source, tmp_path)
    tomllib.loads(text)   # valid TOML as printed
    # the one value a TODO leaves empty here: a template parameter the file never launches
    filled = re.sub(r"= \[\]", "= [16]", text)
    path = tmp_path / "catalog.toml"
    path.write_text(filled)
    specs = catalog.load(path)
    assert [s.entry for s in specs] == [e["entry"] for e in tomllib.loads(text)["kernel"]]


def test_scratch_memory_is_drafted_in_its_roles_with_a_todo_for_its_sizes(tmp_path):
    # a split-K / stream-K kernel as libraries publish it: a workspace and semaphores the caller zeroes
    entry, text = drafted_text(tmp_path, "__global__ void splitk(const float* A, const float* B, float* C, "
                                          "float* d_workspace, int* semaphores, int M, int N, int K) {}")
    assert entry["args"][3:5] == ["workspace", "semaphores"]
    assert ("# TODO: scratch = { workspace = \"...\", semaphores = \"...\" }: the bytes the kernel's callers allocate "
            "for 'float* d_workspace', 'int* semaphores', over M, N, K and the parameters") in text
    # locks and partial sums by their other names; a third scratch buffer has no role left
    entry, text = drafted_text(tmp_path, "__global__ void k(const float* A, const float* B, float* C, "
                                         "float* partials, int* locks, float* scratch, int M, int N, int K) {}",
                               name="three.cu")
    assert entry["args"][3:6] == ["workspace", "semaphores", "TODO scratch"]
    assert "'float* scratch': scratch memory beyond the one workspace and one semaphores buffer" in text
    # an unknown pointer of another name is not called scratch
    _, other = drafted_text(tmp_path, "__global__ void k(const float* A, const float* B, float* C, float* src, "
                                      "int M, int N, int K) {}", name="other.cu")
    assert "TODO src" in other and "scratch = " not in other and "scratch memory" not in other


def test_what_cannot_be_read_is_marked_and_the_loader_names_it_until_filled(tmp_path):
    source = tmp_path / "odd.cu"
    source.write_text("#define TILE 16\n"
                      "template <typename T, int BM>\n"
                      "__global__ void __launch_bounds__(256) odd(const T *src, const T *B, T *C, int M, int N, int K, int count)\n"
                      "{ __shared__ T s[TILE]; }\n")
    text = draft.draft_source(source, tmp_path)
    assert "# TODO: args: the role of 'const T *src', 'int count': one of A, B, C, D, scale_A, scale_B, M, N, K" in text
    assert "# TODO: args: no parameter reads as A" in text
    assert "# TODO: params: the values of BM to test" in text
    assert "# TODO: dtypes: T is a template parameter" in text
    assert "# TODO: grid:" in text and "# TODO: block:" in text and "__launch_bounds__(256)" in text
    (entry,) = tomllib.loads(text)["kernel"]
    assert entry["args"] == ["TODO src", "B", "C", "M", "N", "K", "TODO count"]
    assert entry["template_args"] == "{T}, {BM}" and entry["params"] == {"TILE": [16], "BM": []}
    assert entry["block"] == [256]   # the __launch_bounds__ hint
    path = tmp_path / "catalog.toml"
    path.write_text(text)
    with pytest.raises(catalog.CatalogError, match="unknown role 'TODO src'"):
        catalog.load(path)
    path.write_text(text.replace('"TODO src"', '"A"').replace('"TODO count"', "0").replace("BM = []", "BM = [32]"))
    (spec,) = catalog.load(path)
    assert spec.roles == ("A", "B", "C", "M", "N", "K", 0) and spec.params["BM"] == (32,)


def test_a_file_without_kernels_says_so(tmp_path):
    source = tmp_path / "host.cu"
    source.write_text("int main() { return 0; }\n#if 0\n__global__ void old(float *a) {}\n#endif\n")
    assert "# TODO: host.cu declares no __global__ function (after preprocessing)" in draft.draft_source(source)


def test_the_command_prints_the_draft_and_names_a_missing_file(tmp_path):
    run = lambda *args: subprocess.run([sys.executable, "-m", "gemmcheck", "draft", *args], capture_output=True,
                                       text=True, cwd=ROOT)
    ok = run(str(PUBLISHED / "07_macro_kernel.cu"))
    assert ok.returncode == 0 and 'entry = "sgemm_macro"' in ok.stdout and "sgemm_macro_old" not in ok.stdout
    missing = run(str(tmp_path / "nope.cu"))
    assert missing.returncode == 2 and "nope.cu: no such file" in missing.stderr


def test_the_seeds_file_drafts_its_defined_tile_square_claim_and_floor_grid(tmp_path):
    text = draft.draft_source(ROOT / "examples" / "tiled_matmuls.cu", tmp_path)
    (entry,) = tomllib.loads(text)["kernel"]
    assert entry["args"] == ["A", "B", "C", "N"] and entry["params"] == {"TILE": [2]}
    assert (entry["grid"], entry["block"]) == (["N // TILE", "N // TILE"], ["TILE", "TILE"])
    assert entry["shapes"] == "square-tile-multiple"
    path = tmp_path / "catalog.toml"
    path.write_text(text)
    (spec,) = catalog.load(path)
    assert spec.instances()[0].launch_shape(8, 8, 8) == ((4, 4, 1), (2, 2, 1))


def test_a_kernel_with_leading_dimensions_gets_a_layout_todo(tmp_path):
    text = draft.draft_source(ROOT / "examples" / "gemm_colmajor.cu", tmp_path)
    assert "# TODO: layout:" in text and '# layout = { A = "col", B = "col", C = "col" }' in text
    assert "layout =" not in text.replace('# layout =', '')


DYNAMIC_SHARED = """
#define BM 64
#define BK 32
__global__ void sized(const float *A, const float *B, float *C, int M, int N, int K)
{
    extern __shared__ float tile[];
    tile[threadIdx.x] = A[threadIdx.x];
}
__global__ void unsized(const float *A, const float *B, float *C, int M, int N, int K)
{
    extern __shared__ float tile[];
    C[0] = tile[0];
}
__global__ void plain(const float *A, const float *B, float *C, int M, int N, int K) { C[0] = A[0]; }
void run(const float *A, const float *B, float *C, int M, int N, int K)
{
    sized<<<dim3(N / BM, M / BM), dim3(256), 2 * BM * BK * sizeof(float)>>>(A, B, C, M, N, K);
    unsized<<<dim3(N / BM, M / BM), dim3(256)>>>(A, B, C, M, N, K);
    plain<<<dim3(N / BM, M / BM), dim3(256)>>>(A, B, C, M, N, K);
}
"""


def test_dynamic_shared_memory_comes_from_the_launch_or_is_a_todo_where_the_kernel_declares_it(tmp_path):
    # Launched without its extern __shared__ bytes, a kernel reads and writes past its shared memory.
    source = tmp_path / "dynamic.cu"
    source.write_text(DYNAMIC_SHARED)
    text = draft.draft_source(source, tmp_path)
    entries = {e["name"]: e for e in tomllib.loads(text)["kernel"]}
    assert "shared_bytes" in entries["sized"] and "shared_bytes" not in entries["unsized"]
    assert "TODO: shared_bytes: the kernel uses dynamic (extern __shared__) memory" in text.split("name = \"unsized\"")[1]
    assert "shared_bytes" not in text.split("name = \"plain\"")[1]
    (tmp_path / "catalog.toml").write_text(text)
    sized = catalog.load(tmp_path / "catalog.toml")[0].instances()[0]
    assert sized.spec.geometry.evaluate({**sized.params, "M": 128, "N": 128, "K": 64})[2] == 2 * 64 * 32 * 4


def test_size_t_and_friends_map_to_their_roles_and_the_draft_packs_them_as_declared(tmp_path):
    code = ("template <typename T>\n__global__ void gemm(size_t M, std::size_t N, int64_t K, T alpha, "
            "const T *A, uint32_t lda, const T *B, unsigned ldb, T beta, T *C, long ldc) {}\n"
            "void run() { gemm<float><<<dim3((N + 15) / 16, (M + 15) / 16), dim3(16, 16)>>>"
            "(M, N, K, 1.0f, A, K, B, N, 0.0f, C, N); }\n")
    entry, text = drafted_text(tmp_path, code, name="sizes.cu")
    assert entry["args"] == ["M", "N", "K", "alpha", "A", "lda", "B", "ldb", "beta", "C", "ldc"]
    assert "TODO: args" not in text
    (tmp_path / "catalog.toml").write_text(text.replace('dtypes = ["float32"]', 'dtypes = ["float32", "float16"]'))
    from gemmcheck.contract import launch
    half = next(i for s in catalog.load(tmp_path / "catalog.toml") for i in s.instances() if i.dtype == "float16")
    assert [str(t) for t in launch.packed_types(half)] == [
        "unsigned long", "unsigned long", "long", "__half", "__half *", "unsigned int", "__half *", "unsigned int",
        "__half", "__half *", "long"]


def test_a_struct_of_sizes_drafts_as_its_members(tmp_path):
    source = tmp_path / "dims.cu"
    source.write_text("struct Dims { int m, n, k; };\n"
                      "__global__ void gemm(const float *A, const float *B, float *C, Dims d) {}\n")
    text = draft.draft_source(source, tmp_path)
    assert "# m, n, k: the members of 'Dims d', one role each in the order Dims declares them" in text
    assert tomllib.loads(text)["kernel"][0]["args"] == ["A", "B", "C", "M", "N", "K"]


def test_a_parameter_the_suite_cannot_pack_gets_a_todo_naming_its_type(tmp_path):
    source = tmp_path / "dims.cu"
    source.write_text("struct Dims { int shape[3]; };\n"
                      "__global__ void gemm(const float *A, const float *B, float *C, Dims d) {}\n")
    text = draft.draft_source(source, tmp_path)
    assert ("# TODO: args: 'Dims d' is a Dims by value, which the suite cannot pack (struct Dims has an array member) "
            "(it passes pointers, integers, floating-point alpha and beta, CUtensorMaps, and structs of these): this "
            "kernel takes what no role is") in text
    assert tomllib.loads(text)["kernel"][0]["args"] == ["A", "B", "C", "TODO d"]


MIXED = """
#include <cuda_fp8.h>
__global__ void fp8_gemm(const __nv_fp8_e4m3 *A, const __nv_fp8_e4m3 *B, __nv_bfloat16 *out, const float *scale_a,
                         float b_scale, int M, int N, int K) {}
__global__ void int8_gemm(const int8_t *A, const int8_t *B, int32_t *C, int M, int N, int K) {}
__global__ void u8_gemm(const unsigned char *a, const signed char *b, int *c, int m, int n, int k) {}
template <typename TA, typename TC>
__global__ void tmpl(const TA *A, const TA *B, const TC *C, TC *D, int M, int N, int K) {}
__global__ void fp8_out(const __nv_fp8_e4m3 *A, const __nv_fp8_e4m3 *B, __nv_fp8_e4m3 *D, const float *sfa,
                        const float *sfb, int M, int N, int K) {}
"""


def test_mixed_signatures_draft_their_operands_scales_and_a_type_per_operand(tmp_path):
    source = tmp_path / "mixed.cu"
    source.write_text(MIXED)
    text = draft.draft_source(source, tmp_path)
    entries = {e["name"]: e for e in tomllib.loads(text)["kernel"]}
    assert entries["fp8_gemm"]["args"] == ["A", "B", "C", "scale_A", "scale_B", "M", "N", "K"]
    assert entries["fp8_gemm"]["dtypes"] == ["e4m3e4m3bf16"]
    assert entries["fp8_gemm"]["scales"] == {"A": "tensor", "B": "tensor"}
    assert "scale_B taken by value: that is certain" in text
    assert entries["int8_gemm"]["dtypes"] == ["s8s8s32"] and entries["u8_gemm"]["dtypes"] == ["u8s8s32"]
    assert entries["tmpl"]["args"] == ["A", "B", "C", "D", "M", "N", "K"]
    assert entries["tmpl"]["template_args"] == "{A}, {C}"
    assert "TA, TC are template parameters (A is TA, B is TA, C is TC, D is TC)" in text
    assert entries["fp8_out"]["args"][:5] == ["A", "B", "D", "scale_A", "scale_B"]
    assert "# saturates_output = true" in text and "# d_aliases_c = true" in text
    path = tmp_path / "catalog.toml"
    path.write_text(text)
    assert [s.name for s in catalog.load(path)] == list(entries)   # the draft loads as it is


def test_the_vendor_style_tensor_core_sample_drafts_a_separate_d_and_its_types(tmp_path):
    (entry, _) = drafted(ROOT / "examples" / "mixed" / "wmma_sample.cu", tmp_path)
    assert entry["args"] == ["A", "B", "C", "D", "M", "N", "K", "alpha", "beta"]   # c beside d: d is D
    assert entry["dtypes"] == ["f16f16f32"]                                          # half A, B; float C, D


def test_batched_epilogue_and_grouped_signatures_read_by_their_common_names(tmp_path):
    source = tmp_path / "k.cu"
    source.write_text(
        "__global__ void bmm(const float *A, long long strideA, const float *B, long long ldb_batch, float *C,\n"
        "                    long long stride_c, int M, int N, int K, int batch_count) {}\n"
        "__global__ void fused(const float *A, const float *B, const float *bias, const float *residual,\n"
        "                      float *D, int M, int N, int K, float out_scale) {}\n"
        "__global__ void moe(const float *A, const float *B, float *C, const int *expert_offsets,\n"
        "                    int M, int N, int K, int num_experts) {}\n"
        "__global__ void masked(const float *A, const float *B, float *C, const int *masked_m,\n"
        "                       int M, int N, int K, int num_groups) {}\n")
    entries = {e["name"]: e for e in drafted(source, tmp_path)}
    assert entries["bmm"]["args"] == ["A", "stride_A", "B", "stride_B", "C", "stride_C", "M", "N", "K", "batch"]
    assert entries["bmm"]["grid"][2] == "batch"                # the products along z
    assert entries["fused"]["args"] == ["A", "B", "bias", "residual", "D", "M", "N", "K", "output_scale"]
    assert "TODO: epilogue:" in draft.draft_source(source, tmp_path)
    assert entries["moe"]["args"] == ["A", "B", "C", "group_offsets", "M", "N", "K", "groups"]
    assert entries["masked"]["args"] == ["A", "B", "C", "group_counts", "M", "N", "K", "groups"]
    assert entries["moe"]["grid"][2] == "groups"


def test_a_pointer_array_batch_drafts_its_arrays_by_their_types_and_common_names(tmp_path):
    """cuBLAS's gemmBatched form: arrays of pointers, declared as T *const X[] or T **; the
    examples' own gemm_batched drafts to the entry its catalog gives (with the template's TODO)."""
    source = tmp_path / "k.cu"
    source.write_text(
        "__global__ void gemm_batched(int m, int n, int k, float alpha, const float *const Aarray[],\n"
        "                             const float *const Barray[], float beta, float *const Carray[],\n"
        "                             int batchCount) {}\n"
        "__global__ void bmm_ptrs(const __half **d_A, const __half **d_B, float **out, int M, int N, int K,\n"
        "                         int batch) {}\n")
    entries = {e["name"]: e for e in drafted(source, tmp_path)}
    assert entries["gemm_batched"]["args"] == ["M", "N", "K", "alpha", "A_array", "B_array", "beta", "C_array",
                                               "batch"]
    assert entries["gemm_batched"]["grid"][2] == "batch"
    assert entries["bmm_ptrs"]["args"] == ["A_array", "B_array", "C_array", "M", "N", "K", "batch"]
    assert entries["bmm_ptrs"]["dtypes"] == ["f16f16f32"]
    published = {e["name"]: e for e in drafted(ROOT / "examples" / "batched" / "batched.cu", tmp_path)}
    assert published["gemm_batched"]["args"] == ["M", "N", "K", "alpha", "A_array", "B_array", "beta", "C_array",
                                                 "batch"]


def test_magmas_batched_form_drafts_its_arrays_and_leading_dimensions_leaving_only_the_layout():
    (entry,) = tomllib.loads(draft.draft_source(ROOT / "examples" / "batched" / "magma_style.cu",
                                                ROOT / "examples" / "batched"))["kernel"]
    assert entry["args"] == ["M", "N", "K", "alpha", "A_array", "lda", "B_array", "ldb", "beta", "C_array", "ldc",
                             "batch"]
    assert entry["grid"] == ["ceil(M / BLK)", "ceil(N / BLK)", "batch"] and entry["params"] == {"BLK": [16]}
    listed = next(s for s in catalog.load(ROOT / "examples" / "batched" / "catalog.toml")
                  if s.name == "sgemm_batched_magma_style")
    assert listed.roles == tuple(entry["args"])   # the catalog's entry is the draft's, its layout filled


def test_a_pointer_array_kernel_told_no_count_drafts_its_grids_z_from_a_dim3_declared_beside_the_block(tmp_path):
    """`dim3 block(16, 16), grid(..., batch);`: one statement, two dim3s (the host's batch is the
    grid's z: a block per product, the count never passed to the kernel)."""
    source = tmp_path / "k.cu"
    source.write_text(
        "__global__ void bmm_ptrs(const float **A, const float **B, float **C, int M, int N, int K) {}\n"
        "void run(const float **A, const float **B, float **C, int M, int N, int K, int batch)\n{\n"
        "    dim3 block(16, 16), grid((N + 15) / 16, (M + 15) / 16, batch);\n"
        "    bmm_ptrs<<<grid, block>>>(A, B, C, M, N, K);\n}\n")
    (entry,) = drafted(source, tmp_path)
    assert entry["args"] == ["A_array", "B_array", "C_array", "M", "N", "K"]
    assert entry["grid"] == ["ceil(N / 16)", "ceil(M / 16)", "batch"] and entry["block"] == [16, 16]
    (tmp_path / "catalog.toml").write_text(draft.draft_source(source, tmp_path))
    (spec,) = catalog.load(tmp_path / "catalog.toml")
    assert spec.instances()[0].batched


@pytest.mark.parametrize("host, catalog_expression", [
    ("(N + 15) / 16", "ceil(N / 16)"), ("(m+31)/32", "ceil(M / 32)"), ("(N + TILE - 1) / TILE", "ceil(N / TILE)"),
    ("(N + 15) / 32", "(N + 15) // 32"),   # not a rounding up: kept as written
])
def test_a_launchs_rounding_up_is_drafted_as_ceil(host, catalog_expression):
    from gemmcheck.host_launches import host_expression
    assert host_expression(host, {"m": "M"}, {}) == catalog_expression


def test_the_textbook_labs_rows_and_columns_draft_as_sizes_passed_twice_and_the_entry_runs_as_drafted(tmp_path):
    """numARows ... numCColumns: M, K, K, N, M, N; the grid (n - 1) / TILE_WIDTH + 1 rounds up."""
    source = PUBLISHED / "08_textbook_lab.cu"
    (entry,) = drafted(source, PUBLISHED)
    assert entry["args"] == ["A", "B", "C", "M", "K", "K", "N", "M", "N"]
    assert entry["grid"] == ["ceil(N / TILE_WIDTH)", "ceil(M / TILE_WIDTH)", 1]
    listed = next(s for s in catalog.load(PUBLISHED / "catalog.toml") if s.name == "textbook_lab")
    assert listed.roles == tuple(entry["args"])
    (tmp_path / "catalog.toml").write_text(draft.draft_source(source, tmp_path))
    (spec,) = catalog.load(tmp_path / "catalog.toml")
    instance = spec.instances()[0]
    from gemmcheck.judge.oracle import judge
    from gemmcheck.problems.harness import run_problem
    from gemmcheck.problems.problem import Problem
    from simulator import simulator
    with simulator() as backend:
        problem = Problem(33, 17, 41, instance.types, "exact", 1)   # ragged in M, N and K
        judgement = judge(run_problem(backend, instance, problem), *problem.operands()[:2], exact=True,
                          problem=problem)
    assert judgement.ok, judgement.message()


def test_a_linear_layers_names_draft_as_its_operands_and_sizes_and_its_launch_is_shown_where_not_read(tmp_path):
    """llm.c's matmul_forward: inp and weight are A and B (weight N x K: a layout TODO); BT, C
    and OC, a linear layer's rows, in and out features, are M, K and N (the catalog's own entry
    for it says so); a grid over a runtime block size is shown with what the launch passes."""
    text = draft.draft_source(ROOT / "examples" / "epilogue" / "matmul_forward.cu", tmp_path)
    (entry,) = tomllib.loads(text)["kernel"]
    listed = next(s for s in catalog.load(ROOT / "examples" / "epilogue" / "catalog.toml")
                  if s.name == "matmul_forward_bias")
    assert entry["args"] == list(listed.roles) == ["C", "A", "B", "bias", "M", "K", "N"]
    assert entry["shapes"] == "any"
    assert 'layout = { B = "col" }' in text and "torch.nn.Linear" in text
    assert "with grid (ceil((B * T) / sqrt_block_size), ceil(OC / sqrt_block_size))" in text
    assert "passing BT = B * T" in text


@pytest.mark.parametrize("host, catalog_expression", [
    ("ceil_div(B * T, block_size)", "ceil((B * T) / block_size)"), ("iDivUp(n, 16)", "ceil(N / 16)"),
    ("CEIL_DIV(m, BM)", "ceil(M / BM)"), ("cdiv(cdiv(m, 2), 4)", "ceil(ceil(M / 2) / 4)"),
    ("(n - 1) / 16 + 1", "ceil(N / 16)"), ("(n - 1) / 16 + 10", "(N - 1) // 16 + 10"),
])
def test_a_rounding_up_by_a_helper_or_the_textbooks_minus_one_is_drafted_as_ceil(host, catalog_expression):
    from gemmcheck.host_launches import host_expression
    assert host_expression(host, {"m": "M", "n": "N"}, {}) == catalog_expression


def test_a_grid_written_with_the_blocks_members_is_drafted_with_the_blocks_values(tmp_path):
    """``dim3 grid((N + block.x - 1) / block.x, ...)``: block.x is the block's 16."""
    (entry,) = drafted(ROOT / "examples" / "mixed" / "int8_dp4a.cu", tmp_path)
    assert (entry["grid"], entry["block"], entry["dtypes"]) == (["ceil(N / 16)", "ceil(M / 16)"], [16, 16],
                                                                ["s8s8s32"])
    listed = next(s for s in catalog.load(ROOT / "examples" / "mixed" / "catalog.toml")
                  if s.name == "int8_dp4a_words")
    assert listed.roles == tuple(entry["args"])


def test_operands_whose_roles_are_todos_still_draft_their_shared_element_type(tmp_path):
    source = tmp_path / "k.cu"
    source.write_text("#include <cuda_bf16.h>\n__global__ void k(const __nv_bfloat16 *p, const __nv_bfloat16 *q, "
                      "__nv_bfloat16 *r, int M, int N, int K) {}\n")
    (entry,) = drafted(source, tmp_path)
    assert entry["args"][:3] == ["TODO p", "TODO q", "TODO r"] and entry["dtypes"] == ["bfloat16"]


def test_a_w8a8_kernel_drafts_its_dequantized_types_and_its_weights_scale():
    entries = {e["name"]: e for e in drafted(ROOT / "examples" / "mixed" / "w8a8.cu", ROOT / "examples" / "mixed")}
    entry = entries["w8a8_gemm_bf16"]
    assert entry["args"] == ["A", "B", "C", "scale_A", "scale_B", "M", "N", "K"] and entry["dtypes"] == ["s8s8bf16"]


def test_a_split_k_that_atomically_adds_into_c_drafts_the_conventions_and_the_launchs_constant():
    text = draft.draft_source(ROOT / "examples" / "split_k_atomic.cu", ROOT / "examples")
    first = text.split("[[kernel]]")[1]
    assert "# adds_into_c = true" in first and "# deterministic = false" in first
    assert "the file's launch passes splits = 4" in first
    filled = first.replace('"TODO splits"', "4").replace("# adds_into_c", "adds_into_c").replace(
        "# deterministic", "deterministic")
    listed = next(s for s in catalog.load(ROOT / "examples" / "catalog.toml") if s.name == "splitk_atomic")
    entry = tomllib.loads("[[kernel]]" + filled)["kernel"][0]
    assert (tuple(entry["args"]), entry["adds_into_c"], entry["deterministic"]) == (listed.roles, True, False)


def test_fp8_operands_kept_as_raw_bytes_draft_as_e4m3_with_a_todo(tmp_path):
    code = ("#include <cuda_fp8.h>\n#include <cuda_bf16.h>\n__global__ void k(const __nv_fp8_storage_t *A, "
            "const __nv_fp8_storage_t *B, __nv_bfloat16 *D, const float *scale_a, const float *scale_b, "
            "int M, int N, int K) {}\n")
    entry, text = drafted_text(tmp_path, code)
    assert entry["dtypes"] == ["e4m3e4m3bf16"] and "fp8 as raw bytes), drafted as e4m3" in text


def test_a_size_compiled_in_by_a_define_drafts_as_sizes_and_the_entry_runs_as_drafted(tmp_path):
    """An introductory course's kernel takes no size (#define N 64): the draft says the one shape it
    computes (sizes), keeps N out of params (a size is not a parameter), and needs no TODO filled."""
    text = draft.draft_source(PUBLISHED / "09_fixed_size.cu", PUBLISHED)
    (entry,) = tomllib.loads(text)["kernel"]
    assert entry["args"] == ["A", "B", "C"] and entry["sizes"] == {"M": 64, "N": 64, "K": 64}
    assert entry["params"] == {"TILE_WIDTH": [16]} and "shapes" not in entry
    assert "#define N 64" in text
    committed = {e["name"]: e for e in tomllib.loads((PUBLISHED / "catalog.toml").read_text())["kernel"]}
    assert {k: v for k, v in committed["fixed_size"].items() if k not in ("name", "description")} == \
        {k: v for k, v in entry.items() if k not in ("name", "description")}


def test_sizes_as_template_parameters_instantiated_once_draft_as_sizes_with_their_values_written_in(tmp_path):
    source = tmp_path / "fixed.cu"
    source.write_text("template <int M, int N, int K>\n"
                      "__global__ void gemm_fixed(const float *A, const float *B, float *C) {}\n"
                      "template __global__ void gemm_fixed<128, 96, 64>(const float *, const float *, float *);\n")
    (entry,) = drafted(source, tmp_path)
    assert entry["template_args"] == "128, 96, 64" and entry["sizes"] == {"M": 128, "N": 96, "K": 64}
    assert "params" not in entry
    (tmp_path / "catalog.toml").write_text(draft.draft_source(source, tmp_path))
    (spec,) = catalog.load(tmp_path / "catalog.toml")
    assert spec.instances()[0].name_expression == "gemm_fixed<128, 96, 64>"


def test_an_explicit_instantiation_gives_the_values_of_a_kernel_the_file_never_launches(tmp_path):
    code = ("template <int BM, int BN>\n"
            "__global__ void tiled(const float *A, const float *B, float *C, int M, int N, int K) {}\n"
            "template __global__ void tiled<64, 32>(const float *, const float *, float *, int, int, int);\n"
            "template __global__ void tiled<128, 32>(const float *, const float *, float *, int, int, int);\n")
    entry, text = drafted_text(tmp_path, code, name="lib.cu")
    assert [{k: v for k, v in c.items() if k != "name"} for c in entry["configs"]] == \
        [{"BM": 64, "BN": 32}, {"BM": 128, "BN": 32}]
    assert "instantiates it with: tiled<64, 32>; tiled<128, 32>" in text and "TODO: params" not in text


def test_a_kernel_that_takes_no_size_and_defines_none_is_told_how_to_claim_its_shapes(tmp_path):
    code = ("__global__ void square(const float *A, const float *B, float *C) {\n"
            "  int n = gridDim.x * blockDim.x; (void)n; }\n")
    entry, text = drafted_text(tmp_path, code, name="nosize.cu")
    assert entry["shapes"] == "square-tile-multiple" and "sizes" not in entry
    assert "# sizes = { M = 64, N = 64, K = 64 }" in text and "gridDim * blockDim" in text


def test_operands_taken_as_vectors_draft_their_element_type_and_rows_of_whole_vectors(tmp_path):
    """`const float4 *A` holds float32 elements (the suite's buffers, every matrix 16-byte
    aligned); its rows must be whole vectors for each to start aligned."""
    source = tmp_path / "vec.cu"
    source.write_text("__global__ void sgemm4(int M, int N, int K, const float4 *A, const float4 *B, float4 *C) {}\n"
                      "__global__ void hgemm2(const half2 *A, const __half *B, half2 *C, int M, int N, int K) {}\n")
    text = draft.draft_source(source, tmp_path)
    sgemm4, hgemm2 = tomllib.loads(text)["kernel"]
    assert (sgemm4["dtypes"], sgemm4["shapes"]) == (["float32"], "K % 4 == 0 and N % 4 == 0")
    assert (hgemm2["dtypes"], hgemm2["shapes"]) == (["float16"], "K % 2 == 0 and N % 2 == 0")
    assert "A is float4 *, B is float4 *, C is float4 *, read a vector at a time" in text
    assert "is not one gemmcheck knows" not in text


HALF_SUM = """#include <cuda_fp16.h>
__global__ void hgemm_half_sum(const half *A, const half *B, half *C, int M, int N, int K) {
  int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= M || col >= N) return;
  half sum = __float2half(0.0f);
  for (int k = 0; k < K; ++k) sum = __hfma(A[row * K + k], B[k * N + col], sum);
  C[row * N + col] = sum;
}
void launch(const half *A, const half *B, half *C, int M, int N, int K) {
  dim3 block(16, 16), grid((N + 15) / 16, (M + 15) / 16);
  hgemm_half_sum<<<grid, block>>>(A, B, C, M, N, K);
}
"""


@pytest.mark.parametrize("body, how", [
    (HALF_SUM, "its accumulator sum is declared half"),
    ("#include <mma.h>\nusing namespace nvcuda;\n__global__ void h(const half *A, const half *B, half *C, int M, "
     "int N, int K) {\n  wmma::fragment<wmma::accumulator, 16, 16, 16, __half> acc;\n}\n",
     "a wmma accumulator fragment of __half"),
    ("__global__ void h(const half *A, const half *B, half *C, int M, int N, int K) { float sum = 0; }\n", None),
])
def test_a_half_gemm_that_sums_in_half_drafts_its_accumulator(tmp_path, body, how):
    (tmp_path / "h.cu").write_text(body)
    text = draft.draft_source(tmp_path / "h.cu", tmp_path)
    (entry,) = tomllib.loads(text)["kernel"]
    assert entry.get("accumulator") == ("float16" if how else None)
    assert (f"the kernel sums in half ({how})" in text) if how else "sums in half" not in text


def test_the_drafted_half_accumulator_is_what_keeps_a_correct_half_summing_kernel_correct(tmp_path):
    """As drafted (only the TODO comments left), the half-summing HGEMM is judged by half sums'
    bound and passes on the simulator; without the line it is judged against float32 sums and
    fails, the message naming the declaration."""
    (tmp_path / "hsum.cu").write_text(HALF_SUM)
    drafted_text = draft.draft_source(tmp_path / "hsum.cu", tmp_path)
    runs = {}
    for name, text in (("drafted", drafted_text), ("without", re.sub(r"(?m)^accumulator = .*\n", "", drafted_text))):
        (tmp_path / f"{name}.toml").write_text(text)
        (tmp_path / name).mkdir()
        runs[name] = judge_catalog(tmp_path / f"{name}.toml", tmp_path / name, "suites/correctness/test_error_bound.py")[0]
    assert runs["drafted"].returncode == 0, runs["drafted"].stdout[-2000:]
    assert runs["without"].returncode == 1 and 'declare accumulator = "float16"' in runs["without"].stdout


def test_scalars_through_device_pointers_and_a_launch_on_the_templates_defaults_draft_whole(tmp_path):
    """cuBLAS's pointer mode device (const float *alpha) drafts as alpha and beta; a launch
    that leaves the template arguments out drafts the template's defaults; a kernel in
    namespaces is found and runs by its qualified name."""
    source = ROOT / "tests" / "data" / "scalar_pointers" / "kernels.cu"
    text = draft.draft_source(source, tmp_path)
    entries = {e["entry"]: e for e in tomllib.loads(text)["kernel"]}
    assert entries["gemm_device_scalars"]["args"] == ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
    assert entries["hgemm_half_scalars"]["args"] == ["alpha", "beta", "A", "B", "C", "M", "N", "K"]
    launched = tmp_path / "launched.cu"
    launched.write_text(source.read_text() + "void run(int M, int N, int K, const float *a, const float *A, "
                        "const float *B, const float *b, float *C) {\n"
                        "  mylib::kernels::gemm_device_scalars<<<dim3(N / 16, M / 16), dim3(16, 16)>>>"
                        "(M, N, K, a, A, B, b, C);\n}\n")
    text = draft.draft_source(launched, tmp_path)
    entry = next(e for e in tomllib.loads(text)["kernel"] if e["entry"] == "gemm_device_scalars")
    assert entry["params"] == {"BM": [16], "BN": [16], "FLAW": [0]}
    assert "gemm_device_scalars (the template's defaults)" in text


def test_an_operand_named_as_held_transposed_gets_a_layout_todo(tmp_path):
    code = ("__global__ void addmm(const float *mat1, const float *Bt, float *c_out, int M, int N, int K) {}\n")
    entry, text = drafted_text(tmp_path, code, name="t.cu")
    assert entry["args"] == ["A", "B", "C", "M", "N", "K"]
    assert "# TODO: layout: B is 'Bt': if it holds the operand transposed" in text and '# layout = { B = "col" }' in text


MODERN_CPP = """#include <cuda_fp16.h>
template <typename T, size_t TILE_X, size_t TILE_Y>
__global__ void gemm_modern(size_t m, size_t n, size_t k, T alpha, T const* A, size_t lda, T const* B,
                            size_t ldb, T beta, T* C, size_t ldc)
{
    size_t const col{blockIdx.x * TILE_X + threadIdx.x};
    size_t const row{blockIdx.y * TILE_Y + threadIdx.y};
    T sum{static_cast<T>(0)};
    for (size_t i{0U}; row < m && col < n && i < k; ++i)
        sum += A[row * lda + i] * B[i * ldb + col];
    if (row < m && col < n)
        C[row * ldc + col] = beta == static_cast<T>(0) ? alpha * sum : alpha * sum + beta * C[row * ldc + col];
}

template <typename T>
void launch_gemm_modern(size_t m, size_t n, size_t k, T const* alpha, T const* A, size_t lda, T const* B,
                        size_t ldb, T const* beta, T* C, size_t ldc, cudaStream_t stream)
{
    constexpr unsigned int TILE_X{16U};
    constexpr unsigned int TILE_Y{8U};
    dim3 const block_dim{TILE_X, TILE_Y, 1U};
    dim3 const grid_dim{(static_cast<unsigned int>(n) + block_dim.x - 1U) / block_dim.x,
                        (static_cast<unsigned int>(m) + block_dim.y - 1U) / block_dim.y, 1U};
    gemm_modern<T, TILE_X, TILE_Y><<<grid_dim, block_dim, 0U, stream>>>(m, n, k, *alpha, A, lda, B, ldb, *beta,
                                                                       C, ldc);
}

template void launch_gemm_modern<float>(size_t, size_t, size_t, float const*, float const*, size_t,
                                        float const*, size_t, float const*, float*, size_t, cudaStream_t);
template void launch_gemm_modern<__half>(size_t, size_t, size_t, __half const*, __half const*, size_t,
                                         __half const*, size_t, __half const*, __half*, size_t, cudaStream_t);
"""


def test_a_modern_cpp_launcher_drafts_whole_and_its_entry_runs_as_drafted(tmp_path):
    """Brace-initialized constants (constexpr unsigned int TILE_X{16U}), a const dim3 with
    static_casts, the kernel launched from a host template the file instantiates explicitly
    for float and __half, which sets the dtypes; the kernel sums in T, so at float16 in half:
    accumulator by dtype. Drafted, it runs on the simulator with no TODO filled."""
    (tmp_path / "modern.cu").write_text(MODERN_CPP)
    text = draft.draft_source(tmp_path / "modern.cu", tmp_path)
    (entry,) = tomllib.loads(text)["kernel"]
    assert entry["params"] == {"TILE_X": [16], "TILE_Y": [8]}
    assert entry["grid"] == ["ceil(N / TILE_X)", "ceil(M / TILE_Y)", 1] and entry["block"] == ["TILE_X", "TILE_Y", 1]
    assert entry["dtypes"] == ["float32", "float16"] and entry["accumulator"] == {"float16": "float16"}
    assert "instantiates launch_gemm_modern, which launches it, with: float, __half" in text
    (tmp_path / "catalog.toml").write_text(text)
    run, rows = judge_catalog(tmp_path / "catalog.toml", tmp_path, "suites/correctness/test_error_bound.py",
                              "suites/correctness/test_exact_results.py")
    assert run.returncode == 0, run.stdout[-3000:]
    assert {r["dtype"]: r["verdict"] for r in rows} == {"float32": "correct", "float16": "correct"}
    # without the line, the half instantiation fails, the message naming the declaration by dtype
    (tmp_path / "without").mkdir()
    (tmp_path / "without.toml").write_text(re.sub(r"(?m)^accumulator = .*\n", "", text))
    run, _ = judge_catalog(tmp_path / "without.toml", tmp_path / "without", "suites/correctness/test_error_bound.py")
    assert run.returncode == 1 and 'declare accumulator = { float16 = "float16" }' in run.stdout


def test_dynamic_shared_memory_held_in_a_variable_drafts_its_initializer(tmp_path):
    code = ("template <int BM, int BN, int BK>\n"
            "__global__ void sgemm_dyn(int M, int N, int K, const float *A, const float *B, float *C) {\n"
            "  extern __shared__ float smem[]; }\n"
            "void run(int M, int N, int K, const float *A, const float *B, float *C) {\n"
            "  constexpr int BM = 64, BN = 64, BK = 16;\n"
            "  const size_t smem_bytes = (BM * BK + BK * BN) * sizeof(float);\n"
            "  sgemm_dyn<BM, BN, BK><<<dim3(N / BN, M / BM), 256, smem_bytes>>>(M, N, K, A, B, C);\n}\n")
    entry, text = drafted_text(tmp_path, code, name="dyn.cu")
    assert entry["shared_bytes"] == "(BM * BK + BK * BN) * 4" and "TODO: shared_bytes" not in text


def test_bool_template_arguments_draft_as_0_and_1_and_a_literal_rounding_up_as_ceil_of_the_parameter(tmp_path):
    """gemm<false, 16> and gemm<true, 16>: configs with TRANS_B 0 and 1 (a bool template parameter
    takes them); (N + 15) / 16 with 16 the TILE the launch passes is ceil(N / TILE)."""
    source = tmp_path / "tb.cu"
    source.write_text("template <bool TRANS_B, int TILE>\n"
                      "__global__ void gemm_tb(const float *A, const float *B, float *C, int M, int N, int K) {}\n"
                      "void run(const float *A, const float *B, float *C, int M, int N, int K) {\n"
                      "  dim3 block(16, 16), grid((N + 15) / 16, (M + 15) / 16);\n"
                      "  gemm_tb<false, 16><<<grid, block>>>(A, B, C, M, N, K);\n"
                      "  gemm_tb<true, 16><<<grid, block>>>(A, B, C, M, N, K);\n}\n")
    (entry,) = drafted(source, tmp_path)
    assert [{k: v for k, v in c.items() if k != "name"} for c in entry["configs"]] == \
        [{"TRANS_B": 0, "TILE": 16}, {"TRANS_B": 1, "TILE": 16}]
    assert entry["grid"] == ["ceil(N / TILE)", "ceil(M / TILE)"]
    (tmp_path / "catalog.toml").write_text(draft.draft_source(source, tmp_path))
    assert [i.name_expression for i in catalog.load(tmp_path / "catalog.toml")[0].instances()] == \
        ["gemm_tb<0, 16>", "gemm_tb<1, 16>"]


def test_toolkit_headers_included_with_quotes_are_no_todo_and_any_half_variable_summed_into_is_the_accumulator(
        tmp_path):
    """A project's common header includes "cublas_v2.h" and "cuda_fp16.h" with quotes (nvcc finds
    them itself): no TODO for them, one for the project's own header that is not there. A naive
    HGEMM adding into `half tmp` sums in half, whatever the variable's name."""
    source = tmp_path / "simt.cu"
    source.write_text('#include "cublas_v2.h"\n#include "cuda_fp16.h"\n#include "mma.h"\n#include "mine.h"\n'
                      "__global__ void simt(const half *A, const half *B, half *C, size_t M, size_t N, size_t K) {\n"
                      "  size_t row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;\n"
                      "  half tmp = 0.0;\n  half scale = A[0];\n"
                      "  for (size_t i = 0; i < K; ++i) tmp += A[row * K + i] * B[i * N + col];\n"
                      "  C[row * N + col] = tmp * scale;\n}\n")
    result = draft.draft(source, tmp_path)
    assert result.unopened == ("mine.h",)
    (entry,) = tomllib.loads(result.toml)["kernel"]
    assert entry["accumulator"] == "float16" and "its accumulator tmp is declared half" in result.toml


def test_an_operand_indexed_column_major_gets_a_layout_todo_and_a_row_major_one_none(tmp_path):
    """B[i + col * K]: B's columns K elements apart (column-major, as the int8 example reads it);
    A[k * M + row] likewise for A; A[row * K + k] and C[row * N + col] are row-major: no TODO."""
    (entry,) = drafted(ROOT / "examples" / "mixed" / "int8_dp4a.cu", tmp_path)
    text = draft.draft_source(ROOT / "examples" / "mixed" / "int8_dp4a.cu", tmp_path)
    assert "the kernel reads B as B[col * K + k] (its columns K elements apart: column-major)" in text
    source = tmp_path / "cm.cu"
    source.write_text("__global__ void cm(const float *A, const float *B, float *C, int M, int N, int K) {\n"
                      "  int row = threadIdx.y, col = threadIdx.x; float s = 0;\n"
                      "  for (int k = 0; k < K; ++k) s += A[k * M + row] * B[k * N + col];\n"
                      "  C[row * N + col] = s;\n}\n")
    text = draft.draft_source(source, tmp_path)
    assert "reads A as A[k * M + row]" in text and '# layout = { A = "col" }' in text and "reads B" not in text


def test_a_launch_that_writes_out_no_dynamic_shared_memory_drafts_none(tmp_path):
    """``<<<grid, block, 0, stream>>>``: the 0 is what a launch gives anyway, not a field to fill."""
    code = ("__global__ void k(const float *A, const float *B, float *C, int M, int N, int K) {}\n"
            "void run(const float *A, const float *B, float *C, int M, int N, int K, cudaStream_t s) {\n"
            "    k<<<dim3((N + 15) / 16, (M + 15) / 16), dim3(16, 16), 0, s>>>(A, B, C, M, N, K);\n}\n")
    entry, text = drafted_text(tmp_path, code)
    assert entry["grid"] == ["ceil(N / 16)", "ceil(M / 16)"] and "shared_bytes" not in text


def test_a_one_dimensional_launch_held_in_integer_variables_drafts_its_grid_and_block(tmp_path):
    """``const int blocks = (m * n + threads - 1) / threads; k<<<blocks, threads>>>``: the course
    style of one thread per output; the sizes declared beside each other (int m = 1000, n = 700)
    are not read as the grid."""
    source = tmp_path / "flat.cu"
    source.write_text(
        "__global__ void flat(const float *a, const float *b, float *c, int m, int n, int k) {}\n"
        "int main() {\n    int m = 1000, n = 700, k = 300;\n    float *a, *b, *c;\n"
        "    const int threads = 256;\n    const int blocks = (m * n + threads - 1) / threads;\n"
        "    flat<<<blocks, threads>>>(a, b, c, m, n, k);\n}\n")
    (entry,) = drafted(source, tmp_path)
    assert (entry["grid"], entry["block"]) == (["ceil((M * N) / 256)"], [256])


@pytest.mark.parametrize("host, catalog_expression", [
    ("(m * n + threads - 1) / threads", "ceil((M * N) / threads)"), ("((n + 31) / 32)", "ceil(N / 32)"),
    ("(m + 1) * (n + 1)", "(M + 1) * (N + 1)"),
])
def test_a_sum_or_product_rounded_up_is_drafted_as_ceil_and_outer_parentheses_go(host, catalog_expression):
    from gemmcheck.host_launches import host_expression
    assert host_expression(host, {"m": "M", "n": "N"}, {}) == catalog_expression


WMMA_BLOG_STYLE = """#include <mma.h>
using namespace nvcuda;
#define MATRIX_M 16384
#define MATRIX_N 16384
#define MATRIX_K 16384
const int WMMA_M = 16;
const int WMMA_N = 16;
const int WMMA_K = 16;
__global__ void wmma_example(half *a, half *b, float *c, int M, int N, int K, float alpha, float beta) {
   wmma::fragment<wmma::matrix_a, WMMA_M, WMMA_N, WMMA_K, half, wmma::col_major> a_frag;
   wmma::fragment<wmma::matrix_b, WMMA_M, WMMA_N, WMMA_K, half, wmma::col_major> b_frag;
   wmma::fragment<wmma::accumulator, WMMA_M, WMMA_N, WMMA_K, float> c_frag;
   wmma::load_matrix_sync(c_frag, c, M, wmma::mem_col_major);
   wmma::store_matrix_sync(c, c_frag, M, wmma::mem_col_major);
}
int main() {
   half *a_fp16, *b_fp16; float *c_wmma;
   float alpha = 2.0f, beta = 2.0f;
   dim3 gridDim;
   dim3 blockDim;
   blockDim.x = 128;
   blockDim.y = 4;
   gridDim.x = (MATRIX_M + (WMMA_M * blockDim.x / 32 - 1)) / (WMMA_M * blockDim.x / 32);
   gridDim.y = (MATRIX_N + WMMA_N * blockDim.y - 1) / (WMMA_N * blockDim.y);
   wmma_example <<< gridDim, blockDim >>> (a_fp16, b_fp16, c_wmma, MATRIX_M, MATRIX_N, MATRIX_K, alpha, beta);
}
"""


def test_the_wmma_blog_examples_launch_drafts_its_geometry_and_its_column_major_fragments(tmp_path):
    """NVIDIA's WMMA example: dim3s set member by member, the grid over the block's members and
    literal arithmetic (64 = 16 * 128 / 32), the problem's #defines passed as M, N, K (not
    kernel parameters), every operand column-major by its fragments."""
    source = tmp_path / "wmma_example.cu"
    source.write_text(WMMA_BLOG_STYLE)
    text = draft.draft_source(source, tmp_path)
    (entry,) = tomllib.loads(text)["kernel"]
    assert (entry["grid"], entry["block"]) == (["ceil(M / 64)", "ceil(N / 64)"], [128, 4])
    assert entry["args"] == ["A", "B", "C", "M", "N", "K", "alpha", "beta"] and "params" not in entry
    assert '# layout = { A = "col", B = "col", C = "col" }' in text


@pytest.mark.parametrize("host, catalog_expression", [
    ("(m + (16 * 128 / 32 - 1)) / (16 * 128 / 32)", "ceil(M / 64)"), ("(n+16*4-1)/(16*4)", "ceil(N / 64)"),
    ("k / 2 * 3", "K // 2 * 3"), ("m - 8 / 2", "M - 4"), ("m * 2 * 3", "M * 2 * 3"),
])
def test_literal_arithmetic_is_computed_only_where_it_binds_alone(host, catalog_expression):
    from gemmcheck.host_launches import host_expression
    assert host_expression(host, {"m": "M", "n": "N", "k": "K"}, {}) == catalog_expression


def test_alpha_of_a_type_computed_from_t_is_still_alpha_and_is_read_from_the_compiled_kernel(tmp_path):
    """``scalar_t<T> alpha`` (a template alias: float for half T), ``typename accumulator<T>::type``:
    the suite packs alpha in its own type and checks it against the compiled kernel's; the draft
    named them TODOs the suite 'cannot pack'."""
    code = ("template <typename T> struct acc { using type = T; };\n"
            "template <typename T> using scalar_t = typename acc<T>::type;\n"
            "template <typename T>\n__global__ void k(int M, int N, int K, scalar_t<T> alpha, const T *A, "
            "const T *B, typename acc<T>::type beta, T *C) {}\n")
    entry, text = drafted_text(tmp_path, code)
    assert entry["args"] == ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
    assert "cannot pack" not in text and "'scalar_t<T> alpha': a type read from the compiled kernel" in text


@pytest.mark.parametrize("written", [
    "template __global__ void k<16>(int);", "template void __global__ k<16>(int);",
    "template __global__ static void k<16>(int);", "template __launch_bounds__(256) __global__ void k<16>(int);",
])
def test_an_explicit_instantiation_is_read_in_each_order_its_specifiers_are_written(written):
    from gemmcheck.host_launches import explicit_instantiations
    assert explicit_instantiations(written, "k") == [["16"]]


def test_a_scale_read_at_an_index_drafts_per_row_of_a_and_per_column_of_b_naming_the_index(tmp_path):
    """``scale_a[m]`` and ``scale_b[n]``, in the kernel or in a __device__ function it hands them
    to under other names (w8a8.cu's body): not one value; per token and per channel is what
    such a scale usually is, and the TODO shows the index. ``scale_a[0]`` is one value."""
    (entry,) = [e for e in drafted(ROOT / "examples" / "mixed" / "w8a8.cu", tmp_path) if e["name"] == "w8a8_gemm_bf16"]
    assert entry["scales"] == {"A": "row", "B": "col"}   # as the catalog's entry "w8a8" says
    code = ("#include <cuda_fp8.h>\n__global__ void k(const __nv_fp8_e4m3 *a, const __nv_fp8_e4m3 *b, "
            "const float *scale_a, const float *scale_b, float *out, int M, int N, int K) {\n"
            "    out[0] = scale_a[0] * scale_b[threadIdx.x];\n}\n")
    entry, text = drafted_text(tmp_path, code)
    assert entry["scales"] == {"A": "tensor", "B": "col"} and "it reads B's as [threadIdx.x]" in text


@pytest.mark.parametrize("source, name", [("10_one_thread_per_output.cu", "one_thread_per_output"),
                                          ("11_textbook_pmpp.cu", "textbook_pmpp")])
def test_a_published_form_drafts_to_its_committed_entry_with_no_todo_filled(source, name):
    """The committed entries of examples/published are their drafts, name and description
    written: the one-dimensional launch held in integers, the textbook's M x N = P."""
    (entry,) = tomllib.loads(draft.draft_source(PUBLISHED / source, PUBLISHED))["kernel"]
    committed = {e["name"]: e for e in tomllib.loads((PUBLISHED / "catalog.toml").read_text())["kernel"]}
    assert {k: v for k, v in committed[name].items() if k not in ("name", "description")} == \
        {k: v for k, v in entry.items() if k not in ("name", "description")}
