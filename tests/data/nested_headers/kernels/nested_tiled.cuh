// A tiled kernel in a header two levels down, beside a host launcher that uses cuBLAS types.
#pragma once
#include <cublas_v2.h>
#include "tile_math.cuh"

template <int TILE>
__global__ void nested_tiled(const float *A, const float *B, float *C, int M, int N, int K)
{
    __shared__ float As[TILE][TILE], Bs[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    float sum = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE)
    {
        As[threadIdx.y][threadIdx.x] = load_or_zero(A, row, k0 + threadIdx.x, M, K);
        Bs[threadIdx.y][threadIdx.x] = load_or_zero(B, k0 + threadIdx.y, col, K, N);
        __syncthreads();
        for (int k = 0; k < TILE; k++)
            sum += As[threadIdx.y][k] * Bs[k][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N)
        C[row * N + col] = sum;
}

inline void launch_with_handle(cublasHandle_t handle, const float *A, const float *B, float *C, int M, int N, int K)
{
    cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH);
    nested_tiled<16><<<dim3((N + 15) / 16, (M + 15) / 16), dim3(16, 16)>>>(A, B, C, M, N, K);
}
