// Split-K as tutorials and production split-K kernels write it: each of `splits` slices of K
// (blockIdx.z) sums its share and atomicAdds it into C, which the host zeroes first
// (cudaMemset): C += A B. Not BLAS (it reads C whatever beta would be), so its catalog entry
// declares adds_into_c; its float sums land in any order, so deterministic = false.

__global__ void sgemm_splitk_atomic(const float *A, const float *B, float *C, int M, int N, int K, int splits)
{
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int chunk = (K + splits - 1) / splits;
    const int k0 = blockIdx.z * chunk, k1 = min(K, k0 + chunk);
    if (row < M && col < N) {
        float sum = 0.0f;
        for (int k = k0; k < k1; ++k)
            sum += A[row * K + k] * B[k * N + col];
        atomicAdd(&C[row * N + col], sum);
    }
}

// The slice's share rounded down (K / splits): the last K % splits of K are never summed.
__global__ void sgemm_splitk_atomic_drops_the_tail(const float *A, const float *B, float *C, int M, int N, int K,
                                                   int splits)
{
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int chunk = K / splits;
    const int k0 = blockIdx.z * chunk, k1 = k0 + chunk;
    if (row < M && col < N) {
        float sum = 0.0f;
        for (int k = k0; k < k1; ++k)
            sum += A[row * K + k] * B[k * N + col];
        atomicAdd(&C[row * N + col], sum);
    }
}

void sgemm_splitk(const float *A, const float *B, float *C, int M, int N, int K, cudaStream_t stream)
{
    const int splits = 4;
    cudaMemsetAsync(C, 0, sizeof(float) * M * N, stream);
    dim3 block(16, 16);
    dim3 grid((N + 15) / 16, (M + 15) / 16, splits);
    sgemm_splitk_atomic<<<grid, block, 0, stream>>>(A, B, C, M, N, K, splits);
}
