// GEMM kernels with a type per operand, as people ship them, and their broken twins.
//
// - gemm_f16_f32: half A and B, float sums, D = alpha A B + beta C into a float D separate
//   from the float C (C only read, and only when beta != 0);
// - gemm_s8_dp4a: int8 A and B, four products at a time with __dp4a, int32 sums and output
//   (signed char and int: NVRTC's device headers have no <cstdint>);
// - gemm_fp8_tensor_scaled: e4m3 A and B with one scale factor each (per tensor), float sums,
//   D = (sA sB) A B in bfloat16, or e4m3 through the saturating conversion;
// - gemm_fp8_block_scaled: e4m3 A and B with a scale per 1 x 128 block of A (stored K-block
//   major, as the common fp8 GEMM libraries keep activations' scales) and per 128 x 128 block of
//   B; each 128-long block of K is summed, then scaled and added: the DeepSeek-style recipe.
//
// Each is a plain shared-memory tiled kernel (TILE x TILE threads, one output each, guarded
// for any shape), SIMT only, so the CPU simulator runs it. A twin is the same body with one
// flaw (MixedFlaw), so a diff against the reference is the flaw and nothing else; the catalog
// declares the defect each must be caught with.

#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

enum MixedFlaw
{
    MIXED_OK,
    ACCUMULATES_IN_HALF,    // sums in __half where float is declared: the error bound catches it
    WRITES_D_INTO_C,        // stores the result over C, which is only an input when D is separate
    READS_C_AT_BETA_ZERO,   // D = alpha sum + beta C with C read even at beta = 0 (C's NaN leaks in)
    SCALE_LEFT_OUT,         // multiplies by A's scale only
    SCALE_APPLIED_TWICE,    // multiplies by A's scale twice
    SCALE_ON_WRONG_AXIS,    // reads B's block scale at (column block, K block): the transposed index
    OUTPUT_OVERFLOWS,       // converts to e4m3 without saturating (__NV_NOSAT): NaN past 448
};

// -- half inputs, float sums, a separate float D ---------------------------------------------

template <int TILE, MixedFlaw F>
__device__ __forceinline__ void half_body(const __half *A, const __half *B, const float *C, float *D, int M,
                                          int N, int K, float alpha, float beta)
{
    __shared__ __half As[TILE][TILE];
    __shared__ __half Bs[TILE][TILE];
    const int row = blockIdx.y * TILE + threadIdx.y;
    const int col = blockIdx.x * TILE + threadIdx.x;
    float sum = 0.0f;
    __half half_sum = __float2half(0.0f);
    for (int t = 0; t < K; t += TILE)
    {
        As[threadIdx.y][threadIdx.x] = (row < M && t + threadIdx.x < K) ? A[row * K + t + threadIdx.x] : __float2half(0.0f);
        Bs[threadIdx.y][threadIdx.x] = (t + threadIdx.y < K && col < N) ? B[(t + threadIdx.y) * N + col] : __float2half(0.0f);
        __syncthreads();
        for (int k = 0; k < TILE; k++)
        {
            if (F == ACCUMULATES_IN_HALF)
                half_sum = __hfma(As[threadIdx.y][k], Bs[k][threadIdx.x], half_sum);
            else
                sum += __half2float(As[threadIdx.y][k]) * __half2float(Bs[k][threadIdx.x]);
        }
        __syncthreads();
    }
    if (F == ACCUMULATES_IN_HALF)
        sum = __half2float(half_sum);
    if (row < M && col < N)
    {
        float *out = F == WRITES_D_INTO_C ? const_cast<float *>(C) : D;
        const bool read_c = beta != 0.0f || F == READS_C_AT_BETA_ZERO;   // BLAS: C unread at beta = 0
        out[row * N + col] = read_c ? alpha * sum + beta * C[row * N + col] : alpha * sum;
    }
}

template <int TILE>
__global__ void gemm_f16_f32(const __half *A, const __half *B, const float *C, float *D, int M, int N, int K,
                             float alpha, float beta)
{
    half_body<TILE, MIXED_OK>(A, B, C, D, M, N, K, alpha, beta);
}
template <int TILE>
__global__ void broken_f16_accumulates_in_half(const __half *A, const __half *B, const float *C, float *D, int M,
                                               int N, int K, float alpha, float beta)
{
    half_body<TILE, ACCUMULATES_IN_HALF>(A, B, C, D, M, N, K, alpha, beta);
}
template <int TILE>
__global__ void broken_f16_writes_d_into_c(const __half *A, const __half *B, const float *C, float *D, int M, int N,
                                           int K, float alpha, float beta)
{
    half_body<TILE, WRITES_D_INTO_C>(A, B, C, D, M, N, K, alpha, beta);
}
template <int TILE>
__global__ void broken_f16_reads_c_at_beta_zero(const __half *A, const __half *B, const float *C, float *D, int M,
                                                int N, int K, float alpha, float beta)
{
    half_body<TILE, READS_C_AT_BETA_ZERO>(A, B, C, D, M, N, K, alpha, beta);
}

// -- int8 inputs, __dp4a, int32 sums and output ------------------------------------------------

__device__ __forceinline__ int packed4(signed char a, signed char b, signed char c, signed char d)
{
    return (int)((unsigned)(unsigned char)a | ((unsigned)(unsigned char)b << 8) | ((unsigned)(unsigned char)c << 16)
                 | ((unsigned)(unsigned char)d << 24));
}

template <int TILE>
__global__ void gemm_s8_dp4a(const signed char *A, const signed char *B, int *C, int M, int N, int K)
{
    static_assert(TILE % 4 == 0, "__dp4a takes four K at a time");
    __shared__ signed char As[TILE][TILE];
    __shared__ signed char Bs[TILE][TILE];
    const int row = blockIdx.y * TILE + threadIdx.y;
    const int col = blockIdx.x * TILE + threadIdx.x;
    int sum = 0;
    for (int t = 0; t < K; t += TILE)
    {
        As[threadIdx.y][threadIdx.x] = (row < M && t + threadIdx.x < K) ? A[row * K + t + threadIdx.x] : (signed char)0;
        Bs[threadIdx.y][threadIdx.x] = (t + threadIdx.y < K && col < N) ? B[(t + threadIdx.y) * N + col] : (signed char)0;
        __syncthreads();
        for (int k = 0; k < TILE; k += 4)
        {
            const int a = packed4(As[threadIdx.y][k], As[threadIdx.y][k + 1], As[threadIdx.y][k + 2], As[threadIdx.y][k + 3]);
            const int b = packed4(Bs[k][threadIdx.x], Bs[k + 1][threadIdx.x], Bs[k + 2][threadIdx.x], Bs[k + 3][threadIdx.x]);
            sum = __dp4a(a, b, sum);
        }
        __syncthreads();
    }
    if (row < M && col < N)
        C[row * N + col] = sum;
}

// -- e4m3 inputs, one scale per tensor --------------------------------------------------------

template <typename TD, MixedFlaw F> __device__ __forceinline__ TD converted(float x);
template <> __device__ __forceinline__ __nv_bfloat16 converted<__nv_bfloat16, MIXED_OK>(float x)
{
    return __float2bfloat16_rn(x);
}
template <> __device__ __forceinline__ __nv_fp8_e4m3 converted<__nv_fp8_e4m3, MIXED_OK>(float x)
{
    return __nv_fp8_e4m3(x);   // the constructor saturates (__NV_SATFINITE)
}
template <> __device__ __forceinline__ __nv_fp8_e4m3 converted<__nv_fp8_e4m3, OUTPUT_OVERFLOWS>(float x)
{
    __nv_fp8_e4m3 out;
    out.__x = __nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E4M3);
    return out;
}

template <typename TD, int TILE, MixedFlaw F>
__device__ __forceinline__ void fp8_tensor_body(const __nv_fp8_e4m3 *A, const __nv_fp8_e4m3 *B, TD *D,
                                                const float *scale_a, const float *scale_b, int M, int N, int K)
{
    __shared__ __nv_fp8_e4m3 As[TILE][TILE];
    __shared__ __nv_fp8_e4m3 Bs[TILE][TILE];
    const int row = blockIdx.y * TILE + threadIdx.y;
    const int col = blockIdx.x * TILE + threadIdx.x;
    const __nv_fp8_e4m3 zero(0.0f);
    float sum = 0.0f;
    for (int t = 0; t < K; t += TILE)
    {
        As[threadIdx.y][threadIdx.x] = (row < M && t + threadIdx.x < K) ? A[row * K + t + threadIdx.x] : zero;
        Bs[threadIdx.y][threadIdx.x] = (t + threadIdx.y < K && col < N) ? B[(t + threadIdx.y) * N + col] : zero;
        __syncthreads();
        for (int k = 0; k < TILE; k++)
            sum += float(As[threadIdx.y][k]) * float(Bs[k][threadIdx.x]);
        __syncthreads();
    }
    if (row < M && col < N)
    {
        float scale = F == SCALE_LEFT_OUT ? *scale_a
                    : F == SCALE_APPLIED_TWICE ? *scale_a * *scale_a * *scale_b
                                               : *scale_a * *scale_b;
        D[row * N + col] = converted<TD, F == OUTPUT_OVERFLOWS ? OUTPUT_OVERFLOWS : MIXED_OK>(sum * scale);
    }
}

template <typename TD, int TILE>
__global__ void gemm_fp8_tensor_scaled(const __nv_fp8_e4m3 *A, const __nv_fp8_e4m3 *B, TD *D, const float *scale_a,
                                       const float *scale_b, int M, int N, int K)
{
    fp8_tensor_body<TD, TILE, MIXED_OK>(A, B, D, scale_a, scale_b, M, N, K);
}
template <typename TD, int TILE>
__global__ void broken_fp8_scale_left_out(const __nv_fp8_e4m3 *A, const __nv_fp8_e4m3 *B, TD *D, const float *scale_a,
                                          const float *scale_b, int M, int N, int K)
{
    fp8_tensor_body<TD, TILE, SCALE_LEFT_OUT>(A, B, D, scale_a, scale_b, M, N, K);
}
template <typename TD, int TILE>
__global__ void broken_fp8_scale_applied_twice(const __nv_fp8_e4m3 *A, const __nv_fp8_e4m3 *B, TD *D,
                                               const float *scale_a, const float *scale_b, int M, int N, int K)
{
    fp8_tensor_body<TD, TILE, SCALE_APPLIED_TWICE>(A, B, D, scale_a, scale_b, M, N, K);
}
template <typename TD, int TILE>
__global__ void broken_fp8_output_overflows(const __nv_fp8_e4m3 *A, const __nv_fp8_e4m3 *B, TD *D,
                                            const float *scale_a, const float *scale_b, int M, int N, int K)
{
    fp8_tensor_body<TD, TILE, OUTPUT_OVERFLOWS>(A, B, D, scale_a, scale_b, M, N, K);
}

// -- e4m3 inputs, 1 x 128 block scales of A, 128 x 128 of B -----------------------------------

constexpr int SCALE_BLOCK = 128;

template <int TILE, MixedFlaw F>
__device__ __forceinline__ void fp8_block_body(const __nv_fp8_e4m3 *A, const __nv_fp8_e4m3 *B, __nv_bfloat16 *D,
                                               const float *sfa, const float *sfb, int M, int N, int K)
{
    static_assert(SCALE_BLOCK % TILE == 0, "a scale block is a whole number of tiles");
    __shared__ __nv_fp8_e4m3 As[TILE][TILE];
    __shared__ __nv_fp8_e4m3 Bs[TILE][TILE];
    const int row = blockIdx.y * TILE + threadIdx.y;
    const int col = blockIdx.x * TILE + threadIdx.x;
    const int k_blocks = (K + SCALE_BLOCK - 1) / SCALE_BLOCK;
    const int n_blocks = (N + SCALE_BLOCK - 1) / SCALE_BLOCK;
    const bool inside = row < M && col < N;
    const __nv_fp8_e4m3 zero(0.0f);
    float sum = 0.0f, block_sum = 0.0f;
    for (int t = 0; t < K; t += TILE)
    {
        As[threadIdx.y][threadIdx.x] = (row < M && t + threadIdx.x < K) ? A[row * K + t + threadIdx.x] : zero;
        Bs[threadIdx.y][threadIdx.x] = (t + threadIdx.y < K && col < N) ? B[(t + threadIdx.y) * N + col] : zero;
        __syncthreads();
        for (int k = 0; k < TILE; k++)
            block_sum += float(As[threadIdx.y][k]) * float(Bs[k][threadIdx.x]);
        __syncthreads();
        if ((t + TILE) % SCALE_BLOCK == 0 || t + TILE >= K)
        {
            const int kb = t / SCALE_BLOCK, nb = col / SCALE_BLOCK;
            if (inside)
            {
                const float sa = sfa[kb * M + row];   // A's scales stored K-block major: (K / 128) x M
                const float sb = F == SCALE_ON_WRONG_AXIS ? sfb[nb * k_blocks + kb] : sfb[kb * n_blocks + nb];
                sum += block_sum * (sa * sb);
            }
            block_sum = 0.0f;
        }
    }
    if (inside)
        D[row * N + col] = __float2bfloat16_rn(sum);
}

template <int TILE>
__global__ void gemm_fp8_block_scaled(const __nv_fp8_e4m3 *A, const __nv_fp8_e4m3 *B, __nv_bfloat16 *D, const float *sfa,
                                      const float *sfb, int M, int N, int K)
{
    fp8_block_body<TILE, MIXED_OK>(A, B, D, sfa, sfb, M, N, K);
}
template <int TILE>
__global__ void broken_fp8_block_scale_on_wrong_axis(const __nv_fp8_e4m3 *A, const __nv_fp8_e4m3 *B, __nv_bfloat16 *D,
                                                     const float *sfa, const float *sfb, int M, int N, int K)
{
    fp8_block_body<TILE, SCALE_ON_WRONG_AXIS>(A, B, D, sfa, sfb, M, N, K);
}
