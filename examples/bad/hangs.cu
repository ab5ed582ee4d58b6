// Hangs: thread (0, 0) of each block waits for a flag that no thread ever sets.
template <typename T, int TILE>
__global__ void hangs(const T *A, const T *B, T *C, int M, int N, int K)
{
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    if (threadIdx.x == 0 && threadIdx.y == 0) {
        volatile int *flag = (volatile int *)&C[0];
        while (*flag != 0x7fc00001) {   // a NaN payload no GEMM writes
        }
    }
    if (row >= M || col >= N)
        return;
    T sum = 0;
    for (int k = 0; k < K; ++k)
        sum += A[row * K + k] * B[k * N + col];
    C[row * N + col] = sum;
}
