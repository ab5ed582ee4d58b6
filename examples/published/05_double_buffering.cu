// Double buffering with asynchronous copies, tutorial style: while the block computes on one
// shared-memory stage, cuda::memcpy_async fills the other; a cuda::barrier per stage says
// when a stage has landed, and cooperative groups name the block. A 1-D block of
// BM * BN / (TM * TN) threads, a TM x TN register tile per thread (as the 2-D blocktiling
// kernel). No bounds guards, as published: M, N, K multiples of BM, BN, BK.
#include <cublas_v2.h>
#include <cstdio>
#include <cassert>
#include <cooperative_groups.h>
#include <cuda/barrier>

namespace cg = cooperative_groups;
using barrier = cuda::barrier<cuda::thread_scope_block>;

template <const int BM, const int BN, const int BK, const int TM, const int TN>
__device__ void issueStage(cg::thread_block &block, int N, int K, const float *A, const float *B,
                           float *As, float *Bs, barrier &bar)
{
    constexpr uint NUM_THREADS = (BM * BN) / (TM * TN);
    // A's slice row by row (kept [m][k]); B's slice row by row ([k][n]).
    for (uint row = threadIdx.x; row < BM; row += NUM_THREADS) {
        cuda::memcpy_async(&As[row * BK], &A[row * K], cuda::aligned_size_t<16>(sizeof(float) * BK), bar);
    }
    for (uint row = threadIdx.x; row < BK; row += NUM_THREADS) {
        cuda::memcpy_async(&Bs[row * BN], &B[row * N], cuda::aligned_size_t<16>(sizeof(float) * BN), bar);
    }
}

template <const int BM, const int BN, const int BK, const int TM, const int TN>
__global__ void __launch_bounds__((BM * BN) / (TM * TN))
    sgemmDoubleBuffering(int M, int N, int K, float alpha, float *A, float *B, float beta, float *C)
{
    auto block = cg::this_thread_block();
    const uint threadCol = threadIdx.x % (BN / TN);
    const uint threadRow = threadIdx.x / (BN / TN);

    __shared__ alignas(16) float As[2][BM * BK];
    __shared__ alignas(16) float Bs[2][BK * BN];
#pragma nv_diag_suppress static_var_with_dynamic_init
    __shared__ barrier bars[2];
    if (block.thread_rank() == 0) {
        init(&bars[0], block.size());
        init(&bars[1], block.size());
    }
    block.sync();

    A += blockIdx.y * BM * K;
    B += blockIdx.x * BN;
    C += blockIdx.y * BM * N + blockIdx.x * BN;

    float threadResults[TM * TN] = {0.0f};
    const uint stages = K / BK;

    issueStage<BM, BN, BK, TM, TN>(block, N, K, A, B, As[0], Bs[0], bars[0]);
    for (uint s = 0; s < stages; ++s) {
        const uint cur = s % 2;
        if (s + 1 < stages) {   // the next stage loads while this one computes
            issueStage<BM, BN, BK, TM, TN>(block, N, K, A + (s + 1) * BK, B + (s + 1) * BK * N,
                                           As[1 - cur], Bs[1 - cur], bars[1 - cur]);
        }
        bars[cur].arrive_and_wait();   // this stage's copies have landed
        for (uint dotIdx = 0; dotIdx < BK; ++dotIdx) {
            for (uint resIdxM = 0; resIdxM < TM; ++resIdxM) {
                const float a = As[cur][(threadRow * TM + resIdxM) * BK + dotIdx];
                for (uint resIdxN = 0; resIdxN < TN; ++resIdxN) {
                    threadResults[resIdxM * TN + resIdxN] += a * Bs[cur][dotIdx * BN + threadCol * TN + resIdxN];
                }
            }
        }
        block.sync();   // every thread is done with this stage before it is refilled
    }

    for (uint resIdxM = 0; resIdxM < TM; ++resIdxM) {
        for (uint resIdxN = 0; resIdxN < TN; ++resIdxN) {
            float *out = &C[(threadRow * TM + resIdxM) * N + threadCol * TN + resIdxN];
            const float v = alpha * threadResults[resIdxM * TN + resIdxN];
            *out = beta == 0.0f ? v : v + beta * *out;
        }
    }
}

void runSgemmDoubleBuffering(int M, int N, int K, float alpha, float *A, float *B, float beta, float *C)
{
    const uint BK = 16, TM = 8, TN = 8, BM = 128, BN = 128;
    dim3 gridDim((N + BN - 1) / BN, (M + BM - 1) / BM);
    dim3 blockDim((BM * BN) / (TM * TN));
    sgemmDoubleBuffering<BM, BN, BK, TM, TN><<<gridDim, blockDim>>>(M, N, K, alpha, A, B, beta, C);
}
