// A user's kernels for the performance suite's fault containment (tests/test_perf_containment.py):
// a tutorial's naive SGEMM (no tile parameter), and a tiled kernel that is right at every size
// the correctness suite and the isolated probe's small problems use, but faults at the sizes
// the performance suite times.

// The tutorial's first kernel: one thread per element of C, a fixed 32 x 32 block, no
// compile-time parameter. C = alpha A B + beta C, C not read at beta = 0 (BLAS).
extern "C" __global__ void sgemm_naive(int M, int N, int K, float alpha, const float *A, const float *B,
                                       float beta, float *C)
{
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N)
    {
        float sum = 0.0f;
        for (int k = 0; k < K; k++)
            sum += A[(long long)row * K + k] * B[(long long)k * N + col];
        C[(long long)row * N + col] = beta == 0.0f ? alpha * sum : alpha * sum + beta * C[(long long)row * N + col];
    }
}

// The guarded tiled kernel, except that from M = FAULT_FROM_M on the last row of blocks reads A
// through a base 2^40 elements past its end (a prefetch offset computed in the wrong units):
// an illegal address on the GPU, far from any allocation, which leaves the process's CUDA
// context unusable. Every M below it is computed right.
#define FAULT_FROM_M 4096

template <typename T, int TILE>
__global__ void faults_from_4096(const T *A, const T *B, T *C, int M, int N, int K)
{
    __shared__ T As[TILE][TILE];
    __shared__ T Bs[TILE][TILE];
    const int row = blockIdx.y * TILE + threadIdx.y;
    const int col = blockIdx.x * TILE + threadIdx.x;
    const bool flawed = M >= FAULT_FROM_M && blockIdx.y == gridDim.y - 1;
    const T *a = A + (flawed ? (1LL << 40) : 0LL);
    float sum = 0.0f;
    for (int phase = 0; phase < (K + TILE - 1) / TILE; phase++)
    {
        const int ka = phase * TILE + threadIdx.x;
        const int kb = phase * TILE + threadIdx.y;
        As[threadIdx.y][threadIdx.x] = (row < M && ka < K) ? a[(long long)row * K + ka] : T(0);
        Bs[threadIdx.y][threadIdx.x] = (kb < K && col < N) ? B[(long long)kb * N + col] : T(0);
        __syncthreads();
        for (int k = 0; k < TILE; k++)
            sum += float(As[threadIdx.y][k]) * float(Bs[k][threadIdx.x]);
        __syncthreads();
    }
    if (row < M && col < N)
        C[(long long)row * N + col] = T(sum);
}
