// Attention scores as a hand-written transformer kernel computes them: for each of B*H heads,
// scores = scale * q k^T (T x T from T x D each: k is read row by row, so k^T is column-major),
// packed heads found from the index (q + b * T * D), one thread per score, b = blockIdx.z. In the
// suite's terms a batch of M = N = T products over K = D with an output scale (1/sqrt(D) in a
// model; the suite passes 1/2). The twin is the same body with one flaw.

template <bool DIVIDES>   // the twin's flaw: the scale divided by (1/sqrt(D) taken for sqrt(D))
__device__ __forceinline__ void scores_body(const float *q, const float *k, float *scores, float scale, int BH,
                                            int T, int D)
{
    const int b = blockIdx.z;
    const int i = blockIdx.y * blockDim.y + threadIdx.y;
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (b < BH && i < T && j < T) {
        const float *qb = q + (size_t)b * T * D;
        const float *kb = k + (size_t)b * T * D;
        float s = 0.f;
        for (int d = 0; d < D; ++d)
            s += qb[i * D + d] * kb[j * D + d];
        scores[(size_t)b * T * T + i * T + j] = DIVIDES ? s / scale : s * scale;
    }
}

__global__ void attention_scores(const float *q, const float *k, float *scores, float scale, int BH, int T, int D)
{
    scores_body<false>(q, k, scores, scale, BH, T, D);
}

__global__ void attention_scores_divided(const float *q, const float *k, float *scores, float scale, int BH, int T,
                                         int D)
{
    scores_body<true>(q, k, scores, scale, BH, T, D);
}
