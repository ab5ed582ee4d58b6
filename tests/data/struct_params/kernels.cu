// Kernels that take their arguments in one struct by value, as many published GEMMs do: a
// launcher fills the struct, the kernel reads p.A, p.M, p.alpha. gemmcheck passes each
// member's role at the member's offset (tests/data/struct_params/catalog.toml lists one role
// per member, in declaration order).
#include <cuda_fp16.h>

struct GemmParams {
    const float *A, *B;
    float *C;
    int M, N, K;
    float alpha = 1.0f, beta = 0.0f;   // default member initializers, as launchers often have
    __host__ __device__ int rows() const { return M; }
};

// BUG 1 drops beta (C is overwritten, never scaled): the twin the suite must catch.
template <int BUG>
__global__ void sgemm_params(const GemmParams p)
{
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= p.rows() || col >= p.N) return;
    float acc = 0.0f;
    for (int k = 0; k < p.K; ++k) acc += p.A[row * p.K + k] * p.B[k * p.N + col];
    const float old = (BUG == 1 || p.beta == 0.0f) ? 0.0f : p.C[row * p.N + col];
    p.C[row * p.N + col] = p.alpha * acc + (BUG == 1 ? 0.0f : p.beta * old);
}

template __global__ void sgemm_params<0>(const GemmParams);
template __global__ void sgemm_params<1>(const GemmParams);

// An anonymous struct named by typedef, 8-, 4- and 2-byte members mixed.
typedef struct {
    const __half *A;
    const __half *B;
    __half *C;
    size_t M;
    int N, K;
    __half alpha, beta;
} HgemmArgs;

__global__ void hgemm_args(const HgemmArgs args)
{
    const size_t row = blockIdx.y * blockDim.y + threadIdx.y;
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= args.M || col >= args.N) return;
    float acc = 0.0f;
    for (int k = 0; k < args.K; ++k)
        acc += __half2float(args.A[row * args.K + k]) * __half2float(args.B[k * args.N + col]);
    const float beta = __half2float(args.beta);
    const float old = beta == 0.0f ? 0.0f : __half2float(args.C[row * args.N + col]);
    args.C[row * args.N + col] = __float2half(__half2float(args.alpha) * acc + beta * old);
}

// The sizes in a struct, the pointers beside it.
struct Sizes { int M, N, K; };

__global__ void sizes_struct_gemm(Sizes s, const float *A, const float *B, float *C)
{
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= s.M || col >= s.N) return;
    float acc = 0.0f;
    for (int k = 0; k < s.K; ++k) acc += A[row * s.K + k] * B[k * s.N + col];
    C[row * s.N + col] = acc;
}

// A packed struct: every member right after the one before (M at 0, A at 4).
struct __attribute__((packed)) PackedArgs {
    int M;
    const float *A, *B;
    float *C;
    int N, K;
};

__global__ void packed_args_gemm(PackedArgs p)
{
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= p.M || col >= p.N) return;
    float acc = 0.0f;
    for (int k = 0; k < p.K; ++k) acc += p.A[row * p.K + k] * p.B[k * p.N + col];
    p.C[row * p.N + col] = acc;
}

// A template struct, instantiated with the kernel's own type: Args<float>, Args<__half>.
template <typename T>
struct Args {
    const T *A, *B;
    T *C;
    int M, N, K;
    T alpha, beta;
};

template <typename T>
__global__ void templated_args_gemm(const Args<T> args)
{
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= args.M || col >= args.N) return;
    float acc = 0.0f;
    for (int k = 0; k < args.K; ++k)
        acc += static_cast<float>(args.A[row * args.K + k]) * static_cast<float>(args.B[k * args.N + col]);
    const float beta = static_cast<float>(args.beta);
    const float old = beta == 0.0f ? 0.0f : static_cast<float>(args.C[row * args.N + col]);
    args.C[row * args.N + col] = static_cast<T>(static_cast<float>(args.alpha) * acc + beta * old);
}
