// A linear layer's forward pass in the form of a popular from-scratch LLM training project:
// out (B*T x OC) = inp (B*T x C) weight^T + bias, weight kept as OC x C (out features x in
// features, as torch.nn.Linear keeps it), one thread per output, float sums. In the suite's
// terms: M = B*T, K = C, N = OC, B = weight read column-major, a bias per column.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

template <class T>
__host__ __device__ T ceil_div(T dividend, T divisor) {
    return (dividend + divisor - 1) / divisor;
}

void cudaCheck(cudaError_t error, const char *file, int line) {
    if (error != cudaSuccess) {
        printf("[CUDA ERROR] at file %s:%d:\n%s\n", file, line, cudaGetErrorString(error));
        exit(EXIT_FAILURE);
    }
}
#define cudaCheck(err) (cudaCheck(err, __FILE__, __LINE__))

// kernel 1: naive kernel, every thread handles one output element, direct global memory access
__global__ void matmul_forward_kernel1(float *out, const float *inp, const float *weight, const float *bias,
                                       int BT, int C, int OC) {
    // out is (B,T,OC). OC is short for "output channels", e.g. OC = 4 * C
    // inp is (B,T,C), weight is (OC, C), bias is (OC)
    int bt = blockIdx.x * blockDim.x + threadIdx.x;
    int oc = blockIdx.y * blockDim.y + threadIdx.y;
    if (bt < BT && oc < OC) {
        float val = (bias != NULL) ? bias[oc] : 0.0f;
        const float *wrow = weight + oc * C;
        const float *inp_bt = inp + bt * C;
        for (int i = 0; i < C; i++) {
            val += inp_bt[i] * wrow[i];
        }
        out[bt * OC + oc] = val;
    }
}

void matmul_forward1(float *out, const float *inp, const float *weight, const float *bias,
                     int B, int T, int C, int OC, const int sqrt_block_size) {
    dim3 gridDim(ceil_div(B * T, sqrt_block_size), ceil_div(OC, sqrt_block_size));
    dim3 blockDim(sqrt_block_size, sqrt_block_size);
    matmul_forward_kernel1<<<gridDim, blockDim>>>(out, inp, weight, bias, B * T, C, OC);
    cudaCheck(cudaGetLastError());
}
