// Matrixmultiplikation für alle Größen, in latin-1 (nvcc takes it).
// A correct GEMM, C = A B (row-major): one thread per element of C, guarded.
template <typename T, int TILE>
__global__ void good(const T *A, const T *B, T *C, int M, int N, int K)
{
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    if (row >= M || col >= N)
        return;
    T sum = 0;
    for (int k = 0; k < K; ++k)
        sum += A[row * K + k] * B[k * N + col];
    C[row * N + col] = sum;
}
