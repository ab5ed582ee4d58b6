// A tiled matrix multiply as introductory courses write it: the matrices' size is a #define,
// so the kernel takes no size argument and computes exactly N x N = (N x N)(N x N); the grid
// is N / TILE_WIDTH blocks a side, and a main() allocates, copies and launches. Row-major.
#include <cstdio>
#include <cstdlib>

#define N 64
#define TILE_WIDTH 16

__global__ void matMulTiled(const float *a, const float *b, float *c) {
  __shared__ float tileA[TILE_WIDTH][TILE_WIDTH];
  __shared__ float tileB[TILE_WIDTH][TILE_WIDTH];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * TILE_WIDTH + ty;
  int col = blockIdx.x * TILE_WIDTH + tx;
  float sum = 0.0f;
  for (int phase = 0; phase < N / TILE_WIDTH; ++phase) {
    tileA[ty][tx] = a[row * N + phase * TILE_WIDTH + tx];
    tileB[ty][tx] = b[(phase * TILE_WIDTH + ty) * N + col];
    __syncthreads();
    for (int k = 0; k < TILE_WIDTH; ++k)
      sum += tileA[ty][k] * tileB[k][tx];
    __syncthreads();
  }
  c[row * N + col] = sum;
}

int main() {
  size_t bytes = N * N * sizeof(float);
  float *h_a = (float *)malloc(bytes), *h_b = (float *)malloc(bytes), *h_c = (float *)malloc(bytes);
  for (int i = 0; i < N * N; ++i) {
    h_a[i] = 1.0f;
    h_b[i] = 2.0f;
  }
  float *d_a, *d_b, *d_c;
  cudaMalloc(&d_a, bytes);
  cudaMalloc(&d_b, bytes);
  cudaMalloc(&d_c, bytes);
  cudaMemcpy(d_a, h_a, bytes, cudaMemcpyHostToDevice);
  cudaMemcpy(d_b, h_b, bytes, cudaMemcpyHostToDevice);
  dim3 grid(N / TILE_WIDTH, N / TILE_WIDTH);
  dim3 block(TILE_WIDTH, TILE_WIDTH);
  matMulTiled<<<grid, block>>>(d_a, d_b, d_c);
  cudaMemcpy(h_c, d_c, bytes, cudaMemcpyDeviceToHost);
  printf("c[0] = %f (expected %f)\n", h_c[0], 2.0f * N);
  cudaFree(d_a);
  cudaFree(d_b);
  cudaFree(d_c);
  free(h_a);
  free(h_b);
  free(h_c);
  return 0;
}
