// A kernel that faults only at some shapes: the guarded tiled GEMM, except that a block
// whose first row is FAULT_ROW or more reads A through a stale base, a quarter GiB past
// A's end (as a prefetch offset computed in the wrong units would). Every shape with
// M <= FAULT_ROW is computed right; any larger M faults (an illegal address on the GPU,
// which leaves the process's CUDA context unusable; an out-of-bounds read on cpu-sim).
// The isolated probe's shapes (M = TILE + 3 and 2 TILE: 19 and 32 at TILE 16) and the kill
// matrix's ragged one (2 TILE + 1 = 33) never reach that row; its tile-aligned problem
// (4 TILE = 64) and every larger M do. Its catalog entry declares `crash`.

#define FAULT_ROW 48

template <typename T> struct fault_acc { typedef float type; };
template <> struct fault_acc<double> { typedef double type; };

template <typename T, int TILE>
__global__ void broken_faults_at_large_m(const T *A, const T *B, T *C, int M, int N, int K)
{
    typedef typename fault_acc<T>::type acc_t;
    __shared__ T As[TILE][TILE];
    __shared__ T Bs[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    // the flaw: from block row FAULT_ROW on, A is read 2^26 elements past where it is
    const T *a = A + ((blockIdx.y * TILE >= FAULT_ROW) ? (1LL << 26) : 0LL);
    acc_t sum = acc_t(0);
    for (int phase = 0; phase < (K + TILE - 1) / TILE; phase++)
    {
        int ka = phase * TILE + threadIdx.x;
        int kb = phase * TILE + threadIdx.y;
        As[threadIdx.y][threadIdx.x] = (row < M && ka < K) ? a[(long long)row * K + ka] : T(0);
        Bs[threadIdx.y][threadIdx.x] = (kb < K && col < N) ? B[(long long)kb * N + col] : T(0);
        __syncthreads();
        for (int k = 0; k < TILE; k++)
            sum += acc_t(As[threadIdx.y][k]) * acc_t(Bs[k][threadIdx.x]);
        __syncthreads();
    }
    if (row < M && col < N)
        C[(long long)row * N + col] = T(sum);
}
