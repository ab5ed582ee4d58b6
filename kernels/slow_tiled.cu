// A deliberately slowed tiled GEMM: the performance suite's positive control.
//
// It is the hardened general kernel (reference_tiled.cu, matmul_tiled_guarded:
// ceil(K / TILE) phases, guarded zero-filled loads, guarded store) with one
// flaw: after each phase's dot product it runs the same dot product
// SLOW_REPEATS - 1 more times over the same shared tiles. The redundant passes
// read shared memory through a volatile pointer, so the compiler must issue
// every load again, and their sum is folded into the output multiplied by
// (M < 0), which is 0 for every real launch but unknown to the compiler, so
// the work cannot be removed. The results are those of matmul_tiled_guarded
// (sum + 0 * redundant == sum for finite values); only the time changes.
//
// It must fail the thresholds its unslowed twin passes (catalog: expect =
// "too_slow"). Launch: the `tile2d` policy.

#include <cuda_fp16.h>
#include <cuda_bf16.h>

#define SLOW_REPEATS 4

template <typename T> struct slow_accumulator { using type = T; };
template <> struct slow_accumulator<__half> { using type = float; };
template <> struct slow_accumulator<__nv_bfloat16> { using type = float; };

template <typename T, int TILE>
__global__ void slow_tiled(const T *A, const T *B, T *C, int M, int N, int K)
{
    using acc_t = typename slow_accumulator<T>::type;
    __shared__ T As[TILE][TILE];
    __shared__ T Bs[TILE][TILE];
    const volatile T *vAs = &As[0][0];
    const volatile T *vBs = &Bs[0][0];

    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    acc_t sum = acc_t(0);
    acc_t redundant = acc_t(0);

    for (int t = 0; t < (K + TILE - 1) / TILE; t++)
    {
        int aCol = t * TILE + threadIdx.x;
        int bRow = t * TILE + threadIdx.y;
        As[threadIdx.y][threadIdx.x] = (row < M && aCol < K) ? A[row * K + aCol] : T(0.0f);
        Bs[threadIdx.y][threadIdx.x] = (bRow < K && col < N) ? B[bRow * N + col] : T(0.0f);

        __syncthreads();

        for (int k = 0; k < TILE; k++)
        {
            sum += acc_t(As[threadIdx.y][k]) * acc_t(Bs[k][threadIdx.x]);
        }
        // The flaw: the same dot product again, SLOW_REPEATS - 1 times.
        for (int r = 1; r < SLOW_REPEATS; r++)
        {
            for (int k = 0; k < TILE; k++)
            {
                redundant += acc_t(vAs[threadIdx.y * TILE + k]) * acc_t(vBs[k * TILE + threadIdx.x]);
            }
        }

        __syncthreads();
    }

    if (row < M && col < N)
        C[row * N + col] = T(sum + acc_t(M < 0) * redundant);
}
