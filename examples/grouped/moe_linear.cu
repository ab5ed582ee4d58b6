// A mixture-of-experts linear layer as a PyTorch extension writes it: the tokens sorted by
// expert, expert e's rows of x between expert_offsets[e] and expert_offsets[e + 1] (int64, as
// torch.cumsum gives them), its weight w[e] kept N x K (as nn.Linear keeps it), one thread per
// output. out[rows of e] = x[rows of e] w[e]^T.
#include <cstdint>

__global__ void moe_linear(const float *x, const float *w, float *out, const int64_t *expert_offsets,
                           int M, int N, int K, int num_experts)
{
    const int e = blockIdx.z;
    const int64_t begin = expert_offsets[e], end = expert_offsets[e + 1];
    const int64_t row = begin + blockIdx.y * blockDim.y + threadIdx.y;
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < end && col < N) {
        const float *we = w + (size_t)e * N * K;
        float acc = 0.f;
        for (int k = 0; k < K; ++k)
            acc += x[row * K + k] * we[(size_t)col * K + k];
        out[row * N + col] = acc;
    }
}
