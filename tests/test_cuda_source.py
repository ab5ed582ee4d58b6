"""Reading .cu files as a compiler does: kernels after preprocessing, #defines, the device part."""

from pathlib import Path

from gemmcheck.contract import cuda_source

ROOT = Path(__file__).resolve().parent.parent


def test_kernels_are_found_by_parsing_not_by_substring():
    text = """
    // __global__ void in_a_comment(float *x) {}
    /* __global__ void in_a_block_comment(float *x) {} */
    const char *s = "__global__ void in_a_string(";
    template <typename T, int TILE>
    __global__ void __launch_bounds__(256) templated(const T *A) {}
    extern "C" __global__ void plain(float *A) {}
    __device__ float helper_global_like(float x) { return x; }
    """
    assert cuda_source.kernels(text) == ["templated", "plain"]


def test_kernels_declared_by_a_macro_are_found_at_each_invocation():
    text = (ROOT / "kernels" / "broken_tiled.cu").read_text()
    found = cuda_source.kernels(text)
    assert "broken_no_barriers" in found and "broken_divergent_barrier" in found and "NAME" not in found


def test_a_miss_names_what_is_there():
    text = "__global__ void matmul_tiled(float *A) {}\n__global__ void matmul_tiled_guarded(float *A) {}\n"
    assert cuda_source.missing_kernel(text, "matmul_tiled", "k.cu") is None
    assert cuda_source.missing_kernel(text, "matmul_tile", "k.cu") == (
        "entry 'matmul_tile' is not a __global__ function of k.cu; it declares matmul_tiled, "
        "matmul_tiled_guarded; did you mean 'matmul_tiled'?")


def test_integer_defines_are_read_and_commented_ones_are_not():
    text = "#define TILE 2\n// #define BM 64\n#  define BN (128)\n#define NAME(x) x\n#define F 1.5\n"
    assert cuda_source.defines(text) == {"TILE": 2, "BN": 128}


def test_the_device_part_blanks_host_functions_and_keeps_every_line():
    text = (ROOT / "examples" / "tiled_matmuls.cu").read_text()
    device = cuda_source.device_part(text, compiler="nvrtc")
    assert len(device) == len(text) and device.count("\n") == text.count("\n")
    assert "int main" not in device and "cudaMalloc" not in device
    assert "#include <stdio.h>" in device   # NVRTC's build decides which headers it can open
    assert "__global__\nvoid matmul_tiled(float *A, float *B, float *C, int N)" in device
    assert device.index("__syncthreads") == text.index("__syncthreads")


def test_the_device_part_keeps_device_functions_structs_and_namespaces():
    text = ("struct Pair { float a; float f() const { return a; } };\n"
            "namespace ns { __device__ float twice(float x) { return 2 * x; } void host_only() { } }\n"
            "__host__ __device__ inline float both(float x) { return x; }\n"
            "static float table[2] = {1, 2};\n"
            "int helper(int x) { return x; }\n")
    device = cuda_source.device_part(text, compiler="nvrtc")
    for kept in ("struct Pair { float a; float f() const { return a; } };", "__device__ float twice",
                 "__host__ __device__ inline float both", "static float table[2] = {1, 2};"):
        assert kept in device
    assert "host_only" not in device and "helper" not in device


def test_sources_without_host_code_are_unchanged():
    for name in ("reference_tiled.cu", "broken_tiled.cu", "slow_tiled.cu"):
        text = (ROOT / "kernels" / name).read_text()
        assert cuda_source.device_part(text, compiler="nvrtc") == text


def test_the_device_part_blanks_host_prototypes_and_keeps_device_declarations():
    text = ("#define CUDA_CHECK(call) cudaCheck((call), __FILE__, __LINE__)\n"
            "void cudaCheck(cudaError_t error, const char *file, int line);\n"
            "template void host_fill<float>(float *, int);\n"
            "__host__ __device__ float both(float x);\n"
            "template <int TILE> __global__ void k(const float *A);\n"
            "template __global__ void k<16>(const float *);\n"
            "static_assert(sizeof(float) == 4, \"float\");\n"
            "constexpr int square(int x);\n"
            "FOO(bar);\n")
    device = cuda_source.device_part(text, compiler="nvrtc")
    assert len(device) == len(text) and device.count("\n") == text.count("\n")
    assert "cudaCheck(cudaError_t" not in device and "host_fill" not in device
    for kept in ("#define CUDA_CHECK", "__host__ __device__ float both(float x);",
                 "template <int TILE> __global__ void k(const float *A);", "template __global__ void k<16>",
                 "static_assert", "constexpr int square(int x);", "FOO(bar);"):
        assert kept in device


def test_extern_c_functions_are_read_as_functions_and_extern_c_blocks_as_blocks():
    text = ('extern "C" void host_only(int *p) { *p = 1; }\n'
            'extern "C" __global__ void kernel_c(float *C) { C[0] = 1; }\n'
            'extern "C" {\n__global__ void in_block(float *C) { C[0] = 2; }\nvoid host_in_block() { }\n}\n')
    device = cuda_source.device_part(text, compiler="nvrtc")
    assert "host_only" not in device and "*p = 1" not in device and "host_in_block" not in device
    assert 'extern "C" __global__ void kernel_c(float *C) { C[0] = 1; }' in device
    assert "__global__ void in_block(float *C) { C[0] = 2; }" in device
