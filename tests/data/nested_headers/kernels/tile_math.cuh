// Found beside the header that includes it, as compilers look for a quoted #include first.
#pragma once

__device__ inline float load_or_zero(const float *X, int row, int col, int rows, int cols)
{
    return row < rows && col < cols ? X[row * cols + col] : 0.0f;
}
