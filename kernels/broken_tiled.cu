// Deliberately broken GEMM kernels: the suite's positive controls.
//
// Each variant is the hardened general kernel (reference_tiled.cu,
// matmul_tiled_guarded) with exactly one documented flaw, selected at compile
// time, so a diff against the reference is the flaw and nothing else. The
// catalog declares the defect each one must be caught with (`expect`).
// Signature and launch as the reference: (A, B, C, M, N, K), policy tile2d.

#include <cuda_fp16.h>
#include <cuda_bf16.h>

template <typename T> struct accumulator { using type = T; };
template <> struct accumulator<__half> { using type = float; };
template <> struct accumulator<__nv_bfloat16> { using type = float; };

enum Flaw
{
    NO_FLAW,              // the reference itself: the base of broken_faults and broken_hangs
    NO_BARRIERS,          // neither __syncthreads(): shared tiles read while being written and overwritten
    NO_SYNC_AFTER_LOAD,   // reads As/Bs before other threads wrote them (the seed's RAW case)
    NO_SYNC_AFTER_DOT,    // overwrites As/Bs while slower threads still read them (the seed's WAR case)
    UNGUARDED_LOADS,      // ceil grid and phases, loads without bounds checks: out-of-bounds reads on ragged shapes
    UNGUARDED_STORE,      // store without the (row < M && col < N) check: out-of-bounds writes on ragged shapes
    FLOOR_PHASES,         // K / TILE phases rounded down: the K tail is dropped on ragged K
    DIVERGENT_BARRIER,    // the first barrier only for threads with row < M: divergent on ragged M
    READS_C_AT_BETA_ZERO, // the tutorial epilogue C = alpha * sum + beta * C: reads C even at beta = 0
    RETURNS_EARLY_AT_K0,  // `if (K == 0) return;`: BLAS wants C = beta C (zeros at beta = 0) written
};

template <typename T, int TILE, Flaw F>
__device__ __forceinline__ void flawed_body(const T *A, const T *B, T *C, int M, int N, int K,
                                            typename accumulator<T>::type alpha = 1,
                                            typename accumulator<T>::type beta = 0)
{
    using acc_t = typename accumulator<T>::type;
    if (F == RETURNS_EARLY_AT_K0 && K == 0)
        return;
    __shared__ T As[TILE][TILE];
    __shared__ T Bs[TILE][TILE];

    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    acc_t sum = acc_t(0);
    int phases = (F == FLOOR_PHASES) ? K / TILE : (K + TILE - 1) / TILE;

    for (int t = 0; t < phases; t++)
    {
        int aCol = t * TILE + threadIdx.x;
        int bRow = t * TILE + threadIdx.y;
        if (F == UNGUARDED_LOADS)
        {
            As[threadIdx.y][threadIdx.x] = A[row * K + aCol];
            Bs[threadIdx.y][threadIdx.x] = B[bRow * N + col];
        }
        else
        {
            As[threadIdx.y][threadIdx.x] = (row < M && aCol < K) ? A[row * K + aCol] : T(0.0f);
            Bs[threadIdx.y][threadIdx.x] = (bRow < K && col < N) ? B[bRow * N + col] : T(0.0f);
        }

        if (F == DIVERGENT_BARRIER)
        {
            if (row < M)
                __syncthreads();
        }
        else if (F != NO_BARRIERS && F != NO_SYNC_AFTER_LOAD)
        {
            __syncthreads();
        }

        for (int k = 0; k < TILE; k++)
        {
            sum += acc_t(As[threadIdx.y][k]) * acc_t(Bs[k][threadIdx.x]);
        }

        if (F != NO_BARRIERS && F != NO_SYNC_AFTER_DOT)
            __syncthreads();
    }

    if (F == READS_C_AT_BETA_ZERO)
    {
        if (row < M && col < N)
            C[row * N + col] = T(alpha * sum + beta * acc_t(C[row * N + col]));
    }
    else if (F == UNGUARDED_STORE || (row < M && col < N))
        C[row * N + col] = T(sum);
}

#define FLAWED_KERNEL(NAME, FLAW)                                                       \
    template <typename T, int TILE>                                                     \
    __global__ void NAME(const T *A, const T *B, T *C, int M, int N, int K)            \
    {                                                                                   \
        flawed_body<T, TILE, FLAW>(A, B, C, M, N, K);                                   \
    }

FLAWED_KERNEL(broken_no_barriers, NO_BARRIERS)
FLAWED_KERNEL(broken_no_sync_after_load, NO_SYNC_AFTER_LOAD)
FLAWED_KERNEL(broken_no_sync_after_dot, NO_SYNC_AFTER_DOT)
FLAWED_KERNEL(broken_unguarded_loads, UNGUARDED_LOADS)
FLAWED_KERNEL(broken_unguarded_store, UNGUARDED_STORE)
FLAWED_KERNEL(broken_floor_phases, FLOOR_PHASES)
FLAWED_KERNEL(broken_divergent_barrier, DIVERGENT_BARRIER)
FLAWED_KERNEL(broken_returns_early_at_k0, RETURNS_EARLY_AT_K0)

// C = alpha * A B + beta * C with the epilogue most tutorials write: correct at beta != 0, and
// at beta = 0 it reads C anyway (0 * NaN = NaN when C holds NaN, as BLAS allows it to).
template <typename T, int TILE>
__global__ void broken_reads_c_at_beta_zero(const T *A, const T *B, T *C, int M, int N, int K,
                                            typename accumulator<T>::type alpha,
                                            typename accumulator<T>::type beta)
{
    flawed_body<T, TILE, READS_C_AT_BETA_ZERO>(A, B, C, M, N, K, alpha, beta);
}

// Faults: the guarded kernel, then one thread stores through an address no
// allocation holds. The launch fails with an illegal-address error and the
// process's CUDA context is unusable afterwards: run it isolated.
template <typename T, int TILE>
__global__ void broken_faults(const T *A, const T *B, T *C, int M, int N, int K)
{
    flawed_body<T, TILE, NO_FLAW>(A, B, C, M, N, K);
    if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0 && threadIdx.y == 0)
        C[-(1LL << 40)] = T(1.0f);
}

// Hangs: thread (0, 0) of block (0, 0) spins forever on the clock (clock64()
// is volatile, so the loop cannot be optimized away). Run it isolated.
template <typename T, int TILE>
__global__ void broken_hangs(const T *A, const T *B, T *C, int M, int N, int K)
{
    flawed_body<T, TILE, NO_FLAW>(A, B, C, M, N, K);
    if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0 && threadIdx.y == 0)
        while (clock64() >= 0)
        {
        }
}

// Split-K in two slices of the K phases, racing in global memory: slice 0 stores its partial
// sum into C while slice 1 atomicAdds its own, and nothing orders the two (a correct split-K
// zeroes C first, or reduces in a second pass). When the add lands first the store overwrites
// it: slice 1's half of the sum is lost, in a different place each launch. The slice is the
// fastest-varying block index, so both slices of a tile run side by side. No shared memory is
// involved in the race (each block's tiles are its own, with both barriers): on a GPU
// racecheck is silent, and launches that differ are all there is to see; cpu-sim's
// global-memory tracking names the element and the two blocks.
// Launch: grid (2 * ceil(N / TILE), ceil(M / TILE)), block (TILE, TILE). float only (atomicAdd).
template <typename T, int TILE>
__global__ void broken_splitk_global_race(const T *A, const T *B, T *C, int M, int N, int K)
{
    using acc_t = typename accumulator<T>::type;
    __shared__ T As[TILE][TILE];
    __shared__ T Bs[TILE][TILE];

    const int slice = blockIdx.x % 2;
    const int row = blockIdx.y * TILE + threadIdx.y;
    const int col = (blockIdx.x / 2) * TILE + threadIdx.x;
    const int phases = (K + TILE - 1) / TILE;
    const int half = (phases + 1) / 2;
    const int begin = slice == 0 ? 0 : half;
    const int end = slice == 0 ? half : phases;
    acc_t sum = acc_t(0);

    for (int t = begin; t < end; t++)
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
    {
        if (slice == 0)
            C[row * N + col] = T(sum);
        else
            atomicAdd(&C[row * N + col], T(sum));
    }
}
