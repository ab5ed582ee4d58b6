// Small kernels using the CUDA device API the CPU simulator models: vector types,
// atomics, intrinsics, warp shuffles and votes, cooperative groups
// (tests/test_cpu_sim_device_api.py; catalog: device_api.toml).
// Signature (A, B, C, M, N, K) unless the catalog says otherwise; row-major operands.
#include <cooperative_groups.h>
#include <cuda/barrier>
#include <cuda_fp16.h>

namespace cg = cooperative_groups;

// -- vector types --------------------------------------------------------------------------

// C[0..]: sizeof and alignof of the vector types, in the order the test lists them.
template <typename T, int TILE>
__global__ void vector_layout(const T *A, const T *B, T *C, int M, int N, int K)
{
    if (threadIdx.x != 0 || blockIdx.x != 0)
        return;
    uint i = 0;       // glibc's typedefs, as device code sees them under nvcc
    ushort s = 0;
    ulong l = 0;
#define LAYOUT(V) C[i++] = T(sizeof(V)), C[i++] = T(alignof(V));
    LAYOUT(float2) LAYOUT(float3) LAYOUT(float4) LAYOUT(int2) LAYOUT(int4) LAYOUT(uint4)
    LAYOUT(double2) LAYOUT(char4) LAYOUT(short2) LAYOUT(half2) LAYOUT(__half2) LAYOUT(longlong2)
#undef LAYOUT
    float4 f = make_float4(1.0f, 2.0f, 3.0f, 4.0f);
    int2 n = make_int2(5, 6);
    C[i++] = T(f.x + f.y * 10 + f.z * 100 + f.w * 1000 + n.x * 10000 + n.y * 100000 + s + l);
}

// Each thread computes 4 neighbouring columns of C: rows of B and C read and written as
// float4 (N a multiple of 4, so every access is 16-byte aligned).
template <typename T, int TILE>
__global__ void gemm_float4(const T *A, const T *B, T *C, int M, int N, int K)
{
    int row = blockIdx.y * TILE + threadIdx.y, col = 4 * (blockIdx.x * TILE + threadIdx.x);
    if (row >= M || col >= N)
        return;
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int k = 0; k < K; ++k)
    {
        float a = __ldg(&A[row * K + k]);
        float4 b = reinterpret_cast<const float4 *>(&B[k * N + col])[0];
        acc.x += a * b.x;
        acc.y += a * b.y;
        acc.z += a * b.z;
        acc.w += a * b.w;
    }
    reinterpret_cast<float4 *>(&C[row * N + col])[0] = acc;
}

// The same, but B's float4 loads start one element late: misaligned (line is checked).
template <typename T, int TILE>
__global__ void gemm_float4_misaligned(const T *A, const T *B, T *C, int M, int N, int K)
{
    int row = blockIdx.y * TILE + threadIdx.y, col = 4 * (blockIdx.x * TILE + threadIdx.x);
    if (row >= M || col >= N)
        return;
    float4 b = reinterpret_cast<const float4 *>(&B[col + 1])[0];  // MISALIGNED
    C[row * N + col] = b.x;
}

// -- warp shuffles and votes ---------------------------------------------------------------

// One warp per element of C: lane l sums k = l, l + 32, ...; the lanes' sums are reduced
// with __shfl_xor_sync (every lane gets the total) and checked against a __shfl_down_sync
// reduction broadcast from lane 0 with __shfl_sync. Grid (N, M), block 32.
template <typename T, int TILE>
__global__ void gemm_warp_reduce(const T *A, const T *B, T *C, int M, int N, int K)
{
    int row = blockIdx.y, col = blockIdx.x, lane = threadIdx.x;
    T sum = 0;
    for (int k = lane; k < K; k += 32)
        sum += A[row * K + k] * B[k * N + col];
    T x = sum, d = sum;
    for (int offset = 16; offset > 0; offset /= 2)
    {
        x += __shfl_xor_sync(0xffffffffu, x, offset);
        d += __shfl_down_sync(0xffffffffu, d, offset);
    }
    d = __shfl_sync(0xffffffffu, d, 0);
    if (__all_sync(0xffffffffu, x == d) && lane == 0)
        C[row * N + col] = x;
}

// Per warp of a 64-thread block, C[row t] gets lane t's results: shfl idx (from lane
// (t * 3) % 32), up 1 in segments of 8, down 2, xor 5, ballot(t odd), all(t < 40),
// any(t == 7), activemask, match_any(t / 4).  M >= 64, N >= 9.
template <typename T, int TILE>
__global__ void warp_probe(const T *A, const T *B, T *C, int M, int N, int K)
{
    int t = threadIdx.x;
    float v = 100.0f + t;
    T *out = C + t * N;
    out[0] = __shfl_sync(0xffffffffu, v, (t * 3) % 32);
    out[1] = __shfl_up_sync(0xffffffffu, v, 1, 8);
    out[2] = __shfl_down_sync(0xffffffffu, v, 2);
    out[3] = __shfl_xor_sync(0xffffffffu, v, 5);
    out[4] = (float)__ballot_sync(0xffffffffu, t & 1);
    out[5] = (float)__all_sync(0xffffffffu, t < 40);
    out[6] = (float)__any_sync(0xffffffffu, t == 7);
    out[7] = (float)__activemask();
    out[8] = (float)__match_any_sync(0xffffffffu, t / 4);
    __syncwarp();
}

// Lanes 0..15 shuffle with a full mask; lanes 16..31 never come (a divergent shuffle).
template <typename T, int TILE>
__global__ void warp_partial_mask(const T *A, const T *B, T *C, int M, int N, int K)
{
    int lane = threadIdx.x;
    T v = A[lane];
    if (lane < 16)
        v = __shfl_down_sync(0xffffffffu, v, 1);  // PARTIAL
    C[lane] = v;
}

// Lanes 0..15 shuffle with a full mask while lanes 16..31 wait at a barrier: they never come.
template <typename T, int TILE>
__global__ void warp_partial_mask_at_barrier(const T *A, const T *B, T *C, int M, int N, int K)
{
    int lane = threadIdx.x;
    T v = A[lane];
    if (lane < 16)
        v = __shfl_down_sync(0xffffffffu, v, 1);  // PARTIAL AT BARRIER
    __syncthreads();
    C[lane] = v;
}

// The same branch with the mask that names exactly the lanes that come: correct.
template <typename T, int TILE>
__global__ void warp_exact_mask(const T *A, const T *B, T *C, int M, int N, int K)
{
    int lane = threadIdx.x;
    T v = A[lane];
    if (lane < 16)
        v = __shfl_down_sync(0x0000ffffu, v, 1, 16);
    C[lane] = v;
}

// Every lane calls with a mask of the lower half only: the upper lanes leave themselves out.
template <typename T, int TILE>
__global__ void warp_mask_without_caller(const T *A, const T *B, T *C, int M, int N, int K)
{
    int lane = threadIdx.x;
    C[lane] = __shfl_sync(0x0000ffffu, A[lane], 0);
}

// Every lane calls with a mask of the lower half and reads its own value back: the GPU gives
// each lane its own value whatever the mask, yet lanes 16..31 are outside it (undefined).
template <typename T, int TILE>
__global__ void warp_half_mask_all_lanes(const T *A, const T *B, T *C, int M, int N, int K)
{
    int lane = threadIdx.x;
    C[lane] = __shfl_sync(0x0000ffffu, A[lane], lane);  // HALF MASK
}

// Two tiles of 16 lanes, each shuffling within itself with its own mask: correct (disjoint
// groups of one warp may call with different masks).
template <typename T, int TILE>
__global__ void warp_two_tiles(const T *A, const T *B, T *C, int M, int N, int K)
{
    int lane = threadIdx.x;
    unsigned mask = lane < 16 ? 0x0000ffffu : 0xffff0000u;
    C[lane] = __shfl_xor_sync(mask, A[lane], 1, 16);
}

// Lanes 0..15 call with the lower half's mask, lanes 16..31 with the full one: the upper
// lanes' mask names lanes that call with another mask (undefined).
template <typename T, int TILE>
__global__ void warp_masks_differ(const T *A, const T *B, T *C, int M, int N, int K)
{
    int lane = threadIdx.x;
    unsigned mask = lane < 16 ? 0x0000ffffu : 0xffffffffu;
    C[lane] = __shfl_xor_sync(mask, A[lane], 1, 16);
}

// The warp matches and reductions (sm_80), by a 64-thread block. Row t of C (N >= 8):
// match_all(t / 32) with its predicate, match_all(t), reduce add / min / max of int
// (t - 40), min / max of unsigned t, and / or / xor of unsigned (1 << (t % 32)) | 1.
template <typename T, int TILE>
__global__ void warp_reductions(const T *A, const T *B, T *C, int M, int N, int K)
{
    int t = threadIdx.x, pred = -1, pred_all = -1;
    unsigned bits = (1u << (t % 32)) | 1u;
    T *out = C + t * N;
    out[0] = (float)__match_all_sync(0xffffffffu, t / 32, &pred);
    out[1] = (float)pred;
    out[2] = (float)__match_all_sync(0xffffffffu, t, &pred_all) + (float)pred_all;
    out[3] = (float)__reduce_add_sync(0xffffffffu, t - 40);
    out[4] = (float)__reduce_min_sync(0xffffffffu, t - 40) + 1000.0f * (float)__reduce_max_sync(0xffffffffu, t - 40);
    out[5] = (float)__reduce_min_sync(0xffffffffu, (unsigned)t) + 1000.0f * (float)__reduce_max_sync(0xffffffffu, (unsigned)t);
    out[6] = (float)(__reduce_and_sync(0xffffffffu, bits) + __reduce_xor_sync(0xffffffffu, bits));
    out[7] = (float)__reduce_or_sync(0xffffffffu, bits);
}

// -- atomics -------------------------------------------------------------------------------

// Split-K inside a block: block (TILE, TILE, 4); thread z sums its quarter of K and adds
// it to a shared accumulator with atomicAdd; thread z == 0 stores it.
template <typename T, int TILE>
__global__ void gemm_shared_atomic_splitk(const T *A, const T *B, T *C, int M, int N, int K)
{
    __shared__ T acc[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    int z = threadIdx.z, slice = (K + blockDim.z - 1) / blockDim.z;
    if (z == 0)
        acc[threadIdx.y][threadIdx.x] = T(0);
    __syncthreads();
    T part = 0;
    if (row < M && col < N)
        for (int k = z * slice; k < K && k < (z + 1) * slice; ++k)
            part += A[row * K + k] * B[k * N + col];
    atomicAdd(&acc[threadIdx.y][threadIdx.x], part);
    __syncthreads();
    if (z == 0 && row < M && col < N)
        C[row * N + col] = acc[threadIdx.y][threadIdx.x];
}

// Split-K across blocks: blockIdx.z takes a quarter of K and atomically adds alpha times
// its partial product to C, which must start at zero (called with beta = 1 and C0 = 0).
template <typename T, int TILE>
__global__ void gemm_global_atomic_splitk(int M, int N, int K, T alpha, const T *A, const T *B, T beta, T *C)
{
    int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    int slice = (K + gridDim.z - 1) / gridDim.z;
    if (row >= M || col >= N)
        return;
    T part = 0;
    for (int k = blockIdx.z * slice; k < K && k < (int)(blockIdx.z + 1) * slice; ++k)
        part += A[row * K + k] * B[k * N + col];
    atomicAdd(&C[row * N + col], alpha * part);
}

// Each block swaps its number into C[0] with atomicExch and stores what it got in
// C[1 + block]: the last block to run owns C[0], so the result is the block order.
template <typename T, int TILE>
__global__ void block_order(const T *A, const T *B, T *C, int M, int N, int K)
{
    if (threadIdx.x == 0)
    {
        unsigned int mine = blockIdx.x + 1;
        unsigned int old = atomicExch((unsigned int *)C, mine);
        ((unsigned int *)C)[1 + blockIdx.x] = old;
    }
}

// Integer atomics on shared memory from every thread of a 64-thread block; thread 0 stores
// the results: C[0] = sum of t, C[1] = max, C[2] = min of (t * 7) % 64, C[3] = xor of t,
// C[4] = atomicInc wraps at 9, C[5] = threads whose CAS(0 -> 1) found 0, C[6] = or of 1 << (t % 8).
template <typename T, int TILE>
__global__ void integer_atomics(const T *A, const T *B, T *C, int M, int N, int K)
{
    __shared__ int s[8];
    __shared__ unsigned int u[2];
    int t = threadIdx.x;
    if (t == 0)
    {
        s[0] = 0, s[1] = -1, s[2] = 1000, s[3] = 0, s[4] = 0, s[5] = 0, s[6] = 0;
        u[0] = 0, u[1] = 0;
    }
    __syncthreads();
    atomicAdd(&s[0], t);
    atomicMax(&s[1], (t * 7) % 64);
    atomicMin(&s[2], (t * 7) % 64);
    atomicXor(&s[3], t);
    atomicInc(&u[0], 9u);
    if (atomicCAS(&s[4], 0, 1) == 0)
        atomicAdd(&s[5], 1);
    atomicOr(&s[6], 1 << (t % 8));
    __syncthreads();
    if (t == 0)
    {
        C[0] = T(s[0]), C[1] = T(s[1]), C[2] = T(s[2]), C[3] = T(s[3]);
        C[4] = T(u[0]), C[5] = T(s[5]), C[6] = T(s[6]);
    }
}

// -- intrinsics ------------------------------------------------------------------------------

// C[i] for the element-wise intrinsics of A[i] and B[i] (float32), 10 results per element.
template <typename T, int TILE>
__global__ void intrinsics(const T *A, const T *B, T *C, int M, int N, int K)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= M)
        return;
    float a = __ldg(&A[i]), b = B[i];
    T *out = C + 10 * i;
    out[0] = __fmaf_rn(a, b, 1.0f);
    out[1] = __fmul_rn(a, b);
    out[2] = __fadd_rn(a, b);
    out[3] = __fdividef(a, b);
    out[4] = __saturatef(a);
    out[5] = rsqrtf(fabsf(b));
    out[6] = __int_as_float(__float_as_int(a) ^ 0x80000000);
    out[7] = __half2float(__float2half_rn(a));
    out[8] = (float)__float2int_rn(a * 10.0f);
    out[9] = __expf(b * 0.01f);
}

// -- cooperative groups ----------------------------------------------------------------------

// The tiled GEMM with cooperative groups' block.sync() for its barriers.
template <typename T, int TILE>
__global__ void gemm_cg_tiled(const T *A, const T *B, T *C, int M, int N, int K)
{
    cg::thread_block block = cg::this_thread_block();
    __shared__ T As[TILE][TILE];
    __shared__ T Bs[TILE][TILE];
    int ty = block.thread_index().y, tx = block.thread_index().x;
    int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
    T sum = 0;
    for (int k0 = 0; k0 < K; k0 += TILE)
    {
        As[ty][tx] = (row < M && k0 + tx < K) ? A[row * K + k0 + tx] : T(0);
        Bs[ty][tx] = (col < N && k0 + ty < K) ? B[(k0 + ty) * N + col] : T(0);
        block.sync();
        for (int k = 0; k < TILE; ++k)
            sum += As[ty][k] * Bs[k][tx];
        cg::sync(block);
    }
    if (row < M && col < N)
        C[row * N + col] = sum;
}

// One warp-sized tile per element of C, reduced with the tile's shfl_down and broadcast
// with shfl; grid (N, M), block 64 (two tiles: the second one's lanes sum nothing).
template <typename T, int TILE>
__global__ void gemm_cg_tile_reduce(const T *A, const T *B, T *C, int M, int N, int K)
{
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> tile = cg::tiled_partition<32>(block);
    int row = blockIdx.y, col = blockIdx.x;
    T sum = 0;
    if (tile.meta_group_rank() == 0)
        for (int k = tile.thread_rank(); k < K; k += tile.size())
            sum += A[row * K + k] * B[k * N + col];
    for (int offset = tile.size() / 2; offset > 0; offset /= 2)
        sum += tile.shfl_down(sum, offset);
    sum = tile.shfl(sum, 0);
    tile.sync();
    if (block.thread_rank() == 0)
        C[row * N + col] = sum;
}

// -- cuda::barrier and cuda::memcpy_async ----------------------------------------------------

// The tiled GEMM with its tiles filled by cuda::memcpy_async (one row of TILE elements per
// thread of column 0), paced by a block-wide cuda::barrier. Whole tiles only (M, N, K
// multiples of TILE). WAIT: without this wait, other threads read the stage before it landed.
template <typename T, int TILE, bool WAIT>
__device__ void barrier_tiled_body(const T *A, const T *B, T *C, int M, int N, int K)
{
    using barrier = cuda::barrier<cuda::thread_scope_block>;
    auto block = cg::this_thread_block();
    __shared__ alignas(16) T As[TILE][TILE];
    __shared__ alignas(16) T Bs[TILE][TILE];
    __shared__ barrier bar;
    if (block.thread_rank() == 0)
        init(&bar, block.size());
    block.sync();
    int ty = threadIdx.y, tx = threadIdx.x;
    int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
    T sum = 0;
    for (int k0 = 0; k0 < K; k0 += TILE)
    {
        if (tx == 0)
        {
            cuda::memcpy_async(&As[ty][0], &A[row * K + k0], cuda::aligned_size_t<4>(sizeof(T) * TILE), bar);
            cuda::memcpy_async(&Bs[ty][0], &B[(k0 + ty) * N + blockIdx.x * TILE], sizeof(T) * TILE, bar);
        }
        if (WAIT)
            bar.arrive_and_wait();
        for (int k = 0; k < TILE; ++k)
            sum += As[ty][k] * Bs[k][tx];
        block.sync();
    }
    C[row * N + col] = sum;
}

template <typename T, int TILE>
__global__ void gemm_barrier_tiled(const T *A, const T *B, T *C, int M, int N, int K)
{
    barrier_tiled_body<T, TILE, true>(A, B, C, M, N, K);
}

template <typename T, int TILE>
__global__ void gemm_barrier_no_wait(const T *A, const T *B, T *C, int M, int N, int K)
{
    barrier_tiled_body<T, TILE, false>(A, B, C, M, N, K);
}
