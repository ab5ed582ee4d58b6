// A kernel whose helpers live in a header of another directory, found through the catalog's
// include_dirs (tests/test_cpu_sim_build.py).
#include "gemm_helpers.cuh"

template <int TILE>
__global__ void gemm_with_helpers(const float *A, const float *B, float *C, int M, int N, int K)
{
    int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    if (row < M && col < N)
        C[row * N + col] = dot_row_col(A, B, row, col, N, K);
}
