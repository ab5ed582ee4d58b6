// Register-blocked SGEMM in the common style: C = alpha * A B + beta * C, row-major.
// Each block computes a BM x BN tile of C with BM * BN / (TM * TN) threads in one
// dimension; each thread accumulates a TM x TN sub-tile in registers, from BK-deep
// slices of A and B staged in shared memory.
//
//   sgemm          guards every load and store: correct on any M, N, K
//   sgemm_aligned  no guards: correct only when BM | M, BN | N and BK | K (its catalog
//                  entry claims exactly that)

template <int BM, int BN, int BK, int TM, int TN, bool GUARD>
__device__ void sgemm_body(int M, int N, int K, float alpha, const float *A, const float *B,
                           float beta, float *C)
{
    constexpr int THREADS = BM * BN / (TM * TN);
    __shared__ float As[BK][BM];   // the A slice, transposed: As[k][m]
    __shared__ float Bs[BK][BN];

    const int tid = threadIdx.x;
    const int trow = tid / (BN / TN);
    const int tcol = tid % (BN / TN);
    const int row0 = blockIdx.y * BM;
    const int col0 = blockIdx.x * BN;

    float acc[TM][TN] = {};
    float a[TM], b[TN];

    for (int k0 = 0; k0 < K; k0 += BK)
    {
        for (int i = tid; i < BM * BK; i += THREADS)
        {
            const int m = i / BK, k = i % BK;
            const int r = row0 + m, c = k0 + k;
            As[k][m] = (!GUARD || (r < M && c < K)) ? A[r * K + c] : 0.0f;
        }
        for (int i = tid; i < BK * BN; i += THREADS)
        {
            const int k = i / BN, n = i % BN;
            const int r = k0 + k, c = col0 + n;
            Bs[k][n] = (!GUARD || (r < K && c < N)) ? B[r * N + c] : 0.0f;
        }
        __syncthreads();
        for (int k = 0; k < BK; ++k)
        {
            for (int i = 0; i < TM; ++i)
                a[i] = As[k][trow * TM + i];
            for (int j = 0; j < TN; ++j)
                b[j] = Bs[k][tcol * TN + j];
            for (int i = 0; i < TM; ++i)
                for (int j = 0; j < TN; ++j)
                    acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }

    for (int i = 0; i < TM; ++i)
        for (int j = 0; j < TN; ++j)
        {
            const int r = row0 + trow * TM + i, c = col0 + tcol * TN + j;
            if (GUARD && (r >= M || c >= N))
                continue;
            float out = alpha * acc[i][j];
            if (beta != 0.0f)   // as BLAS: with beta = 0, C is not read (it may hold NaN)
                out += beta * C[r * N + c];
            C[r * N + c] = out;
        }
}

template <int BM, int BN, int BK, int TM, int TN>
__global__ void sgemm(int M, int N, int K, float alpha, const float *A, const float *B, float beta, float *C)
{
    sgemm_body<BM, BN, BK, TM, TN, true>(M, N, K, alpha, A, B, beta, C);
}

template <int BM, int BN, int BK, int TM, int TN>
__global__ void sgemm_aligned(int M, int N, int K, float alpha, const float *A, const float *B, float beta,
                              float *C)
{
    sgemm_body<BM, BN, BK, TM, TN, false>(M, N, K, alpha, A, B, beta, C);
}
