// An int8 GEMM as int8 inference stacks write it (W8A8: int8 activations and weights): the
// int32 sum of each output dequantized with a scale per token (a row of A) and per output
// channel (a column of B), out[i][j] = bf16(float(acc) * a_scale[i] * w_scale[j]). The weight is
// kept N x K (as a linear layer keeps it), so four k of a row of A and of a column of B are one
// 32-bit word each, summed with __dp4a: K must be a multiple of 4.
#include <cstdint>
#include <cuda_bf16.h>

enum W8A8Flaw { W8A8_OK, W_SCALE_LEFT_OUT, SCALE_BY_COLUMN_FOR_BOTH };

template <typename OutT, W8A8Flaw FLAW>
__device__ __forceinline__ void w8a8_body(const int8_t *__restrict__ a, const int8_t *__restrict__ w,
                                          OutT *__restrict__ out, const float *__restrict__ a_scale,
                                          const float *__restrict__ w_scale, int M, int N, int K)
{
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M || col >= N)
        return;
    int acc = 0;
    for (int k = 0; k < K; k += 4) {
        const int x = *reinterpret_cast<const int *>(a + (size_t)row * K + k);
        const int y = *reinterpret_cast<const int *>(w + (size_t)col * K + k);
        acc = __dp4a(x, y, acc);
    }
    float v = static_cast<float>(acc);
    if (FLAW == SCALE_BY_COLUMN_FOR_BOTH)
        v *= a_scale[col % M] * w_scale[col];   // the token's scale read at the column's index
    else if (FLAW == W_SCALE_LEFT_OUT)
        v *= a_scale[row];
    else
        v *= a_scale[row] * w_scale[col];
    out[(size_t)row * N + col] = static_cast<OutT>(v);
}

__global__ void w8a8_gemm_bf16(const int8_t *a, const int8_t *w, __nv_bfloat16 *out, const float *a_scale,
                               const float *w_scale, int M, int N, int K)
{
    w8a8_body<__nv_bfloat16, W8A8_OK>(a, w, out, a_scale, w_scale, M, N, K);
}

__global__ void w8a8_gemm_f32(const int8_t *a, const int8_t *w, float *out, const float *a_scale,
                              const float *w_scale, int M, int N, int K)
{
    w8a8_body<float, W8A8_OK>(a, w, out, a_scale, w_scale, M, N, K);
}

__global__ void w8a8_w_scale_left_out(const int8_t *a, const int8_t *w, __nv_bfloat16 *out, const float *a_scale,
                                      const float *w_scale, int M, int N, int K)
{
    w8a8_body<__nv_bfloat16, W_SCALE_LEFT_OUT>(a, w, out, a_scale, w_scale, M, N, K);
}

__global__ void w8a8_token_scale_by_column(const int8_t *a, const int8_t *w, __nv_bfloat16 *out,
                                           const float *a_scale, const float *w_scale, int M, int N, int K)
{
    w8a8_body<__nv_bfloat16, SCALE_BY_COLUMN_FOR_BOTH>(a, w, out, a_scale, w_scale, M, N, K);
}

void w8a8_gemm(const int8_t *a, const int8_t *w, __nv_bfloat16 *out, const float *a_scale, const float *w_scale,
               int M, int N, int K, cudaStream_t stream)
{
    dim3 block(16, 16);
    dim3 grid((N + block.x - 1) / block.x, (M + block.y - 1) / block.y);
    w8a8_gemm_bf16<<<grid, block, 0, stream>>>(a, w, out, a_scale, w_scale, M, N, K);
}
