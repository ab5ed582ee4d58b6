// Two kernels as a user might write them, each with a defect that leaves the right values on
// most runs: gemmcheck must name it all the same (tests/data/trust_detect/catalog.toml).
// Both are instantiated explicitly, as a library's .cu often does.
//
// splitk_store_vs_atomic: split-K over blockIdx.z. The z = 0 blocks store their half of the
// sum into C, the z = 1 blocks atomicAdd theirs, and nothing orders a block's store against
// another block's add: where the add lands first the store overwrites it. Blocks of z = 0
// tend to run first, so the result is often right. Grid (ceil(N / TILE), ceil(M / TILE), 2),
// block (TILE, TILE).
//
// half_mask_shuffle: each thread computes its element of C, then passes it through a warp
// shuffle from its own lane with mask 0x0000ffff, which all 32 lanes of the warp call. A lane
// that calls __shfl_sync must be in its mask: lanes 16..31 are not (undefined, though the GPU
// returns each lane its own value). Grid (ceil(N / TILE), ceil(M / TILE)), block (TILE, TILE).

template <int TILE>
__global__ void splitk_store_vs_atomic(const float *A, const float *B, float *C, int M, int N, int K)
{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    const int row = blockIdx.y * TILE + threadIdx.y;
    const int col = blockIdx.x * TILE + threadIdx.x;
    const int phases = (K + TILE - 1) / TILE;
    const int half = (phases + 1) / 2;
    const int begin = blockIdx.z == 0 ? 0 : half;
    const int end = blockIdx.z == 0 ? half : phases;
    float sum = 0.0f;
    for (int t = begin; t < end; t++)
    {
        const int aCol = t * TILE + threadIdx.x, bRow = t * TILE + threadIdx.y;
        As[threadIdx.y][threadIdx.x] = (row < M && aCol < K) ? A[row * K + aCol] : 0.0f;
        Bs[threadIdx.y][threadIdx.x] = (bRow < K && col < N) ? B[bRow * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; k++)
            sum += As[threadIdx.y][k] * Bs[k][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N)
    {
        if (blockIdx.z == 0)
            C[row * N + col] = sum;
        else
            atomicAdd(&C[row * N + col], sum);
    }
}

template <int TILE>
__global__ void half_mask_shuffle(const float *A, const float *B, float *C, int M, int N, int K)
{
    const int row = blockIdx.y * TILE + threadIdx.y;
    const int col = blockIdx.x * TILE + threadIdx.x;
    const int lane = (threadIdx.y * TILE + threadIdx.x) % 32;
    float sum = 0.0f;
    for (int k = 0; k < K; k++)
        sum += ((row < M) ? A[row * K + k] : 0.0f) * ((col < N) ? B[k * N + col] : 0.0f);
    sum = __shfl_sync(0x0000ffffu, sum, lane);
    if (row < M && col < N)
        C[row * N + col] = sum;
}

template __global__ void splitk_store_vs_atomic<16>(const float *, const float *, float *, int, int, int);
template __global__ void half_mask_shuffle<16>(const float *, const float *, float *, int, int, int);
