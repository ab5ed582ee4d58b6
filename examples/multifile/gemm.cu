// A shared-memory tiled SGEMM whose loads and stores are device functions of another file
// (tile_math.cu): C = alpha * A * B + beta * C, row-major, guarded for any M, N, K.

__device__ float load_or_zero(const float *m, int rows, int cols, int row, int col);
__device__ void store_scaled(float *c, float alpha, float acc, float beta);

template <int TILE>
__global__ void sgemm_linked(int M, int N, int K, float alpha, const float *A, const float *B, float beta, float *C)
{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    const int row = blockIdx.y * TILE + threadIdx.y;
    const int col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        As[threadIdx.y][threadIdx.x] = load_or_zero(A, M, K, row, k0 + threadIdx.x);
        Bs[threadIdx.y][threadIdx.x] = load_or_zero(B, K, N, k0 + threadIdx.y, col);
        __syncthreads();
        for (int i = 0; i < TILE; ++i) {
            acc += As[threadIdx.y][i] * Bs[i][threadIdx.x];
        }
        __syncthreads();
    }
    if (row < M && col < N) {
        store_scaled(&C[row * N + col], alpha, acc, beta);
    }
}
