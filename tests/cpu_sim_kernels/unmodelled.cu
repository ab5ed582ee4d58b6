// One file, several kernels, some using what the CPU simulator does not model: each of
// those is its own skip reason and never a build failure of the others
// (tests/test_cpu_sim_device_api.py).
#include <cublas_v2.h>   // a host library's header: not there for the simulator, not needed
#include <cstdio>
#include <cuda/pipeline>    // not modelled: left out, so its names are unknown to g++
#include <cuda_pipeline.h>  // the __pipeline_* primitives, likewise

// Plain and fine.
__global__ void plain(const float *A, const float *B, float *C, int M, int N, int K)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M || col >= N)
        return;
    float s = 0;
    for (int k = 0; k < K; ++k)
        s += A[row * K + k] * B[k * N + col];
    C[row * N + col] = s;
}

// Not a template: compiled with the file whether anyone launches it or not.
__global__ void reads_laneid(const float *A, const float *B, float *C, int M, int N, int K)
{
    unsigned lane;
    asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));  // PTX
    C[0] = (float)lane;
}

// A template using CUDA's pipeline primitives.
template <typename T, int TILE>
__global__ void pipelined(const T *A, const T *B, T *C, int M, int N, int K)
{
    __shared__ T s[TILE];
    __pipeline_memcpy_async(&s[threadIdx.x], &A[threadIdx.x], sizeof(T));  // PIPELINE
    __pipeline_commit();
    __pipeline_wait_prior(0);
    C[threadIdx.x] = s[threadIdx.x];
}

// A template using libcu++'s pipeline.
template <typename T, int TILE>
__global__ void cuda_pipeline(const T *A, const T *B, T *C, int M, int N, int K)
{
    cuda::pipeline<cuda::thread_scope_thread> pipe = cuda::make_pipeline();  // CUDA PIPELINE
    C[threadIdx.x] = A[threadIdx.x];
}
