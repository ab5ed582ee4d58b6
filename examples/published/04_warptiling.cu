// Warp tiling, tutorial style: a block of NUM_THREADS computes a BM x BN tile of C; each warp
// a WM x WN warp tile, split into WMITER x WNITER sub-tiles of WSUBM x WSUBN that the warp's
// 32 threads cover with TM x TN register tiles each. Loads are float4 (A stored transposed).
// No bounds guards, as published: M, N, K multiples of BM, BN, BK.
#include <cublas_v2.h>
#include <cstdio>
#include <cassert>

const int WARPSIZE = 32;   // warpSize is not constexpr in CUDA

namespace wt {

template <const int BM, const int BN, const int BK, const int NUM_THREADS>
__device__ void loadFromGmem(int N, int K, const float *A, const float *B, float *As, float *Bs)
{
    for (uint i = threadIdx.x; i < BM * BK / 4; i += NUM_THREADS) {
        const uint innerRowA = i / (BK / 4), innerColA = i % (BK / 4);
        const float4 tmp = reinterpret_cast<const float4 *>(&A[innerRowA * K + innerColA * 4])[0];
        As[(innerColA * 4 + 0) * BM + innerRowA] = tmp.x;
        As[(innerColA * 4 + 1) * BM + innerRowA] = tmp.y;
        As[(innerColA * 4 + 2) * BM + innerRowA] = tmp.z;
        As[(innerColA * 4 + 3) * BM + innerRowA] = tmp.w;
    }
    for (uint i = threadIdx.x; i < BK * BN / 4; i += NUM_THREADS) {
        const uint innerRowB = i / (BN / 4), innerColB = i % (BN / 4);
        reinterpret_cast<float4 *>(&Bs[innerRowB * BN + innerColB * 4])[0] =
            reinterpret_cast<const float4 *>(&B[innerRowB * N + innerColB * 4])[0];
    }
}

template <const int BM, const int BN, const int BK, const int WM, const int WN, const int WMITER,
          const int WNITER, const int WSUBM, const int WSUBN, const int TM, const int TN>
__device__ void processFromSmem(float *regM, float *regN, float *threadResults, const float *As,
                                const float *Bs, const uint warpRow, const uint warpCol,
                                const uint threadRowInWarp, const uint threadColInWarp)
{
    for (uint dotIdx = 0; dotIdx < BK; ++dotIdx) {
        for (uint wSubRowIdx = 0; wSubRowIdx < WMITER; ++wSubRowIdx)
            for (uint i = 0; i < TM; ++i)
                regM[wSubRowIdx * TM + i] =
                    As[dotIdx * BM + warpRow * WM + wSubRowIdx * WSUBM + threadRowInWarp * TM + i];
        for (uint wSubColIdx = 0; wSubColIdx < WNITER; ++wSubColIdx)
            for (uint i = 0; i < TN; ++i)
                regN[wSubColIdx * TN + i] =
                    Bs[dotIdx * BN + warpCol * WN + wSubColIdx * WSUBN + threadColInWarp * TN + i];
        for (uint wSubRowIdx = 0; wSubRowIdx < WMITER; ++wSubRowIdx)
            for (uint wSubColIdx = 0; wSubColIdx < WNITER; ++wSubColIdx)
                for (uint resIdxM = 0; resIdxM < TM; ++resIdxM)
                    for (uint resIdxN = 0; resIdxN < TN; ++resIdxN)
                        threadResults[(wSubRowIdx * TM + resIdxM) * (WNITER * TN) + wSubColIdx * TN + resIdxN] +=
                            regM[wSubRowIdx * TM + resIdxM] * regN[wSubColIdx * TN + resIdxN];
    }
}

}  // namespace wt

template <const int BM, const int BN, const int BK, const int WM, const int WN, const int WNITER,
          const int TM, const int TN, const int NUM_THREADS>
__global__ void __launch_bounds__(NUM_THREADS)
    sgemmWarptiling(int M, int N, int K, float alpha, float *A, float *B, float beta, float *C)
{
    const uint cRow = blockIdx.y;
    const uint cCol = blockIdx.x;

    const uint warpIdx = threadIdx.x / WARPSIZE;
    const uint warpCol = warpIdx % (BN / WN);
    const uint warpRow = warpIdx / (BN / WN);

    constexpr uint WMITER = (WM * WN) / (WARPSIZE * TM * TN * WNITER);
    constexpr uint WSUBM = WM / WMITER;
    constexpr uint WSUBN = WN / WNITER;
    static_assert(WMITER >= 1 && (BM / WM) * (BN / WN) * WARPSIZE == NUM_THREADS, "warp tiles must cover the block");

    const uint threadIdxInWarp = threadIdx.x % WARPSIZE;
    const uint threadColInWarp = threadIdxInWarp % (WSUBN / TN);
    const uint threadRowInWarp = threadIdxInWarp / (WSUBN / TN);

    __shared__ float As[BM * BK];
    __shared__ float Bs[BK * BN];

    A += cRow * BM * K;
    B += cCol * BN;
    C += (cRow * BM + warpRow * WM) * N + cCol * BN + warpCol * WN;

    float threadResults[WMITER * TM * WNITER * TN] = {0.0f};
    float regM[WMITER * TM] = {0.0f};
    float regN[WNITER * TN] = {0.0f};

    for (uint bkIdx = 0; bkIdx < K; bkIdx += BK) {
        wt::loadFromGmem<BM, BN, BK, NUM_THREADS>(N, K, A, B, As, Bs);
        __syncthreads();
        wt::processFromSmem<BM, BN, BK, WM, WN, WMITER, WNITER, WSUBM, WSUBN, TM, TN>(
            regM, regN, threadResults, As, Bs, warpRow, warpCol, threadRowInWarp, threadColInWarp);
        A += BK;
        B += BK * N;
        __syncthreads();
    }

    for (uint wSubRowIdx = 0; wSubRowIdx < WMITER; ++wSubRowIdx) {
        for (uint wSubColIdx = 0; wSubColIdx < WNITER; ++wSubColIdx) {
            float *C_interim = C + (wSubRowIdx * WSUBM) * N + wSubColIdx * WSUBN;
            for (uint resIdxM = 0; resIdxM < TM; resIdxM += 1) {
                for (uint resIdxN = 0; resIdxN < TN; resIdxN += 4) {
                    float4 *out = reinterpret_cast<float4 *>(
                        &C_interim[(threadRowInWarp * TM + resIdxM) * N + threadColInWarp * TN + resIdxN]);
                    const float *r = &threadResults[(wSubRowIdx * TM + resIdxM) * (WNITER * TN) +
                                                    wSubColIdx * TN + resIdxN];
                    float4 tmp;
                    if (beta == 0.0f) {
                        tmp = make_float4(alpha * r[0], alpha * r[1], alpha * r[2], alpha * r[3]);
                    } else {
                        tmp = out[0];
                        tmp.x = alpha * r[0] + beta * tmp.x;
                        tmp.y = alpha * r[1] + beta * tmp.y;
                        tmp.z = alpha * r[2] + beta * tmp.z;
                        tmp.w = alpha * r[3] + beta * tmp.w;
                    }
                    out[0] = tmp;
                }
            }
        }
    }
}

void runSgemmWarptiling(int M, int N, int K, float alpha, float *A, float *B, float beta, float *C)
{
    const uint K10_NUM_THREADS = 128, K10_BN = 128, K10_BM = 128, K10_BK = 16;
    const uint K10_WN = 64, K10_WM = 64, K10_WNITER = 4, K10_TN = 4, K10_TM = 8;
    dim3 blockDim(K10_NUM_THREADS);
    dim3 gridDim((N + K10_BN - 1) / K10_BN, (M + K10_BM - 1) / K10_BM);
    sgemmWarptiling<K10_BM, K10_BN, K10_BK, K10_WM, K10_WN, K10_WNITER, K10_TM, K10_TN, K10_NUM_THREADS>
        <<<gridDim, blockDim>>>(M, N, K, alpha, A, B, beta, C);
}
