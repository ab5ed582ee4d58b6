// Rungs 9 and 10 of the reference ladder (docs/ladder.md): Hopper's own GEMM path, for float16
// and bfloat16 (gemm_wgmma), and for float8 e4m3 with a scale per tensor (gemm_wgmma_fp8), with
// float32 accumulation.
//
// The idea: rung 7 spends its threads moving tiles and its tensor-core work is warp-sized
// mma.sync. Here a copy engine moves the tiles (TMA, cp.async.bulk.tensor, one thread issues a
// whole tile, 128-byte swizzled in shared memory so the tensor cores read it without bank
// conflicts), and the math is warpgroup-sized (wgmma.mma_async m64nBNk16, operands read straight
// from shared memory through matrix descriptors, accumulators in registers). The warps
// specialize: warpgroup 0 is the producer (one thread issues TMA loads into a STAGES-deep ring;
// setmaxnreg gives its registers away), warpgroups 1 and 2 are consumers (each owns 64 rows of
// the BM x BN tile; setmaxnreg takes the registers their 64 x BN accumulators need). A full and
// an empty mbarrier per stage hand each stage between them: TMA completes its bytes on the full
// barrier, each consumer warp arrives on the empty one once its wgmma has read the stage. A
// cluster of CN x CM CTAs (CN along N, CM along M) shares operand tiles: the CTAs of a cluster
// row (same M tile) share A, those of a cluster column (same N tile) share B; each loads its
// 1 / CN of A's rows and 1 / CM of B's and multicasts them into every CTA that shares them, so
// each tile is read from L2 once per cluster row or column instead of once per CTA.
//
// Contract of gemm_wgmma (kernels/ladder_catalog.toml):
//     (int M, int N, int K, float alpha, const __grid_constant__ CUtensorMap tensor_map_A,
//      const __grid_constant__ CUtensorMap tensor_map_B, float beta, T *C)
// A row-major M x K, B column-major (K contiguous: element (k, n) at B[n * K + k]), C row-major
// M x N; C = alpha A B + beta C, C read only when beta != 0. The caller encodes each operand's
// map with cuTensorMapEncodeTiled over its matrix: box [BK, BM / CN] for A and [BK, BN / CM]
// for B (inner dimension K), 128-byte swizzle, out-of-bounds elements filled with zeros (so
// ragged M, N and K edges need no guards in the main loop). Claims K % 8 == 0 (TMA needs
// 16-byte row strides) and K > 0 (a tensor map has no empty dimension); any M and N. (Given
// maps of any extent, K == 0 gives beta C: the accumulators start at zero.)
// Launch: 384 threads, grid (CN * ceil(N / (CN * BN)), CM * ceil(M / (CM * BM))), cluster
// (CN, CM, 1), dynamic shared STAGES * (BM + BN) * BK * sizeof(T) + 2048 bytes (the barriers,
// then the tiles from a 1024-byte boundary, the 128-byte swizzle's period). Edge CTAs that
// only pad the grid to whole clusters load zeros (their boxes lie outside the maps) and store
// nothing. Compile for sm_90a (wgmma, setmaxnreg, multicast).
//
// gemm_wgmma_fp8 (rung 10) is the same kernel on e4m3 operands (T = __nv_fp8_e4m3):
//     (int M, int N, int K, const __grid_constant__ CUtensorMap tensor_map_A,
//      const __grid_constant__ CUtensorMap tensor_map_B, const float *scale_a, const float *scale_b,
//      __nv_bfloat16 *D)
// D = (sA sB) A B rounded to bfloat16 (sA = *scale_a, sB = *scale_b; alpha = sA sB, beta = 0 in
// the shared kernel, so nothing else is read). BK = 128 e4m3 is one 128-byte swizzle row, as
// BK = 64 halves, so tiles, maps, descriptors and their 32-byte k-steps are rung 9's; the
// instruction is wgmma m64nBNk32 e4m3. The tensor cores sum e4m3 products with a 13-bit
// significand, so each k-tile's four wgmmas sum into PARTIALS fresh partial sums (1: all four,
// 128 of K; 2: two wgmmas each) that are added to the accumulators in float32 (BN = 128: 64
// accumulators and 64 or 128 partial sums per thread); PARTIALS 0 accumulates in the tensor
// cores throughout, as rung 9 does (BN = 128 or 256). Claims
// K % 16 == 0 (16-byte rows of 1-byte elements) and K > 0; any M and N. Dynamic shared
// STAGES * (BM + BN) * BK + 2048 bytes.
//
// FLAW selects a broken twin for the kill matrix (0: the rung itself); each flaw is marked
// `// FLAW:` below:
//   1  the consumer's wait on the full barrier comes after the wgmma that reads the stage:
//      the tensor cores read shared memory before (or while) TMA writes it
//   2  the wgmma descriptors say "no swizzle" while TMA writes the tiles 128-byte swizzled
//   3  the epilogue stores without the col < N guard: a ragged N edge writes outside C
//   4  (gemm_wgmma_fp8) B's scale left out: D = sA A B

#include <cuda.h>   // CUtensorMap (under NVRTC, which cannot open this host header, gemmcheck's prelude declares it)
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

// wgmma and setmaxnreg exist in the arch-specific target sm_90a only: a device compile for any
// other target fails with the static_assert in the kernel, not with ptxas's first wgmma.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define LADDER_WGMMA_SM90A true
#else
#define LADDER_WGMMA_SM90A false
#endif

namespace ladder_hopper
{
template <typename T> struct wgmma_is_bf16 { static constexpr bool value = false; };
template <> struct wgmma_is_bf16<__nv_bfloat16> { static constexpr bool value = true; };
template <typename T> struct wgmma_is_e4m3 { static constexpr bool value = false; };
template <> struct wgmma_is_e4m3<__nv_fp8_e4m3> { static constexpr bool value = true; };

__device__ __forceinline__ unsigned smem_address(const void *p)
{
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// -- mbarriers ---------------------------------------------------------------------------
// Arrivals and waits keep the instructions' default semantics (release / acquire at CTA scope),
// as CUTLASS does: the ordering that matters (a wgmma's reads before TMA's next writes, TMA's
// bytes before a wgmma's reads) is carried by wgmma.wait_group and the transaction count.
// Measured (H200, float16, 4096^3, no cluster): with .release.cluster arrivals (through mapa)
// and .acquire.cluster waits the kernel ran at 420 TFLOP/s, with these at 661.
__device__ __forceinline__ void barrier_init(unsigned bar, unsigned count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
}
// The producer's arrival: one arrival plus the bytes TMA will complete on this phase.
__device__ __forceinline__ void barrier_arrive_expect_bytes(unsigned bar, unsigned bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void barrier_arrive(unsigned bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// An arrival on the barrier at the same offset in CTA `rank` of the cluster (this CTA too).
__device__ __forceinline__ void barrier_arrive_in_cta(unsigned bar, unsigned rank)
{
    asm volatile("{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %0, %1;\n"
                 "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n" ::"r"(bar), "r"(rank)
                 : "memory");
}
// Wait until the phase of parity `parity` has completed.
__device__ __forceinline__ void barrier_wait(unsigned bar, unsigned parity)
{
    unsigned done;
    do
    {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(bar), "r"(parity)
                     : "memory");
    } while (!done);
}

// -- cluster -----------------------------------------------------------------------------
// This CTA's position in its cluster: x along N, y along M; its rank is x + y * (cluster width).
__device__ __forceinline__ unsigned cluster_x()
{
    unsigned x;
    asm volatile("mov.u32 %0, %%cluster_ctaid.x;\n" : "=r"(x));
    return x;
}
__device__ __forceinline__ unsigned cluster_y()
{
    unsigned y;
    asm volatile("mov.u32 %0, %%cluster_ctaid.y;\n" : "=r"(y));
    return y;
}
__device__ __forceinline__ void cluster_sync()
{
    asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}

// -- TMA ---------------------------------------------------------------------------------
// Load the box at (inner, outer) of `map` into shared memory at `dst`; its bytes complete on `bar`.
__device__ __forceinline__ void tma_load(unsigned dst, const CUtensorMap *map, unsigned bar, int inner, int outer)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n"
                 ::"r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(bar), "r"(inner), "r"(outer)
                 : "memory");
}
// The same box written at `dst` (and its bytes completed on `bar`) in every CTA of `cta_mask`.
__device__ __forceinline__ void tma_load_multicast(unsigned dst, const CUtensorMap *map, unsigned bar, int inner,
                                                   int outer, unsigned short cta_mask)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1, {%4, %5}], [%2], %3;\n"
                 ::"r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(bar), "h"(cta_mask), "r"(inner),
                 "r"(outer)
                 : "memory");
}

// -- wgmma -------------------------------------------------------------------------------
// A shared-memory matrix descriptor for a K-major tile written by TMA with the 128-byte swizzle:
// rows of 128 bytes (64 elements of K), 8-row core-matrix groups 1024 bytes apart (the stride
// byte offset), the leading byte offset unused for swizzled K-major layouts (1 by convention),
// layout type 1 = 128-byte swizzle (bits 62-63). The start address advances by 32 bytes per
// k16 step inside the swizzle row; the hardware applies the swizzle to the address bits, which
// is why each tile starts on a 1024-byte boundary.
template <int FLAW>
__device__ __forceinline__ unsigned long long smem_descriptor(unsigned address)
{
    unsigned long long desc = 0;
    desc |= (unsigned long long)((address & 0x3FFFF) >> 4);
    desc |= (unsigned long long)1 << 16;             // leading byte offset: 16 bytes
    desc |= (unsigned long long)(1024 >> 4) << 32;   // stride byte offset: 1024 bytes
    if (FLAW != 2)
        desc |= (unsigned long long)1 << 62;         // 128-byte swizzle
    // FLAW: (2) layout type 0 (no swizzle) while TMA wrote the tile 128-byte swizzled.
    return desc;
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int PENDING>
__device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(PENDING) : "memory"); }
// Keeps the compiler from moving accumulator accesses across wgmma issue and wait.
template <int R>
__device__ __forceinline__ void fence_accumulators(float (&d)[R])
{
#pragma unroll
    for (int i = 0; i < R; ++i)
        asm volatile("" : "+f"(d[i])::"memory");
}

// The accumulator operands of the wgmmas below, written once: the registers "%0, ..., %63"
// (%127) of the instruction and the matching "+f"(d[i]) constraints of the asm statement.
#define WGMMA_REGS_64 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define WGMMA_REGS_128 WGMMA_REGS_64 ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define WGMMA_D_64(d) \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
    "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
    "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
    "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
    "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
    "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
    "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
    "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define WGMMA_D_128(d) WGMMA_D_64(d), \
    "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
    "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
    "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), \
    "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), \
    "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), \
    "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), \
    "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), \
    "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])

// One wgmma, float32 accumulate, A and B K-major from shared memory, D += A B (D = A B where
// ACCUMULATE is 0): SHAPE "m64n128k16", TYPE "f16", "bf16" or "e4m3", TRANS the transpose
// immediates, then the accumulators and the operand numbers of the two descriptors and the
// scale-d flag that follow them.
#define WGMMA(SHAPE, TYPE, TRANS, REGS, D, DESC_A, DESC_B, SCALE_D, ACCUMULATE)                       \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" SCALE_D ", 0;\n"                                  \
                 "wgmma.mma_async.sync.aligned." SHAPE ".f32." TYPE "." TYPE " {" REGS "}, "          \
                 "%" DESC_A ", %" DESC_B ", p, 1, 1" TRANS ";\n}\n"                                   \
                 : D : "l"(desc_a), "l"(desc_b), "r"(ACCUMULATE))
// The transpose immediates of 16-bit types (0: both K-major); 8-bit types have none (K-major only).
#define WGMMA_K_MAJOR ", 0, 0"

template <typename T>
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], unsigned long long desc_a, unsigned long long desc_b)
{
    if constexpr (!wgmma_is_bf16<T>::value)
        WGMMA("m64n128k16", "f16", WGMMA_K_MAJOR, WGMMA_REGS_64, WGMMA_D_64(d), "64", "65", "66", 1);
    else
        WGMMA("m64n128k16", "bf16", WGMMA_K_MAJOR, WGMMA_REGS_64, WGMMA_D_64(d), "64", "65", "66", 1);
}

template <typename T>
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], unsigned long long desc_a, unsigned long long desc_b)
{
    if constexpr (!wgmma_is_bf16<T>::value)
        WGMMA("m64n256k16", "f16", WGMMA_K_MAJOR, WGMMA_REGS_128, WGMMA_D_128(d), "128", "129", "130", 1);
    else
        WGMMA("m64n256k16", "bf16", WGMMA_K_MAJOR, WGMMA_REGS_128, WGMMA_D_128(d), "128", "129", "130", 1);
}

// e4m3 x e4m3: 32 of K per instruction, i.e. the same 32 bytes of each 128-byte row as k16 of a
// 16-bit type, so the descriptors advance alike. ACCUMULATE 0: D = A B (a fresh partial sum).
__device__ __forceinline__ void wgmma_m64n128k32_e4m3(float (&d)[64], unsigned long long desc_a,
                                                      unsigned long long desc_b, int accumulate)
{
    WGMMA("m64n128k32", "e4m3", "", WGMMA_REGS_64, WGMMA_D_64(d), "64", "65", "66", accumulate);
}
__device__ __forceinline__ void wgmma_m64n256k32_e4m3(float (&d)[128], unsigned long long desc_a,
                                                      unsigned long long desc_b, int accumulate)
{
    WGMMA("m64n256k32", "e4m3", "", WGMMA_REGS_128, WGMMA_D_128(d), "128", "129", "130", accumulate);
}

template <typename T, int BN>
__device__ __forceinline__ void wgmma_tile(float (&d)[BN / 2], unsigned long long desc_a, unsigned long long desc_b,
                                           int accumulate = 1)
{
    if constexpr (wgmma_is_e4m3<T>::value && BN == 256)
        wgmma_m64n256k32_e4m3(d, desc_a, desc_b, accumulate);
    else if constexpr (wgmma_is_e4m3<T>::value)
        wgmma_m64n128k32_e4m3(d, desc_a, desc_b, accumulate);
    else if constexpr (BN == 256)
        wgmma_m64n256k16<T>(d, desc_a, desc_b);
    else
        wgmma_m64n128k16<T>(d, desc_a, desc_b);
}

// Store two neighbouring columns of C (as one 32-bit store where both are in and aligned).
template <typename T, int FLAW>
__device__ __forceinline__ void store_pair(T *C, int M, int N, int row, int col, float v0, float v1, float alpha,
                                          float beta, bool paired)
{
    const long long at = (long long)row * N + col;
    float out0 = alpha * v0, out1 = alpha * v1;
    if (row < M && col + 1 < N && paired)
    {
        if (beta != 0.0f)
        {
            out0 += beta * float(C[at]);
            out1 += beta * float(C[at + 1]);
        }
        if constexpr (wgmma_is_bf16<T>::value)
            *reinterpret_cast<__nv_bfloat162 *>(C + at) = __floats2bfloat162_rn(out0, out1);
        else
            *reinterpret_cast<__half2 *>(C + at) = __floats2half2_rn(out0, out1);
        return;
    }
#pragma unroll
    for (int j = 0; j < 2; ++j)
    {
        float out = j == 0 ? out0 : out1;
        const bool in = row < M && col + j < N;
        if (in && beta != 0.0f)
            out += beta * float(C[at + j]);
        // FLAW: (3) the column guard dropped from the store: columns >= N of an edge tile are
        // stored too, into the next row and, past the last row, outside C.
        if (in || (FLAW == 3 && row < M))
            C[at + j] = T(out);
    }
}

}  // namespace ladder_hopper

// The kernel of both rungs: T the operands' element type, TC C's; C = alpha A B + beta C.
// PARTIALS: the partial sums of each k-tile of 8-bit operands, added in float32 (0: none, the
// sums stay in the tensor cores throughout; always 0 for 16-bit operands).
template <typename T, typename TC, int BM, int BN, int BK, int STAGES, int CN, int CM, int FLAW, int PARTIALS = 0>
__device__ __forceinline__ void gemm_wgmma_body(int M, int N, int K, float alpha, const CUtensorMap *tensor_map_A,
                                                const CUtensorMap *tensor_map_B, float beta, TC *C)
{
    using namespace ladder_hopper;
    // 8-bit operands with partial sums: every k-tile is summed apart and added in float32 (below).
    constexpr bool PROMOTE = PARTIALS > 0;
    static_assert(PARTIALS == 0 || (wgmma_is_e4m3<T>::value && (PARTIALS == 1 || PARTIALS == 2)),
                  "partial sums: one or two per k-tile, for 8-bit operands");
    static_assert(BM == 128, "two consumer warpgroups of 64 rows each");
    static_assert(BN == 128 || BN == 256, "wgmma m64n128k16 or m64n256k16");
    static_assert(!PROMOTE || BN == 128, "partial sums: m64n128k32 (64 accumulators, 64 or 128 partial sums per thread)");
    static_assert(BK * sizeof(T) == 128, "one K row of a tile is one 128-byte swizzle row");
    static_assert((CN == 1 || CN == 2) && (CM == 1 || CM == 2), "clusters of 1 or 2 CTAs along N and M");
    constexpr int CONSUMER_WARPS = 8, CLUSTER = CN * CM;
    constexpr unsigned A_BYTES = BM * BK * sizeof(T), B_BYTES = BN * BK * sizeof(T);
    constexpr unsigned STAGE_BYTES = A_BYTES + B_BYTES;   // 1024-byte multiples: every tile stays aligned
    constexpr int ACC = BN / 2;                            // accumulators per thread: 64 x BN / 128

    // Barriers first (8-byte aligned), then the tiles from the next 1024-byte boundary.
    extern __shared__ __align__(1024) unsigned char ladder_wgmma_smem[];
    const unsigned full_bar = smem_address(ladder_wgmma_smem);
    const unsigned empty_bar = full_bar + 8 * STAGES;
    const unsigned tiles = (smem_address(ladder_wgmma_smem) + 16 * STAGES + 1023) & ~1023u;

    const int warpgroup = threadIdx.x / 128;
    const int k_tiles = (K + BK - 1) / BK;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;

    if (threadIdx.x == 0)
    {
        for (int s = 0; s < STAGES; ++s)
        {
            barrier_init(full_bar + 8 * s, 1);
            barrier_init(empty_bar + 8 * s, CONSUMER_WARPS * CLUSTER);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    // Every barrier of the cluster is initialized before any CTA's TMA or arrival reaches it.
    if constexpr (CLUSTER > 1)
        cluster_sync();
    else
        __syncthreads();

    if (warpgroup == 0)
    {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
        if (threadIdx.x == 0)
        {
            // The CTAs of a cluster row (same M tile) share A, those of a column (same N tile) B:
            // each loads its 1 / CN of A's rows and 1 / CM of B's into every CTA that shares them.
            const unsigned cx = CN > 1 ? cluster_x() : 0, cy = CM > 1 ? cluster_y() : 0;
            const unsigned short row_mask = ((1u << CN) - 1) << (cy * CN);
            unsigned short column_mask = 0;
            for (int y = 0; y < CM; ++y)
                column_mask |= 1u << (cx + y * CN);
            for (int t = 0; t < k_tiles; ++t)
            {
                const int s = t % STAGES, round = t / STAGES;
                if (round > 0)   // wait until every consumer of the cluster has released the stage
                    barrier_wait(empty_bar + 8 * s, (round - 1) & 1);
                const unsigned a_tile = tiles + s * STAGE_BYTES, b_tile = a_tile + A_BYTES, full = full_bar + 8 * s;
                barrier_arrive_expect_bytes(full, STAGE_BYTES);
                if constexpr (CM == 1)
                    tma_load(b_tile, tensor_map_B, full, t * BK, col0);
                else
                    tma_load_multicast(b_tile + cy * (B_BYTES / CM), tensor_map_B, full, t * BK,
                                       col0 + cy * (BN / CM), column_mask);
                if constexpr (CN == 1)
                    tma_load(a_tile, tensor_map_A, full, t * BK, row0);
                else
                    tma_load_multicast(a_tile + cx * (A_BYTES / CN), tensor_map_A, full, t * BK,
                                       row0 + cx * (BM / CN), row_mask);
            }
        }
    }
    else
    {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
        const int consumer = warpgroup - 1;   // rows consumer * 64 .. + 63 of the tile
        const int lane = threadIdx.x % 32, warp_in_group = (threadIdx.x / 32) % 4;
        float acc[ACC];
#pragma unroll
        for (int i = 0; i < ACC; ++i)
            acc[i] = 0.0f;

        // Release stage s to every producer of the cluster (those of this CTA's row and column
        // write into its stage s; every CTA is told, which is exact for clusters of two).
        auto release = [&](int s) {
            if (lane == 0)
            {
                if constexpr (CLUSTER == 1)
                {
                    barrier_arrive(empty_bar + 8 * s);
                }
                else
                {
#pragma unroll
                    for (int r = 0; r < CLUSTER; ++r)
                        barrier_arrive_in_cta(empty_bar + 8 * s, r);
                }
            }
        };

        // 8-bit operands: the tensor cores sum e4m3 products with a 13-bit significand (the result
        // keeps about 14 bits), not float32's 23. With PARTIALS > 0 each k-tile's wgmmas sum afresh
        // into PARTIALS partial sums, added to acc in float32 once the group is done, as the vendor
        // library's and CUTLASS's fp8 GEMMs do: one partial sum covers 128 of K, two 64 each (64
        // products of integers up to 16 stay within 2^14, exact in 14 bits). PARTIALS 0 keeps the
        // sums in the tensor cores throughout, as rung 9 does (the libraries' "fast accumulation").
        constexpr int K_STEPS = BK * sizeof(T) / 32, STEPS_PER_PARTIAL = K_STEPS / (PROMOTE ? PARTIALS : 1);
        float partial[PROMOTE ? PARTIALS : 1][ACC];
        auto fence_partials = [&]() {
#pragma unroll
            for (int p = 0; p < PARTIALS; ++p)
                fence_accumulators(partial[p]);
        };
        for (int t = 0; t < k_tiles; ++t)
        {
            const int s = t % STAGES;
            const unsigned parity = (t / STAGES) & 1;
            if (FLAW != 1)
                barrier_wait(full_bar + 8 * s, parity);
            const unsigned a_tile = tiles + s * STAGE_BYTES + consumer * 64 * BK * sizeof(T);
            const unsigned b_tile = tiles + s * STAGE_BYTES + A_BYTES;
            if constexpr (PROMOTE)
                fence_partials();
            else
                fence_accumulators(acc);
            wgmma_fence();
#pragma unroll
            for (int k = 0; k < K_STEPS; ++k)   // 32 bytes of each 128-byte row per wgmma
            {
                const unsigned long long desc_a = smem_descriptor<FLAW>(a_tile + k * 32);
                const unsigned long long desc_b = smem_descriptor<FLAW>(b_tile + k * 32);
                if constexpr (PROMOTE)   // the first wgmma of each partial sum starts it from zero
                    wgmma_tile<T, BN>(partial[k / STEPS_PER_PARTIAL], desc_a, desc_b, k % STEPS_PER_PARTIAL != 0);
                else
                    wgmma_tile<T, BN>(acc, desc_a, desc_b);
            }
            wgmma_commit();
            if constexpr (PROMOTE)
                fence_partials();
            else
                fence_accumulators(acc);
            // FLAW: (1) the full barrier is waited on only after the wgmma above has read the stage.
            if (FLAW == 1)
                barrier_wait(full_bar + 8 * s, parity);
            if constexpr (!PROMOTE)
            {
                // Keep one group in flight: tile t - 1's group is done, so its stage can be refilled.
                wgmma_wait<1>();
                fence_accumulators(acc);
                if (t > 0)
                    release((t - 1) % STAGES);
            }
            else
            {
                // The whole group (a partial wait before reading a partial sum makes ptxas serialize
                // every wgmma, C7514): the other consumer warpgroup's wgmmas keep the tensor cores
                // busy meanwhile.
                wgmma_wait<0>();
                fence_partials();
                release(s);
#pragma unroll
                for (int p = 0; p < PARTIALS; ++p)
#pragma unroll
                    for (int i = 0; i < ACC; ++i)
                        acc[i] += partial[p][i];
            }
        }
        if constexpr (!PROMOTE)
        {
            wgmma_wait<0>();
            fence_accumulators(acc);
            if (k_tiles > 0)
                release((k_tiles - 1) % STAGES);
        }

        // Epilogue. wgmma's accumulator layout: warp w of the group owns rows 16 w .. 16 w + 15;
        // per 8 columns j a thread holds (r, c), (r, c + 1), (r + 8, c), (r + 8, c + 1) with
        // r = lane / 4 and c = 8 j + 2 (lane % 4).
        const int row = row0 + consumer * 64 + warp_in_group * 16 + lane / 4;
        const bool paired = N % 2 == 0 && (reinterpret_cast<unsigned long long>(C) & 3) == 0;
#pragma unroll
        for (int j = 0; j < BN / 8; ++j)
        {
            const int col = col0 + 8 * j + 2 * (lane % 4);
            store_pair<TC, FLAW>(C, M, N, row, col, acc[4 * j], acc[4 * j + 1], alpha, beta, paired);
            store_pair<TC, FLAW>(C, M, N, row + 8, col, acc[4 * j + 2], acc[4 * j + 3], alpha, beta, paired);
        }
    }
    // No CTA leaves while its partner may still arrive on its barriers or multicast into it.
    if constexpr (CLUSTER > 1)
        cluster_sync();
}

template <typename T, int BM, int BN, int BK, int STAGES, int CN, int CM, int FLAW = 0>
__global__ void __launch_bounds__(384, 1)
gemm_wgmma(int M, int N, int K, float alpha, const __grid_constant__ CUtensorMap tensor_map_A,
           const __grid_constant__ CUtensorMap tensor_map_B, float beta, T *C)
{
#if defined(__CUDA_ARCH__)
    static_assert(LADDER_WGMMA_SM90A, "gemm_wgmma needs sm_90a (wgmma, setmaxnreg): compile with arch sm_90a");
    gemm_wgmma_body<T, T, BM, BN, BK, STAGES, CN, CM, FLAW>(M, N, K, alpha, &tensor_map_A, &tensor_map_B, beta, C);
#endif
}

// Rung 10: e4m3 A and B with a float scale each (per tensor, by pointer), D = (sA sB) A B in
// bfloat16: rung 9's kernel with the scales' product as alpha and beta 0 (C never read).
template <typename T, int BM, int BN, int BK, int STAGES, int CN, int CM, int PARTIALS, int FLAW = 0>
__global__ void __launch_bounds__(384, 1)
gemm_wgmma_fp8(int M, int N, int K, const __grid_constant__ CUtensorMap tensor_map_A,
               const __grid_constant__ CUtensorMap tensor_map_B, const float *scale_a, const float *scale_b,
               __nv_bfloat16 *D)
{
#if defined(__CUDA_ARCH__)
    static_assert(LADDER_WGMMA_SM90A, "gemm_wgmma_fp8 needs sm_90a (wgmma, setmaxnreg): compile with arch sm_90a");
    static_assert(ladder_hopper::wgmma_is_e4m3<T>::value, "gemm_wgmma_fp8 takes __nv_fp8_e4m3 operands");
    // FLAW: (4) B's scale left out.
    const float scale = FLAW == 4 ? *scale_a : *scale_a * *scale_b;
    gemm_wgmma_body<T, __nv_bfloat16, BM, BN, BK, STAGES, CN, CM, FLAW, PARTIALS>(
        M, N, K, scale, &tensor_map_A, &tensor_map_B, 0.0f, D);
#endif
}
