// A naive SGEMM in the style of the popular tutorial series: one thread per element of C,
// C = alpha * A B + beta * C, row-major. The file is a tutorial file as published: host
// headers (cuBLAS, <cstdio>, <cassert>), glibc's `uint`, a host launcher and a check macro.
// Only the kernel is judged; the rest never reaches the device compile.
#include <cublas_v2.h>
#include <cstdio>
#include <cassert>
#include <cstdlib>

#define CEIL_DIV(M, N) (((M) + (N) - 1) / (N))

#define cudaCheck(err) (cudaCheckImpl(err, __FILE__, __LINE__))
void cudaCheckImpl(cudaError_t error, const char *file, int line)
{
    if (error != cudaSuccess) {
        printf("[CUDA ERROR] at file %s:%d:\n%s\n", file, line, cudaGetErrorString(error));
        exit(EXIT_FAILURE);
    }
}

__global__ void sgemm_naive(int M, int N, int K, float alpha, const float *A,
                            const float *B, float beta, float *C)
{
    const uint x = blockIdx.x * blockDim.x + threadIdx.x;   // row of C
    const uint y = blockIdx.y * blockDim.y + threadIdx.y;   // column of C

    if (x < M && y < N) {
        float tmp = 0.0f;
        for (int i = 0; i < K; ++i) {
            tmp += A[x * K + i] * B[i * N + y];
        }
        // BLAS: beta == 0 means C is output only (it may hold NaN), so it is not read.
        C[x * N + y] = beta == 0.0f ? alpha * tmp : alpha * tmp + beta * C[x * N + y];
    }
}

void run_sgemm_naive(int M, int N, int K, float alpha, float *A, float *B, float beta, float *C)
{
    dim3 gridDim(CEIL_DIV(M, 32), CEIL_DIV(N, 32));
    dim3 blockDim(32, 32);
    sgemm_naive<<<gridDim, blockDim>>>(M, N, K, alpha, A, B, beta, C);
    cudaCheck(cudaGetLastError());
}

void run_cublas(cublasHandle_t handle, int M, int N, int K, float alpha, float *A, float *B, float beta,
                float *C)
{
    // cuBLAS is column-major: C^T = B^T A^T gives the row-major product.
    cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &alpha, B, N, A, K, &beta, C, N);
}
