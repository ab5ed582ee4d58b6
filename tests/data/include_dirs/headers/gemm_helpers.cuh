// Helpers the kernel file includes from the catalog's include_dirs.
#pragma once

__device__ inline float dot_row_col(const float *A, const float *B, int row, int col, int N, int K)
{
    float sum = 0.0f;
    for (int k = 0; k < K; k++)
        sum += A[row * K + k] * B[k * N + col];
    return sum;
}
