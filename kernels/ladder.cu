// The reference ladder: from the seed's tiled kernel to production speed (seed section 8).
//
// Every rung computes C = alpha * A * B + beta * C in the common SGEMM argument form
//     (int M, int N, int K, S alpha, const T *A, const T *B, S beta, T *C)
// with row-major A (M x K), B (K x N), C (M x N), leading dimensions equal to the widths.
// S is the accumulator type: T for float and double, float for __half and __nv_bfloat16.
// beta == 0 means C is not read (BLAS semantics: C may hold NaN on entry).
// Each rung adds one idea to the one before it (seed section 8):
//   1 sgemm_1d_blocktiling   each thread computes TM outputs of one column
//   2 sgemm_2d_blocktiling   each thread computes a TM x TN register tile
//   3 sgemm_vectorized       128-bit loads and stores, A tile stored transposed in shared memory
//   4 sgemm_double_buffered  two shared buffers: the next tile is fetched while this one is used
//   5 sgemm_warptiled        block -> warp -> thread tiles (plus rung 4's double buffer)
//   5b sgemm_warptiled_occ   rung 5 with an occupancy bound (launch bounds), one or two shared buffers,
//                            unguarded 128-bit loads on interior tiles
//   6 gemm_wmma              float16 / bfloat16 on tensor cores (WMMA), float32 accumulate
//   7 gemm_wmma_async        rung 6 fed by a multi-stage cp.async pipeline, dynamic shared memory
// Launch (all rungs): 1-D blocks, grid (ceil(N / BN), ceil(M / BM)). Threads per block and
// shared memory are given at each kernel and in kernels/ladder_catalog.toml.
// Rungs 1-5 use static shared memory <= 48 KB and no warp-level primitives, so the CPU
// simulator runs them; rungs 6-7 (tensor cores, cp.async) compile only for the GPU.
// Indices are int: M * K, K * N and M * N must stay below 2^31.

#include <cuda_fp16.h>
#include <cuda_bf16.h>

// Rungs 6-7 need <mma.h> (WMMA), whose crt/mma.h part some NVRTC header sets lack: define
// LADDER_CUDA_CORES_ONLY to compile rungs 1-5 without it.
#if !defined(LADDER_CUDA_CORES_ONLY)
#define LADDER_TENSOR_CORES 1
#include <mma.h>
#endif
using ladder_float4 = float4;

// The scalar (alpha, beta) and accumulator type for an element type: half precisions
// accumulate in float, as production GEMMs do.
template <typename T> struct ladder_scalar { using type = T; };
template <> struct ladder_scalar<__half> { using type = float; };
template <> struct ladder_scalar<__nv_bfloat16> { using type = float; };
template <typename T> using scalar_t = typename ladder_scalar<T>::type;

// Write one element of C = alpha * acc + beta * C; C is read only when beta != 0.
template <typename T, typename S>
__device__ __forceinline__ void store_scaled(T *C, int index, S acc, S alpha, S beta)
{
    S out = alpha * acc;
    if (beta != S(0))
        out += beta * S(C[index]);
    C[index] = T(out);
}

// ---------------------------------------------------------------------------------------
// Rung 1: 1-D register blocking. A block of BM * BN / TM threads owns a BM x BN tile of C;
// thread t owns column t % BN, rows (t / BN) * TM .. + TM - 1, so every B value read from
// shared memory is reused TM times from a register. Loads are guarded and zero-filled, so
// every shape is correct.
// Launch: grid (ceil(N / BN), ceil(M / BM)), block BM * BN / TM, static shared (BM + BN) * BK * sizeof(T).
// ---------------------------------------------------------------------------------------
template <typename T, int BM, int BN, int BK, int TM>
__global__ void sgemm_1d_blocktiling(int M, int N, int K, scalar_t<T> alpha, const T *A, const T *B,
                                     scalar_t<T> beta, T *C)
{
    using S = scalar_t<T>;
    static_assert(BM % TM == 0, "BM must be a multiple of TM");
    constexpr int THREADS = BM * BN / TM;
    __shared__ T As[BM][BK];
    __shared__ T Bs[BK][BN];

    const int tid = threadIdx.x;
    const int tcol = tid % BN, trow = tid / BN;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    S acc[TM];
    for (int m = 0; m < TM; ++m)
        acc[m] = S(0);

    for (int k0 = 0; k0 < K; k0 += BK)
    {
        for (int i = tid; i < BM * BK; i += THREADS)
        {
            int r = i / BK, c = i % BK;
            As[r][c] = (row0 + r < M && k0 + c < K) ? A[(row0 + r) * K + k0 + c] : T(0.0f);
        }
        for (int i = tid; i < BK * BN; i += THREADS)
        {
            int r = i / BN, c = i % BN;
            Bs[r][c] = (k0 + r < K && col0 + c < N) ? B[(k0 + r) * N + col0 + c] : T(0.0f);
        }
        __syncthreads();
        for (int k = 0; k < BK; ++k)
        {
            S b = S(Bs[k][tcol]);
#pragma unroll
            for (int m = 0; m < TM; ++m)
                acc[m] += S(As[trow * TM + m][k]) * b;
        }
        __syncthreads();
    }

    const int col = col0 + tcol;
    for (int m = 0; m < TM; ++m)
    {
        int row = row0 + trow * TM + m;
        if (row < M && col < N)
            store_scaled(C, row * N + col, acc[m], alpha, beta);
    }
}

// ---------------------------------------------------------------------------------------
// Rung 2: 2-D register blocking. (BM / TM) * (BN / TN) threads; each owns a TM x TN tile of
// C and per k reads TM values of A and TN of B into registers for TM * TN products: the
// arithmetic intensity per shared load grows from ~1 to TM * TN / (TM + TN).
// Launch: grid (ceil(N / BN), ceil(M / BM)), block (BM / TM) * (BN / TN),
// static shared (BM + BN) * BK * sizeof(T). Every shape.
// ---------------------------------------------------------------------------------------
template <typename T, int BM, int BN, int BK, int TM, int TN>
__global__ void sgemm_2d_blocktiling(int M, int N, int K, scalar_t<T> alpha, const T *A, const T *B,
                                     scalar_t<T> beta, T *C)
{
    using S = scalar_t<T>;
    static_assert(BM % TM == 0 && BN % TN == 0, "BM, BN must be multiples of TM, TN");
    constexpr int THREADS = (BM / TM) * (BN / TN);
    __shared__ T As[BM][BK];
    __shared__ T Bs[BK][BN];

    const int tid = threadIdx.x;
    const int tcol = tid % (BN / TN), trow = tid / (BN / TN);
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    S acc[TM][TN];
    for (int m = 0; m < TM; ++m)
        for (int n = 0; n < TN; ++n)
            acc[m][n] = S(0);
    S regM[TM], regN[TN];

    for (int k0 = 0; k0 < K; k0 += BK)
    {
        for (int i = tid; i < BM * BK; i += THREADS)
        {
            int r = i / BK, c = i % BK;
            As[r][c] = (row0 + r < M && k0 + c < K) ? A[(row0 + r) * K + k0 + c] : T(0.0f);
        }
        for (int i = tid; i < BK * BN; i += THREADS)
        {
            int r = i / BN, c = i % BN;
            Bs[r][c] = (k0 + r < K && col0 + c < N) ? B[(k0 + r) * N + col0 + c] : T(0.0f);
        }
        __syncthreads();
        for (int k = 0; k < BK; ++k)
        {
#pragma unroll
            for (int m = 0; m < TM; ++m)
                regM[m] = S(As[trow * TM + m][k]);
#pragma unroll
            for (int n = 0; n < TN; ++n)
                regN[n] = S(Bs[k][tcol * TN + n]);
#pragma unroll
            for (int m = 0; m < TM; ++m)
#pragma unroll
                for (int n = 0; n < TN; ++n)
                    acc[m][n] += regM[m] * regN[n];
        }
        __syncthreads();
    }

    for (int m = 0; m < TM; ++m)
    {
        int row = row0 + trow * TM + m;
        for (int n = 0; n < TN; ++n)
        {
            int col = col0 + tcol * TN + n;
            if (row < M && col < N)
                store_scaled(C, row * N + col, acc[m][n], alpha, beta);
        }
    }
}

// ---------------------------------------------------------------------------------------
// float32 helpers for rungs 3-5: 128-bit global access with a scalar fallback at the edges.
// `vec` says the matrix can be read four at a time: its width (the row pitch) is a multiple
// of 4 and its base pointer 16-byte aligned; it is uniform over the launch. A group of four
// that is in bounds takes one 128-bit access, any other group is read element by element and
// zero-filled past the edges. So these rungs are correct on every shape, and fast where
// K % 4 == 0 (A) and N % 4 == 0 (B, C).
// ---------------------------------------------------------------------------------------
__device__ __forceinline__ bool aligned16(const void *p)
{
    return (reinterpret_cast<unsigned long long>(p) & 15ull) == 0;
}

__device__ __forceinline__ ladder_float4 load4(const float *X, int rows, int cols, int r, int c, bool vec)
{
    if (vec && r < rows && c + 3 < cols)
        return *reinterpret_cast<const ladder_float4 *>(X + r * cols + c);
    ladder_float4 v;
    const bool in_row = r < rows;
    v.x = (in_row && c + 0 < cols) ? X[r * cols + c + 0] : 0.0f;
    v.y = (in_row && c + 1 < cols) ? X[r * cols + c + 1] : 0.0f;
    v.z = (in_row && c + 2 < cols) ? X[r * cols + c + 2] : 0.0f;
    v.w = (in_row && c + 3 < cols) ? X[r * cols + c + 3] : 0.0f;
    return v;
}

// C[r][c .. c+3] = alpha * acc + beta * C (C read only when beta != 0), guarded.
__device__ __forceinline__ void store4(float *C, int rows, int cols, int r, int c, bool vec, ladder_float4 acc,
                                       float alpha, float beta)
{
    if (r >= rows)
        return;
    if (vec && c + 3 < cols)
    {
        ladder_float4 *p = reinterpret_cast<ladder_float4 *>(C + r * cols + c);
        ladder_float4 out;
        out.x = alpha * acc.x;
        out.y = alpha * acc.y;
        out.z = alpha * acc.z;
        out.w = alpha * acc.w;
        if (beta != 0.0f)
        {
            ladder_float4 old = *p;
            out.x += beta * old.x;
            out.y += beta * old.y;
            out.z += beta * old.z;
            out.w += beta * old.w;
        }
        *p = out;
        return;
    }
    if (c + 0 < cols)
        store_scaled(C, r * cols + c + 0, acc.x, alpha, beta);
    if (c + 1 < cols)
        store_scaled(C, r * cols + c + 1, acc.y, alpha, beta);
    if (c + 2 < cols)
        store_scaled(C, r * cols + c + 2, acc.z, alpha, beta);
    if (c + 3 < cols)
        store_scaled(C, r * cols + c + 3, acc.w, alpha, beta);
}

// ---------------------------------------------------------------------------------------
// Rung 3: vectorized loads. As rung 2 (float32), plus: A and B are fetched with 128-bit
// loads, A's tile is stored transposed (As[k][m]) so a thread's TM values of A for one k are
// contiguous and read from shared memory as float4, like its TN values of B; C is written
// with 128-bit stores. Vector path where K % 4 == 0 (A) and N % 4 == 0 (B, C) with 16-byte
// aligned pointers, scalar zero-filled fallback elsewhere: every shape is correct.
// Launch: grid (ceil(N / BN), ceil(M / BM)), block (BM / TM) * (BN / TN),
// static shared (BM + BN) * BK * 4 bytes.
// ---------------------------------------------------------------------------------------
template <int BM, int BN, int BK, int TM, int TN>
__global__ void sgemm_vectorized(int M, int N, int K, float alpha, const float *A, const float *B, float beta,
                                 float *C)
{
    static_assert(BM % TM == 0 && BN % TN == 0, "BM, BN must be multiples of TM, TN");
    static_assert(TM % 4 == 0 && TN % 4 == 0 && BK % 4 == 0 && BN % 4 == 0 && BM % 4 == 0,
                  "TM, TN, BK, BM, BN must be multiples of 4 (float4 groups)");
    constexpr int THREADS = (BM / TM) * (BN / TN);
    alignas(16) __shared__ float As[BK][BM];   // transposed: As[k][m] = A[row0 + m][k0 + k]
    alignas(16) __shared__ float Bs[BK][BN];

    const int tid = threadIdx.x;
    const int tcol = tid % (BN / TN), trow = tid / (BN / TN);
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const bool vecA = K % 4 == 0 && aligned16(A);
    const bool vecB = N % 4 == 0 && aligned16(B);
    const bool vecC = N % 4 == 0 && aligned16(C);

    float acc[TM][TN] = {};
    float regM[TM], regN[TN];

    for (int k0 = 0; k0 < K; k0 += BK)
    {
        for (int i = tid; i < BM * BK / 4; i += THREADS)
        {
            int r = i / (BK / 4), c = (i % (BK / 4)) * 4;
            ladder_float4 v = load4(A, M, K, row0 + r, k0 + c, vecA);
            As[c + 0][r] = v.x;
            As[c + 1][r] = v.y;
            As[c + 2][r] = v.z;
            As[c + 3][r] = v.w;
        }
        for (int i = tid; i < BK * BN / 4; i += THREADS)
        {
            int r = i / (BN / 4), c = (i % (BN / 4)) * 4;
            *reinterpret_cast<ladder_float4 *>(&Bs[r][c]) = load4(B, K, N, k0 + r, col0 + c, vecB);
        }
        __syncthreads();
        for (int k = 0; k < BK; ++k)
        {
#pragma unroll
            for (int m = 0; m < TM; m += 4)
            {
                ladder_float4 v = *reinterpret_cast<const ladder_float4 *>(&As[k][trow * TM + m]);
                regM[m] = v.x, regM[m + 1] = v.y, regM[m + 2] = v.z, regM[m + 3] = v.w;
            }
#pragma unroll
            for (int n = 0; n < TN; n += 4)
            {
                ladder_float4 v = *reinterpret_cast<const ladder_float4 *>(&Bs[k][tcol * TN + n]);
                regN[n] = v.x, regN[n + 1] = v.y, regN[n + 2] = v.z, regN[n + 3] = v.w;
            }
#pragma unroll
            for (int m = 0; m < TM; ++m)
#pragma unroll
                for (int n = 0; n < TN; ++n)
                    acc[m][n] += regM[m] * regN[n];
        }
        __syncthreads();
    }

#pragma unroll
    for (int m = 0; m < TM; ++m)
#pragma unroll
        for (int n = 0; n < TN; n += 4)
            store4(C, M, N, row0 + trow * TM + m, col0 + tcol * TN + n, vecC,
                   ladder_float4{acc[m][n], acc[m][n + 1], acc[m][n + 2], acc[m][n + 3]}, alpha, beta);
}

// ---------------------------------------------------------------------------------------
// Rung 4: double-buffered shared memory. As rung 3, with two shared buffers per operand:
// while the block computes on buffer t % 2, each thread already holds tile t + 1 in
// registers (its global loads in flight during the math) and stores it into the other buffer
// afterwards. One barrier per tile suffices (see the loop). Tiles are loaded as whole
// float4 groups per thread, so
// BM * BK / 4 and BK * BN / 4 must be multiples of the thread count (static_assert).
// Launch: grid (ceil(N / BN), ceil(M / BM)), block (BM / TM) * (BN / TN),
// static shared 2 * (BM + BN) * BK * 4 bytes. Every shape (rung 3's fallback).
// ---------------------------------------------------------------------------------------
template <int BM, int BN, int BK, int TM, int TN>
__global__ void sgemm_double_buffered(int M, int N, int K, float alpha, const float *A, const float *B,
                                      float beta, float *C)
{
    static_assert(BM % TM == 0 && BN % TN == 0, "BM, BN must be multiples of TM, TN");
    static_assert(TM % 4 == 0 && TN % 4 == 0 && BK % 4 == 0 && BN % 4 == 0 && BM % 4 == 0,
                  "TM, TN, BK, BM, BN must be multiples of 4 (float4 groups)");
    constexpr int THREADS = (BM / TM) * (BN / TN);
    static_assert((BM * BK / 4) % THREADS == 0 && (BK * BN / 4) % THREADS == 0,
                  "every thread loads the same number of float4 groups of A and of B");
    constexpr int LOADS_A = BM * BK / 4 / THREADS, LOADS_B = BK * BN / 4 / THREADS;
    alignas(16) __shared__ float As[2][BK][BM];
    alignas(16) __shared__ float Bs[2][BK][BN];

    const int tid = threadIdx.x;
    const int tcol = tid % (BN / TN), trow = tid / (BN / TN);
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const bool vecA = K % 4 == 0 && aligned16(A);
    const bool vecB = N % 4 == 0 && aligned16(B);
    const bool vecC = N % 4 == 0 && aligned16(C);

    ladder_float4 nextA[LOADS_A], nextB[LOADS_B];
    auto fetch = [&](int k0) {
#pragma unroll
        for (int l = 0; l < LOADS_A; ++l)
        {
            int i = tid + l * THREADS, r = i / (BK / 4), c = (i % (BK / 4)) * 4;
            nextA[l] = load4(A, M, K, row0 + r, k0 + c, vecA);
        }
#pragma unroll
        for (int l = 0; l < LOADS_B; ++l)
        {
            int i = tid + l * THREADS, r = i / (BN / 4), c = (i % (BN / 4)) * 4;
            nextB[l] = load4(B, K, N, k0 + r, col0 + c, vecB);
        }
    };
    auto deposit = [&](int buf) {
#pragma unroll
        for (int l = 0; l < LOADS_A; ++l)
        {
            int i = tid + l * THREADS, r = i / (BK / 4), c = (i % (BK / 4)) * 4;
            As[buf][c + 0][r] = nextA[l].x;
            As[buf][c + 1][r] = nextA[l].y;
            As[buf][c + 2][r] = nextA[l].z;
            As[buf][c + 3][r] = nextA[l].w;
        }
#pragma unroll
        for (int l = 0; l < LOADS_B; ++l)
        {
            int i = tid + l * THREADS, r = i / (BN / 4), c = (i % (BN / 4)) * 4;
            *reinterpret_cast<ladder_float4 *>(&Bs[buf][r][c]) = nextB[l];
        }
    };

    float acc[TM][TN] = {};
    float regM[TM], regN[TN];
    const int tiles = (K + BK - 1) / BK;
    if (tiles > 0)
    {
        fetch(0);
        deposit(0);
    }
    __syncthreads();
    for (int t = 0; t < tiles; ++t)
    {
        const int cur = t & 1;
        if (t + 1 < tiles)
            fetch((t + 1) * BK);
        for (int k = 0; k < BK; ++k)
        {
#pragma unroll
            for (int m = 0; m < TM; m += 4)
            {
                ladder_float4 v = *reinterpret_cast<const ladder_float4 *>(&As[cur][k][trow * TM + m]);
                regM[m] = v.x, regM[m + 1] = v.y, regM[m + 2] = v.z, regM[m + 3] = v.w;
            }
#pragma unroll
            for (int n = 0; n < TN; n += 4)
            {
                ladder_float4 v = *reinterpret_cast<const ladder_float4 *>(&Bs[cur][k][tcol * TN + n]);
                regN[n] = v.x, regN[n + 1] = v.y, regN[n + 2] = v.z, regN[n + 3] = v.w;
            }
#pragma unroll
            for (int m = 0; m < TM; ++m)
#pragma unroll
                for (int n = 0; n < TN; ++n)
                    acc[m][n] += regM[m] * regN[n];
        }
        if (t + 1 < tiles)
            deposit(cur ^ 1);
        // The one barrier per tile: orders this tile's reads of buffer `cur` before iteration
        // t + 1 writes it again (WAR), and this iteration's writes of buffer `cur ^ 1` before
        // iteration t + 1 reads them (RAW).
        __syncthreads();
    }

#pragma unroll
    for (int m = 0; m < TM; ++m)
#pragma unroll
        for (int n = 0; n < TN; n += 4)
            store4(C, M, N, row0 + trow * TM + m, col0 + tcol * TN + n, vecC,
                   ladder_float4{acc[m][n], acc[m][n + 1], acc[m][n + 2], acc[m][n + 3]}, alpha, beta);
}

// ---------------------------------------------------------------------------------------
// Rung 5: warptiling. The block tile BM x BN is split among warps (WM x WN each); a warp
// sweeps its tile in WMITER x WNITER sub-tiles of WSUBM x WSUBN, and a thread owns a TM x TN
// piece of each sub-tile. Neighbouring lanes read neighbouring shared addresses (fewer bank
// conflicts, broadcast of A across the lanes of a row), and a thread's registers are reused
// over WMITER * WNITER sub-tiles. Keeps rung 4's double buffer and fallback edges. Uses only
// threadIdx.x / 32 as the warp index: no warp-level primitives.
// Launch: grid (ceil(N / BN), ceil(M / BM)), block THREADS,
// static shared 2 * (BM + BN) * BK * 4 bytes. Every shape.
// ---------------------------------------------------------------------------------------
template <int BM, int BN, int BK, int WM, int WN, int WNITER, int TM, int TN, int THREADS>
__global__ void __launch_bounds__(THREADS)
sgemm_warptiled(int M, int N, int K, float alpha, const float *A, const float *B, float beta, float *C)
{
    constexpr int WARP = 32;
    static_assert((BM / WM) * (BN / WN) * WARP == THREADS, "one warp per WM x WN warp tile");
    constexpr int WMITER = (WM * WN) / (WARP * TM * TN * WNITER);
    static_assert(WMITER >= 1 && WMITER * WARP * TM * TN * WNITER == WM * WN, "warp tile must split evenly");
    constexpr int WSUBM = WM / WMITER, WSUBN = WN / WNITER;
    static_assert(WSUBN % TN == 0 && (WSUBM / TM) * (WSUBN / TN) == WARP, "a warp's 32 lanes cover a sub-tile");
    static_assert(TM % 4 == 0 && TN % 4 == 0 && BK % 4 == 0 && BN % 4 == 0 && BM % 4 == 0,
                  "TM, TN, BK, BM, BN must be multiples of 4 (float4 groups)");
    static_assert((BM * BK / 4) % THREADS == 0 && (BK * BN / 4) % THREADS == 0,
                  "every thread loads the same number of float4 groups of A and of B");
    constexpr int LOADS_A = BM * BK / 4 / THREADS, LOADS_B = BK * BN / 4 / THREADS;
    alignas(16) __shared__ float As[2][BK][BM];
    alignas(16) __shared__ float Bs[2][BK][BN];

    const int tid = threadIdx.x;
    const int warp = tid / WARP, lane = tid % WARP;
    const int warpRow = warp / (BN / WN), warpCol = warp % (BN / WN);
    const int laneRow = lane / (WSUBN / TN), laneCol = lane % (WSUBN / TN);
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const bool vecA = K % 4 == 0 && aligned16(A);
    const bool vecB = N % 4 == 0 && aligned16(B);
    const bool vecC = N % 4 == 0 && aligned16(C);

    ladder_float4 nextA[LOADS_A], nextB[LOADS_B];
    auto fetch = [&](int k0) {
#pragma unroll
        for (int l = 0; l < LOADS_A; ++l)
        {
            int i = tid + l * THREADS, r = i / (BK / 4), c = (i % (BK / 4)) * 4;
            nextA[l] = load4(A, M, K, row0 + r, k0 + c, vecA);
        }
#pragma unroll
        for (int l = 0; l < LOADS_B; ++l)
        {
            int i = tid + l * THREADS, r = i / (BN / 4), c = (i % (BN / 4)) * 4;
            nextB[l] = load4(B, K, N, k0 + r, col0 + c, vecB);
        }
    };
    auto deposit = [&](int buf) {
#pragma unroll
        for (int l = 0; l < LOADS_A; ++l)
        {
            int i = tid + l * THREADS, r = i / (BK / 4), c = (i % (BK / 4)) * 4;
            As[buf][c + 0][r] = nextA[l].x;
            As[buf][c + 1][r] = nextA[l].y;
            As[buf][c + 2][r] = nextA[l].z;
            As[buf][c + 3][r] = nextA[l].w;
        }
#pragma unroll
        for (int l = 0; l < LOADS_B; ++l)
        {
            int i = tid + l * THREADS, r = i / (BN / 4), c = (i % (BN / 4)) * 4;
            *reinterpret_cast<ladder_float4 *>(&Bs[buf][r][c]) = nextB[l];
        }
    };

    float acc[WMITER * TM][WNITER * TN] = {};
    float regM[WMITER * TM], regN[WNITER * TN];
    const int tiles = (K + BK - 1) / BK;
    if (tiles > 0)
    {
        fetch(0);
        deposit(0);
    }
    __syncthreads();
    for (int t = 0; t < tiles; ++t)
    {
        const int cur = t & 1;
        if (t + 1 < tiles)
            fetch((t + 1) * BK);
#pragma unroll
        for (int k = 0; k < BK; ++k)
        {
#pragma unroll
            for (int wm = 0; wm < WMITER; ++wm)
#pragma unroll
                for (int m = 0; m < TM; m += 4)
                {
                    ladder_float4 v = *reinterpret_cast<const ladder_float4 *>(
                        &As[cur][k][warpRow * WM + wm * WSUBM + laneRow * TM + m]);
                    float *d = &regM[wm * TM + m];
                    d[0] = v.x, d[1] = v.y, d[2] = v.z, d[3] = v.w;
                }
#pragma unroll
            for (int wn = 0; wn < WNITER; ++wn)
#pragma unroll
                for (int n = 0; n < TN; n += 4)
                {
                    ladder_float4 v = *reinterpret_cast<const ladder_float4 *>(
                        &Bs[cur][k][warpCol * WN + wn * WSUBN + laneCol * TN + n]);
                    float *d = &regN[wn * TN + n];
                    d[0] = v.x, d[1] = v.y, d[2] = v.z, d[3] = v.w;
                }
#pragma unroll
            for (int m = 0; m < WMITER * TM; ++m)
#pragma unroll
                for (int n = 0; n < WNITER * TN; ++n)
                    acc[m][n] += regM[m] * regN[n];
        }
        if (t + 1 < tiles)
            deposit(cur ^ 1);
        __syncthreads();   // WAR on buffer `cur`, RAW on buffer `cur ^ 1`, as in rung 4
    }

#pragma unroll
    for (int wm = 0; wm < WMITER; ++wm)
#pragma unroll
        for (int m = 0; m < TM; ++m)
        {
            const int row = row0 + warpRow * WM + wm * WSUBM + laneRow * TM + m;
#pragma unroll
            for (int wn = 0; wn < WNITER; ++wn)
#pragma unroll
                for (int n = 0; n < TN; n += 4)
                {
                    const int col = col0 + warpCol * WN + wn * WSUBN + laneCol * TN + n;
                    const float *a = &acc[wm * TM + m][wn * TN + n];
                    store4(C, M, N, row, col, vecC, ladder_float4{a[0], a[1], a[2], a[3]}, alpha, beta);
                }
        }
}


// ---------------------------------------------------------------------------------------
// Rung 5b: rung 5 tuned for occupancy. Three changes, each a template parameter or
// uniform branch, the geometry and fallback edges unchanged:
//  - __launch_bounds__(THREADS, MINBLOCKS): ptxas keeps registers low enough for MINBLOCKS
//    blocks per SM, so one block's barrier and deposit overlap another block's math;
//  - BUFS = 2: rung 5's double buffer (one barrier per tile); BUFS = 1: one shared buffer,
//    the next tile prefetched into registers during the math, deposited between a barrier
//    pair (half the shared memory);
//  - tiles wholly inside A or B (and vector-aligned) are fetched with plain 128-bit loads;
//    edge tiles take rung 3's guarded, zero-filled load4;
//  - APAD pads each k-row of the transposed A tile by APAD floats (0 or 4, keeping float4
//    alignment): the four scalar stores that transpose a float4 of A hit fewer banks twice
//    (BK = 8: none; BK = 16: 2-way instead of 4-way);
//  - EARLY (BUFS = 2 only): the next tile is deposited before the last k step's products
//    rather than after them, so its shared stores overlap those products.
// With TM = TN = 4 the lanes of a warp read 8 and 4 neighbouring float4 groups of A and B
// per k: no shared bank conflicts. No warp-level primitives. H200, 4096^3: fastest at one block
// per SM; 128x256x16, warp 64x64, 4x4, BUFS 1, APAD 4 reaches 92.8% of cuBLAS SGEMM (catalog).
// Launch: grid (ceil(N / BN), ceil(M / BM)), block THREADS,
// static shared BUFS * (BM + APAD + BN) * BK * 4 bytes. Every shape.
// ---------------------------------------------------------------------------------------
template <int BM, int BN, int BK, int WM, int WN, int WNITER, int TM, int TN, int THREADS, int MINBLOCKS, int BUFS,
          int APAD, int EARLY>
__global__ void __launch_bounds__(THREADS, MINBLOCKS)
sgemm_warptiled_occ(int M, int N, int K, float alpha, const float *A, const float *B, float beta, float *C)
{
    constexpr int WARP = 32;
    static_assert(BUFS == 1 || BUFS == 2, "one or two shared buffers");
    static_assert(APAD % 4 == 0 && APAD >= 0, "the padding keeps the A tile's rows 16-byte aligned");
    static_assert(EARLY == 0 || BUFS == 2, "an early deposit needs a second buffer");
    static_assert((BM / WM) * (BN / WN) * WARP == THREADS, "one warp per WM x WN warp tile");
    constexpr int WMITER = (WM * WN) / (WARP * TM * TN * WNITER);
    static_assert(WMITER >= 1 && WMITER * WARP * TM * TN * WNITER == WM * WN, "warp tile must split evenly");
    constexpr int WSUBM = WM / WMITER, WSUBN = WN / WNITER;
    static_assert(WSUBN % TN == 0 && (WSUBM / TM) * (WSUBN / TN) == WARP, "a warp's 32 lanes cover a sub-tile");
    static_assert(TM % 4 == 0 && TN % 4 == 0 && BK % 4 == 0 && BN % 4 == 0 && BM % 4 == 0,
                  "TM, TN, BK, BM, BN must be multiples of 4 (float4 groups)");
    static_assert((BM * BK / 4) % THREADS == 0 && (BK * BN / 4) % THREADS == 0,
                  "every thread loads the same number of float4 groups of A and of B");
    static_assert(BUFS * (BM + APAD + BN) * BK * 4 <= 48 * 1024, "static shared memory over 48 KB");
    constexpr int LOADS_A = BM * BK / 4 / THREADS, LOADS_B = BK * BN / 4 / THREADS;
    alignas(16) __shared__ float As[BUFS][BK][BM + APAD];
    alignas(16) __shared__ float Bs[BUFS][BK][BN];

    const int tid = threadIdx.x;
    const int warp = tid / WARP, lane = tid % WARP;
    const int warpRow = warp / (BN / WN), warpCol = warp % (BN / WN);
    const int laneRow = lane / (WSUBN / TN), laneCol = lane % (WSUBN / TN);
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const bool vecA = K % 4 == 0 && aligned16(A);
    const bool vecB = N % 4 == 0 && aligned16(B);
    const bool vecC = N % 4 == 0 && aligned16(C);
    // Block-uniform: this block's rows of A and columns of B are all inside and vector-aligned.
    const bool innerA = vecA && row0 + BM <= M;
    const bool innerB = vecB && col0 + BN <= N;

    ladder_float4 nextA[LOADS_A], nextB[LOADS_B];
    auto fetch = [&](int k0) {
        const bool wholeK = k0 + BK <= K;
        if (innerA && wholeK)
        {
#pragma unroll
            for (int l = 0; l < LOADS_A; ++l)
            {
                int i = tid + l * THREADS, r = i / (BK / 4), c = (i % (BK / 4)) * 4;
                nextA[l] = *reinterpret_cast<const ladder_float4 *>(A + (row0 + r) * K + k0 + c);
            }
        }
        else
        {
#pragma unroll
            for (int l = 0; l < LOADS_A; ++l)
            {
                int i = tid + l * THREADS, r = i / (BK / 4), c = (i % (BK / 4)) * 4;
                nextA[l] = load4(A, M, K, row0 + r, k0 + c, vecA);
            }
        }
        if (innerB && wholeK)
        {
#pragma unroll
            for (int l = 0; l < LOADS_B; ++l)
            {
                int i = tid + l * THREADS, r = i / (BN / 4), c = (i % (BN / 4)) * 4;
                nextB[l] = *reinterpret_cast<const ladder_float4 *>(B + (k0 + r) * N + col0 + c);
            }
        }
        else
        {
#pragma unroll
            for (int l = 0; l < LOADS_B; ++l)
            {
                int i = tid + l * THREADS, r = i / (BN / 4), c = (i % (BN / 4)) * 4;
                nextB[l] = load4(B, K, N, k0 + r, col0 + c, vecB);
            }
        }
    };
    auto deposit = [&](int buf) {
#pragma unroll
        for (int l = 0; l < LOADS_A; ++l)
        {
            int i = tid + l * THREADS, r = i / (BK / 4), c = (i % (BK / 4)) * 4;
            As[buf][c + 0][r] = nextA[l].x;
            As[buf][c + 1][r] = nextA[l].y;
            As[buf][c + 2][r] = nextA[l].z;
            As[buf][c + 3][r] = nextA[l].w;
        }
#pragma unroll
        for (int l = 0; l < LOADS_B; ++l)
        {
            int i = tid + l * THREADS, r = i / (BN / 4), c = (i % (BN / 4)) * 4;
            *reinterpret_cast<ladder_float4 *>(&Bs[buf][r][c]) = nextB[l];
        }
    };

    float acc[WMITER * TM][WNITER * TN] = {};
    float regM[WMITER * TM], regN[WNITER * TN];
    const int tiles = (K + BK - 1) / BK;
    if (tiles > 0)
    {
        fetch(0);
        deposit(0);
    }
    __syncthreads();
    for (int t = 0; t < tiles; ++t)
    {
        const int cur = BUFS == 2 ? (t & 1) : 0;
        if (t + 1 < tiles)
            fetch((t + 1) * BK);
#pragma unroll
        for (int k = 0; k < BK; ++k)
        {
#pragma unroll
            for (int wm = 0; wm < WMITER; ++wm)
#pragma unroll
                for (int m = 0; m < TM; m += 4)
                {
                    ladder_float4 v = *reinterpret_cast<const ladder_float4 *>(
                        &As[cur][k][warpRow * WM + wm * WSUBM + laneRow * TM + m]);
                    float *d = &regM[wm * TM + m];
                    d[0] = v.x, d[1] = v.y, d[2] = v.z, d[3] = v.w;
                }
#pragma unroll
            for (int wn = 0; wn < WNITER; ++wn)
#pragma unroll
                for (int n = 0; n < TN; n += 4)
                {
                    ladder_float4 v = *reinterpret_cast<const ladder_float4 *>(
                        &Bs[cur][k][warpCol * WN + wn * WSUBN + laneCol * TN + n]);
                    float *d = &regN[wn * TN + n];
                    d[0] = v.x, d[1] = v.y, d[2] = v.z, d[3] = v.w;
                }
            // Buffer cur ^ 1 is free since the last barrier: its deposit may go before the
            // last products of this tile (block-uniform condition, k known at compile time).
            if (EARLY && k == BK - 1 && t + 1 < tiles)
                deposit(cur ^ 1);
#pragma unroll
            for (int m = 0; m < WMITER * TM; ++m)
#pragma unroll
                for (int n = 0; n < WNITER * TN; ++n)
                    acc[m][n] += regM[m] * regN[n];
        }
        if (!EARLY && t + 1 < tiles)   // block-uniform
        {
            if (BUFS == 1)
                __syncthreads();   // WAR: everyone is done reading the one buffer
            deposit(BUFS == 2 ? cur ^ 1 : 0);
        }
        __syncthreads();   // RAW on the buffer just deposited (and, BUFS == 2, WAR on `cur`)
    }

#pragma unroll
    for (int wm = 0; wm < WMITER; ++wm)
#pragma unroll
        for (int m = 0; m < TM; ++m)
        {
            const int row = row0 + warpRow * WM + wm * WSUBM + laneRow * TM + m;
#pragma unroll
            for (int wn = 0; wn < WNITER; ++wn)
#pragma unroll
                for (int n = 0; n < TN; n += 4)
                {
                    const int col = col0 + warpCol * WN + wn * WSUBN + laneCol * TN + n;
                    const float *a = &acc[wm * TM + m][wn * TN + n];
                    store4(C, M, N, row, col, vecC, ladder_float4{a[0], a[1], a[2], a[3]}, alpha, beta);
                }
        }
}

#if defined(LADDER_TENSOR_CORES)
// ---------------------------------------------------------------------------------------
// Rungs 6-7: tensor cores (GPU only). T is __half or __nv_bfloat16; alpha, beta and the
// accumulation are float32. Each warp owns a WM x WN tile of C as (WM / 16) x (WN / 16) WMMA
// 16x16x16 accumulator fragments. Shared rows are padded by 8 elements (16 bytes) to spread
// the fragment loads over banks while keeping every fragment pointer 32-byte aligned.
// Edges: tiles are zero-filled past M, N, K; the epilogue goes through a per-warp float
// scratch tile in shared memory and writes C element by element with guards.
// ---------------------------------------------------------------------------------------
namespace ladder_tc
{
using namespace nvcuda;
constexpr int PAD = 8;
constexpr int VEC = 8;   // elements of T per 16-byte access

// The 8 consecutive elements X[r][c .. c+7] (row-major rows x cols) as 16 bytes, zero past the
// edges; one 16-byte load when `vec` (cols % 8 == 0, 16-byte aligned base) and in bounds.
template <typename T>
__device__ __forceinline__ uint4 load8(const T *X, int rows, int cols, int r, int c, bool vec)
{
    if (vec && r < rows && c + VEC - 1 < cols)
        return *reinterpret_cast<const uint4 *>(X + r * cols + c);
    unsigned short bits[VEC];
#pragma unroll
    for (int j = 0; j < VEC; ++j)
    {
        T v = (r < rows && c + j < cols) ? X[r * cols + c + j] : T(0.0f);
        bits[j] = *reinterpret_cast<const unsigned short *>(&v);
    }
    return make_uint4(bits[0] | (unsigned(bits[1]) << 16), bits[2] | (unsigned(bits[3]) << 16),
                      bits[4] | (unsigned(bits[5]) << 16), bits[6] | (unsigned(bits[7]) << 16));
}

// The guarded epilogue of one warp: each accumulator fragment goes through `scratch`
// (16 x 16 floats of this warp) to C = alpha * acc + beta * C.
template <typename T, int FM, int FN>
__device__ __forceinline__ void store_fragments(wmma::fragment<wmma::accumulator, 16, 16, 16, float> (&acc)[FM][FN],
                                                float *scratch, T *C, int M, int N, int wrow0, int wcol0,
                                                float alpha, float beta, int lane)
{
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j)
        {
            wmma::store_matrix_sync(scratch, acc[i][j], 16, wmma::mem_row_major);
            __syncwarp();
            for (int e = lane; e < 256; e += 32)
            {
                int row = wrow0 + i * 16 + e / 16, col = wcol0 + j * 16 + e % 16;
                if (row < M && col < N)
                    store_scaled(C, row * N + col, scratch[e], alpha, beta);
            }
            __syncwarp();
        }
}
}  // namespace ladder_tc

// ---------------------------------------------------------------------------------------
// Rung 6: WMMA tensor cores with rung 4's register double buffer. (BM / WM) * (BN / WN)
// warps. 16-byte loads where K % 8 == 0 (A) and N % 8 == 0 (B), element fallback elsewhere:
// every shape is correct.
// Launch: grid (ceil(N / BN), ceil(M / BM)), block 32 * (BM / WM) * (BN / WN),
// static shared 2 * (BM * (BK + 8) + BK * (BN + 8)) * sizeof(T) bytes (<= 48 KB).
// ---------------------------------------------------------------------------------------
template <typename T, int BM, int BN, int BK, int WM, int WN>
__global__ void __launch_bounds__(32 * (BM / WM) * (BN / WN))
gemm_wmma(int M, int N, int K, float alpha, const T *A, const T *B, float beta, T *C)
{
    using namespace nvcuda;
    using namespace ladder_tc;
    constexpr int WARPS = (BM / WM) * (BN / WN), THREADS = 32 * WARPS;
    constexpr int FM = WM / 16, FN = WN / 16;
    constexpr int LDA = BK + PAD, LDB = BN + PAD;
    static_assert(WM % 16 == 0 && WN % 16 == 0 && BK % 16 == 0, "WMMA tiles are 16 x 16 x 16");
    static_assert((BM * BK / VEC) % THREADS == 0 && (BK * BN / VEC) % THREADS == 0,
                  "every thread copies the same number of 16-byte groups");
    static_assert(2 * (BM * LDA + BK * LDB) * 2 <= 48 * 1024, "static shared memory over 48 KB");
    static_assert(2 * (BM * LDA + BK * LDB) * 2 >= WARPS * 256 * 4, "epilogue scratch must fit");
    constexpr int LOADS_A = BM * BK / VEC / THREADS, LOADS_B = BK * BN / VEC / THREADS;
    alignas(32) __shared__ T smem[2 * (BM * LDA + BK * LDB)];
    auto As = [&](int buf) { return smem + buf * (BM * LDA); };
    auto Bs = [&](int buf) { return smem + 2 * BM * LDA + buf * (BK * LDB); };

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int warpRow = warp / (BN / WN), warpCol = warp % (BN / WN);
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const bool vecA = K % VEC == 0 && aligned16(A);
    const bool vecB = N % VEC == 0 && aligned16(B);

    uint4 nextA[LOADS_A], nextB[LOADS_B];
    auto fetch = [&](int k0) {
#pragma unroll
        for (int l = 0; l < LOADS_A; ++l)
        {
            int i = tid + l * THREADS, r = i / (BK / VEC), c = (i % (BK / VEC)) * VEC;
            nextA[l] = load8(A, M, K, row0 + r, k0 + c, vecA);
        }
#pragma unroll
        for (int l = 0; l < LOADS_B; ++l)
        {
            int i = tid + l * THREADS, r = i / (BN / VEC), c = (i % (BN / VEC)) * VEC;
            nextB[l] = load8(B, K, N, k0 + r, col0 + c, vecB);
        }
    };
    auto deposit = [&](int buf) {
#pragma unroll
        for (int l = 0; l < LOADS_A; ++l)
        {
            int i = tid + l * THREADS, r = i / (BK / VEC), c = (i % (BK / VEC)) * VEC;
            *reinterpret_cast<uint4 *>(As(buf) + r * LDA + c) = nextA[l];
        }
#pragma unroll
        for (int l = 0; l < LOADS_B; ++l)
        {
            int i = tid + l * THREADS, r = i / (BN / VEC), c = (i % (BN / VEC)) * VEC;
            *reinterpret_cast<uint4 *>(Bs(buf) + r * LDB + c) = nextB[l];
        }
    };

    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[FM][FN];
    for (int i = 0; i < FM; ++i)
        for (int j = 0; j < FN; ++j)
            wmma::fill_fragment(acc[i][j], 0.0f);
    wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa[FM];
    wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fb[FN];

    const int tiles = (K + BK - 1) / BK;
    if (tiles > 0)
    {
        fetch(0);
        deposit(0);
    }
    __syncthreads();
    for (int t = 0; t < tiles; ++t)
    {
        const int cur = t & 1;
        if (t + 1 < tiles)
            fetch((t + 1) * BK);
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16)
        {
#pragma unroll
            for (int i = 0; i < FM; ++i)
                wmma::load_matrix_sync(fa[i], As(cur) + (warpRow * WM + i * 16) * LDA + kk, LDA);
#pragma unroll
            for (int j = 0; j < FN; ++j)
                wmma::load_matrix_sync(fb[j], Bs(cur) + kk * LDB + warpCol * WN + j * 16, LDB);
#pragma unroll
            for (int i = 0; i < FM; ++i)
#pragma unroll
                for (int j = 0; j < FN; ++j)
                    wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
        }
        if (t + 1 < tiles)
            deposit(cur ^ 1);
        __syncthreads();
    }

    // The operand buffers are free after the last barrier: reuse them as epilogue scratch.
    float *scratch = reinterpret_cast<float *>(smem) + warp * 256;
    store_fragments<T, FM, FN>(acc, scratch, C, M, N, row0 + warpRow * WM, col0 + warpCol * WN, alpha, beta,
                               lane);
}

// ---------------------------------------------------------------------------------------
// Rung 7: rung 6 fed by a STAGES-deep cp.async pipeline (global -> shared without passing
// through registers; STAGES - 1 tiles in flight while one is consumed). Out-of-range 16-byte
// groups are zero-filled by cp.async's src-size 0. Claims: K % 8 == 0 and N % 8 == 0 (every
// 16-byte group is all in or all out of bounds) and 16-byte aligned A, B; any M.
// Launch: grid (ceil(N / BN), ceil(M / BM)), block 32 * (BM / WM) * (BN / WN),
// dynamic shared STAGES * (BM * (BK + 8) + BK * (BN + 8)) * sizeof(T) bytes (over 48 KB needs
// cudaFuncAttributeMaxDynamicSharedMemorySize).
// ---------------------------------------------------------------------------------------
namespace ladder_tc
{
__device__ __forceinline__ void cp_async16(void *smem, const void *gmem, bool in_bounds)
{
    unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    int src_bytes = in_bounds ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int PENDING>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING)); }
}  // namespace ladder_tc

// bfloat16's conversions keep more values live than float16's: left to its own choice
// ptxas spills a few bytes at 128x128 (NVRTC 13.0). Asking for one resident block lets it
// take the registers it needs; float16 keeps ptxas's default (minimum 0: no constraint).
template <typename T> struct wmma_async_min_blocks { static constexpr int value = 0; };
template <> struct wmma_async_min_blocks<__nv_bfloat16> { static constexpr int value = 1; };

template <typename T, int BM, int BN, int BK, int WM, int WN, int STAGES>
__global__ void __launch_bounds__(32 * (BM / WM) * (BN / WN), wmma_async_min_blocks<T>::value)
gemm_wmma_async(int M, int N, int K, float alpha, const T *A, const T *B, float beta, T *C)
{
    using namespace nvcuda;
    using namespace ladder_tc;
    constexpr int WARPS = (BM / WM) * (BN / WN), THREADS = 32 * WARPS;
    constexpr int FM = WM / 16, FN = WN / 16;
    constexpr int LDA = BK + PAD, LDB = BN + PAD;
    constexpr int STAGE = BM * LDA + BK * LDB;   // elements of T per stage
    static_assert(STAGES >= 2, "a pipeline needs at least two stages");
    static_assert(WM % 16 == 0 && WN % 16 == 0 && BK % 16 == 0, "WMMA tiles are 16 x 16 x 16");
    static_assert((BM * BK / VEC) % THREADS == 0 && (BK * BN / VEC) % THREADS == 0,
                  "every thread copies the same number of 16-byte groups");
    static_assert(STAGES * STAGE * 2 >= WARPS * 256 * 4, "epilogue scratch must fit");
    constexpr int LOADS_A = BM * BK / VEC / THREADS, LOADS_B = BK * BN / VEC / THREADS;
    extern __shared__ __align__(128) unsigned char ladder_dynamic_smem[];
    T *smem = reinterpret_cast<T *>(ladder_dynamic_smem);

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int warpRow = warp / (BN / WN), warpCol = warp % (BN / WN);
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;

    // Issue the copies of tile `t` into stage t % STAGES.
    auto issue = [&](int t) {
        T *As = smem + (t % STAGES) * STAGE, *Bs = As + BM * LDA;
        const int k0 = t * BK;
#pragma unroll
        for (int l = 0; l < LOADS_A; ++l)
        {
            int i = tid + l * THREADS, r = i / (BK / VEC), c = (i % (BK / VEC)) * VEC;
            bool in = row0 + r < M && k0 + c < K;
            cp_async16(As + r * LDA + c, in ? A + (row0 + r) * K + k0 + c : A, in);
        }
#pragma unroll
        for (int l = 0; l < LOADS_B; ++l)
        {
            int i = tid + l * THREADS, r = i / (BN / VEC), c = (i % (BN / VEC)) * VEC;
            bool in = k0 + r < K && col0 + c < N;
            cp_async16(Bs + r * LDB + c, in ? B + (k0 + r) * N + col0 + c : B, in);
        }
    };

    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[FM][FN];
    for (int i = 0; i < FM; ++i)
        for (int j = 0; j < FN; ++j)
            wmma::fill_fragment(acc[i][j], 0.0f);
    wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa[FM];
    wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fb[FN];

    const int tiles = (K + BK - 1) / BK;
    // Prologue: STAGES - 1 tiles in flight. One commit group per tile, empty past the end, so
    // that "wait until at most STAGES - 2 groups are pending" always means "tile t has landed".
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s)
    {
        if (s < tiles)
            issue(s);
        cp_async_commit();
    }
    for (int t = 0; t < tiles; ++t)
    {
        cp_async_wait<STAGES - 2>();   // this thread's copies of tile t are done ...
        __syncthreads();               // ... and everyone's; stage (t - 1) % STAGES is free again
        if (t + STAGES - 1 < tiles)
            issue(t + STAGES - 1);
        cp_async_commit();
        const T *As = smem + (t % STAGES) * STAGE, *Bs = As + BM * LDA;
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16)
        {
#pragma unroll
            for (int i = 0; i < FM; ++i)
                wmma::load_matrix_sync(fa[i], As + (warpRow * WM + i * 16) * LDA + kk, LDA);
#pragma unroll
            for (int j = 0; j < FN; ++j)
                wmma::load_matrix_sync(fb[j], Bs + kk * LDB + warpCol * WN + j * 16, LDB);
#pragma unroll
            for (int i = 0; i < FM; ++i)
#pragma unroll
                for (int j = 0; j < FN; ++j)
                    wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
        }
    }
    cp_async_wait<0>();
    __syncthreads();   // every warp is done with the stages before they become scratch

    float *scratch = reinterpret_cast<float *>(ladder_dynamic_smem) + warp * 256;
    store_fragments<T, FM, FN>(acc, scratch, C, M, N, row0 + warpRow * WM, col0 + warpCol * WN, alpha, beta,
                               lane);
}
#endif  // LADDER_TENSOR_CORES
