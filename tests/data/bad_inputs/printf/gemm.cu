// A correct GEMM that prints once from its first thread (a debugging aid left in): device printf
// gives it a stack frame, which is information about a user's kernel, not a failure.
#include <cstdio>

template <typename T, int TILE>
__global__ void chatty(const T *A, const T *B, T *C, int M, int N, int K)
{
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    if (row == 0 && col == 0 && blockIdx.x == 0 && blockIdx.y == 0)
        printf("chatty: M=%d N=%d K=%d\n", M, N, K);
    if (row >= M || col >= N)
        return;
    T sum = 0;
    for (int k = 0; k < K; ++k)
        sum += A[row * K + k] * B[k * N + col];
    C[row * N + col] = sum;
}
