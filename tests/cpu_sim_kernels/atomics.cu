// Every atomic CUDA offers and every fence, and the compiler's atomic builtins the thread
// instrumentation hands to the simulator's worker (tests/test_cpu_sim_atomics.py; catalog:
// atomics.toml). Signature (A, B, C, M, N, K); one block of 64 threads unless the catalog
// says otherwise. Thread 0 stores the results in C (float64: every value here is exact).
#include <cstdint>

struct Slots
{
    int i[12];
    unsigned int u[14];
    unsigned long long l[10];
    long long s[2];
    float f[3];
    double d[1];
    unsigned short h[2];
};

__device__ Slots global_slots;

// Thread t uses the plain form when t % 3 == 0, the _block form at 1, the _system form at 2:
// all three scopes, on one variable, in one launch.
#define SCOPES(NAME, ...) \
    (t % 3 == 0 ? NAME(__VA_ARGS__) : t % 3 == 1 ? NAME##_block(__VA_ARGS__) : NAME##_system(__VA_ARGS__))

// TILE 1: the variables live in shared memory; TILE 2: in global memory.
template <typename T, int TILE>
__global__ void every_cuda_atomic(const T *A, const T *B, T *C, int M, int N, int K)
{
    __shared__ Slots shared_slots;
    Slots &v = TILE == 1 ? shared_slots : global_slots;
    int t = threadIdx.x;
    if (t == 0)
    {
        for (int k = 0; k < 12; k++)
            v.i[k] = 0;
        for (int k = 0; k < 14; k++)
            v.u[k] = 0;
        for (int k = 0; k < 10; k++)
            v.l[k] = 0;
        v.i[2] = 5, v.i[3] = 1000, v.i[4] = -1000, v.i[7] = -1;
        v.u[1] = 5000, v.u[2] = 5, v.u[3] = 1000, v.u[8] = 0xFFFFFFFFu;
        v.l[1] = 5, v.l[2] = 1ull << 50, v.l[5] = ~0ull;
        v.s[0] = 0, v.s[1] = -(1ll << 50);
        v.f[0] = 0.0f, v.f[1] = 1.5f, v.f[2] = 0.0f, v.d[0] = 0.0;
        v.h[0] = 0, v.h[1] = 0;
    }
    __syncthreads();
    int spread = (t * 7) % 64;   // 0..63 in another order
    // int
    SCOPES(atomicAdd, &v.i[0], t - 20);
    SCOPES(atomicSub, &v.i[1], t);
    atomicAdd(&v.i[10], SCOPES(atomicExch, &v.i[2], 7) == 5);          // exactly one thread found 5
    SCOPES(atomicMin, &v.i[3], spread - 30);
    SCOPES(atomicMax, &v.i[4], spread - 30);
    atomicAdd(&v.i[6], SCOPES(atomicCAS, &v.i[5], 0, 1) == 0);         // exactly one thread swapped
    SCOPES(atomicAnd, &v.i[7], ~(1 << (t % 16)));
    SCOPES(atomicOr, &v.i[8], 1 << (t % 20));
    SCOPES(atomicXor, &v.i[9], t * 3);
    __threadfence_block();
    // unsigned int
    SCOPES(atomicAdd, &v.u[0], (unsigned)t);
    SCOPES(atomicSub, &v.u[1], (unsigned)t);
    atomicAdd(&v.u[12], SCOPES(atomicExch, &v.u[2], 7u) == 5u ? 1u : 0u);
    SCOPES(atomicMin, &v.u[3], (unsigned)spread + 10u);
    SCOPES(atomicMax, &v.u[4], (unsigned)spread + 10u);
    SCOPES(atomicInc, &v.u[5], 9u);
    SCOPES(atomicDec, &v.u[6], 9u);
    atomicAdd(&v.u[13], SCOPES(atomicCAS, &v.u[7], 0u, 1u) == 0u ? 1u : 0u);
    SCOPES(atomicAnd, &v.u[8], ~(1u << (t % 32)));
    SCOPES(atomicOr, &v.u[9], 1u << (t % 32));
    SCOPES(atomicXor, &v.u[10], (unsigned)t * 5u);
    __threadfence();
    // unsigned long long and long long
    SCOPES(atomicAdd, &v.l[0], (unsigned long long)t << 33);
    atomicAdd(&v.l[8], SCOPES(atomicExch, &v.l[1], 7ull) == 5ull ? 1ull : 0ull);
    SCOPES(atomicMin, &v.l[2], (unsigned long long)spread + (1ull << 40));
    SCOPES(atomicMax, &v.l[3], (unsigned long long)spread + (1ull << 40));
    atomicAdd(&v.l[9], SCOPES(atomicCAS, &v.l[4], 0ull, 1ull) == 0ull ? 1ull : 0ull);
    SCOPES(atomicAnd, &v.l[5], ~(1ull << (t % 64)));
    SCOPES(atomicOr, &v.l[6], 1ull << (t % 40));
    SCOPES(atomicXor, &v.l[7], (unsigned long long)(t * 3) << 34);
    SCOPES(atomicMin, &v.s[0], (long long)spread - (1ll << 40));
    SCOPES(atomicMax, &v.s[1], (long long)spread - (1ll << 40));
    __threadfence_system();
    // float, double, unsigned short
    SCOPES(atomicAdd, &v.f[0], 0.5f * t);
    atomicAdd(&v.i[11], SCOPES(atomicExch, &v.f[1], 2.5f) == 1.5f);
    SCOPES(atomicAdd, &v.d[0], 0.25 * t);
    atomicAdd(&v.u[11], atomicCAS(&v.h[0], (unsigned short)0, (unsigned short)1) == 0 ? 1u : 0u);
    __syncthreads();
    if (t != 0)
        return;
    int k = 0;
    for (int j = 0; j < 12; j++)
        C[k++] = T(v.i[j]);
    for (int j = 0; j < 14; j++)
        C[k++] = T(v.u[j]);
    for (int j = 0; j < 10; j++)
        C[k++] = T(v.l[j]);
    for (int j = 0; j < 2; j++)
        C[k++] = T(v.s[j]);
    C[k++] = T(v.f[0]), C[k++] = T(v.f[1]), C[k++] = T(v.d[0]), C[k++] = T(v.h[0]);
}

// The compiler's own atomic builtins, every width (1, 2, 4, 8, 16 bytes) and operation, from
// 64 threads on shared memory (TILE 1) or global memory (TILE 2). Under the simulator's thread
// instrumentation each is a call of a __tsan_atomic* entry point of the worker. C[16 * w + k]:
// value k (k < 8) or count k - 8 of width w (1, 2, 4, 8, 16 bytes: w = 0 to 4).
template <typename U> __device__ void builtins_of_one_width(U *x, U *counts, int t)
{
    U one = 1;
    __atomic_fetch_add(&x[0], (U)t, __ATOMIC_RELAXED);
    __atomic_sub_fetch(&x[1], (U)t, __ATOMIC_SEQ_CST);
    __atomic_fetch_and(&x[2], (U) ~(one << (t % 8)), __ATOMIC_ACQ_REL);
    __atomic_or_fetch(&x[3], (U)(one << (t % 8)), __ATOMIC_RELEASE);
    __atomic_fetch_xor(&x[4], (U)(t * 3), __ATOMIC_ACQUIRE);
    __atomic_fetch_nand(&x[5], (U)~(U)0, __ATOMIC_RELAXED);   // flips every bit
    U expected = 0;
    if (__atomic_compare_exchange_n(&x[6], &expected, (U)9, t % 2 == 1, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
        __atomic_fetch_add(&counts[0], (U)1, __ATOMIC_RELAXED);
    if (__atomic_exchange_n(&x[7], (U)4, __ATOMIC_SEQ_CST) == 3)
        __atomic_fetch_add(&counts[1], (U)1, __ATOMIC_RELAXED);
    if (__sync_val_compare_and_swap(&counts[2], (U)0, (U)1) == 0)
        __sync_fetch_and_add(&counts[3], (U)1);
    __sync_add_and_fetch(&counts[4], (U)2);
    if (__sync_lock_test_and_set(&counts[5], (U)1) == 0)
        __sync_lock_release(&counts[6]);
    __atomic_store_n(&counts[7], (U)(__atomic_load_n(&counts[7], __ATOMIC_ACQUIRE) | 1), __ATOMIC_RELEASE);
}

// The low 32 bits of each value (exact in a double).
template <typename U> __device__ void store_one_width(U *x, U *counts, double *C)
{
    for (int k = 0; k < 8; k++)
        C[k] = (double)(uint32_t)x[k], C[8 + k] = (double)(uint32_t)counts[k];
}

struct Builtins
{
    uint8_t b[2][8];
    uint16_t h[2][8];
    uint32_t w[2][8];
    uint64_t d[2][8];
    unsigned __int128 q[2][8];
};

__device__ Builtins global_builtins;

template <typename T, int TILE>
__global__ void atomic_builtins(const T *A, const T *B, T *C, int M, int N, int K)
{
    __shared__ Builtins shared_builtins;
    Builtins &v = TILE == 1 ? shared_builtins : global_builtins;
    int t = threadIdx.x;
    if (t == 0)
    {
        for (int k = 0; k < 8; k++)
            v.b[0][k] = v.h[0][k] = v.w[0][k] = v.d[0][k] = v.q[0][k] = 0,
            v.b[1][k] = v.h[1][k] = v.w[1][k] = v.d[1][k] = v.q[1][k] = 0;
        v.b[0][1] = v.h[0][1] = v.w[0][1] = v.d[0][1] = v.q[0][1] = 200;
        v.b[0][2] = v.h[0][2] = v.w[0][2] = v.d[0][2] = v.q[0][2] = 0xFF;
        v.b[0][5] = v.h[0][5] = v.w[0][5] = v.d[0][5] = v.q[0][5] = 0x0F;
        v.b[0][7] = v.h[0][7] = v.w[0][7] = v.d[0][7] = v.q[0][7] = 3;
    }
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    __syncthreads();
    builtins_of_one_width(v.b[0], v.b[1], t);
    builtins_of_one_width(v.h[0], v.h[1], t);
    builtins_of_one_width(v.w[0], v.w[1], t);
    builtins_of_one_width(v.d[0], v.d[1], t);
    builtins_of_one_width(v.q[0], v.q[1], t);
    __sync_synchronize();
    __syncthreads();
    if (t != 0)
        return;
    store_one_width(v.b[0], v.b[1], (double *)C);
    store_one_width(v.h[0], v.h[1], (double *)C + 16);
    store_one_width(v.w[0], v.w[1], (double *)C + 32);
    store_one_width(v.d[0], v.d[1], (double *)C + 48);
    store_one_width(v.q[0], v.q[1], (double *)C + 64);
}

// How the tracking sees an atomic builtin: as it sees CUDA's atomics, a write of its thread.
// Every thread of two blocks adds to a shared counter and sets its block's bit of C[0] (as
// 64-bit integer) with atomic builtins: no race. TILE 2: thread 1 also stores to the shared
// counter plainly in the same barrier interval (a race in shared memory); TILE 3: block 1's
// thread 0 also stores to C[0] plainly (a race between blocks in global memory).
template <typename T, int TILE>
__global__ void atomic_builtin_tracking(const T *A, const T *B, T *C, int M, int N, int K)
{
    __shared__ unsigned int counter;
    if (threadIdx.x == 0)
        counter = 0;
    __syncthreads();
    __atomic_fetch_add(&counter, 1u, __ATOMIC_RELAXED);
    __atomic_fetch_or((unsigned long long *)C, 1ull << blockIdx.x, __ATOMIC_RELAXED);
    if (TILE == 2 && threadIdx.x == 1)
        counter = 100;
    if (TILE == 3 && blockIdx.x == 1 && threadIdx.x == 0)
        *(unsigned long long *)C = 0;
    __syncthreads();
    if (threadIdx.x == 0)
        C[1 + blockIdx.x] = T(counter);
}
