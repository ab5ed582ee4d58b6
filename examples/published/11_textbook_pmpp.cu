// The tiled kernel in the textbook's own names: M x N = P, square Width x Width matrices,
// Width a multiple of TILE_WIDTH (the text's assumption: no bounds checks), one phase per
// tile of the inner dimension. Row-major.
#include <cuda_runtime.h>

#define TILE_WIDTH 16

__global__ void MatrixMulKernel(float *M, float *N, float *P, int Width)
{
    __shared__ float Mds[TILE_WIDTH][TILE_WIDTH];
    __shared__ float Nds[TILE_WIDTH][TILE_WIDTH];

    int bx = blockIdx.x;  int by = blockIdx.y;
    int tx = threadIdx.x; int ty = threadIdx.y;

    // the row and column of the P element this thread computes
    int Row = by * TILE_WIDTH + ty;
    int Col = bx * TILE_WIDTH + tx;

    float Pvalue = 0;
    for (int ph = 0; ph < Width / TILE_WIDTH; ++ph) {
        Mds[ty][tx] = M[Row * Width + ph * TILE_WIDTH + tx];
        Nds[ty][tx] = N[(ph * TILE_WIDTH + ty) * Width + Col];
        __syncthreads();
        for (int k = 0; k < TILE_WIDTH; ++k)
            Pvalue += Mds[ty][k] * Nds[k][tx];
        __syncthreads();
    }
    P[Row * Width + Col] = Pvalue;
}

void MatrixMultiplication(float *M_d, float *N_d, float *P_d, int Width)
{
    dim3 dimGrid(Width / TILE_WIDTH, Width / TILE_WIDTH, 1);
    dim3 dimBlock(TILE_WIDTH, TILE_WIDTH, 1);
    MatrixMulKernel<<<dimGrid, dimBlock>>>(M_d, N_d, P_d, Width);
}
