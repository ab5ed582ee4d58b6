// Host prototypes of the project's helpers (defined in a host file the suite never sees).
#pragma once
#include <cstddef>
#include <cublas_v2.h>

#define CUDA_CHECK(call) cudaCheck((call), __FILE__, __LINE__)
void cudaCheck(cudaError_t error, const char *file, int line);
void cublasCheck(cublasStatus_t status, const char *file, int line);
float *alloc_device(size_t elements);
void launch_nested_tiled(const float *A, const float *B, float *C, int M, int N, int K);
