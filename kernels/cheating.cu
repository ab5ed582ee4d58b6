// A kernel that is right once and wrong on repeats: the performance suite's
// positive control for its last-launch output check and its roofline check.
//
// It is the hardened tiled kernel (reference_tiled.cu, matmul_tiled_guarded:
// ceil(K / TILE) phases, guarded zero-filled loads, guarded store) with one
// flaw: it keeps state in __device__ memory between launches. The first launch
// computes C = A B; every later launch skips the work and stores zeros, in a
// fraction of the time a real product takes. A suite that checks only the
// first launch and times the rest would pass it and report an impossible
// speed; gemmcheck's perf suite must refuse it (thresholds.toml: [[refuse]]).
//
// The launch count is exact under any block schedule: each block reads it at
// its start, and only the last block of a launch to finish (counted with
// atomicAdd) advances it, after every block of that launch has read it.
// gpu_only in the catalog: the CPU simulator has no atomics.
// Launch: the `tile2d` policy. Catalog: expect = "wrong_values".

#include <cuda_fp16.h>
#include <cuda_bf16.h>

template <typename T> struct cheat_accumulator { using type = T; };
template <> struct cheat_accumulator<__half> { using type = float; };
template <> struct cheat_accumulator<__nv_bfloat16> { using type = float; };

__device__ unsigned int cheat_launches = 0;     // launches completed so far
__device__ unsigned int cheat_blocks_done = 0;  // blocks of the current launch finished

template <typename T, int TILE>
__global__ void cheat_skips_repeats(const T *A, const T *B, T *C, int M, int N, int K)
{
    using acc_t = typename cheat_accumulator<T>::type;
    __shared__ T As[TILE][TILE];
    __shared__ T Bs[TILE][TILE];
    __shared__ bool repeat;

    if (threadIdx.x == 0 && threadIdx.y == 0)
        repeat = *(volatile unsigned int *)&cheat_launches > 0;
    __syncthreads();

    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    acc_t sum = acc_t(0);

    // The flaw: the work is done on the first launch only.
    for (int t = 0; !repeat && t < (K + TILE - 1) / TILE; t++)
    {
        int aCol = t * TILE + threadIdx.x;
        int bRow = t * TILE + threadIdx.y;
        As[threadIdx.y][threadIdx.x] = (row < M && aCol < K) ? A[row * K + aCol] : T(0.0f);
        Bs[threadIdx.y][threadIdx.x] = (bRow < K && col < N) ? B[bRow * N + col] : T(0.0f);
        __syncthreads();
        for (int k = 0; k < TILE; k++)
            sum += acc_t(As[threadIdx.y][k]) * acc_t(Bs[k][threadIdx.x]);
        __syncthreads();
    }

    if (row < M && col < N)
        C[row * N + col] = T(sum);

    __syncthreads();
    if (threadIdx.x == 0 && threadIdx.y == 0)
    {
        __threadfence();
        unsigned int done = atomicAdd(&cheat_blocks_done, 1u);
        if (done == gridDim.x * gridDim.y * gridDim.z - 1)
        {
            cheat_blocks_done = 0;
            __threadfence();
            atomicAdd(&cheat_launches, 1u);
        }
    }
}
