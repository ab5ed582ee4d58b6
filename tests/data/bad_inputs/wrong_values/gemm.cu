// A GEMM whose inner loop stops one short of K: declared correct, it is not.
template <typename T, int TILE>
__global__ void short_k(const T *A, const T *B, T *C, int M, int N, int K)
{
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    if (row >= M || col >= N)
        return;
    T sum = 0;
    for (int k = 0; k < K - 1; ++k)
        sum += A[row * K + k] * B[k * N + col];
    C[row * N + col] = sum;
}
