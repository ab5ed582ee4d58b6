// Grouped GEMMs of a mixture-of-experts layer, the way they are usually published: the tokens
// routed to expert g are the rows of A (and C) of group g, multiplied by the expert's weights
// B_g = B + g * K * N (B is [experts][K][N], row-major); one TILE x TILE block per output tile of
// one group, the group from blockIdx.z.
//
// - contiguous: group g's rows are expert_offsets[g] .. expert_offsets[g + 1] of A and C
//   (prefix sums, experts + 1 entries); M is every group's rows together. Launch: grid
//   (ceil(N / TILE), ceil(M / TILE), experts): a group's blocks past its rows return at once.
// - masked: each expert has a slot of M rows, of which the first counts[g] are its tokens
//   (A is [experts][M][K], C [experts][M][N]); the rest is never read or written.
//
// float sums; fp16 or float data.

#include <cuda_fp16.h>

template <typename T, int TILE>
__device__ __forceinline__ void group_tile(const T *A, const T *B, T *C, int row, int rows, int col, int N, int K)
{
    __shared__ T As[TILE][TILE];
    __shared__ T Bs[TILE][TILE];
    float sum = 0.0f;
    for (int t = 0; t < (K + TILE - 1) / TILE; t++)
    {
        int aCol = t * TILE + threadIdx.x;
        int bRow = t * TILE + threadIdx.y;
        As[threadIdx.y][threadIdx.x] = (row < rows && aCol < K) ? A[row * K + aCol] : T(0.0f);
        Bs[threadIdx.y][threadIdx.x] = (bRow < K && col < N) ? B[bRow * N + col] : T(0.0f);
        __syncthreads();
        for (int k = 0; k < TILE; k++)
            sum += float(As[threadIdx.y][k]) * float(Bs[k][threadIdx.x]);
        __syncthreads();
    }
    if (row < rows && col < N)
        C[row * N + col] = T(sum);
}

template <typename T, int TILE, int END_SHIFT>
__device__ __forceinline__ void contiguous_body(const T *A, const T *B, T *C, const int *expert_offsets,
                                                int N, int K)
{
    const int g = blockIdx.z;
    const int begin = expert_offsets[g];
    const int end = expert_offsets[g + 1] + END_SHIFT;
    if (begin + (int)blockIdx.y * TILE >= end)
        return;   // past this group's rows: the whole block leaves before any barrier
    const int row = blockIdx.y * TILE + threadIdx.y;
    const int col = blockIdx.x * TILE + threadIdx.x;
    group_tile<T, TILE>(A + (long long)begin * K, B + (long long)g * K * N, C + (long long)begin * N,
                        row, end - begin, col, N, K);
}

template <typename T, int TILE>
__global__ void moe_grouped_gemm(const T *A, const T *B, T *C, const int *expert_offsets,
                                 int M, int N, int K, int num_experts)
{
    contiguous_body<T, TILE, 0>(A, B, C, expert_offsets, N, K);
}

// Broken twin: a group's end offset one row too far (expert_offsets[g + 1] + 1): every group
// computes the next group's first row with its own expert, the last one a row past C.
template <typename T, int TILE>
__global__ void broken_grouped_offset_off_by_one(const T *A, const T *B, T *C, const int *expert_offsets,
                                                 int M, int N, int K, int num_experts)
{
    contiguous_body<T, TILE, 1>(A, B, C, expert_offsets, N, K);
}

template <typename T, int TILE, bool COMPUTE_MASKED_TAIL>
__device__ __forceinline__ void masked_body(const T *A, const T *B, T *C, const int *counts, int M, int N, int K)
{
    const int g = blockIdx.z;
    const int rows = COMPUTE_MASKED_TAIL ? M : counts[g];
    if ((int)blockIdx.y * TILE >= rows)
        return;
    const int row = blockIdx.y * TILE + threadIdx.y;
    const int col = blockIdx.x * TILE + threadIdx.x;
    group_tile<T, TILE>(A + (long long)g * M * K, B + (long long)g * K * N, C + (long long)g * M * N,
                        row, rows, col, N, K);
}

template <typename T, int TILE>
__global__ void moe_masked_gemm(const T *A, const T *B, T *C, const int *counts, int M, int N, int K,
                                int num_experts)
{
    masked_body<T, TILE, false>(A, B, C, counts, M, N, K);
}

// Broken twin: every slot computed whole, the masked tail of each group too.
template <typename T, int TILE>
__global__ void broken_masked_tail_computed(const T *A, const T *B, T *C, const int *counts, int M, int N, int K,
                                            int num_experts)
{
    masked_body<T, TILE, true>(A, B, C, counts, M, N, K);
}
