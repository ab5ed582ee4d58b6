// Kernels whose size is compiled in (#define N 64) and their broken twins: the suite must judge
// each at that one shape and catch every twin with its defect.
#define N 64
#define TILE_WIDTH 16

// FLAW 1: the second barrier left out (the next phase overwrites tiles still being read);
// FLAW 2: B's tile read along the wrong axis (tx for ty: wrong values).
template <int FLAW>
__global__ void matmul_fixed(const float *a, const float *b, float *c) {
  __shared__ float tileA[TILE_WIDTH][TILE_WIDTH];
  __shared__ float tileB[TILE_WIDTH][TILE_WIDTH];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * TILE_WIDTH + ty, col = blockIdx.x * TILE_WIDTH + tx;
  float sum = 0.0f;
  for (int phase = 0; phase < N / TILE_WIDTH; ++phase) {
    tileA[ty][tx] = a[row * N + phase * TILE_WIDTH + tx];
    tileB[ty][tx] = FLAW == 2 ? b[(phase * TILE_WIDTH + tx) * N + blockIdx.x * TILE_WIDTH + ty]
                              : b[(phase * TILE_WIDTH + ty) * N + col];
    __syncthreads();
    for (int k = 0; k < TILE_WIDTH; ++k) sum += tileA[ty][k] * tileB[k][tx];
    if (FLAW != 1) __syncthreads();
  }
  c[row * N + col] = sum;
}

// The same with the sizes as template parameters, instantiated at one shape.
template <int M_, int N_, int K_>
__global__ void matmul_template_sizes(const float *a, const float *b, float *c) {
  int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= M_ || col >= N_) return;
  float sum = 0.0f;
  for (int k = 0; k < K_; ++k) sum += a[row * K_ + k] * b[k * N_ + col];
  c[row * N_ + col] = sum;
}
