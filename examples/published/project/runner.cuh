// The project's host prototypes: what the launcher defines and main calls.
#pragma once
#include <cuda_runtime.h>

#define CEIL_DIV(M, N) (((M) + (N) - 1) / (N))
#define cudaCheckErr(err) (cudaCheck(err, __FILE__, __LINE__))

void cudaCheck(cudaError_t error, const char *file, int line);
void run_sgemm_naive(int M, int N, int K, float alpha, float *A, float *B, float beta, float *C);
void run_sgemm_smem_tiled(int M, int N, int K, float alpha, float *A, float *B, float beta, float *C);
