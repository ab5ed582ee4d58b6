// The CUDA device functions GEMM kernels call, for gemmcheck's CPU simulator: cached
// loads, bit casts, rounding and fast-math intrinsics, integer intrinsics, min/max,
// atomics and the warp-synchronous shuffles and votes.
//
// Atomics and warp operations go through the runtime (runtime.cpp), which knows the
// thread running: an atomic is one uninterrupted read-modify-write whose order among
// threads is the schedule's; a warp operation parks its lane until every lane its mask
// names has arrived, then all of them exchange values at once, as a warp does.
#pragma once

// -- loads through the read-only / cache-hinted paths: plain loads on the CPU ------------
template <typename T> inline T __ldg(const T *p) { return *p; }
template <typename T> inline T __ldca(const T *p) { return *p; }
template <typename T> inline T __ldcg(const T *p) { return *p; }
template <typename T> inline T __ldcs(const T *p) { return *p; }
template <typename T> inline T __ldlu(const T *p) { return *p; }
template <typename T> inline T __ldcv(const T *p) { return *p; }
template <typename T> inline void __stcg(T *p, T v) { *p = v; }
template <typename T> inline void __stcs(T *p, T v) { *p = v; }
template <typename T> inline void __stwb(T *p, T v) { *p = v; }
template <typename T> inline void __stwt(T *p, T v) { *p = v; }

// -- bit casts --------------------------------------------------------------------------
template <typename To, typename From> inline To cudasim_bits(From from)
{
    static_assert(sizeof(To) == sizeof(From), "a bit cast keeps the size");
    To to;
    __builtin_memcpy(&to, &from, sizeof to);
    return to;
}
inline float __int_as_float(int i) { return cudasim_bits<float>(i); }
inline int __float_as_int(float f) { return cudasim_bits<int>(f); }
inline float __uint_as_float(unsigned int u) { return cudasim_bits<float>(u); }
inline unsigned int __float_as_uint(float f) { return cudasim_bits<unsigned int>(f); }
inline double __longlong_as_double(long long i) { return cudasim_bits<double>(i); }
inline long long __double_as_longlong(double d) { return cudasim_bits<long long>(d); }
inline int __double2hiint(double d) { return (int)(cudasim_bits<unsigned long long>(d) >> 32); }
inline int __double2loint(double d) { return (int)cudasim_bits<unsigned long long>(d); }
inline double __hiloint2double(int hi, int lo)
{
    return cudasim_bits<double>(((unsigned long long)(unsigned)hi << 32) | (unsigned)lo);
}

// -- arithmetic rounded to nearest: what C++ float / double arithmetic is on x86-64 (SSE) --
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fmaf_rn(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
inline float __frcp_rn(float a) { return 1.0f / a; }
inline float __fsqrt_rn(float a) { return __builtin_sqrtf(a); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __fma_rn(double a, double b, double c) { return __builtin_fma(a, b, c); }
inline double __drcp_rn(double a) { return 1.0 / a; }
inline double __dsqrt_rn(double a) { return __builtin_sqrt(a); }

// -- fast math: the GPU's approximations are within a few ulp; here they are the correctly
// rounded (or libm) values, inside the error bounds the oracle allows.
inline float __fdividef(float a, float b) { return a / b; }
inline float __expf(float x) { return expf(x); }
inline float __exp10f(float x) { return exp10f(x); }
inline float __logf(float x) { return logf(x); }
inline float __log2f(float x) { return log2f(x); }
inline float __log10f(float x) { return log10f(x); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __tanf(float x) { return tanf(x); }
inline float __powf(float x, float y) { return powf(x, y); }
inline void __sincosf(float x, float *s, float *c) { *s = sinf(x); *c = cosf(x); }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float rcbrtf(float x) { return 1.0f / cbrtf(x); }
// Clamp to [0, 1]; NaN gives 0, as on the GPU.
inline float __saturatef(float x) { return x >= 1.0f ? 1.0f : (x > 0.0f ? x : 0.0f); }

// -- conversions -------------------------------------------------------------------------
inline int __float2int_rn(float x) { return (int)__builtin_lrintf(x); }   // default mode: nearest even
inline int __float2int_rz(float x) { return (int)x; }
inline int __float2int_rd(float x) { return (int)floorf(x); }
inline int __float2int_ru(float x) { return (int)ceilf(x); }
inline unsigned int __float2uint_rn(float x) { return (unsigned int)__builtin_llrintf(x); }
inline unsigned int __float2uint_rz(float x) { return (unsigned int)x; }
inline long long __float2ll_rn(float x) { return __builtin_llrintf(x); }
inline float __int2float_rn(int i) { return (float)i; }
inline float __uint2float_rn(unsigned int u) { return (float)u; }
inline double __int2double_rn(int i) { return (double)i; }
inline float __double2float_rn(double d) { return (float)d; }
inline int __double2int_rn(double d) { return (int)__builtin_lrint(d); }
inline int __double2int_rz(double d) { return (int)d; }

// -- integer intrinsics ------------------------------------------------------------------
inline int __popc(unsigned int x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
inline int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned int __brev(unsigned int x)
{
    unsigned int r = 0;
    for (int i = 0; i < 32; i++, x >>= 1)
        r = (r << 1) | (x & 1u);
    return r;
}
inline int __mul24(int a, int b) { return (int)(((long long)(a << 8 >> 8)) * (long long)(b << 8 >> 8)); }
inline unsigned int __umul24(unsigned int a, unsigned int b) { return (a & 0xffffffu) * (b & 0xffffffu); }
inline int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
inline unsigned int __umulhi(unsigned int a, unsigned int b) { return (unsigned int)(((unsigned long long)a * b) >> 32); }

// -- min / max: CUDA's device overloads (integers, mixed signedness, float, double) ------
#define CUDASIM_MINMAX(R, A, B)                                     \
    inline R min(A a, B b) { return (R)a < (R)b ? (R)a : (R)b; }     \
    inline R max(A a, B b) { return (R)a > (R)b ? (R)a : (R)b; }
CUDASIM_MINMAX(int, int, int)
CUDASIM_MINMAX(unsigned int, unsigned int, unsigned int)
CUDASIM_MINMAX(unsigned int, int, unsigned int)
CUDASIM_MINMAX(unsigned int, unsigned int, int)
CUDASIM_MINMAX(long, long, long)
CUDASIM_MINMAX(unsigned long, unsigned long, unsigned long)
CUDASIM_MINMAX(long long, long long, long long)
CUDASIM_MINMAX(unsigned long long, unsigned long long, unsigned long long)
#undef CUDASIM_MINMAX
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }
inline double min(double a, double b) { return fmin(a, b); }
inline double max(double a, double b) { return fmax(a, b); }
inline double min(float a, double b) { return fmin(a, b); }
inline double max(float a, double b) { return fmax(a, b); }
inline double min(double a, float b) { return fmin(a, b); }
inline double max(double a, float b) { return fmax(a, b); }

// -- atomics -------------------------------------------------------------------------------
// cudasim_atomic: the runtime's part (alignment check, shared-memory bookkeeping, and under
// `lockstep` a turn for the other threads first). The read-modify-write itself is not
// instrumented (no_sanitize), so atomics of different threads are not reported as a race.
extern "C" void cudasim_atomic(void *address, unsigned long size, const char *file, int line);
#define CUDASIM_ATOMIC_FN inline __attribute__((noinline, no_sanitize("thread")))
#define CUDASIM_RMW(NAME, T, NEW)                                                          \
    CUDASIM_ATOMIC_FN T NAME(T *address, T val, const char *file = __builtin_FILE(),       \
                             int line = __builtin_LINE())                                    \
    {                                                                                        \
        cudasim_atomic(address, sizeof(T), file, line);                                      \
        T old = *address;                                                                    \
        *address = (NEW);                                                                    \
        return old;                                                                          \
    }
#define CUDASIM_RMW_SCOPES(NAME, T, NEW) \
    CUDASIM_RMW(NAME, T, NEW) CUDASIM_RMW(NAME##_block, T, NEW) CUDASIM_RMW(NAME##_system, T, NEW)
// Integer sums wrap as on the GPU (two's complement), without C++'s signed overflow.
#define CUDASIM_WRAP(T, E) ((T)(unsigned long long)(E))
CUDASIM_RMW_SCOPES(atomicAdd, int, CUDASIM_WRAP(int, (unsigned)old + (unsigned)val))
CUDASIM_RMW_SCOPES(atomicAdd, unsigned int, old + val)
CUDASIM_RMW_SCOPES(atomicAdd, unsigned long long, old + val)
CUDASIM_RMW_SCOPES(atomicAdd, float, old + val)
CUDASIM_RMW_SCOPES(atomicAdd, double, old + val)
CUDASIM_RMW_SCOPES(atomicSub, int, CUDASIM_WRAP(int, (unsigned)old - (unsigned)val))
CUDASIM_RMW_SCOPES(atomicSub, unsigned int, old - val)
CUDASIM_RMW_SCOPES(atomicExch, int, val)
CUDASIM_RMW_SCOPES(atomicExch, unsigned int, val)
CUDASIM_RMW_SCOPES(atomicExch, unsigned long long, val)
CUDASIM_RMW_SCOPES(atomicExch, float, val)
CUDASIM_RMW_SCOPES(atomicMax, int, old > val ? old : val)
CUDASIM_RMW_SCOPES(atomicMax, unsigned int, old > val ? old : val)
CUDASIM_RMW_SCOPES(atomicMax, long long, old > val ? old : val)
CUDASIM_RMW_SCOPES(atomicMax, unsigned long long, old > val ? old : val)
CUDASIM_RMW_SCOPES(atomicMin, int, old < val ? old : val)
CUDASIM_RMW_SCOPES(atomicMin, unsigned int, old < val ? old : val)
CUDASIM_RMW_SCOPES(atomicMin, long long, old < val ? old : val)
CUDASIM_RMW_SCOPES(atomicMin, unsigned long long, old < val ? old : val)
CUDASIM_RMW_SCOPES(atomicAnd, int, old & val)
CUDASIM_RMW_SCOPES(atomicAnd, unsigned int, old & val)
CUDASIM_RMW_SCOPES(atomicAnd, unsigned long long, old & val)
CUDASIM_RMW_SCOPES(atomicOr, int, old | val)
CUDASIM_RMW_SCOPES(atomicOr, unsigned int, old | val)
CUDASIM_RMW_SCOPES(atomicOr, unsigned long long, old | val)
CUDASIM_RMW_SCOPES(atomicXor, int, old ^ val)
CUDASIM_RMW_SCOPES(atomicXor, unsigned int, old ^ val)
CUDASIM_RMW_SCOPES(atomicXor, unsigned long long, old ^ val)
CUDASIM_RMW_SCOPES(atomicInc, unsigned int, old >= val ? 0u : old + 1u)
CUDASIM_RMW_SCOPES(atomicDec, unsigned int, (old == 0u || old > val) ? val : old - 1u)
#define CUDASIM_CAS(NAME, T)                                                                  \
    CUDASIM_ATOMIC_FN T NAME(T *address, T compare, T val, const char *file = __builtin_FILE(), \
                             int line = __builtin_LINE())                                     \
    {                                                                                         \
        cudasim_atomic(address, sizeof(T), file, line);                                       \
        T old = *address;                                                                     \
        *address = old == compare ? val : old;                                                \
        return old;                                                                           \
    }
CUDASIM_CAS(atomicCAS, int) CUDASIM_CAS(atomicCAS_block, int) CUDASIM_CAS(atomicCAS_system, int)
CUDASIM_CAS(atomicCAS, unsigned int) CUDASIM_CAS(atomicCAS_block, unsigned int)
CUDASIM_CAS(atomicCAS_system, unsigned int)
CUDASIM_CAS(atomicCAS, unsigned long long) CUDASIM_CAS(atomicCAS_block, unsigned long long)
CUDASIM_CAS(atomicCAS_system, unsigned long long)
CUDASIM_CAS(atomicCAS, unsigned short)
#undef CUDASIM_CAS
#undef CUDASIM_WRAP
#undef CUDASIM_RMW_SCOPES
#undef CUDASIM_RMW

// -- warp-synchronous operations -----------------------------------------------------------
// One call per lane: the lane deposits its value and parks; when every lane the mask names
// has arrived (lanes that exited, or that the block does not have, are excused, as CUDA
// excuses exited threads), each gets its result. A lane named in the mask that never
// arrives, a lane calling with a mask that leaves itself out, lanes of one warp calling
// with different masks, or a shuffle reading a lane that did not take part is reported
// (an invalid warp mask), naming the lanes.
enum
{
    CUDASIM_SHFL_IDX, CUDASIM_SHFL_UP, CUDASIM_SHFL_DOWN, CUDASIM_SHFL_XOR,
    CUDASIM_BALLOT, CUDASIM_ALL, CUDASIM_ANY, CUDASIM_SYNCWARP, CUDASIM_MATCH_ANY, CUDASIM_MATCH_ALL,
    CUDASIM_REDUCE_ADD, CUDASIM_REDUCE_MIN, CUDASIM_REDUCE_MAX, CUDASIM_REDUCE_AND, CUDASIM_REDUCE_OR,
    CUDASIM_REDUCE_XOR
};
extern "C" unsigned long long cudasim_warp(int op, unsigned mask, unsigned long long value, int arg, int width,
                                           const char *file, int line);
extern "C" unsigned cudasim_activemask(void);

#define CUDASIM_SITE const char *file = __builtin_FILE(), int line = __builtin_LINE()
template <typename T> inline T cudasim_shuffle(int op, unsigned mask, T var, int arg, int width, const char *file,
                                               int line)
{
    static_assert(sizeof(T) <= 8, "a warp shuffle moves at most 8 bytes per lane");
    unsigned long long bits = 0;
    __builtin_memcpy(&bits, &var, sizeof(T));
    bits = cudasim_warp(op, mask, bits, arg, width, file, line);
    T out;
    __builtin_memcpy(&out, &bits, sizeof(T));
    return out;
}
template <typename T> inline T __shfl_sync(unsigned mask, T var, int srcLane, int width = 32, CUDASIM_SITE)
{
    return cudasim_shuffle(CUDASIM_SHFL_IDX, mask, var, srcLane, width, file, line);
}
template <typename T> inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32, CUDASIM_SITE)
{
    return cudasim_shuffle(CUDASIM_SHFL_UP, mask, var, (int)delta, width, file, line);
}
template <typename T> inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32, CUDASIM_SITE)
{
    return cudasim_shuffle(CUDASIM_SHFL_DOWN, mask, var, (int)delta, width, file, line);
}
template <typename T> inline T __shfl_xor_sync(unsigned mask, T var, int laneMask, int width = 32, CUDASIM_SITE)
{
    return cudasim_shuffle(CUDASIM_SHFL_XOR, mask, var, laneMask, width, file, line);
}
inline unsigned __ballot_sync(unsigned mask, int predicate, CUDASIM_SITE)
{
    return (unsigned)cudasim_warp(CUDASIM_BALLOT, mask, predicate != 0, 0, 32, file, line);
}
inline int __all_sync(unsigned mask, int predicate, CUDASIM_SITE)
{
    return (int)cudasim_warp(CUDASIM_ALL, mask, predicate != 0, 0, 32, file, line);
}
inline int __any_sync(unsigned mask, int predicate, CUDASIM_SITE)
{
    return (int)cudasim_warp(CUDASIM_ANY, mask, predicate != 0, 0, 32, file, line);
}
inline int __uni_sync(unsigned mask, int predicate, CUDASIM_SITE)
{
    int all = (int)cudasim_warp(CUDASIM_ALL, mask, predicate != 0, 0, 32, file, line);
    return all || !cudasim_warp(CUDASIM_ANY, mask, predicate != 0, 0, 32, file, line);
}
template <typename T> inline unsigned __match_any_sync(unsigned mask, T value, CUDASIM_SITE)
{
    static_assert(sizeof(T) <= 8, "__match_any_sync compares at most 8 bytes");
    unsigned long long bits = 0;
    __builtin_memcpy(&bits, &value, sizeof(T));
    return (unsigned)cudasim_warp(CUDASIM_MATCH_ANY, mask, bits, 0, 32, file, line);
}
// Returns `mask` when every lane of it gives the same value (and sets *pred), else 0.
template <typename T> inline unsigned __match_all_sync(unsigned mask, T value, int *pred, CUDASIM_SITE)
{
    static_assert(sizeof(T) <= 8, "__match_all_sync compares at most 8 bytes");
    unsigned long long bits = 0;
    __builtin_memcpy(&bits, &value, sizeof(T));
    unsigned all = (unsigned)cudasim_warp(CUDASIM_MATCH_ALL, mask, bits, 0, 32, file, line);
    *pred = all != 0;
    return all;
}
// The warp reductions (sm_80) over the lanes of the mask: int and unsigned, min / max by the
// operand's signedness (the runtime's `arg`), the sum wrapping as on the GPU.
#define CUDASIM_REDUCE(NAME, OP)                                                                          \
    inline unsigned NAME(unsigned mask, unsigned value, CUDASIM_SITE)                                     \
    {                                                                                                     \
        return (unsigned)cudasim_warp(OP, mask, value, 0, 32, file, line);                                \
    }                                                                                                     \
    inline int NAME(unsigned mask, int value, CUDASIM_SITE)                                               \
    {                                                                                                     \
        return (int)(unsigned)cudasim_warp(OP, mask, (unsigned)value, 1, 32, file, line);                 \
    }
CUDASIM_REDUCE(__reduce_add_sync, CUDASIM_REDUCE_ADD)
CUDASIM_REDUCE(__reduce_min_sync, CUDASIM_REDUCE_MIN)
CUDASIM_REDUCE(__reduce_max_sync, CUDASIM_REDUCE_MAX)
#undef CUDASIM_REDUCE
#define CUDASIM_REDUCE_BITS(NAME, OP)                                                                     \
    inline unsigned NAME(unsigned mask, unsigned value, CUDASIM_SITE)                                     \
    {                                                                                                     \
        return (unsigned)cudasim_warp(OP, mask, value, 0, 32, file, line);                                \
    }
CUDASIM_REDUCE_BITS(__reduce_and_sync, CUDASIM_REDUCE_AND)
CUDASIM_REDUCE_BITS(__reduce_or_sync, CUDASIM_REDUCE_OR)
CUDASIM_REDUCE_BITS(__reduce_xor_sync, CUDASIM_REDUCE_XOR)
#undef CUDASIM_REDUCE_BITS
inline void __syncwarp(unsigned mask = 0xffffffffu, CUDASIM_SITE)
{
    cudasim_warp(CUDASIM_SYNCWARP, mask, 0, 0, 32, file, line);
}
// The lanes of the caller's warp that have not exited: the simulator runs a warp's lanes
// converged between warp-synchronous calls.
inline unsigned __activemask() { return cudasim_activemask(); }
#undef CUDASIM_SITE
