// A kernel declared through an object-like macro, as some code bases do to keep long
// template heads in one place. The compiler sees `template <int BM> __global__ void ...`;
// so does the suite, which finds kernels after preprocessing. The old kernel under #if 0
// is not compiled, so it is not a kernel of this file.
#include <cublas_v2.h>
#include <cstdio>

#define KERNEL template <int BM> __global__ void __launch_bounds__(BM * BM)

#if 0
__global__ void sgemm_macro_old(int M, int N, int K, float alpha, const float *A, const float *B,
                                float beta, float *C) {}
#endif

KERNEL sgemm_macro(int M, int N, int K, float alpha, const float *A, const float *B, float beta,
                   float *C)
{
    __shared__ float As[BM][BM];
    __shared__ float Bs[BM][BM];
    const int ty = threadIdx.y, tx = threadIdx.x;
    const int row = blockIdx.y * BM + ty;
    const int col = blockIdx.x * BM + tx;

    float tmp = 0.0f;
    for (int k0 = 0; k0 < K; k0 += BM) {
        As[ty][tx] = (row < M && k0 + tx < K) ? A[row * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < BM; ++k) {
            tmp += As[ty][k] * Bs[k][tx];
        }
        __syncthreads();
    }
    if (row < M && col < N) {
        C[row * N + col] = beta == 0.0f ? alpha * tmp : alpha * tmp + beta * C[row * N + col];
    }
}
