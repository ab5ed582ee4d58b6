// Split-K in two slices whose partial sums meet in C through a store and an add: the
// correct kernel, whose slices are the two halves of one block, and its twin, whose slices
// are two blocks.
//
// Slice s sums k in [s * ceil(K / 2), min(K, (s + 1) * ceil(K / 2))) for its element of C.
// Slice 1 stores its sum; slice 0 adds its own. Right only when the store comes first,
// and only something that orders the two makes it so:
//  - matmul_splitk_in_block: the slices are threadIdx.z 0 and 1 of one block, and a
//    __syncthreads() between the store and the add orders them, so the add is a plain
//    read-modify-write (a float atomicAdd to global memory runs with subnormals flushed to zero
//    on NVIDIA GPUs: the IEEE special-values claims would fail on it). Block (TILE, TILE, 2),
//    grid (ceil(N / TILE), ceil(M / TILE)). With exact inputs C = a + b, bit for bit.
//  - broken_splitk_z_race: the slices are blockIdx.z 0 and 1, two blocks of one launch, and
//    CUDA orders nothing between them: when the add lands first the store overwrites it.
//    Block (TILE, TILE), grid (ceil(N / TILE), ceil(M / TILE), 2). On a GPU, blocks of z = 0
//    are dispatched first: where the grid outnumbers the resident blocks (1024^3) every add
//    lands first and is lost; on small grids both run at once and launches differ. The CPU
//    simulator's global-memory tracking names the element and the two blocks in whatever order
//    it runs them (kernels/catalog.toml declares it global_memory_race).
// float only (the twin's atomicAdd); no shared memory.

template <typename T, int TILE, bool SLICES_ARE_BLOCKS>
__device__ __forceinline__ void splitk_body(const T *A, const T *B, T *C, int M, int N, int K)
{
    const int slice = SLICES_ARE_BLOCKS ? (int)blockIdx.z : (int)threadIdx.z;
    const int row = blockIdx.y * TILE + threadIdx.y;
    const int col = blockIdx.x * TILE + threadIdx.x;
    const int half = (K + 1) / 2;
    const int begin = slice * half;
    const int end = begin + half < K ? begin + half : K;
    const bool inside = row < M && col < N;
    T sum = T(0);
    if (inside)
        for (int k = begin; k < end; k++)
            sum += A[row * K + k] * B[k * N + col];
    if (slice == 1 && inside)
        C[row * N + col] = sum;
    if (!SLICES_ARE_BLOCKS)
        __syncthreads();
    if (slice == 0 && inside)
    {
        if (SLICES_ARE_BLOCKS)
            atomicAdd(&C[row * N + col], sum);
        else   // ordered by the barrier: a plain read-modify-write (a float atomicAdd to global
            C[row * N + col] += sum;   // memory flushes subnormals to zero on NVIDIA GPUs)
    }
}

template <typename T, int TILE>
__global__ void matmul_splitk_in_block(const T *A, const T *B, T *C, int M, int N, int K)
{
    splitk_body<T, TILE, false>(A, B, C, M, N, K);
}

template <typename T, int TILE>
__global__ void broken_splitk_z_race(const T *A, const T *B, T *C, int M, int N, int K)
{
    splitk_body<T, TILE, true>(A, B, C, M, N, K);
}
