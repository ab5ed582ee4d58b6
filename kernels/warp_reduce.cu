// A warp per element of C: the warp-reduction GEMM (as GEMV and small-N kernels publish it),
// the correct kernel and two twins, each differing from it by one warp mask.
//
// Block (32, TILE): warp w of block (bx, by) computes C[by * TILE + w, bx]. Lane l sums
// k = l, l + 32, ...; __shfl_down_sync folds the 32 partial sums into lane 0, __shfl_sync
// broadcasts lane 0's total to the whole warp, and the warp's last lane stores it (a lane
// that did not compute the total: the broadcast is what makes its store right).
// Launch: grid (N, ceil(M / TILE)), block (32, TILE). TILE is the warps per block.
//
// The twins (kernels/catalog.toml declares them invalid_warp_mask). Every lane calls each
// warp-synchronous function, so on a GPU the warp is converged and the values come out right:
// the flaw is undefined behaviour that hardware happens to forgive, seen by the CPU
// simulator's warp tracking (the lanes outside the mask, the call and its line).
//  - broken_half_mask_shuffle: the broadcast's mask is 0x0000ffff, the lower half only (a
//    typo for 0xffffffff): lanes 16..31 call a __shfl_sync whose mask leaves them out. The
//    compiler drops a constant shuffle mask (sm_90: SHFL.IDX has no mask operand), so
//    compute-sanitizer's synccheck has nothing to check either.
//  - broken_half_mask_syncwarp: a __syncwarp(0x0000ffff) before the broadcast: lanes 16..31
//    reach a __syncwarp() whose mask leaves them out, which synccheck reports ("Barrier error
//    detected. Invalid arguments").

enum WarpFlaw
{
    NO_WARP_FLAW,
    HALF_MASK_SHUFFLE,   // __shfl_sync(0x0000ffff, ...) called by all 32 lanes
    HALF_MASK_SYNCWARP,  // __syncwarp(0x0000ffff) called by all 32 lanes
};

template <typename T, int TILE, WarpFlaw F>
__device__ __forceinline__ void warp_reduce_body(const T *A, const T *B, T *C, int M, int N, int K)
{
    const int lane = threadIdx.x;
    const int row = blockIdx.y * TILE + threadIdx.y;
    const int col = blockIdx.x;
    if (row >= M)
        return;  // the whole warp: a warp is one row
    T sum = T(0);
    for (int k = lane; k < K; k += 32)
        sum += A[row * K + k] * B[k * N + col];
    for (int offset = 16; offset > 0; offset /= 2)
        sum += __shfl_down_sync(0xffffffffu, sum, offset);
    if (F == HALF_MASK_SYNCWARP)
        __syncwarp(0x0000ffffu);
    const unsigned broadcast = F == HALF_MASK_SHUFFLE ? 0x0000ffffu : 0xffffffffu;
    const T total = __shfl_sync(broadcast, sum, 0);
    if (lane == 31)
        C[row * N + col] = total;
}

#define WARP_REDUCE_KERNEL(NAME, FLAW)                                                  \
    template <typename T, int TILE>                                                     \
    __global__ void NAME(const T *A, const T *B, T *C, int M, int N, int K)            \
    {                                                                                   \
        warp_reduce_body<T, TILE, FLAW>(A, B, C, M, N, K);                              \
    }

WARP_REDUCE_KERNEL(matmul_warp_reduce, NO_WARP_FLAW)
WARP_REDUCE_KERNEL(broken_half_mask_shuffle, HALF_MASK_SHUFFLE)
WARP_REDUCE_KERNEL(broken_half_mask_syncwarp, HALF_MASK_SYNCWARP)
