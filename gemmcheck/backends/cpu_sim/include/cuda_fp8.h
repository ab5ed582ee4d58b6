// The 8-bit floats of CUDA's cuda_fp8.h for gemmcheck's CPU simulator: __nv_fp8_e4m3 (no Inf,
// one NaN per sign, largest 448) and __nv_fp8_e5m2 (IEEE-like, largest 57344), their storage
// types and the conversions GEMM kernels use, with the device's results bit for bit:
// float/double -> fp8 rounded once to nearest even, with __NV_SATFINITE (beyond the finite
// range, an infinity too: the largest finite value of its sign) or __NV_NOSAT (e4m3: NaN, e5m2:
// Inf), below half the smallest subnormal a signed zero; a float NaN -> 0x7F (CUDA makes it its
// canonical NaN first), a double NaN -> 0x7F | sign (e4m3) or 0x7E | its top two significand
// bits | sign (e5m2); fp8 -> half / float exact. The constructors from wider types saturate, as CUDA's
// do; conversions are explicit, as in CUDA (float(x), static_cast<float>(x)).
#pragma once
#include "cudasim.h"
#include "cuda_fp16.h"
#include "cuda_bf16.h"

typedef unsigned char __nv_fp8_storage_t;
typedef unsigned short int __nv_fp8x2_storage_t;
typedef unsigned int __nv_fp8x4_storage_t;
typedef enum __nv_saturation_t { __NV_NOSAT, __NV_SATFINITE } __nv_saturation_t;
typedef enum __nv_fp8_interpretation_t { __NV_E4M3, __NV_E5M2 } __nv_fp8_interpretation_t;

namespace cudasim_fp8 {
// x rounded to nearest even onto the grid of a float with p significand bits whose smallest
// normal is 2^emin, then encoded; |x| past the largest finite value after rounding overflows.
inline __nv_fp8_storage_t encode(double x, __nv_saturation_t saturate, __nv_fp8_interpretation_t kind)
{
    const int p = kind == __NV_E4M3 ? 4 : 3, emin = kind == __NV_E4M3 ? -6 : -14, bias = kind == __NV_E4M3 ? 7 : 15;
    const double largest = kind == __NV_E4M3 ? 448.0 : 57344.0;
    const unsigned char max_bits = kind == __NV_E4M3 ? 0x7E : 0x7B;
    const unsigned char sign = __builtin_signbit(x) ? 0x80 : 0x00;
    if (x != x)
    {
        unsigned long long bits;
        __builtin_memcpy(&bits, &x, 8);
        return kind == __NV_E4M3 ? (unsigned char)(0x7F | sign)
                                 : (unsigned char)(0x7E | ((bits >> 50) & 0x3) | sign);
    }
    double a = __builtin_fabs(x);
    int e = a > 0 ? __builtin_ilogb(a) : emin;
    if (e < emin)
        e = emin;
    const double step = __builtin_ldexp(1.0, e - (p - 1));
    double rounded = __builtin_isinf(a) ? a : __builtin_nearbyint(a / step) * step;   // to nearest even
    if (rounded > largest)
    {
        if (saturate == __NV_SATFINITE)
            return (unsigned char)(max_bits | sign);
        return (unsigned char)((kind == __NV_E4M3 ? 0x7F : 0x7C) | sign);
    }
    if (rounded == 0)
        return sign;
    int re = __builtin_ilogb(rounded);
    if (re < emin)   // subnormal: the significand in units of the smallest subnormal
        return (unsigned char)(sign | (unsigned char)(rounded / __builtin_ldexp(1.0, emin - (p - 1))));
    const unsigned mantissa = (unsigned)(rounded / __builtin_ldexp(1.0, re - (p - 1))) - (1u << (p - 1));
    return (unsigned char)(sign | ((unsigned)(re + bias) << (p - 1)) | mantissa);
}

// A float's conversion: CUDA makes a NaN its canonical 0x7FFFFFFF first.
inline __nv_fp8_storage_t encode_float(float x, __nv_saturation_t saturate, __nv_fp8_interpretation_t kind)
{
    return x != x ? (__nv_fp8_storage_t)0x7F : encode((double)x, saturate, kind);
}

inline float decode(__nv_fp8_storage_t bits, __nv_fp8_interpretation_t kind)
{
    const int p = kind == __NV_E4M3 ? 4 : 3, bias = kind == __NV_E4M3 ? 7 : 15;
    const bool negative = bits & 0x80;
    const unsigned magnitude = bits & 0x7F;
    const unsigned exponent = magnitude >> (p - 1), mantissa = magnitude & ((1u << (p - 1)) - 1);
    float value;
    if (kind == __NV_E4M3 && magnitude == 0x7F)
        value = __builtin_nanf("");
    else if (kind == __NV_E5M2 && exponent == 0x1F)
        value = mantissa ? __builtin_nanf("") : __builtin_inff();
    else if (exponent == 0)
        value = __builtin_ldexpf((float)mantissa, 1 - bias - (p - 1));
    else
        value = __builtin_ldexpf((float)(mantissa | (1u << (p - 1))), (int)exponent - bias - (p - 1));
    return negative ? -value : value;
}
}  // namespace cudasim_fp8

struct __half_raw
{
    unsigned short x;
    __half_raw() = default;
    __half_raw(__half h) { __builtin_memcpy(&x, &h, 2); }
    operator __half() const { __half h; __builtin_memcpy(&h, &x, 2); return h; }
};
struct __nv_bfloat16_raw
{
    unsigned short x;
    __nv_bfloat16_raw() = default;
    __nv_bfloat16_raw(__nv_bfloat16 b) : x(b.__x) {}
    operator __nv_bfloat16() const { return __ushort_as_bfloat16(x); }
};

inline __nv_fp8_storage_t __nv_cvt_double_to_fp8(double x, __nv_saturation_t saturate,
                                                 __nv_fp8_interpretation_t kind)
{
    return cudasim_fp8::encode(x, saturate, kind);
}
inline __nv_fp8_storage_t __nv_cvt_float_to_fp8(float x, __nv_saturation_t saturate, __nv_fp8_interpretation_t kind)
{
    return cudasim_fp8::encode_float(x, saturate, kind);
}
inline __nv_fp8x2_storage_t __nv_cvt_float2_to_fp8x2(float2 x, __nv_saturation_t saturate,
                                                     __nv_fp8_interpretation_t kind)
{
    return (__nv_fp8x2_storage_t)(cudasim_fp8::encode_float(x.x, saturate, kind)
                                  | (cudasim_fp8::encode_float(x.y, saturate, kind) << 8));
}
inline __nv_fp8_storage_t __nv_cvt_halfraw_to_fp8(__half_raw x, __nv_saturation_t saturate,
                                                  __nv_fp8_interpretation_t kind)
{
    return cudasim_fp8::encode_float((float)(__half)x, saturate, kind);
}
inline __nv_fp8_storage_t __nv_cvt_bfloat16raw_to_fp8(__nv_bfloat16_raw x, __nv_saturation_t saturate,
                                                      __nv_fp8_interpretation_t kind)
{
    return cudasim_fp8::encode_float((float)(__nv_bfloat16)x, saturate, kind);
}
inline __half_raw __nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t x, __nv_fp8_interpretation_t kind)
{
    return __half_raw((__half)cudasim_fp8::decode(x, kind));
}

#define CUDASIM_FP8(NAME, KIND)                                                                             \
    struct __attribute__((aligned(1))) NAME                                                                 \
    {                                                                                                       \
        __nv_fp8_storage_t __x;                                                                             \
        NAME() = default;                                                                                   \
        explicit NAME(float f) : __x(cudasim_fp8::encode_float(f, __NV_SATFINITE, KIND)) {}                \
        explicit NAME(double d) : __x(cudasim_fp8::encode(d, __NV_SATFINITE, KIND)) {}                     \
        explicit NAME(__half h) : __x(cudasim_fp8::encode_float((float)h, __NV_SATFINITE, KIND)) {}        \
        explicit NAME(__nv_bfloat16 b) : __x(cudasim_fp8::encode_float((float)b, __NV_SATFINITE, KIND)) {} \
        explicit NAME(int i) : __x(cudasim_fp8::encode_float((float)i, __NV_SATFINITE, KIND)) {}           \
        explicit NAME(unsigned int i) : __x(cudasim_fp8::encode_float((float)i, __NV_SATFINITE, KIND)) {}  \
        explicit operator float() const { return cudasim_fp8::decode(__x, KIND); }                        \
        explicit operator double() const { return cudasim_fp8::decode(__x, KIND); }                       \
        explicit operator __half() const { return (__half)cudasim_fp8::decode(__x, KIND); }               \
        explicit operator __nv_bfloat16() const { return __nv_bfloat16(cudasim_fp8::decode(__x, KIND)); } \
    };                                                                                                      \
    struct __attribute__((aligned(2))) NAME##x2                                                             \
    {                                                                                                       \
        __nv_fp8x2_storage_t __x;                                                                           \
        NAME##x2() = default;                                                                               \
        explicit NAME##x2(float2 f) : __x(__nv_cvt_float2_to_fp8x2(f, __NV_SATFINITE, KIND)) {}            \
        explicit operator float2() const                                                                    \
        {                                                                                                   \
            return make_float2(cudasim_fp8::decode(__x & 0xFF, KIND), cudasim_fp8::decode(__x >> 8, KIND)); \
        }                                                                                                   \
    };                                                                                                      \
    struct __attribute__((aligned(4))) NAME##x4                                                             \
    {                                                                                                       \
        __nv_fp8x4_storage_t __x;                                                                           \
        NAME##x4() = default;                                                                               \
        explicit NAME##x4(float4 f)                                                                         \
            : __x(__nv_cvt_float2_to_fp8x2(make_float2(f.x, f.y), __NV_SATFINITE, KIND)                     \
                  | ((__nv_fp8x4_storage_t)__nv_cvt_float2_to_fp8x2(make_float2(f.z, f.w), __NV_SATFINITE, KIND) \
                     << 16)) {}                                                                             \
        explicit operator float4() const                                                                    \
        {                                                                                                   \
            return make_float4(cudasim_fp8::decode(__x & 0xFF, KIND), cudasim_fp8::decode((__x >> 8) & 0xFF, KIND), \
                               cudasim_fp8::decode((__x >> 16) & 0xFF, KIND), cudasim_fp8::decode(__x >> 24, KIND)); \
        }                                                                                                   \
    };
CUDASIM_FP8(__nv_fp8_e4m3, __NV_E4M3)
CUDASIM_FP8(__nv_fp8_e5m2, __NV_E5M2)
#undef CUDASIM_FP8
