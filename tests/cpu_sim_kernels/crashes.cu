// A kernel that stores through an address no allocation holds: its launch crashes (the
// CPU simulator's worker dies). Declared "correct" in tests/test_hazards_rows.py so that
// the "references are clean" claims meet a reference whose launches never finished.
template <typename T, int TILE>
__global__ void crashes(const T *A, const T *B, T *C, int M, int N, int K)
{
    T *nowhere = (T *)16;
    nowhere[threadIdx.x] = A[0];
}
