// A float32 GEMM with TF32 math, written for any GPU: each input is cut to TF32's 10
// fraction bits (as tensor cores do with float32 data they are handed as tf32: the low 13 bits
// are ignored), then multiplied and summed in float. Judged by TF32's bound: a float32 kernel
// would be held to float32's, which this one does not meet on random inputs.

__device__ __forceinline__ float to_tf32(float x)
{
    return __uint_as_float(__float_as_uint(x) & 0xFFFFE000u);
}

template <int TILE>
__global__ void gemm_tf32(const float *A, const float *B, float *C, int M, int N, int K)
{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    const int row = blockIdx.y * TILE + threadIdx.y;
    const int col = blockIdx.x * TILE + threadIdx.x;
    float sum = 0.0f;
    for (int t = 0; t < K; t += TILE)
    {
        As[threadIdx.y][threadIdx.x] = (row < M && t + threadIdx.x < K) ? to_tf32(A[row * K + t + threadIdx.x]) : 0.0f;
        Bs[threadIdx.y][threadIdx.x] = (t + threadIdx.y < K && col < N) ? to_tf32(B[(t + threadIdx.y) * N + col]) : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; k++)
            sum += As[threadIdx.y][k] * Bs[k][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N)
        C[row * N + col] = sum;
}
