// Correct GEMM kernels whose parameters are not all int and float: the suite must pass every
// argument in the type the kernel declares (size_t sizes, an alpha and beta of the element
// type), and judge each of them correct. fixed_width.cu: <cstdint>'s types.
#include <cstddef>
#include <cuda_fp16.h>
#include <cuda_bf16.h>

// Partial sums in float (double for double), as the suite's oracle expects of every dtype.
template <typename T> struct accumulator { typedef float type; };
template <> struct accumulator<double> { typedef double type; };

// C = A B with size_t sizes, row-major: one thread per element of C.
template <typename T>
__global__ void gemm_size_t(const T *A, const T *B, T *C, size_t M, size_t N, size_t K)
{
    size_t row = blockIdx.y * (size_t)blockDim.y + threadIdx.y;
    size_t col = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (row >= M || col >= N)
        return;
    typename accumulator<T>::type sum = 0;
    for (size_t k = 0; k < K; ++k)
        sum += static_cast<float>(A[row * K + k]) * static_cast<float>(B[k * N + col]);
    C[row * N + col] = static_cast<T>(sum);
}

// The tutorial style: every size a size_t, alpha and beta of the element type T (a __half
// alpha in the float16 instantiation), C = alpha A B + beta C row-major, C not read at beta 0.
template <typename T>
__global__ void gemm_tutorial(size_t m, size_t n, size_t k, T alpha, T const *A, size_t lda, T const *B,
                              size_t ldb, T beta, T *C, size_t ldc)
{
    typedef typename accumulator<T>::type Acc;
    size_t row = blockIdx.y * (size_t)blockDim.y + threadIdx.y;
    size_t col = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (row >= m || col >= n)
        return;
    Acc sum = 0;
    for (size_t i = 0; i < k; ++i)
        sum += static_cast<Acc>(A[row * lda + i]) * static_cast<Acc>(B[i * ldb + col]);
    Acc result = static_cast<Acc>(alpha) * sum;
    if (static_cast<Acc>(beta) != Acc(0))
        result += static_cast<Acc>(beta) * static_cast<Acc>(C[row * ldc + col]);
    C[row * ldc + col] = static_cast<T>(result);
}
