// __half for gemmcheck's CPU simulator: gcc's _Float16 (IEEE binary16; conversions
// round to nearest even, in libgcc). Only what GEMM kernels commonly use.
#pragma once
#include "cudasim.h"

#if !defined(__FLT16_MAX__)
#error "gemmcheck cpu-sim needs _Float16 in C++: g++ >= 12 on x86-64"
#endif

typedef _Float16 __half;
typedef __half half;
struct __attribute__((aligned(4))) __half2 { __half x, y; };
typedef __half2 half2;

inline __half __float2half(float f) { return (__half)f; }
inline __half __float2half_rn(float f) { return (__half)f; }
inline __half __double2half(double d) { return (__half)d; }
inline float __half2float(__half h) { return (float)h; }
inline __half __int2half_rn(int i) { return (__half)i; }
inline __half __hadd(__half a, __half b) { return (__half)((double)a + (double)b); }
inline __half __hsub(__half a, __half b) { return (__half)((double)a - (double)b); }
inline __half __hmul(__half a, __half b) { return (__half)((double)a * (double)b); }
inline __half __hfma(__half a, __half b, __half c) { return (__half)__builtin_fma((double)a, (double)b, (double)c); }
inline unsigned short __half_as_ushort(__half h) { unsigned short u; __builtin_memcpy(&u, &h, 2); return u; }
inline __half __ushort_as_half(unsigned short u) { __half h; __builtin_memcpy(&h, &u, 2); return h; }
inline __half2 __halves2half2(__half a, __half b) { __half2 h; h.x = a; h.y = b; return h; }
inline __half2 __floats2half2_rn(float a, float b) { return __halves2half2((__half)a, (__half)b); }
inline __half2 __float2half2_rn(float a) { return __halves2half2((__half)a, (__half)a); }
inline float __low2float(__half2 h) { return (float)h.x; }
inline float __high2float(__half2 h) { return (float)h.y; }
inline float2 __half22float2(__half2 h) { return make_float2((float)h.x, (float)h.y); }
