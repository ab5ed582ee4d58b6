// Kernels written the ways nvcc takes them and the CPU simulator must take too: a split-K
// GEMM whose last block per tile adds the partial sums (__threadfence, then atomicAdd on a
// counter: the common "last block" pattern), emitted by explicit instantiation; an
// extern "C" kernel; a static kernel; one behind `#if __CUDA_ARCH__`. Host code (main) as a
// published file has it.
#include <cstdio>
#include <cuda_runtime.h>

#define CUDA_CHECK(call) cudaCheck((call), __FILE__, __LINE__)
void cudaCheck(cudaError_t error, const char *file, int line);

// Room for problems up to 1024 x 1024 (the catalog claims no more): one partial sum per
// K half, one arrival counter per tile.
constexpr int MAX_EDGE = 1024;
__device__ float partial_sums[2][MAX_EDGE * MAX_EDGE];
__device__ unsigned int arrivals[MAX_EDGE * MAX_EDGE / 64];

// blockIdx.z takes one half of K; the second block of a tile to arrive adds both halves in
// a fixed order (half 0 + half 1), so the result does not depend on which came last.
template <int TILE>
__global__ void splitk_last_block(const float *A, const float *B, float *C, int M, int N, int K)
{
    int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    int half = (K + 1) / 2, k0 = blockIdx.z * half, k1 = min(K, k0 + half);
    float sum = 0.0f;
    if (row < M && col < N)
        for (int k = k0; k < k1; k++)
            sum += A[row * K + k] * B[k * N + col];
    if (row < M && col < N)
        partial_sums[blockIdx.z][row * N + col] = sum;
    __threadfence();   // this block's partial sums are visible before it is counted
    __syncthreads();
    __shared__ bool last;
    unsigned int tile = blockIdx.y * gridDim.x + blockIdx.x;
    if (threadIdx.x == 0 && threadIdx.y == 0)
        last = atomicAdd(&arrivals[tile], 1u) == gridDim.z - 1;
    __syncthreads();
    if (!last)
        return;
    __threadfence();
    if (row < M && col < N)
        C[row * N + col] = __ldcg(&partial_sums[0][row * N + col]) + __ldcg(&partial_sums[1][row * N + col]);
    if (threadIdx.x == 0 && threadIdx.y == 0)
        arrivals[tile] = 0;   // ready for the next launch
}

template __global__ void splitk_last_block<16>(const float *, const float *, float *, int, int, int);
template __global__ void splitk_last_block<8>(const float *, const float *, float *, int, int, int);

// One thread per element of C: the body of the two kernels below.
__device__ void naive_element(const float *A, const float *B, float *C, int M, int N, int K)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M || col >= N)
        return;
    float sum = 0.0f;
    for (int k = 0; k < K; k++)
        sum += A[row * K + k] * B[k * N + col];
    C[row * N + col] = sum;
}

extern "C" __global__ void naive_extern_c(const float *A, const float *B, float *C, int M, int N, int K)
{
    naive_element(A, B, C, M, N, K);
}

static __global__ void naive_static(const float *A, const float *B, float *C, int M, int N, int K)
{
    naive_element(A, B, C, M, N, K);
}

// Device code behind the compiler's macros, as libraries guard an intrinsic for the archs that
// have it: on the GPU (sm_90) the guarded body is what runs, so it is what the simulator runs.
__global__ void naive_arch_guarded(const float *A, const float *B, float *C, int M, int N, int K)
{
#if defined(__CUDACC__) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 610
    naive_element(A, B, C, M, N, K);
#endif
}

void cudaCheck(cudaError_t error, const char *file, int line)
{
    if (error != cudaSuccess) {
        printf("[CUDA ERROR] at file %s:%d:\n%s\n", file, line, cudaGetErrorString(error));
        exit(EXIT_FAILURE);
    }
}

int main()
{
    const int M = 64, N = 64, K = 64;
    float *A, *B, *C;
    CUDA_CHECK(cudaMalloc(&A, M * K * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&B, K * N * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&C, M * N * sizeof(float)));
    splitk_last_block<16><<<dim3(N / 16, M / 16, 2), dim3(16, 16)>>>(A, B, C, M, N, K);
    naive_extern_c<<<dim3(N / 16, M / 16), dim3(16, 16)>>>(A, B, C, M, N, K);
    naive_static<<<dim3(N / 16, M / 16), dim3(16, 16)>>>(A, B, C, M, N, K);
    CUDA_CHECK(cudaDeviceSynchronize());
    return 0;
}
