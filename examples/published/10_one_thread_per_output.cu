// One thread per output element, as a first CUDA course writes it: a one-dimensional grid over
// the m x n outputs (row = idx / n, col = idx % n), its block and grid sizes held in integers,
// and a main() that allocates, launches and checks. Row-major, any shape.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

__global__ void matmul_flat(const float *a, const float *b, float *c, int m, int n, int k)
{
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= m * n) return;
    int row = idx / n, col = idx % n;
    float sum = 0.0f;
    for (int i = 0; i < k; i++)
        sum += a[row * k + i] * b[i * n + col];
    c[idx] = sum;
}

int main()
{
    int m = 1000, n = 700, k = 300;
    size_t bytes_a = (size_t)m * k * sizeof(float), bytes_b = (size_t)k * n * sizeof(float);
    size_t bytes_c = (size_t)m * n * sizeof(float);
    float *h_a = (float *)malloc(bytes_a), *h_b = (float *)malloc(bytes_b), *h_c = (float *)malloc(bytes_c);
    for (int i = 0; i < m * k; i++) h_a[i] = 1.0f;
    for (int i = 0; i < k * n; i++) h_b[i] = 2.0f;
    float *a, *b, *c;
    cudaMalloc(&a, bytes_a);
    cudaMalloc(&b, bytes_b);
    cudaMalloc(&c, bytes_c);
    cudaMemcpy(a, h_a, bytes_a, cudaMemcpyHostToDevice);
    cudaMemcpy(b, h_b, bytes_b, cudaMemcpyHostToDevice);

    const int threads = 256;
    const int blocks = (m * n + threads - 1) / threads;
    matmul_flat<<<blocks, threads>>>(a, b, c, m, n, k);
    cudaMemcpy(h_c, c, bytes_c, cudaMemcpyDeviceToHost);
    printf("c[0] = %f (expected %f)\n", h_c[0], 2.0f * k);

    cudaFree(a); cudaFree(b); cudaFree(c);
    free(h_a); free(h_b); free(h_c);
    return 0;
}
