// A cuBLAS-style GEMM: column-major operands with leading dimensions,
// C = alpha * A B + beta * C, where element (i, j) of X is X[i + j * ldx].
// Threads run along M (x), so consecutive threads touch consecutive addresses.

template <typename T, int TILE>
__global__ void gemm_colmajor(int M, int N, int K, T alpha, const T *A, int lda, const T *B, int ldb,
                              T beta, T *C, int ldc)
{
    __shared__ T As[TILE][TILE + 1];   // As[k][i]; +1 keeps column reads off one bank
    __shared__ T Bs[TILE][TILE + 1];   // Bs[j][k]

    const int i = blockIdx.x * TILE + threadIdx.x;
    const int j = blockIdx.y * TILE + threadIdx.y;
    T sum = 0;

    for (int k0 = 0; k0 < K; k0 += TILE)
    {
        const int ka = k0 + threadIdx.y;   // A(i, ka): this thread loads one element
        As[threadIdx.y][threadIdx.x] = (i < M && ka < K) ? A[i + (size_t)ka * lda] : T(0);
        const int kb = k0 + threadIdx.x;   // B(kb, j)
        Bs[threadIdx.y][threadIdx.x] = (kb < K && j < N) ? B[kb + (size_t)j * ldb] : T(0);
        __syncthreads();
        for (int k = 0; k < TILE; ++k)
            sum += As[k][threadIdx.x] * Bs[threadIdx.y][k];
        __syncthreads();
    }

    if (i < M && j < N)
    {
        T out = alpha * sum;
        if (beta != T(0))
            out += beta * C[i + (size_t)j * ldc];
        C[i + (size_t)j * ldc] = out;
    }
}
