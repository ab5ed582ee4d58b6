// alpha and beta through device pointers, as cuBLAS's pointer mode device passes them (and fp8
// GEMMs their scales), in a library's namespaces; the kernels launched elsewhere. The suite
// must pass each scalar in a buffer of the pointer's type, judge the kernel as it judges one
// taking numbers, and catch the twins: FLAW 1 ignores *alpha (wrong values), FLAW 2 writes
// the result's first element into *alpha (an input changed).
#include <cuda_fp16.h>

namespace mylib {
namespace kernels {

template <int BM = 16, int BN = 16, int FLAW = 0>
__global__ void gemm_device_scalars(int M, int N, int K, const float *alpha, const float *A, const float *B,
                                    const float *beta, float *C) {
  int row = blockIdx.y * BM + threadIdx.y, col = blockIdx.x * BN + threadIdx.x;
  if (row >= M || col >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
  float a = FLAW == 1 ? 1.0f : *alpha, b = *beta;
  float out = b == 0.0f ? a * acc : a * acc + b * C[row * N + col];
  C[row * N + col] = out;
  if (FLAW == 2 && row == 0 && col == 0) *const_cast<float *>(alpha) = out;
}

// A half GEMM whose alpha and beta are half, through pointers: the buffers hold half values.
__global__ void hgemm_half_scalars(const __half *alpha, const __half *beta, const __half *A, const __half *B,
                                   __half *C, int M, int N, int K) {
  int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= M || col >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc += __half2float(A[row * K + k]) * __half2float(B[k * N + col]);
  float b = __half2float(*beta);
  float out = __half2float(*alpha) * acc + (b == 0.0f ? 0.0f : b * __half2float(C[row * N + col]));
  C[row * N + col] = __float2half(out);
}

}  // namespace kernels
}  // namespace mylib

// C = alpha A B: alpha and no beta (C never read). FLAW 1 drops alpha: right at alpha = 1, the
// only value a kernel without beta was ever run at before the variants were fitted to its roles.
template <int FLAW>
__global__ void gemm_alpha_only(int M, int N, int K, float alpha, const float *A, const float *B, float *C) {
  int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= M || col >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
  C[row * N + col] = FLAW == 1 ? acc : alpha * acc;
}
