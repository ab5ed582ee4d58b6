// Reference GEMM kernels: C = A * B, row-major, one element type T throughout.
//
// Every kernel is a template over the element type T (and TILE where it tiles),
// so one source serves every dtype and tile size the catalog asks for.
// Half-precision inputs accumulate in float; see accumulator<> below.

#include <cuda_fp16.h>
#include <cuda_bf16.h>

// The accumulator type for an element type. float16 and bfloat16 accumulate in
// float (what every production GEMM does); float and double accumulate in themselves.
template <typename T> struct accumulator { using type = T; };
template <> struct accumulator<__half> { using type = float; };
template <> struct accumulator<__nv_bfloat16> { using type = float; };

// ---------------------------------------------------------------------------
// matmul_tiled: the seed kernel (tiled_matmuls.cu), made a template over T and
// TILE and otherwise unchanged: square N, N / TILE phases (so N must be a
// multiple of TILE), one barrier after the cooperative load and one after the
// dot product, a guarded store. Launch: grid (N / TILE, N / TILE) rounded down,
// block (TILE, TILE): the `seed` policy.
// ---------------------------------------------------------------------------
template <typename T, int TILE>
__global__ void matmul_tiled(const T *A, const T *B, T *C, int N)
{
    using acc_t = typename accumulator<T>::type;
    __shared__ T As[TILE][TILE];
    __shared__ T Bs[TILE][TILE];

    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    acc_t sum = acc_t(0);

    for (int t = 0; t < N / TILE; t++)
    {
        As[threadIdx.y][threadIdx.x] = A[row * N + t * TILE + threadIdx.x];
        Bs[threadIdx.y][threadIdx.x] = B[(t * TILE + threadIdx.y) * N + col];

        __syncthreads();

        for (int k = 0; k < TILE; k++)
        {
            sum += acc_t(As[threadIdx.y][k]) * acc_t(Bs[k][threadIdx.x]);
        }

        __syncthreads();
    }

    if (row < N && col < N)
        C[row * N + col] = T(sum);
}

// ---------------------------------------------------------------------------
// The hardened general kernel (seed section 7.1): C[M x N] = A[M x K] B[K x N],
// ceil(K / TILE) phases, loads guarded and zero-filled past the edges, guarded
// store. PAD columns of padding per shared row (section 7.2) shift successive
// rows by PAD banks. Launch: grid (ceil(N / TILE), ceil(M / TILE)), block
// (TILE, TILE): the `tile2d` policy.
// ---------------------------------------------------------------------------
template <typename T, int TILE, int PAD>
__device__ __forceinline__ void tiled_guarded_body(const T *A, const T *B, T *C,
                                                   int M, int N, int K)
{
    using acc_t = typename accumulator<T>::type;
    __shared__ T As[TILE][TILE + PAD];
    __shared__ T Bs[TILE][TILE + PAD];

    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    acc_t sum = acc_t(0);

    for (int t = 0; t < (K + TILE - 1) / TILE; t++)
    {
        int aCol = t * TILE + threadIdx.x;
        int bRow = t * TILE + threadIdx.y;
        As[threadIdx.y][threadIdx.x] = (row < M && aCol < K) ? A[row * K + aCol] : T(0.0f);
        Bs[threadIdx.y][threadIdx.x] = (bRow < K && col < N) ? B[bRow * N + col] : T(0.0f);

        __syncthreads();

        for (int k = 0; k < TILE; k++)
        {
            sum += acc_t(As[threadIdx.y][k]) * acc_t(Bs[k][threadIdx.x]);
        }

        __syncthreads();
    }

    if (row < M && col < N)
        C[row * N + col] = T(sum);
}

template <typename T, int TILE>
__global__ void matmul_tiled_guarded(const T *A, const T *B, T *C, int M, int N, int K)
{
    tiled_guarded_body<T, TILE, 0>(A, B, C, M, N, K);
}

template <typename T, int TILE>
__global__ void matmul_tiled_padded(const T *A, const T *B, T *C, int M, int N, int K)
{
    tiled_guarded_body<T, TILE, 1>(A, B, C, M, N, K);
}

// ---------------------------------------------------------------------------
// matmul_naive: one thread per output element, every operand straight from
// global memory. The baseline the tiled kernels are measured against.
// Launch: the `naive` policy (TILE is only the block edge).
// ---------------------------------------------------------------------------
template <typename T>
__global__ void matmul_naive(const T *A, const T *B, T *C, int M, int N, int K)
{
    using acc_t = typename accumulator<T>::type;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N)
    {
        acc_t sum = acc_t(0);
        for (int k = 0; k < K; k++)
            sum += acc_t(A[row * K + k]) * acc_t(B[k * N + col]);
        C[row * N + col] = T(sum);
    }
}
