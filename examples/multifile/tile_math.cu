// The device functions of gemm.cu, in a file of their own: built as relocatable device code
// and linked with it (nvcc -rdc=true, then nvcc -dlink), as a project with several .cu files is.

// Load an element of a row-major rows x cols matrix, or 0 outside it.
__device__ float load_or_zero(const float *m, int rows, int cols, int row, int col)
{
    return (row < rows && col < cols) ? m[row * cols + col] : 0.0f;
}

// C = alpha * acc + beta * C, without reading C at beta = 0 (as BLAS).
__device__ void store_scaled(float *c, float alpha, float acc, float beta)
{
    *c = beta == 0.0f ? alpha * acc : alpha * acc + beta * *c;
}
