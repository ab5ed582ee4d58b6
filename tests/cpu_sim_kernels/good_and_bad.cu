// `good` builds; `bad` fails only when instantiated (tests/test_containment.py, test_cpu_sim_launch.py)
template <typename T, int TILE>
__global__ void good(const T *A, const T *B, T *C, int M, int N, int K)
{
    int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    if (row >= M || col >= N) return;
    T s = 0;
    for (int k = 0; k < K; ++k) s += A[row * K + k] * B[k * N + col];
    C[row * N + col] = s;
}

template <typename T, int TILE>
__global__ void bad(const T *A, const T *B, T *C, int M, int N, int K)
{
    C[0] = A[0].no_such_member;   // an error only when instantiated
}
