// GEMMs with a fused epilogue, the way they are usually published: the product's tile summed in
// float, then, before the one store of D,
//
//   z = alpha * A B + beta * C + bias,  y = act(z),  D = out_scale * (y + residual)
//
// Row-major and tight (lda = K, ldb = N, ldc = ldd = N); C is read only when beta != 0 (BLAS).
// The activations use the accurate library functions (tanhf, erff, expf).

#include <cuda_fp16.h>

enum Activation { IDENTITY = 0, RELU = 1, GELU_TANH = 2, GELU_ERF = 3, SILU = 4 };

template <int ACT>
__device__ __forceinline__ float activate(float x)
{
    if (ACT == RELU)
        return fmaxf(x, 0.0f);
    if (ACT == GELU_TANH)
        return 0.5f * x * (1.0f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x)));
    if (ACT == GELU_ERF)
        return 0.5f * x * (1.0f + erff(x * 0.7071067812f));
    if (ACT == SILU)
        return x / (1.0f + expf(-x));
    return x;
}

// The tiled sum of one element of A B (zero-filled guarded loads), in float.
template <typename T, int TILE>
__device__ __forceinline__ float tile_sum(const T *A, const T *B, int row, int col, int M, int N, int K)
{
    __shared__ T As[TILE][TILE];
    __shared__ T Bs[TILE][TILE];
    float sum = 0.0f;
    for (int t = 0; t < (K + TILE - 1) / TILE; t++)
    {
        int aCol = t * TILE + threadIdx.x;
        int bRow = t * TILE + threadIdx.y;
        As[threadIdx.y][threadIdx.x] = (row < M && aCol < K) ? A[row * K + aCol] : T(0.0f);
        Bs[threadIdx.y][threadIdx.x] = (bRow < K && col < N) ? B[bRow * N + col] : T(0.0f);
        __syncthreads();
        for (int k = 0; k < TILE; k++)
            sum += float(As[threadIdx.y][k]) * float(Bs[k][threadIdx.x]);
        __syncthreads();
    }
    return sum;
}

// What the broken twins get wrong (NO_FLAW: nothing).
enum EpilogueFlaw { NO_FLAW = 0, BIAS_ON_COLUMN = 1, ACTIVATION_FIRST = 2 };

template <typename T, int TILE, int ACT, int FLAW>
__device__ __forceinline__ void bias_act_residual(int M, int N, int K, float alpha, const T *A, const T *B,
                                                  float beta, const T *C, T *D, const T *bias,
                                                  const T *residual, float out_scale)
{
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    float sum = tile_sum<T, TILE>(A, B, row, col, M, N, K);
    if (row < M && col < N)
    {
        float z = alpha * (FLAW == ACTIVATION_FIRST ? activate<ACT>(sum) : sum);
        if (beta != 0.0f)
            z += beta * float(C[row * N + col]);
        z += float(bias[FLAW == BIAS_ON_COLUMN ? col : row]);
        float y = FLAW == ACTIVATION_FIRST ? z : activate<ACT>(z);
        D[row * N + col] = T(out_scale * (y + float(residual[row * N + col])));
    }
}

// D = out_scale * (act(alpha A B + beta C + bias[row]) + residual): a bias per row of D.
// Launch: grid (ceil(N / TILE), ceil(M / TILE)), block (TILE, TILE).
template <typename T, int TILE, int ACT>
__global__ void gemm_bias_act_residual(int M, int N, int K, float alpha, const T *A, const T *B, float beta,
                                       const T *C, T *D, const T *bias, const T *residual, float out_scale)
{
    bias_act_residual<T, TILE, ACT, NO_FLAW>(M, N, K, alpha, A, B, beta, C, D, bias, residual, out_scale);
}

// Broken twin: the bias read along the wrong axis, bias[col] (a per-column bias's index).
template <typename T, int TILE, int ACT>
__global__ void broken_bias_on_wrong_axis(int M, int N, int K, float alpha, const T *A, const T *B, float beta,
                                          const T *C, T *D, const T *bias, const T *residual, float out_scale)
{
    bias_act_residual<T, TILE, ACT, BIAS_ON_COLUMN>(M, N, K, alpha, A, B, beta, C, D, bias, residual, out_scale);
}

// Broken twin: the activation applied to the sum before alpha, beta C and the bias.
template <typename T, int TILE, int ACT>
__global__ void broken_activation_before_alpha_beta(int M, int N, int K, float alpha, const T *A, const T *B,
                                                    float beta, const T *C, T *D, const T *bias,
                                                    const T *residual, float out_scale)
{
    bias_act_residual<T, TILE, ACT, ACTIVATION_FIRST>(M, N, K, alpha, A, B, beta, C, D, bias, residual, out_scale);
}

// The common "bias + GELU" kernel of a Linear layer: one thread per element of D, D = gelu(A B +
// bias[col]), a bias per column (per output feature), erf form. Launch: grid (ceil(N / 16),
// ceil(M / 16)), block (16, 16).
__global__ void gemm_bias_gelu(const float *A, const float *B, const float *bias, float *D, int M, int N, int K)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N)
    {
        float sum = 0.0f;
        for (int k = 0; k < K; k++)
            sum += A[row * K + k] * B[k * N + col];
        D[row * N + col] = activate<GELU_ERF>(sum + bias[col]);
    }
}

// Split-K in two slices of one block (threadIdx.z), a bias per column and relu fused: slice 1
// stores its partial sum in D, a barrier, slice 0 adds its own and applies the epilogue once.
// Block (TILE, TILE, 2), grid (ceil(N / TILE), ceil(M / TILE)).
template <int TILE, bool BIAS_IN_EVERY_SLICE>
__device__ __forceinline__ void splitk_bias_relu_body(int M, int N, int K, float alpha, const float *A,
                                                      const float *B, float beta, const float *C, float *D,
                                                      const float *bias)
{
    const int slice = threadIdx.z;
    const int row = blockIdx.y * TILE + threadIdx.y;
    const int col = blockIdx.x * TILE + threadIdx.x;
    const int half = (K + 1) / 2;
    const int begin = slice * half;
    const int end = begin + half < K ? begin + half : K;
    const bool inside = row < M && col < N;
    float sum = 0.0f;
    if (inside)
        for (int k = begin; k < end; k++)
            sum += A[row * K + k] * B[k * N + col];
    if (BIAS_IN_EVERY_SLICE && inside)
        sum += bias[col];
    if (slice == 1 && inside)
        D[row * N + col] = sum;
    __syncthreads();
    if (slice == 0 && inside)
    {
        float z = alpha * (sum + D[row * N + col]);
        if (beta != 0.0f)
            z += beta * C[row * N + col];
        if (!BIAS_IN_EVERY_SLICE)
            z += bias[col];
        D[row * N + col] = fmaxf(z, 0.0f);
    }
}

template <int TILE>
__global__ void gemm_splitk_bias_relu(int M, int N, int K, float alpha, const float *A, const float *B,
                                      float beta, const float *C, float *D, const float *bias)
{
    splitk_bias_relu_body<TILE, false>(M, N, K, alpha, A, B, beta, C, D, bias);
}

// Broken twin: every slice adds the bias to its partial sum (here twice, alpha times one of them).
template <int TILE>
__global__ void broken_splitk_bias_in_every_slice(int M, int N, int K, float alpha, const float *A,
                                                  const float *B, float beta, const float *C, float *D,
                                                  const float *bias)
{
    splitk_bias_relu_body<TILE, true>(M, N, K, alpha, A, B, beta, C, D, bias);
}
