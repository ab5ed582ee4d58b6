// An int8 GEMM as int8 inference tutorials write it: C (M x N, int32) = A B, A row-major and B
// kept as N x K (each column of B contiguous in K, so four k of A and of B are one 32-bit word
// each), four products per __dp4a. Loads a word at a time: K must be a multiple of 4.
#include <cstdint>
#include <cuda_runtime.h>

__global__ void gemm_int8_dp4a(const int8_t* __restrict__ A, const int8_t* __restrict__ B,
                               int32_t* __restrict__ C, int M, int N, int K) {
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {
        int acc = 0;
        for (int k = 0; k < K; k += 4) {
            int a = *reinterpret_cast<const int*>(&A[row * K + k]);
            int b = *reinterpret_cast<const int*>(&B[col * K + k]);
            acc = __dp4a(a, b, acc);
        }
        C[row * N + col] = acc;
    }
}

void launch_gemm_int8(const int8_t* A, const int8_t* B, int32_t* C, int M, int N, int K, cudaStream_t stream) {
    dim3 block(16, 16);
    dim3 grid((N + block.x - 1) / block.x, (M + block.y - 1) / block.y);
    gemm_int8_dp4a<<<grid, block, 0, stream>>>(A, B, C, M, N, K);
}
