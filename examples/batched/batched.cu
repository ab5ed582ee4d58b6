// Strided-batched GEMM, the way it is usually published: cuBLAS's gemmStridedBatched argument
// order (sizes, alpha, each operand with its batch stride, beta, C, the batch count), one
// TILE x TILE block per output tile of one product, the product's index from blockIdx.z.
//
//   C_b = alpha * A_b * B_b + beta * C_b,  X_b = X + b * strideX,  b = 0 .. batch - 1
//
// Row-major and tight within a product (lda = K, ldb = N, ldc = N); a stride of 0 gives every
// product the same matrix (a broadcast). C is read only when beta != 0 (BLAS).
// Launch: grid (ceil(N / TILE), ceil(M / TILE), batch), block (TILE, TILE).

#include <cuda_fp16.h>

template <typename T> struct accumulator { using type = T; };
template <> struct accumulator<__half> { using type = float; };

// One product's tile: the hardened tiled kernel (zero-filled guarded loads, guarded store).
template <typename T, int TILE>
__device__ __forceinline__ void gemm_tile(int row, int col, int M, int N, int K, T alpha,
                                          const T *A, const T *B, T beta, T *C)
{
    using acc_t = typename accumulator<T>::type;
    __shared__ T As[TILE][TILE];
    __shared__ T Bs[TILE][TILE];
    acc_t sum = acc_t(0);
    for (int t = 0; t < (K + TILE - 1) / TILE; t++)
    {
        int aCol = t * TILE + threadIdx.x;
        int bRow = t * TILE + threadIdx.y;
        As[threadIdx.y][threadIdx.x] = (row < M && aCol < K) ? A[row * K + aCol] : T(0.0f);
        Bs[threadIdx.y][threadIdx.x] = (bRow < K && col < N) ? B[bRow * N + col] : T(0.0f);
        __syncthreads();
        for (int k = 0; k < TILE; k++)
            sum += acc_t(As[threadIdx.y][k]) * acc_t(Bs[k][threadIdx.x]);
        __syncthreads();
    }
    if (row < M && col < N)
    {
        acc_t out = acc_t(alpha) * sum;
        if (acc_t(beta) != acc_t(0))
            out += acc_t(beta) * acc_t(C[row * N + col]);
        C[row * N + col] = T(out);
    }
}

template <typename T, int TILE>
__global__ void gemm_strided_batched(int M, int N, int K, T alpha,
                                     const T *A, long long strideA,
                                     const T *B, long long strideB, T beta,
                                     T *C, long long strideC, int batch)
{
    int b = blockIdx.z;
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    gemm_tile<T, TILE>(row, col, M, N, K, alpha, A + b * strideA, B + b * strideB, beta, C + b * strideC);
}

// Broken twin: C's product offset computed as if the products were packed (b * M * N), ignoring
// strideC. Right at batch 1 and wherever the caller's C is packed; with a padded stride,
// product b writes short of its place, into the space after product b - 1.
template <typename T, int TILE>
__global__ void broken_batched_c_stride_packed(int M, int N, int K, T alpha,
                                               const T *A, long long strideA,
                                               const T *B, long long strideB, T beta,
                                               T *C, long long strideC, int batch)
{
    int b = blockIdx.z;
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    gemm_tile<T, TILE>(row, col, M, N, K, alpha, A + b * strideA, B + b * strideB, beta,
                       C + (long long)b * M * N);
}

// Broken twin: the product's index read from blockIdx.x (and the column tile from blockIdx.z),
// guarded as published kernels guard it (b < batch). Right where the grid's x and z extents
// agree; elsewhere products past ceil(N / TILE), or columns past batch * TILE, are never written.
template <typename T, int TILE>
__global__ void broken_batched_index_from_x(int M, int N, int K, T alpha,
                                            const T *A, long long strideA,
                                            const T *B, long long strideB, T beta,
                                            T *C, long long strideC, int batch)
{
    int b = blockIdx.x;
    if (b >= batch)
        return;
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.z * TILE + threadIdx.x;
    gemm_tile<T, TILE>(row, col, M, N, K, alpha, A + b * strideA, B + b * strideB, beta, C + b * strideC);
}

// Pointer-array batched GEMM, cuBLAS's gemmBatched argument order: an array of one pointer per
// product for each operand (each product's matrices wherever its caller put them, as separate
// allocations or slices of one), the batch count; the product's index from blockIdx.z.
template <typename T, int TILE>
__global__ void gemm_batched(int M, int N, int K, T alpha, const T *const Aarray[], const T *const Barray[],
                             T beta, T *const Carray[], int batchCount)
{
    int b = blockIdx.z;
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    gemm_tile<T, TILE>(row, col, M, N, K, alpha, Aarray[b], Barray[b], beta, Carray[b]);
}

// Broken twin: product b's matrices found from product 0's pointers, as if the batch were one
// packed allocation (X_b = Xarray[0] + b * the matrix's size). Right wherever the caller packs
// its products back to back; elsewhere product b reads and writes where another's memory ends.
template <typename T, int TILE>
__global__ void broken_batched_arrays_assumed_packed(int M, int N, int K, T alpha, const T *const Aarray[],
                                                     const T *const Barray[], T beta, T *const Carray[],
                                                     int batchCount)
{
    int b = blockIdx.z;
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    gemm_tile<T, TILE>(row, col, M, N, K, alpha, Aarray[0] + (long long)b * M * K,
                       Barray[0] + (long long)b * K * N, beta, Carray[0] + (long long)b * M * N);
}

// Broken twin: every product multiplies by product 0's B (a kernel written for one weight
// shared by the batch, given a batch of weights). Right where B is broadcast; elsewhere
// products 1 .. batch - 1 are wrong.
template <typename T, int TILE>
__global__ void broken_batched_b_from_product_0(int M, int N, int K, T alpha, const T *const Aarray[],
                                                const T *const Barray[], T beta, T *const Carray[],
                                                int batchCount)
{
    int b = blockIdx.z;
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    gemm_tile<T, TILE>(row, col, M, N, K, alpha, Aarray[b], Barray[0], beta, Carray[b]);
}

// Broken twin: a grid-stride loop over the products that runs one too far (b <= batchCount), as
// a kernel written for a batch larger than the grid's z often does. Product batchCount's
// pointers are read from past the end of each array.
template <typename T, int TILE>
__global__ void broken_batched_loop_past_the_last_product(int M, int N, int K, T alpha, const T *const Aarray[],
                                                          const T *const Barray[], T beta, T *const Carray[],
                                                          int batchCount)
{
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    for (int b = blockIdx.z; b <= batchCount; b += gridDim.z)
        gemm_tile<T, TILE>(row, col, M, N, K, alpha, Aarray[b], Barray[b], beta, Carray[b]);
}

// Pointer-array batch with a separate output, as cuBLASLt's batched matmul takes one: half (or
// float) A and B, float sums, D_b = alpha A_b B_b + beta C_b with C only read (and only at
// beta != 0); a caller may pass the same arrays for C and D (an in-place update).
template <typename T, int TILE>
__global__ void gemm_batched_separate_d(int M, int N, int K, float alpha, const T *const *A, const T *const *B,
                                        float beta, const float *const *C, float *const *D, int batch)
{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    int b = blockIdx.z;
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    float sum = 0.0f;
    for (int t = 0; t < (K + TILE - 1) / TILE; t++)
    {
        int aCol = t * TILE + threadIdx.x;
        int bRow = t * TILE + threadIdx.y;
        As[threadIdx.y][threadIdx.x] = (row < M && aCol < K) ? float(A[b][row * K + aCol]) : 0.0f;
        Bs[threadIdx.y][threadIdx.x] = (bRow < K && col < N) ? float(B[b][bRow * N + col]) : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; k++)
            sum += As[threadIdx.y][k] * Bs[k][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N)
    {
        float out = alpha * sum;
        if (beta != 0.0f)
            out += beta * C[b][row * N + col];
        D[b][row * N + col] = out;
    }
}
