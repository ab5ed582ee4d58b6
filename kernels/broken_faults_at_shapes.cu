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

// A kernel that faults only at some shapes, as vectorized kernels are often written: each
// thread reads its row of A four floats at a time through a float4 (one 16-byte load), then
// the K % 4 leftovers one by one. A row starts at A + row * K: a multiple of 16 bytes
// whenever K is a multiple of 4, so every such shape is computed right. With any other K
// (odd, or 2 mod 4) rows from the second on start off a 16-byte boundary and the float4 load
// is misaligned: cudaErrorMisalignedAddress on the GPU (sticky: the context is lost), the
// same "misaligned address" stop on cpu-sim (its -fsanitize=alignment check). The isolated
// probe's ragged shape (K = TILE + 5) meets it on the GPU before any launch in the session.
// Its catalog entry declares `crash`; float only (a float4 is four floats).

template <typename T, int TILE>
__global__ void broken_vector_loads_odd_k(const T *A, const T *B, T *C, int M, int N, int K)
{
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    if (row >= M || col >= N)
        return;
    const T *a = A + (long long)row * K;
    float sum = 0.0f;
    int k = 0;
    for (; k + 4 <= K; k += 4)
    {
        // the flaw: assumes A + row * K + k is 16-byte aligned, true only when K % 4 == 0
        float4 a4 = *reinterpret_cast<const float4 *>(&a[k]);
        sum += a4.x * float(B[(long long)(k + 0) * N + col]);
        sum += a4.y * float(B[(long long)(k + 1) * N + col]);
        sum += a4.z * float(B[(long long)(k + 2) * N + col]);
        sum += a4.w * float(B[(long long)(k + 3) * N + col]);
    }
    for (; k < K; k++)
        sum += float(a[k]) * float(B[(long long)k * N + col]);
    C[(long long)row * N + col] = T(sum);
}
