// Correct GEMM kernels with <cstdint>'s fixed-width types and a size type of the file's own:
// the suite passes each argument in the type the kernel declares.
#include <cstdint>
#include <cuda_fp16.h>
#include <cuda_bf16.h>

typedef long long index_t;   // a size type of the file's own

// cuBLAS style, column-major, with 64-bit leading dimensions and float alpha and beta.
__global__ void gemm_int64_ld(int M, int N, int K, float alpha, const float *A, int64_t lda, const float *B,
                              int64_t ldb, float beta, float *C, int64_t ldc)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;   // row of C
    int j = blockIdx.y * blockDim.y + threadIdx.y;   // column of C
    if (i >= M || j >= N)
        return;
    float sum = 0;
    for (int p = 0; p < K; ++p)
        sum += A[i + p * lda] * B[p + j * ldb];
    C[i + j * ldc] = beta == 0 ? alpha * sum : alpha * sum + beta * C[i + j * ldc];
}

// Unsigned and the file's own typedef: unsigned M, uint32_t N, index_t (long long) K; partial
// sums in float, as the suite's oracle expects of float32 and bfloat16.
template <typename T>
__global__ void gemm_mixed(const T *A, const T *B, T *C, unsigned M, uint32_t N, index_t K)
{
    unsigned row = blockIdx.y * blockDim.y + threadIdx.y;
    unsigned col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M || col >= N)
        return;
    float sum = 0;
    for (index_t k = 0; k < K; ++k)
        sum += static_cast<float>(A[row * K + k]) * static_cast<float>(B[k * N + col]);
    C[row * N + col] = static_cast<T>(sum);
}
