// A launcher as a CUDA tutorial project has one: host code that allocates, launches each
// kernel from a host function and times it. Built by its author with
//   nvcc -arch=sm_90 launcher.cu -lcublas -o sgemm
#include <cstdio>
#include <cstdlib>
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include "kernels.cuh"
#include "runner.cuh"

void cudaCheck(cudaError_t error, const char *file, int line)
{
    if (error != cudaSuccess) {
        printf("[CUDA ERROR] at file %s:%d:\n%s\n", file, line, cudaGetErrorString(error));
        exit(EXIT_FAILURE);
    }
}

void run_sgemm_naive(int M, int N, int K, float alpha, float *A, float *B, float beta, float *C)
{
    dim3 gridDim(CEIL_DIV(M, 32), CEIL_DIV(N, 32));
    dim3 blockDim(32, 32);
    sgemm_naive<<<gridDim, blockDim>>>(M, N, K, alpha, A, B, beta, C);
}

void run_sgemm_smem_tiled(int M, int N, int K, float alpha, float *A, float *B, float beta, float *C)
{
    dim3 gridDim(CEIL_DIV(N, 32), CEIL_DIV(M, 32));
    dim3 blockDim(32, 32);
    sgemm_smem_tiled<32><<<gridDim, blockDim>>>(M, N, K, alpha, A, B, beta, C);
}

int main(int argc, char **argv)
{
    const int M = 4096, N = 4096, K = 4096;
    float *A, *B, *C;
    cudaCheckErr(cudaMalloc(&A, sizeof(float) * M * K));
    cudaCheckErr(cudaMalloc(&B, sizeof(float) * K * N));
    cudaCheckErr(cudaMalloc(&C, sizeof(float) * M * N));
    cudaProfilerStart();
    run_sgemm_naive(M, N, K, 1.0f, A, B, 0.0f, C);
    run_sgemm_smem_tiled(M, N, K, 1.0f, A, B, 0.0f, C);
    cudaCheckErr(cudaDeviceSynchronize());
    cudaProfilerStop();
    cudaFree(A);
    cudaFree(B);
    cudaFree(C);
    return 0;
}
