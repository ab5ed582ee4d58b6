// A small Hopper GEMM written the way tutorials write them: C = alpha A B + beta C.
//
// A is M x K row-major and B is N x K (column-major K x N, "TN"): both are K-major, so one
// tensor map box of each is a BM x BK or BN x BK tile whose rows are 128 bytes of K. The host
// encodes the tensor maps with cuTensorMapEncodeTiled (swizzle 128B); the kernel takes them
// as const __grid_constant__ CUtensorMap parameters.
//
// One thread issues the TMA loads (cp.async.bulk.tensor) into a 2-stage ring of swizzled
// shared tiles; each stage completes on its own mbarrier, which carries the expected byte
// count (arrive.expect_tx). Every thread waits on the stage's barrier before it reads the
// tile, and the block syncs after computing on a stage before that stage is refilled.
// TMA zero-fills the parts of a box outside the matrix, so ragged M, N and K tails need no
// guards on the loads; the epilogue guards its plain stores of C.
//
// The grid is launched in 2 x 1 x 1 thread-block clusters. The blocks of a cluster only
// meet at a cluster barrier here (no multicast): the example shows the launch, not the use.
//
// Compute is plain FMA from shared memory (float accumulators), 256 threads, each a 4 x 4
// micro-tile of the 64 x 64 block tile. Build: sm_90a (cp.async.bulk.tensor needs sm_90).
//
// tma_gemm_store_d writes a separate D = alpha A B + beta C as Hopper GEMMs ship: the block
// stages its tile of D in shared memory and one TMA store (a tensor map of D) writes it; TMA
// clips the box at D's edges, so the ragged tail needs no guard. C is only read, and only
// when beta != 0.

#include <cuda.h>          // CUtensorMap
#include <cuda_fp16.h>
#include <cuda_bf16.h>

namespace tma_gemm {

constexpr int STAGES = 2;
constexpr int THREADS = 256;

__device__ __forceinline__ unsigned smem_address(const void* p)
{
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void barrier_init(unsigned long long* barrier, unsigned count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(smem_address(barrier)), "r"(count));
}

// The initialized barriers must be visible to the async proxy (TMA) and the whole cluster.
__device__ __forceinline__ void fence_barrier_init()
{
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// Orders this thread's earlier generic-proxy accesses to shared memory before later
// async-proxy (TMA) ones: the refill of a stage comes after the reads of the old tile.
__device__ __forceinline__ void fence_proxy_async()
{
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// Arrive once on the barrier and tell it how many bytes of TMA writes its phase waits for.
__device__ __forceinline__ void arrive_expect_bytes(unsigned long long* barrier, unsigned bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                 :: "r"(smem_address(barrier)), "r"(bytes) : "memory");
}

// Spin until the barrier's phase with this parity has completed.
__device__ __forceinline__ void wait_parity(unsigned long long* barrier, unsigned parity)
{
    asm volatile(
        "{\n"
        ".reg .pred done;\n"
        "WAIT_%=:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra WAIT_%=;\n"
        "}\n" :: "r"(smem_address(barrier)), "r"(parity) : "memory");
}

// One box of a 2-D tensor map at (inner, outer) into shared memory; completes on `barrier`.
__device__ __forceinline__ void tma_load_2d(void* destination, const CUtensorMap* map, int inner, int outer,
                                            unsigned long long* barrier)
{
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3}], [%4];"
        :: "r"(smem_address(destination)), "l"(reinterpret_cast<unsigned long long>(map)),
           "r"(inner), "r"(outer), "r"(smem_address(barrier)) : "memory");
}

// One box of shared memory into a 2-D tensor map at (inner, outer); TMA writes only the part
// of the box inside the tensor. Waits until the store has read the tile: the block's shared
// memory must outlive it.
__device__ __forceinline__ void tma_store_2d(const CUtensorMap* map, int inner, int outer, const void* source)
{
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];"
                 :: "l"(reinterpret_cast<unsigned long long>(map)), "r"(inner), "r"(outer),
                    "r"(smem_address(source)) : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
}

__device__ __forceinline__ void cluster_sync()
{
    asm volatile("barrier.cluster.arrive.release.aligned;\n"
                 "barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

__device__ __forceinline__ unsigned cluster_rank()
{
    unsigned rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    return rank;
}

// Element (row, col) of a tile whose rows are 128 bytes, as TMA's 128B swizzle stores it:
// the 16-byte chunk index within a row is XORed with the row's index mod 8.
template <typename T>
__device__ __forceinline__ int swizzled_128B(int row, int col)
{
    constexpr int per_chunk = 16 / sizeof(T);
    constexpr int per_row = 128 / sizeof(T);
    return row * per_row + (((col / per_chunk) ^ (row % 8)) * per_chunk) + col % per_chunk;
}

template <typename T>
__device__ __forceinline__ int unswizzled(int row, int col)
{
    return row * (128 / sizeof(T)) + col;
}

// The kernel body. The three switches make the broken twins of the catalog; the reference
// has all three on. `map_out`: where a TMA store writes the result (D's tensor map; the
// twin's C's), or null: plain stores into C.
template <typename T, int BM, int BN, int BK, bool WAIT, bool SWIZZLED_READS, bool GUARDED_STORES>
__device__ __forceinline__ void gemm(int M, int N, int K, float alpha, const CUtensorMap& map_A,
                                     const CUtensorMap& map_B, float beta, T* C,
                                     const CUtensorMap* map_out = nullptr)
{
    static_assert(BK * sizeof(T) == 128, "a tile row is one 128-byte swizzle span");
    static_assert(BM * BN == THREADS * 16, "each thread computes a 4 x 4 micro-tile");
    // 1024-byte alignment: the 128B swizzle pattern repeats every 8 rows of 128 bytes
    __shared__ alignas(1024) T tile_A[STAGES][BM * BK];
    __shared__ alignas(1024) T tile_B[STAGES][BN * BK];
    __shared__ alignas(8) unsigned long long full[STAGES];

    const int tid = threadIdx.x;
    const int m0 = blockIdx.y * BM;
    const int n0 = blockIdx.x * BN;
    const int k_tiles = (K + BK - 1) / BK;
    constexpr unsigned STAGE_BYTES = (BM + BN) * BK * sizeof(T);   // a box is full size, zeros and all

    if (tid == 0) {
        for (int s = 0; s < STAGES; ++s)
            barrier_init(&full[s], 1);
        fence_barrier_init();
    }
    // every block of the cluster has started (and initialized its barriers) before any goes on
    cluster_sync();

    auto issue = [&](int kt) {
        const int s = kt % STAGES;
        arrive_expect_bytes(&full[s], STAGE_BYTES);
        tma_load_2d(tile_A[s], &map_A, kt * BK, m0, &full[s]);
        tma_load_2d(tile_B[s], &map_B, kt * BK, n0, &full[s]);
    };
    if (tid == 0)
        for (int kt = 0; kt < STAGES && kt < k_tiles; ++kt)
            issue(kt);

    const int row0 = (tid / 16) * 4;   // this thread's 4 x 4 micro-tile in the block tile
    const int col0 = (tid % 16) * 4;
    float acc[4][4] = {};

    for (int kt = 0; kt < k_tiles; ++kt) {
        const int s = kt % STAGES;
        if (WAIT)
            wait_parity(&full[s], (kt / STAGES) % 2);   // use kt / STAGES of this stage
        const T* a = tile_A[s];
        const T* b = tile_B[s];
        for (int k = 0; k < BK; ++k) {
            float a_k[4], b_k[4];
            for (int i = 0; i < 4; ++i) {
                a_k[i] = float(a[SWIZZLED_READS ? swizzled_128B<T>(row0 + i, k) : unswizzled<T>(row0 + i, k)]);
                b_k[i] = float(b[SWIZZLED_READS ? swizzled_128B<T>(col0 + i, k) : unswizzled<T>(col0 + i, k)]);
            }
            for (int i = 0; i < 4; ++i)
                for (int j = 0; j < 4; ++j)
                    acc[i][j] = fmaf(a_k[i], b_k[j], acc[i][j]);
        }
        if (!WAIT)
            wait_parity(&full[s], (kt / STAGES) % 2);   // too late: the tile was read already
        __syncthreads();                 // every thread is done with stage s ...
        if (tid == 0 && kt + STAGES < k_tiles) {
            fence_proxy_async();
            issue(kt + STAGES);          // ... before TMA refills it
        }
    }

    if (map_out != nullptr) {
        // the block's tile of the result, staged in shared memory for one TMA store
        __shared__ alignas(128) T tile_out[BM * BN];
        for (int i = 0; i < 4; ++i) {
            const int m = m0 + row0 + i;
            for (int j = 0; j < 4; ++j) {
                const int n = n0 + col0 + j;
                float value = alpha * acc[i][j];
                if (beta != 0.0f && m < M && n < N)   // C is an input here, read inside it only
                    value += beta * float(C[(long long)m * N + n]);
                tile_out[(row0 + i) * BN + col0 + j] = T(value);
            }
        }
        fence_proxy_async();             // this thread's writes of the tile, before TMA reads it
        __syncthreads();
        if (tid == 0)
            tma_store_2d(map_out, n0, m0, tile_out);
    } else {
        for (int i = 0; i < 4; ++i) {
            const int m = m0 + row0 + i;
            for (int j = 0; j < 4; ++j) {
                const int n = n0 + col0 + j;
                if (n >= N || (GUARDED_STORES && m >= M))
                    continue;   // the broken twin forgets the row guard: rows past M land past C
                float value = alpha * acc[i][j];
                if (beta != 0.0f)            // BLAS: at beta = 0, C is not read
                    value += beta * float(C[(long long)m * N + n]);
                C[(long long)m * N + n] = T(value);
            }
        }
    }
    // In 2 x 1 x 1 clusters a block's rank is blockIdx.x % 2: a launch without the
    // catalog's cluster would give every block rank 0, and is stopped here.
    if (cluster_rank() != blockIdx.x % 2)
        __trap();
    cluster_sync();                      // a block leaves when its cluster's blocks are done
}

}  // namespace tma_gemm

template <typename T, int BM, int BN, int BK>
__global__ void __launch_bounds__(tma_gemm::THREADS)
tma_gemm_2stage(int M, int N, int K, float alpha, const __grid_constant__ CUtensorMap map_A,
                const __grid_constant__ CUtensorMap map_B, float beta, T* C)
{
    tma_gemm::gemm<T, BM, BN, BK, true, true, true>(M, N, K, alpha, map_A, map_B, beta, C);
}

// Broken: computes on a stage before waiting for its TMA load to land (it waits only
// afterwards, so no load is still in flight when the stage is refilled or the block exits).
template <typename T, int BM, int BN, int BK>
__global__ void __launch_bounds__(tma_gemm::THREADS)
tma_gemm_no_wait(int M, int N, int K, float alpha, const __grid_constant__ CUtensorMap map_A,
                 const __grid_constant__ CUtensorMap map_B, float beta, T* C)
{
    tma_gemm::gemm<T, BM, BN, BK, false, true, true>(M, N, K, alpha, map_A, map_B, beta, C);
}

// Broken: the tensor maps swizzle 128B, but the kernel reads its tiles as if unswizzled.
template <typename T, int BM, int BN, int BK>
__global__ void __launch_bounds__(tma_gemm::THREADS)
tma_gemm_unswizzled_reads(int M, int N, int K, float alpha, const __grid_constant__ CUtensorMap map_A,
                          const __grid_constant__ CUtensorMap map_B, float beta, T* C)
{
    tma_gemm::gemm<T, BM, BN, BK, true, false, true>(M, N, K, alpha, map_A, map_B, beta, C);
}

// Broken: the epilogue stores rows past M at a ragged edge (TMA's zero fill made the loads safe,
// which is easy to mistake for the stores being safe too).
template <typename T, int BM, int BN, int BK>
__global__ void __launch_bounds__(tma_gemm::THREADS)
tma_gemm_unguarded_store(int M, int N, int K, float alpha, const __grid_constant__ CUtensorMap map_A,
                         const __grid_constant__ CUtensorMap map_B, float beta, T* C)
{
    tma_gemm::gemm<T, BM, BN, BK, true, true, false>(M, N, K, alpha, map_A, map_B, beta, C);
}

// D = alpha A B + beta C with D separate, written by a TMA store of each block's tile.
template <typename T, int BM, int BN, int BK>
__global__ void __launch_bounds__(tma_gemm::THREADS)
tma_gemm_store_d(int M, int N, int K, float alpha, const __grid_constant__ CUtensorMap map_A,
                 const __grid_constant__ CUtensorMap map_B, float beta, const T* C,
                 const __grid_constant__ CUtensorMap map_D)
{
    tma_gemm::gemm<T, BM, BN, BK, true, true, true>(M, N, K, alpha, map_A, map_B, beta, const_cast<T*>(C), &map_D);
}

// Broken: given tensor maps of C and D, it stores its result through C's: C, an input, is
// overwritten and D never written.
template <typename T, int BM, int BN, int BK>
__global__ void __launch_bounds__(tma_gemm::THREADS)
tma_gemm_store_d_into_c(int M, int N, int K, float alpha, const __grid_constant__ CUtensorMap map_A,
                        const __grid_constant__ CUtensorMap map_B, float beta, const T* C,
                        const __grid_constant__ CUtensorMap map_C, const __grid_constant__ CUtensorMap map_D)
{
    tma_gemm::gemm<T, BM, BN, BK, true, true, true>(M, N, K, alpha, map_A, map_B, beta, const_cast<T*>(C), &map_C);
}
