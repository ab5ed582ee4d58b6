// Small kernels with known answers: the CPU simulator's own tests (tests/test_cpu_sim.py).
// Signature (A, B, C, M, N, K) as the catalog's "mnk"; launch policy tile2d.

// Each thread stores its block and thread indices, and the grid and block dimensions.
template <typename T, int TILE>
__global__ void write_indices(const T *A, const T *B, T *C, int M, int N, int K)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    // Every row but the last; the last row's first element gets the dimensions.
    if (row < M - 1 && col < N)
        C[row * N + col] = T(blockIdx.y * 1000000.0 + blockIdx.x * 10000.0 + threadIdx.y * 100.0 + threadIdx.x);
    if (row == 0 && col == 0)
        C[(M - 1) * N] = T(gridDim.y * 1000000.0 + gridDim.x * 10000.0 + blockDim.y * 100.0 + blockDim.x);
}

// Each thread stores A's element of the NEXT thread of its block, passed through shared
// memory: right only if the barrier orders the stores before the loads.
template <typename T, int TILE, bool SYNC>
__device__ __forceinline__ void rotate_body(const T *A, T *C)
{
    __shared__ T s[TILE * TILE];
    int n = TILE * TILE;
    int t = threadIdx.y * TILE + threadIdx.x;
    int base = (blockIdx.y * gridDim.x + blockIdx.x) * n;
    s[t] = A[base + t];
    if (SYNC)
        __syncthreads();
    C[base + t] = s[(t + 1) % n];
}

template <typename T, int TILE>
__global__ void rotate_sync(const T *A, const T *B, T *C, int M, int N, int K) { rotate_body<T, TILE, true>(A, C); }

template <typename T, int TILE>
__global__ void rotate_nosync(const T *A, const T *B, T *C, int M, int N, int K) { rotate_body<T, TILE, false>(A, C); }

// Thread 0 of every block reads the shared slot before its block writes it, then the
// block stores its own number there: C[2b] = what was there, C[2b + 1] = what is there.
template <typename T, int TILE>
__global__ void shared_per_block(const T *A, const T *B, T *C, int M, int N, int K)
{
    __shared__ T slot[1];
    int b = blockIdx.y * gridDim.x + blockIdx.x;
    bool first = threadIdx.x == 0 && threadIdx.y == 0;
    if (first)
        C[2 * b] = slot[0];
    __syncthreads();
    if (first)
        slot[0] = T(b + 1);
    __syncthreads();
    if (first)
        C[2 * b + 1] = slot[0];
}

// Element-wise: C = T(float(A) * float(B)): half/bf16 -> float exactly, float -> T once.
template <typename T, int TILE>
__global__ void convert_product(const T *A, const T *B, T *C, int M, int N, int K)
{
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    if (row < M && col < N)
        C[row * N + col] = T(float(A[row * N + col]) * float(B[row * N + col]));
}

// Column 0 of each block returns before the barrier the others wait at.
template <typename T, int TILE>
__global__ void early_exit_barrier(const T *A, const T *B, T *C, int M, int N, int K)
{
    if (threadIdx.x == 0)
        return;
    __syncthreads();
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    if (row < M && col < N)
        C[row * N + col] = T(1.0f);
}

// Every thread stores C[i] = i at its element; then thread (0, 0) of block (ADDER, 0)
// atomically adds 2 to C[0], which thread (0, 0) of block (0, 0) stored. With ADDER = 1 two
// blocks of one launch write C[0], one plainly, and nothing orders them: a global-memory race
// (C[0] is 2 when block 0 runs first, 0 when block 1 does). With ADDER = 0 the store and the
// add are one thread's, in program order: C[0] is 2 in every schedule.
template <typename T, int TILE, int ADDER>
__device__ __forceinline__ void store_then_add_body(T *C, int M, int N)
{
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    if (row < M && col < N)
        C[row * N + col] = T(row * N + col);
    if (blockIdx.x == ADDER && blockIdx.y == 0 && threadIdx.x == 0 && threadIdx.y == 0)
        atomicAdd(&C[0], T(2));
}

template <typename T, int TILE>
__global__ void store_and_atomic_of_two_blocks(const T *A, const T *B, T *C, int M, int N, int K)
{
    store_then_add_body<T, TILE, 1>(C, M, N);
}

template <typename T, int TILE>
__global__ void store_and_atomic_of_one_block(const T *A, const T *B, T *C, int M, int N, int K)
{
    store_then_add_body<T, TILE, 0>(C, M, N);
}

// Thread (0, 0) of blocks (0, 0) and (1, 0) atomically adds 1 to C[0]; then block (1, 0)'s
// stores 5 there. Block 1's store races with block 0's add (nothing orders them), whichever
// order the blocks run in: forward, block 1's own add comes between the two. Every other
// element is stored once, by its own thread.
template <typename T, int TILE>
__global__ void atomics_of_two_blocks_then_a_store(const T *A, const T *B, T *C, int M, int N, int K)
{
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    if (row < M && col < N && row * N + col != 0)
        C[row * N + col] = T(row * N + col);
    if (blockIdx.x < 2 && blockIdx.y == 0 && threadIdx.x == 0 && threadIdx.y == 0)
    {
        atomicAdd(&C[0], T(1));
        if (blockIdx.x == 1)
            C[0] = T(5);
    }
}

// Writes every element of C; the first row's are computed from a NaN carrying the poison's
// payload (gemmcheck.contract.dtypes: 0x7FC0DEAD, 0x7FF8DEADDEADDEAD), as a race that reads
// stale shared memory which held the poison computes them: NaN + x keeps the NaN's payload
// (on the CPU, and in a GPU's float64). Written, though their bits are the poison's.
template <typename T> __device__ T poison_nan();
template <> __device__ float poison_nan<float>() { return __int_as_float(0x7FC0DEAD); }
template <> __device__ double poison_nan<double>() { return __longlong_as_double(0x7FF8DEADDEADDEADLL); }

template <typename T, int TILE>
__global__ void computes_from_the_poison(const T *A, const T *B, T *C, int M, int N, int K)
{
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    if (row >= M || col >= N)
        return;
    T sum = row == 0 ? poison_nan<T>() : T(0);
    for (int k = 0; k < K; k++)
        sum += A[row * K + k] * B[k * N + col];
    C[row * N + col] = sum;
}
