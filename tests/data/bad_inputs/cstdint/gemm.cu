// A correct GEMM with 64-bit row offsets: <cstdint>'s types, as nvcc gives them.
#include <cstdint>

template <typename T, int TILE>
__global__ void gemm_i64(const T *A, const T *B, T *C, int M, int N, int K)
{
    const uint32_t col = blockIdx.x * TILE + threadIdx.x;
    const std::int64_t row = blockIdx.y * TILE + threadIdx.y;
    if (row >= M || col >= (uint32_t)N)
        return;
    const int64_t a = row * K, c = row * N;
    T sum = 0;
    for (int k = 0; k < K; ++k)
        sum += A[a + k] * B[(int64_t)k * N + col];
    C[c + col] = sum;
}
