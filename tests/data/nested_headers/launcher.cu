// A launcher as a project's main file often is: the toolkit's host API headers, a header of
// host prototypes, and the kernels through a header that includes another, which includes
// cuBLAS (tests/test_cpu_sim_build.py: the kernel builds and runs on the CPU simulator).
#include <cuda_runtime.h>
#include <cuda_profiler_api.h>
#include <cublas_v2.h>
#include "host_api.cuh"
#include "kernels.cuh"

int main()
{
    const int M = 64, N = 64, K = 64;
    float *A = alloc_device(M * K), *B = alloc_device(K * N), *C = alloc_device(M * N);
    cudaProfilerStart();
    launch_nested_tiled(A, B, C, M, N, K);
    CUDA_CHECK(cudaDeviceSynchronize());
    cudaProfilerStop();
    return 0;
}
