// Split-K with a workspace, as GEMM libraries do it when K is long and M x N small: each of
// SPLITS slices of K (blockIdx.z) stores its partial tile in a workspace the caller provides,
// then counts itself in on its tile's arrival counter (semaphores, which the caller zeroes
// before every launch). The slice that arrives last sums the partials in slice order and
// writes C = alpha * sum + beta * C: the same bits on every launch, and C never read at
// beta = 0. The "last block" pattern of the CUDA samples' threadFenceReduction.

#define TILE 16

template <int SPLITS>
__global__ void sgemm_splitk_workspace(const float *A, const float *B, float *C, float *workspace,
                                       unsigned int *semaphores, int M, int N, int K, float alpha, float beta)
{
    __shared__ bool last;
    const int row = blockIdx.y * TILE + threadIdx.y;
    const int col = blockIdx.x * TILE + threadIdx.x;
    const int chunk = (K + SPLITS - 1) / SPLITS;
    const int k0 = min(K, (int)blockIdx.z * chunk), k1 = min(K, k0 + chunk);
    const bool inside = row < M && col < N;
    if (inside) {
        float sum = 0.0f;
        for (int k = k0; k < k1; ++k)
            sum += A[(size_t)row * K + k] * B[(size_t)k * N + col];
        workspace[((size_t)blockIdx.z * M + row) * N + col] = sum;
    }
    __threadfence();   // this slice's partials are visible before it counts itself in
    __syncthreads();
    if (threadIdx.x == 0 && threadIdx.y == 0)
        last = atomicAdd(&semaphores[blockIdx.y * gridDim.x + blockIdx.x], 1u) == SPLITS - 1;
    __syncthreads();
    if (last && inside) {
        float total = 0.0f;
        for (int s = 0; s < SPLITS; ++s)   // past L1: other blocks stored them
            total += __ldcg(&workspace[((size_t)s * M + row) * N + col]);
        const size_t at = (size_t)row * N + col;
        C[at] = beta == 0.0f ? alpha * total : alpha * total + beta * C[at];
    }
}

// The partials' rows padded to whole tiles: a row length of gridDim.x * TILE, every thread of a
// ragged column tile storing one (zeros past N). The values come out right (stored and read
// alike), but the slabs are longer than the SPLITS * M * N floats its callers allocate, and the
// last slice's runs past their end.
template <int SPLITS>
__global__ void sgemm_splitk_workspace_tile_padded(const float *A, const float *B, float *C, float *workspace,
                                                   unsigned int *semaphores, int M, int N, int K, float alpha,
                                                   float beta)
{
    __shared__ bool last;
    const int row = blockIdx.y * TILE + threadIdx.y;
    const int col = blockIdx.x * TILE + threadIdx.x;
    const int ldw = gridDim.x * TILE;
    const int chunk = (K + SPLITS - 1) / SPLITS;
    const int k0 = min(K, (int)blockIdx.z * chunk), k1 = min(K, k0 + chunk);
    const bool inside = row < M && col < N;
    if (row < M) {
        float sum = 0.0f;
        if (col < N)
            for (int k = k0; k < k1; ++k)
                sum += A[(size_t)row * K + k] * B[(size_t)k * N + col];
        workspace[((size_t)blockIdx.z * M + row) * ldw + col] = sum;
    }
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0 && threadIdx.y == 0)
        last = atomicAdd(&semaphores[blockIdx.y * gridDim.x + blockIdx.x], 1u) == SPLITS - 1;
    __syncthreads();
    if (last && inside) {
        float total = 0.0f;
        for (int s = 0; s < SPLITS; ++s)
            total += __ldcg(&workspace[((size_t)s * M + row) * ldw + col]);
        const size_t at = (size_t)row * N + col;
        C[at] = beta == 0.0f ? alpha * total : alpha * total + beta * C[at];
    }
}

// How a caller launches it: the counters zeroed on the stream before every launch.
void sgemm_splitk(const float *A, const float *B, float *C, float *workspace, unsigned int *semaphores, int M,
                  int N, int K, float alpha, float beta, cudaStream_t stream)
{
    constexpr int splits = 4;
    const dim3 block(TILE, TILE), grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE, splits);
    cudaMemsetAsync(semaphores, 0, sizeof(unsigned int) * grid.x * grid.y, stream);
    sgemm_splitk_workspace<splits><<<grid, block, 0, stream>>>(A, B, C, workspace, semaphores, M, N, K, alpha, beta);
}
