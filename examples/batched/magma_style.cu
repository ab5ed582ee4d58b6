// A batched SGEMM in the style of MAGMA's batched routines: column-major operands with leading
// dimensions (ldda, lddb, lddc), arrays of device pointers (dA_array ...), the batch along z, and
// the host wrapper that launches it. `python -m gemmcheck draft magma_style.cu` drafts its entry;
// only the layout TODO needed filling.
#define BLK 16
__global__ void sgemm_batched_kernel(int m, int n, int k, float alpha,
                                     float const * const * dA_array, int ldda,
                                     float const * const * dB_array, int lddb,
                                     float beta, float **dC_array, int lddc, int batchCount)
{
    int batchid = blockIdx.z;
    const float *dA = dA_array[batchid];
    const float *dB = dB_array[batchid];
    float *dC = dC_array[batchid];
    int row = blockIdx.x * BLK + threadIdx.x;
    int col = blockIdx.y * BLK + threadIdx.y;
    if (row >= m || col >= n) return;
    float sum = 0.0f;
    for (int p = 0; p < k; p++)
        sum += dA[row + p * ldda] * dB[p + col * lddb];
    float out = alpha * sum;
    if (beta != 0.0f) out += beta * dC[row + col * lddc];
    dC[row + col * lddc] = out;
}

void magmablas_sgemm_batched(int m, int n, int k, float alpha, float const * const * dA_array, int ldda,
                             float const * const * dB_array, int lddb, float beta, float **dC_array, int lddc,
                             int batchCount)
{
    dim3 threads(BLK, BLK);
    dim3 grid((m + BLK - 1) / BLK, (n + BLK - 1) / BLK, batchCount);
    sgemm_batched_kernel<<<grid, threads>>>(m, n, k, alpha, dA_array, ldda, dB_array, lddb, beta, dC_array, lddc, batchCount);
}
