// A kernel with a syntax error: the kill matrix must give its row compile_error and
// judge every other row (tests/test_hazards_rows.py).
template <typename T, int TILE>
__global__ void does_not_compile(const T *A, const T *B, T *C, int M, int N, int K)
{
    C[0] = A[0] * B[0]   // missing semicolon
}
