// Broken twins of the reference ladder (kernels/ladder.cu): one per new idea of the ladder,
// each the rung it copies with exactly one flaw, marked `// FLAW:` where it is. The catalog
// (kernels/ladder_catalog.toml) declares the defect each must be caught with.
// Argument form and launch as the rung copied:
//     (int M, int N, int K, S alpha, const T *A, const T *B, S beta, T *C)
// 1-D blocks, grid (ceil(N / BN), ceil(M / BM)).
// This file is self-contained (NVRTC compiles a source as one string, without its folder
// on the include path), so it repeats the helpers of ladder.cu it needs.
//   broken_double_buffer_no_barrier      rung 4 without its one barrier per tile      shared_memory_race
//   broken_vector_load_padded_pitch      rung 3, A read with a row pitch rounded up to 4  out_of_bounds_read
//   broken_register_tile_unguarded_store rung 2 without the edge guard on its store  out_of_bounds_write
//   broken_async_consumed_before_wait    rung 7 reading the stage just issued, not waited  shared_memory_race (GPU only)
//   broken_wmma_fragment_layout          rung 6 with B's fragments read column-major  wrong_values (GPU only)

#include <cuda_fp16.h>
#include <cuda_bf16.h>

// The tensor-core twins need <mma.h>; LADDER_CUDA_CORES_ONLY compiles the others without it.
#if !defined(LADDER_CUDA_CORES_ONLY)
#define LADDER_TENSOR_CORES 1
#include <mma.h>
#endif
using ladder_float4 = float4;

template <typename T> struct ladder_scalar { using type = T; };
template <> struct ladder_scalar<__half> { using type = float; };
template <> struct ladder_scalar<__nv_bfloat16> { using type = float; };
template <typename T> using scalar_t = typename ladder_scalar<T>::type;

template <typename T, typename S>
__device__ __forceinline__ void store_scaled(T *C, int index, S acc, S alpha, S beta)
{
    S out = alpha * acc;
    if (beta != S(0))
        out += beta * S(C[index]);
    C[index] = T(out);
}

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
// Twin of rung 4 (sgemm_double_buffered): the barrier at the end of each tile is gone.
// Launch: block (BM / TM) * (BN / TN), static shared 2 * (BM + BN) * BK * 4 bytes.
// Caught as shared_memory_race (any K > BK: a fast thread deposits tile t + 1 into the buffer
// a slow one still reads (WAR), or reads the next buffer before others filled it (RAW)).
// ---------------------------------------------------------------------------------------
template <int BM, int BN, int BK, int TM, int TN>
__global__ void broken_double_buffer_no_barrier(int M, int N, int K, float alpha, const float *A,
                                                const float *B, float beta, float *C)
{
    constexpr int THREADS = (BM / TM) * (BN / TN);
    static_assert((BM * BK / 4) % THREADS == 0 && (BK * BN / 4) % THREADS == 0, "whole float4 groups");
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
#pragma unroll
            for (int m = 0; m < TM; ++m)
#pragma unroll
                for (int n = 0; n < TN; ++n)
                    acc[m][n] += As[cur][k][trow * TM + m] * Bs[cur][k][tcol * TN + n];
        if (t + 1 < tiles)
            deposit(cur ^ 1);
        // FLAW: no __syncthreads() here. Nothing orders this tile's reads of buffer `cur`
        // before the next iteration's deposit into it, nor this deposit into `cur ^ 1`
        // before other threads read it in the next iteration.
    }

#pragma unroll
    for (int m = 0; m < TM; ++m)
#pragma unroll
        for (int n = 0; n < TN; n += 4)
            store4(C, M, N, row0 + trow * TM + m, col0 + tcol * TN + n, vecC,
                   ladder_float4{acc[m][n], acc[m][n + 1], acc[m][n + 2], acc[m][n + 3]}, alpha, beta);
}

// ---------------------------------------------------------------------------------------
// Twin of rung 3 (sgemm_vectorized): A's 128-bit loads assume a leading dimension that is a
// multiple of 4. Launch: block (BM / TM) * (BN / TN), static shared (BM + BN) * BK * 4 bytes.
// Correct when K % 4 == 0; otherwise rows drift and the last rows of A are read past its end:
// caught as out_of_bounds_read (memcheck: invalid global read of size 16 past A).
// ---------------------------------------------------------------------------------------
template <int BM, int BN, int BK, int TM, int TN>
__global__ void broken_vector_load_padded_pitch(int M, int N, int K, float alpha, const float *A,
                                                const float *B, float beta, float *C)
{
    constexpr int THREADS = (BM / TM) * (BN / TN);
    alignas(16) __shared__ float As[BK][BM];
    alignas(16) __shared__ float Bs[BK][BN];

    const int tid = threadIdx.x;
    const int tcol = tid % (BN / TN), trow = tid / (BN / TN);
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    // FLAW: the row pitch of A is taken as K rounded up to a multiple of 4, so that every
    // float4 load is aligned, as if A were stored padded. A is tight (pitch K): when
    // K % 4 != 0 each row starts (K4 - K) * row elements off, and the last rows run past
    // the end of A (M * K4 > M * K).
    const int K4 = (K + 3) / 4 * 4;
    const bool vecB = N % 4 == 0 && aligned16(B);
    const bool vecC = N % 4 == 0 && aligned16(C);

    float acc[TM][TN] = {};
    for (int k0 = 0; k0 < K; k0 += BK)
    {
        for (int i = tid; i < BM * BK / 4; i += THREADS)
        {
            int r = i / (BK / 4), c = (i % (BK / 4)) * 4;
            ladder_float4 v{0.0f, 0.0f, 0.0f, 0.0f};
            if (row0 + r < M && k0 + c < K)
                v = *reinterpret_cast<const ladder_float4 *>(A + (row0 + r) * K4 + k0 + c);
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
#pragma unroll
            for (int m = 0; m < TM; ++m)
#pragma unroll
                for (int n = 0; n < TN; ++n)
                    acc[m][n] += As[k][trow * TM + m] * Bs[k][tcol * TN + n];
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
// Twin of rung 2 (sgemm_2d_blocktiling): the register tile is stored without its edge guard.
// Launch: block (BM / TM) * (BN / TN), static shared (BM + BN) * BK * sizeof(T).
// Correct when M % BM == 0 and N % BN == 0; on ragged shapes the rows past M are written
// past the end of C: caught as out_of_bounds_write (guard bands, memcheck).
// ---------------------------------------------------------------------------------------
template <typename T, int BM, int BN, int BK, int TM, int TN>
__global__ void broken_register_tile_unguarded_store(int M, int N, int K, scalar_t<T> alpha, const T *A,
                                                     const T *B, scalar_t<T> beta, T *C)
{
    using S = scalar_t<T>;
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
            for (int m = 0; m < TM; ++m)
                for (int n = 0; n < TN; ++n)
                    acc[m][n] += S(As[trow * TM + m][k]) * S(Bs[k][tcol * TN + n]);
        __syncthreads();
    }

    for (int m = 0; m < TM; ++m)
        for (int n = 0; n < TN; ++n)
        {
            int row = row0 + trow * TM + m, col = col0 + tcol * TN + n;
            // FLAW: no `if (row < M && col < N)`: the edge blocks' register tiles overhang C.
            store_scaled(C, row * N + col, acc[m][n], alpha, beta);
        }
}

#if defined(LADDER_TENSOR_CORES)
namespace ladder_tc
{
using namespace nvcuda;
constexpr int PAD = 8;
constexpr int VEC = 8;

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

// ---------------------------------------------------------------------------------------
// Twin of rung 6 (gemm_wmma): B's fragments are loaded column-major from a row-major tile.
// Launch: block 32 * (BM / WM) * (BN / WN), static shared 2 * (BM * (BK + 8) + BK * (BN + 8))
// * sizeof(T) bytes. Every 16 x 16 block of B is used transposed: caught as wrong_values.
// ---------------------------------------------------------------------------------------
template <typename T, int BM, int BN, int BK, int WM, int WN>
__global__ void __launch_bounds__(32 * (BM / WM) * (BN / WN))
broken_wmma_fragment_layout(int M, int N, int K, float alpha, const T *A, const T *B, float beta, T *C)
{
    using namespace nvcuda;
    using namespace ladder_tc;
    constexpr int WARPS = (BM / WM) * (BN / WN), THREADS = 32 * WARPS;
    constexpr int FM = WM / 16, FN = WN / 16;
    constexpr int LDA = BK + PAD, LDB = BN + PAD;
    static_assert((BM * BK / VEC) % THREADS == 0 && (BK * BN / VEC) % THREADS == 0, "whole 16-byte groups");
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
    // FLAW: the B tile in shared memory is row-major (Bs[k][n]), but its fragments are
    // declared col_major: each 16 x 16 block of B enters the product transposed.
    wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> fb[FN];

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

    float *scratch = reinterpret_cast<float *>(smem) + warp * 256;
    store_fragments<T, FM, FN>(acc, scratch, C, M, N, row0 + warpRow * WM, col0 + warpCol * WN, alpha, beta,
                               lane);
}

// ---------------------------------------------------------------------------------------
// Twin of rung 7 (gemm_wmma_async): consumes a stage before its cp.async group is waited for.
// Launch: block 32 * (BM / WM) * (BN / WN), dynamic shared
// STAGES * (BM * (BK + 8) + BK * (BN + 8)) * sizeof(T) bytes. Claims K % 8 == 0, N % 8 == 0.
// (A first version waited for one group too few, cp_async_wait<STAGES - 1>: on the H200 it
// gave correct results on small shapes, the copies landing in time: not a usable control.)
// On the H200 the values are wrong and change from launch to launch (the copies race with the
// reads): shared_memory_race, inferred from nondeterminism by the plain detectors.
// ---------------------------------------------------------------------------------------
template <typename T, int BM, int BN, int BK, int WM, int WN, int STAGES>
__global__ void __launch_bounds__(32 * (BM / WM) * (BN / WN))
broken_async_consumed_before_wait(int M, int N, int K, float alpha, const T *A, const T *B, float beta, T *C)
{
    using namespace nvcuda;
    using namespace ladder_tc;
    constexpr int WARPS = (BM / WM) * (BN / WN), THREADS = 32 * WARPS;
    constexpr int FM = WM / 16, FN = WN / 16;
    constexpr int LDA = BK + PAD, LDB = BN + PAD;
    constexpr int STAGE = BM * LDA + BK * LDB;
    static_assert(STAGES >= 2, "a pipeline needs at least two stages");
    static_assert((BM * BK / VEC) % THREADS == 0 && (BK * BN / VEC) % THREADS == 0, "whole 16-byte groups");
    static_assert(STAGES * STAGE * 2 >= WARPS * 256 * 4, "epilogue scratch must fit");
    constexpr int LOADS_A = BM * BK / VEC / THREADS, LOADS_B = BK * BN / VEC / THREADS;
    extern __shared__ __align__(128) unsigned char ladder_dynamic_smem[];
    T *smem = reinterpret_cast<T *>(ladder_dynamic_smem);

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int warpRow = warp / (BN / WN), warpCol = warp % (BN / WN);
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;

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
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s)
    {
        if (s < tiles)
            issue(s);
        cp_async_commit();
    }
    for (int t = 0; t < tiles; ++t)
    {
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        if (t + STAGES - 1 < tiles)
            issue(t + STAGES - 1);
        cp_async_commit();
        // FLAW: the math reads the stage the copy above was just issued into (the write stage,
        // (t + STAGES - 1) % STAGES) instead of tile t's stage (t % STAGES), which the wait
        // guarantees: an asynchronous copy consumed before its wait. It reads bytes still in
        // flight, or the tile from STAGES - 1 iterations ahead, or (past the last copy) a stale
        // stage: wrong values whatever the timing.
        const T *As = smem + ((t + STAGES - 1) % STAGES) * STAGE, *Bs = As + BM * LDA;
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
    __syncthreads();

    float *scratch = reinterpret_cast<float *>(ladder_dynamic_smem) + warp * 256;
    store_fragments<T, FM, FN>(acc, scratch, C, M, N, row0 + warpRow * WM, col0 + warpCol * WN, alpha, beta,
                               lane);
}
#endif  // LADDER_TENSOR_CORES
