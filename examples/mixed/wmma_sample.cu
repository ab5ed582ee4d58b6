// A tensor-core GEMM in the style of the vendor's WMMA sample: half A and B, float C, a
// separate float D = alpha * A * B + beta * C, one warp per 16 x 16 x 16 WMMA tile, a 2-D grid
// of warps, and a host main that runs it once. A is row-major (M x K), B column-major
// (K x N), C and D row-major (M x N); every dimension a multiple of 16, as the sample assumes.
//
// wmma_gemm skips C's load when beta is 0 (BLAS: C need not hold anything then);
// wmma_gemm_loads_c loads it always, as the sample's epilogue does: at beta = 0 a C full of
// NaN leaks into D (0 * NaN is NaN), which the suite names reads_c_at_beta_zero.

#include <cstdio>
#include <cstdlib>
#include <cuda_fp16.h>
#include <mma.h>

using namespace nvcuda;

#define WMMA_M 16
#define WMMA_N 16
#define WMMA_K 16

template <bool LOAD_C_ALWAYS>
__device__ void wmma_tile(const half *a, const half *b, const float *c, float *d, int m_ld, int n_ld, int k_ld,
                          float alpha, float beta)
{
    // leading dimensions: packed, A and B both K-major
    const int lda = k_ld, ldb = k_ld, ldc = n_ld;
    // the warp's 16 x 16 tile of D: warps along x cover M, threads along y cover N
    const int warp_m = (blockIdx.x * blockDim.x + threadIdx.x) / warpSize;
    const int warp_n = blockIdx.y * blockDim.y + threadIdx.y;
    const int row = warp_m * WMMA_M, col = warp_n * WMMA_N;
    if (row >= m_ld || col >= n_ld)
        return;   // the whole warp leaves together: the fragments are warp-wide

    wmma::fragment<wmma::matrix_a, WMMA_M, WMMA_N, WMMA_K, half, wmma::row_major> a_frag;
    wmma::fragment<wmma::matrix_b, WMMA_M, WMMA_N, WMMA_K, half, wmma::col_major> b_frag;
    wmma::fragment<wmma::accumulator, WMMA_M, WMMA_N, WMMA_K, float> acc_frag;
    wmma::fragment<wmma::accumulator, WMMA_M, WMMA_N, WMMA_K, float> c_frag;
    wmma::fill_fragment(acc_frag, 0.0f);

    for (int k = 0; k < k_ld; k += WMMA_K)
    {
        wmma::load_matrix_sync(a_frag, a + row * lda + k, lda);
        wmma::load_matrix_sync(b_frag, b + col * ldb + k, ldb);
        wmma::mma_sync(acc_frag, a_frag, b_frag, acc_frag);
    }

    if (LOAD_C_ALWAYS || beta != 0.0f)
        wmma::load_matrix_sync(c_frag, c + row * ldc + col, ldc, wmma::mem_row_major);
    else
        wmma::fill_fragment(c_frag, 0.0f);
    for (int i = 0; i < c_frag.num_elements; i++)
        c_frag.x[i] = (LOAD_C_ALWAYS || beta != 0.0f) ? alpha * acc_frag.x[i] + beta * c_frag.x[i]
                                                      : alpha * acc_frag.x[i];
    wmma::store_matrix_sync(d + row * ldc + col, c_frag, ldc, wmma::mem_row_major);
}

__global__ void wmma_gemm(const half *a, const half *b, const float *c, float *d, int m_ld, int n_ld, int k_ld,
                          float alpha, float beta)
{
    wmma_tile<false>(a, b, c, d, m_ld, n_ld, k_ld, alpha, beta);
}

__global__ void wmma_gemm_loads_c(const half *a, const half *b, const float *c, float *d, int m_ld, int n_ld,
                                  int k_ld, float alpha, float beta)
{
    wmma_tile<true>(a, b, c, d, m_ld, n_ld, k_ld, alpha, beta);
}

// -- the host side, as the sample has one: 256 x 256 x 256, random halves, one launch --------

#define CHECK(call)                                                                          \
    do                                                                                       \
    {                                                                                        \
        cudaError_t status = (call);                                                         \
        if (status != cudaSuccess)                                                           \
        {                                                                                    \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(status));  \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

int main()
{
    const int M = 256, N = 256, K = 256;
    half *a, *b;
    float *c, *d;
    CHECK(cudaMallocManaged(&a, sizeof(half) * M * K));
    CHECK(cudaMallocManaged(&b, sizeof(half) * K * N));
    CHECK(cudaMallocManaged(&c, sizeof(float) * M * N));
    CHECK(cudaMallocManaged(&d, sizeof(float) * M * N));
    for (int i = 0; i < M * K; i++)
        a[i] = __float2half((float)(rand() % 7 - 3));
    for (int i = 0; i < K * N; i++)
        b[i] = __float2half((float)(rand() % 7 - 3));
    for (int i = 0; i < M * N; i++)
        c[i] = (float)(rand() % 5);

    // 4 x 4 warps a block: 128 threads along x (4 warps over M), 4 along y (over N)
    dim3 block(128, 4);
    dim3 grid((M + WMMA_M * block.x / 32 - 1) / (WMMA_M * block.x / 32), (N + WMMA_N * block.y - 1) / (WMMA_N * block.y));
    wmma_gemm<<<grid, block>>>(a, b, c, d, M, N, K, 2.0f, 1.0f);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    printf("d[0] = %f\n", d[0]);
    CHECK(cudaFree(a));
    CHECK(cudaFree(b));
    CHECK(cudaFree(c));
    CHECK(cudaFree(d));
    return 0;
}
