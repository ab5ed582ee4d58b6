// Shared-memory cache-blocking SGEMM, tutorial style: a 1-D block of BLOCKSIZE * BLOCKSIZE
// threads computes a BLOCKSIZE x BLOCKSIZE tile of C from BLOCKSIZE-wide slices of A and B
// staged in shared memory. Unlike many published versions it guards its loads and stores,
// so it is correct on any M, N, K.
#include <cublas_v2.h>
#include <cstdio>
#include <cassert>

#define CEIL_DIV(M, N) (((M) + (N) - 1) / (N))

template <const int BLOCKSIZE>
__global__ void sgemm_shared_mem_block(int M, int N, int K, float alpha, const float *A,
                                       const float *B, float beta, float *C)
{
    const uint cRow = blockIdx.y;
    const uint cCol = blockIdx.x;

    __shared__ float As[BLOCKSIZE * BLOCKSIZE];
    __shared__ float Bs[BLOCKSIZE * BLOCKSIZE];

    const uint threadCol = threadIdx.x % BLOCKSIZE;
    const uint threadRow = threadIdx.x / BLOCKSIZE;
    const uint row = cRow * BLOCKSIZE + threadRow;
    const uint col = cCol * BLOCKSIZE + threadCol;

    float tmp = 0.0f;
    for (int bkIdx = 0; bkIdx < K; bkIdx += BLOCKSIZE) {
        As[threadRow * BLOCKSIZE + threadCol] =
            (row < M && bkIdx + threadCol < K) ? A[row * K + bkIdx + threadCol] : 0.0f;
        Bs[threadRow * BLOCKSIZE + threadCol] =
            (bkIdx + threadRow < K && col < N) ? B[(bkIdx + threadRow) * N + col] : 0.0f;
        __syncthreads();

        for (int dotIdx = 0; dotIdx < BLOCKSIZE; ++dotIdx) {
            tmp += As[threadRow * BLOCKSIZE + dotIdx] * Bs[dotIdx * BLOCKSIZE + threadCol];
        }
        __syncthreads();   // before the next slice overwrites As and Bs
    }
    if (row < M && col < N) {
        C[row * N + col] = beta == 0.0f ? alpha * tmp : alpha * tmp + beta * C[row * N + col];
    }
}

void run_sgemm_shared_mem_block(int M, int N, int K, float alpha, float *A, float *B, float beta, float *C)
{
    dim3 gridDim(CEIL_DIV(N, 32), CEIL_DIV(M, 32));
    dim3 blockDim(32 * 32);
    sgemm_shared_mem_block<32><<<gridDim, blockDim>>>(M, N, K, alpha, A, B, beta, C);
    assert(cudaGetLastError() == cudaSuccess);
}
