// Crashes: the output pointer is offset by a garbage index, so every store goes far
// outside any allocation (on the GPU: an illegal address, which loses the CUDA context).
template <typename T, int TILE>
__global__ void crashes(const T *A, const T *B, T *C, int M, int N, int K)
{
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    if (row >= M || col >= N)
        return;
    T sum = 0;
    for (int k = 0; k < K; ++k)
        sum += A[row * K + k] * B[k * N + col];
    T *wild = (T *)((unsigned long long)C ^ (1ull << 46));   // a flipped high address bit
    wild[row * N + col] = sum;
}
