// __nv_bfloat16 for gemmcheck's CPU simulator: 16 bits of storage, float arithmetic,
// conversions rounded to nearest even; NaN converts to the canonical 0x7FFF, as the
// GPU's cvt.rn.bf16 does.
#pragma once
#include "cudasim.h"

namespace cudasim_bf16 {
inline unsigned short from_float(float f)
{
    uint32_t u;
    __builtin_memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return 0x7fff;
    u += 0x7fffu + ((u >> 16) & 1u);
    return (unsigned short)(u >> 16);
}
// double -> float rounded to odd, then to bfloat16 to nearest even: one correct rounding.
inline unsigned short from_double(double d)
{
    if (d != d)
        return 0x7fff;
    float f = (float)d;
    if (__builtin_fabs((double)f) > __builtin_fabs(d))
        f = __builtin_nextafterf(f, 0.0f);
    if ((double)f != d && __builtin_isfinite(f))
    {
        uint32_t u;
        __builtin_memcpy(&u, &f, 4);
        u |= 1u;
        __builtin_memcpy(&f, &u, 4);
    }
    return from_float(f);
}
inline float to_float(unsigned short b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    __builtin_memcpy(&f, &u, 4);
    return f;
}
}  // namespace cudasim_bf16

struct __nv_bfloat16
{
    unsigned short __x;
    __nv_bfloat16() = default;
    __nv_bfloat16(float f) : __x(cudasim_bf16::from_float(f)) {}
    __nv_bfloat16(double d) : __x(cudasim_bf16::from_double(d)) {}
    __nv_bfloat16(int i) : __x(cudasim_bf16::from_double((double)i)) {}
    __nv_bfloat16(unsigned int i) : __x(cudasim_bf16::from_double((double)i)) {}
    __nv_bfloat16(long long i) : __x(cudasim_bf16::from_double((double)i)) {}
    operator float() const { return cudasim_bf16::to_float(__x); }
};
struct __attribute__((aligned(4))) __nv_bfloat162 { __nv_bfloat16 x, y; };
typedef __nv_bfloat16 nv_bfloat16;
typedef __nv_bfloat162 nv_bfloat162;

inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __double2bfloat16(double d) { return __nv_bfloat16(d); }
inline float __bfloat162float(__nv_bfloat16 b) { return (float)b; }
inline __nv_bfloat16 __hadd(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat16((double)(float)a + (double)(float)b); }
inline __nv_bfloat16 __hmul(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat16((double)(float)a * (double)(float)b); }
inline __nv_bfloat16 __hfma(__nv_bfloat16 a, __nv_bfloat16 b, __nv_bfloat16 c)
{
    return __nv_bfloat16(__builtin_fma((double)(float)a, (double)(float)b, (double)(float)c));
}
inline __nv_bfloat16 operator+(__nv_bfloat16 a, __nv_bfloat16 b) { return __hadd(a, b); }
inline __nv_bfloat16 operator*(__nv_bfloat16 a, __nv_bfloat16 b) { return __hmul(a, b); }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.__x; }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) { __nv_bfloat16 h; h.__x = u; return h; }
