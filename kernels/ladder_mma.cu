// Rung 8 of the reference ladder (rungs 1-7: kernels/ladder.cu): warp-level tensor-core
// instructions issued directly instead of through WMMA fragments.
//
// Idea: mma.sync.m16n8k16 (float16 or bfloat16 operands, float32 accumulate) fed by
// ldmatrix.x4 (.trans for the row-major B tile) from shared tiles XOR-swizzled in 16-byte
// chunks, so ldmatrix reads and cp.async fills meet no bank conflict without padding; a
// STAGES-deep cp.async.cg pipeline as in rung 7; an epilogue that stages each warp's
// accumulators through a swizzled float scratch (conflict-free writes and reads) and writes C in
// 16-byte coalesced stores, reading C only when beta != 0.
// Claims: K % 8 == 0 and N % 8 == 0 (every 16-byte group of A, B and C all in or all out of
// bounds) and 16-byte aligned A, B and C; any M; K = 0 gives beta * C.
// Launch: grid (ceil(N / BN), ceil(M / BM)), block 32 * (BM / WM) * (BN / WN), dynamic shared
// STAGES * (BM * BK + BK * BN) * 2 bytes (over 48 KB needs cudaFuncAttributeMaxDynamicSharedMemorySize).
// Broken twins (kernels/ladder_catalog.toml) compile this file with one LADDER_MMA_FLAW_* macro;
// each flaw is marked `// FLAW:`.

#include <cuda_fp16.h>
#include <cuda_bf16.h>

namespace ladder_mma
{
constexpr int CHUNK = 8;   // 2-byte elements per 16-byte chunk

// Where chunk `col` of row `row` is stored, in chunks from the tile's start, for a tile whose
// rows are CHUNKS_PER_ROW chunks: the chunk's index within its 128-byte line XORed with a key
// that differs across 8 consecutive rows (across pairs of rows when a row is 64 bytes). Eight
// rows read at one column (ldmatrix) then hit 8 distinct bank groups, as does a line written
// whole (cp.async), with no padding.
template <int CHUNKS_PER_ROW>
__device__ __forceinline__ int swizzled(int row, int col)
{
    constexpr int KEY_SPAN = CHUNKS_PER_ROW > 8 ? CHUNKS_PER_ROW : 8;   // chunks sharing one key
    const int q = row * CHUNKS_PER_ROW + col;
    return q ^ ((q / KEY_SPAN) % 8);
}

// The index ldmatrix reads chunk (row, col) from.
template <int CHUNKS_PER_ROW>
__device__ __forceinline__ int read_index(int row, int col)
{
#ifdef LADDER_MMA_FLAW_UNSWIZZLED_READ
    return row * CHUNKS_PER_ROW + col;   // FLAW: the fill swizzles, this read does not
#else
    return swizzled<CHUNKS_PER_ROW>(row, col);
#endif
}

__device__ __forceinline__ unsigned shared_address(const void *p)
{
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, zero-filled when out of bounds (src-size 0 reads nothing).
__device__ __forceinline__ void cp_async16(unsigned dst, const void *src, bool in_bounds)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(in_bounds ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int PENDING>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING) : "memory"); }

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned address)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(address));
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], unsigned address)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(address));
}

// d += a * b on one 16 x 8 x 16 tile (a: 4 registers of the A fragment, b: 2 of the B fragment).
template <typename T>
__device__ __forceinline__ void mma16816(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1);
template <>
__device__ __forceinline__ void mma16816<__half>(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma16816<__nv_bfloat16>(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                                         unsigned b1)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats as two packed elements (round to nearest), and back.
template <typename T> __device__ __forceinline__ unsigned pack2(float lo, float hi);
template <> __device__ __forceinline__ unsigned pack2<__half>(float lo, float hi)
{
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<unsigned *>(&h);
}
template <> __device__ __forceinline__ unsigned pack2<__nv_bfloat16>(float lo, float hi)
{
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<unsigned *>(&h);
}
template <typename T> __device__ __forceinline__ float2 unpack2(unsigned bits);
template <> __device__ __forceinline__ float2 unpack2<__half>(unsigned bits)
{
    return __half22float2(*reinterpret_cast<__half2 *>(&bits));
}
template <> __device__ __forceinline__ float2 unpack2<__nv_bfloat16>(unsigned bits)
{
    return __bfloat1622float2(*reinterpret_cast<__nv_bfloat162 *>(&bits));
}

// C[0 .. 7] = alpha * (lo, hi) + beta * C[0 .. 7] in one 16-byte load (beta != 0 only) and store.
template <typename T>
__device__ __forceinline__ void store8(T *C, float4 lo, float4 hi, float alpha, float beta)
{
    float v[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
    for (int e = 0; e < 8; ++e)
        v[e] *= alpha;
    if (beta != 0.0f)
    {
        const uint4 old = *reinterpret_cast<const uint4 *>(C);
        const unsigned words[4] = {old.x, old.y, old.z, old.w};
#pragma unroll
        for (int w = 0; w < 4; ++w)
        {
            float2 c = unpack2<T>(words[w]);
            v[2 * w] += beta * c.x;
            v[2 * w + 1] += beta * c.y;
        }
    }
    *reinterpret_cast<uint4 *>(C) = make_uint4(pack2<T>(v[0], v[1]), pack2<T>(v[2], v[3]), pack2<T>(v[4], v[5]),
                                               pack2<T>(v[6], v[7]));
}
}  // namespace ladder_mma

template <typename T, int BM, int BN, int BK, int WM, int WN, int STAGES>
__global__ void __launch_bounds__(32 * (BM / WM) * (BN / WN))
gemm_mma(int M, int N, int K, float alpha, const T *A, const T *B, float beta, T *C)
{
    using namespace ladder_mma;
    constexpr int WARPS_N = BN / WN, WARPS = (BM / WM) * WARPS_N, THREADS = 32 * WARPS;
    constexpr int MI = WM / 16, NI = WN / 8;                        // m16n8k16 tiles per warp
    constexpr int A_CHUNKS = BK / CHUNK, B_CHUNKS = BN / CHUNK;     // 16-byte chunks per tile row
    constexpr int STAGE = BM * BK + BK * BN;                        // elements per stage
    constexpr int LOADS_A = (BM * A_CHUNKS + THREADS - 1) / THREADS;
    constexpr int LOADS_B = (BK * B_CHUNKS + THREADS - 1) / THREADS;
    static_assert(STAGES >= 2, "a pipeline needs at least two stages");
    static_assert(BM % WM == 0 && BN % WN == 0 && WM % 16 == 0 && BK % 32 == 0, "whole m16n8k16 tiles, an even number of k-steps per tile");
    // WN % 32: B is read 16 columns per ldmatrix.x4.trans, and the epilogue's swizzle needs 8
    // float4 units per scratch row.
    static_assert(WN % 32 == 0, "warp tiles WN a multiple of 32");
    static_assert(WARPS * 16 * WN * 4 <= STAGES * STAGE * 2, "epilogue scratch must fit in the stages");
    extern __shared__ __align__(128) unsigned char ladder_mma_smem[];
    T *smem = reinterpret_cast<T *>(ladder_mma_smem);

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int warp_row = warp / WARPS_N, warp_col = warp % WARPS_N;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;

    // Issue the copies of tile `t` into stage t % STAGES, each chunk at its swizzled place.
    auto issue = [&](int t) {
        T *As = smem + (t % STAGES) * STAGE, *Bs = As + BM * BK;
        const int k0 = t * BK;
#pragma unroll
        for (int l = 0; l < LOADS_A; ++l)
        {
            const int i = tid + l * THREADS, r = i / A_CHUNKS, c = i % A_CHUNKS;
            if ((BM * A_CHUNKS) % THREADS == 0 || i < BM * A_CHUNKS)
            {
                const bool in = row0 + r < M && k0 + c * CHUNK < K;
                cp_async16(shared_address(As + swizzled<A_CHUNKS>(r, c) * CHUNK),
                           in ? A + (row0 + r) * K + k0 + c * CHUNK : A, in);
            }
        }
#pragma unroll
        for (int l = 0; l < LOADS_B; ++l)
        {
            const int i = tid + l * THREADS, r = i / B_CHUNKS, c = i % B_CHUNKS;
            if ((BK * B_CHUNKS) % THREADS == 0 || i < BK * B_CHUNKS)
            {
                const bool in = k0 + r < K && col0 + c * CHUNK < N;
                cp_async16(shared_address(Bs + swizzled<B_CHUNKS>(r, c) * CHUNK),
                           in ? B + (k0 + r) * N + col0 + c * CHUNK : B, in);
            }
        }
    };

    float acc[MI][NI][4];
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                acc[i][j][e] = 0.0f;

    const int tiles = (K + BK - 1) / BK;
    // Prologue: STAGES - 1 tiles in flight, one commit group per tile (empty past the end), so
    // that "at most STAGES - 2 groups pending" always means "tile t has landed".
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s)
    {
        if (s < tiles)
            issue(s);
        cp_async_commit();
    }
    // ldmatrix.x4 lanes 0-15 address rows 0-15 of a 16 x 16 operand block at its first 8
    // columns, lanes 16-31 the same rows at the next 8: the four 8 x 8 matrices come back in
    // the order mma's A fragment (and, transposed, two B fragments) wants.
    const int fragment_row = lane % 16, fragment_chunk = lane / 16;
    constexpr int KSTEPS = BK / 16;
    unsigned a[2][MI][4], b[2][NI][2];   // fragments of this k-step and the next
    // Byte offsets in a stage of this lane's ldmatrix rows: A's for each k-step (block i of
    // the warp tile is 16 rows further: 16 * BK * 2 bytes, the swizzle key repeating every 16
    // rows), B's for each pair of n8 tiles (k-step kk is 16 rows further: 16 * BN * 2 bytes).
    unsigned a_offset[KSTEPS], b_offset[NI / 2];
#pragma unroll
    for (int kk = 0; kk < KSTEPS; ++kk)
        a_offset[kk] = 16 * read_index<A_CHUNKS>(warp_row * WM + fragment_row, kk * 2 + fragment_chunk);
#pragma unroll
    for (int j = 0; j < NI / 2; ++j)
        b_offset[j] = BM * BK * 2 + 16 * read_index<B_CHUNKS>(fragment_row, (warp_col * WN + j * 16) / CHUNK + fragment_chunk);
    auto load_fragments = [&](int buf, int stage, int kk) {
        const unsigned base = shared_address(smem + stage * STAGE);
#pragma unroll
        for (int i = 0; i < MI; ++i)
            ldmatrix_x4(a[buf][i], base + a_offset[kk] + i * 16 * BK * 2);
#pragma unroll
        for (int j = 0; j < NI / 2; ++j)
        {
            unsigned r[4];
            ldmatrix_x4_trans(r, base + b_offset[j] + kk * 16 * BN * 2);
            b[buf][2 * j][0] = r[0];
            b[buf][2 * j][1] = r[1];
            b[buf][2 * j + 1][0] = r[2];
            b[buf][2 * j + 1][1] = r[3];
        }
    };

    // The wait before each barrier: this thread's copies of the tile about to be read are done
    // (at most STAGES - 2 groups pending), and after the barrier everyone's are.
#ifndef LADDER_MMA_FLAW_NO_WAIT
#define LADDER_MMA_WAIT_FOR_NEXT_TILE() cp_async_wait<STAGES - 2>()
#else
#define LADDER_MMA_WAIT_FOR_NEXT_TILE() ((void)0)   // FLAW: no wait; a tile may be read before it landed
#endif
    LADDER_MMA_WAIT_FOR_NEXT_TILE();
    __syncthreads();
    if (tiles > 0)
        load_fragments(0, 0, 0);
    // Each k-step loads the next step's fragments (across the tile boundary too) before its own
    // mma, so shared-memory latency hides behind tensor-core work. Tile t + STAGES - 1 is issued
    // into stage (t - 1) % STAGES at the first k-step of tile t: every warp read its last
    // fragments of tile t - 1 before the barrier that ends it.
    for (int t = 0; t < tiles; ++t)
    {
#pragma unroll
        for (int kk = 0; kk < KSTEPS; ++kk)
        {
            const int cur = kk % 2, nxt = (kk + 1) % 2;
            if (kk == KSTEPS - 1)
            {
                LADDER_MMA_WAIT_FOR_NEXT_TILE();
                __syncthreads();
                if (t + 1 < tiles)
                    load_fragments(nxt, (t + 1) % STAGES, 0);
            }
            else
                load_fragments(nxt, t % STAGES, kk + 1);
            if (kk == 0)
            {
                if (t + STAGES - 1 < tiles)
                    issue(t + STAGES - 1);
                cp_async_commit();
            }
#pragma unroll
            for (int i = 0; i < MI; ++i)
#pragma unroll
                for (int j = 0; j < NI; ++j)
                    mma16816<T>(acc[i][j], a[cur][i], b[cur][j][0], b[cur][j][1]);
        }
    }
#undef LADDER_MMA_WAIT_FOR_NEXT_TILE
    cp_async_wait<0>();
    __syncthreads();   // every warp is done with the stages before they become scratch

    // Epilogue, 16 rows of the warp tile at a time, through this warp's 16 x WN float scratch.
    // Float4 unit u of scratch row r is stored at u ^ (2 * (r % 4)): the fragments' 8-byte
    // writes (rows g, g + 8; columns 2 (lane % 4) of each n8 tile) fill 32 distinct banks per
    // half-warp, and a row's 8-float chunk j stays contiguous, at chunk j ^ (r % 4).
    float *scratch = reinterpret_cast<float *>(ladder_mma_smem) + warp * 16 * WN;
    constexpr int C_CHUNKS = WN / 8;   // 8-float chunks per scratch row
    const int g = lane / 4, q = lane % 4;
#pragma unroll
    for (int i = 0; i < MI; ++i)
    {
#pragma unroll
        for (int j = 0; j < NI; ++j)
#pragma unroll
            for (int h = 0; h < 2; ++h)
            {
                const int r = g + 8 * h, unit = (2 * j + q / 2) ^ (2 * (r % 4));
                *reinterpret_cast<float2 *>(scratch + r * WN + unit * 4 + (q % 2) * 2) =
                    make_float2(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
            }
        __syncwarp();
#pragma unroll
        for (int e = lane; e < 16 * C_CHUNKS; e += 32)
        {
            const int r = e / C_CHUNKS, chunk = e % C_CHUNKS, stored = chunk ^ (r % 4);
            // Which half of the chunk a lane reads first: the 8 lanes of one 16-byte access
            // phase then read 8 distinct bank groups.
            const int first = ((r * C_CHUNKS + stored) / 4) % 2;
            const float4 p = *reinterpret_cast<const float4 *>(scratch + r * WN + (2 * stored + first) * 4);
            const float4 s = *reinterpret_cast<const float4 *>(scratch + r * WN + (2 * stored + (first ^ 1)) * 4);
            const int row = row0 + warp_row * WM + i * 16 + r, col = col0 + warp_col * WN + chunk * CHUNK;
#ifdef LADDER_MMA_FLAW_NO_COLUMN_GUARD
            if (row < M)   // FLAW: no column guard; a ragged last block column writes past row ends
#else
            if (row < M && col < N)
#endif
                store8<T>(C + row * N + col, first ? s : p, first ? p : s, alpha, beta);
        }
        __syncwarp();
    }
}
