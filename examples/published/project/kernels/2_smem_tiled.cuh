// Shared-memory tiling: a BLOCKSIZE x BLOCKSIZE block of threads computes one tile of C from
// BLOCKSIZE-wide slices of A and B staged in shared memory; loads and stores are guarded.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

template <const int BLOCKSIZE>
__global__ void sgemm_smem_tiled(int M, int N, int K, float alpha, const float *A, const float *B,
                                 float beta, float *C)
{
    __shared__ float As[BLOCKSIZE][BLOCKSIZE];
    __shared__ float Bs[BLOCKSIZE][BLOCKSIZE];
    const int row = blockIdx.y * BLOCKSIZE + threadIdx.y;
    const int col = blockIdx.x * BLOCKSIZE + threadIdx.x;

    float tmp = 0.0f;
    for (int k0 = 0; k0 < K; k0 += BLOCKSIZE) {
        As[threadIdx.y][threadIdx.x] = (row < M && k0 + threadIdx.x < K) ? A[row * K + k0 + threadIdx.x] : 0.0f;
        Bs[threadIdx.y][threadIdx.x] = (k0 + threadIdx.y < K && col < N) ? B[(k0 + threadIdx.y) * N + col] : 0.0f;
        __syncthreads();
        for (int i = 0; i < BLOCKSIZE; ++i) {
            tmp += As[threadIdx.y][i] * Bs[i][threadIdx.x];
        }
        __syncthreads();   // before the next slice overwrites As and Bs
    }
    if (row < M && col < N) {
        C[row * N + col] = beta == 0.0f ? alpha * tmp : alpha * tmp + beta * C[row * N + col];
    }
}

// the project's library exports the 32 x 32 variant
template __global__ void sgemm_smem_tiled<32>(int, int, int, float, const float *, const float *, float, float *);
