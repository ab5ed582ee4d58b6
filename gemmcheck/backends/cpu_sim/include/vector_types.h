// CUDA's vector types (vector_types.h, vector_functions.h) for gemmcheck's CPU simulator:
// the same members, sizes and alignments as CUDA's (float4 / int4 / double2: 16 bytes),
// so `reinterpret_cast<float4 *>(&A[i])[0]` is one 16-byte access here too, and a
// misaligned one is reported as the GPU reports it (runtime.cpp: misaligned_access).
// Written from the table in CUDA's vector_types.h; no arithmetic operators, as in CUDA.
#pragma once


// One row of CUDA's table: the four vector types of an element type, each with its alignment,
// and their make_ functions.
#define CUDASIM_VECTOR_TYPES(T, NAME, ALIGN1, ALIGN2, ALIGN3, ALIGN4)                                    \
    struct __attribute__((aligned(ALIGN1))) NAME##1 { T x; };                                            \
    inline NAME##1 make_##NAME##1(T x) { NAME##1 v; v.x = x; return v; }                                \
    struct __attribute__((aligned(ALIGN2))) NAME##2 { T x, y; };                                         \
    inline NAME##2 make_##NAME##2(T x, T y) { NAME##2 v; v.x = x; v.y = y; return v; }                   \
    struct __attribute__((aligned(ALIGN3))) NAME##3 { T x, y, z; };                                      \
    inline NAME##3 make_##NAME##3(T x, T y, T z) { NAME##3 v; v.x = x; v.y = y; v.z = z; return v; }     \
    struct __attribute__((aligned(ALIGN4))) NAME##4 { T x, y, z, w; };                                   \
    inline NAME##4 make_##NAME##4(T x, T y, T z, T w) { NAME##4 v; v.x = x; v.y = y; v.z = z; v.w = w; return v; }

CUDASIM_VECTOR_TYPES(signed char, char, 1, 2, 1, 4)
CUDASIM_VECTOR_TYPES(unsigned char, uchar, 1, 2, 1, 4)
CUDASIM_VECTOR_TYPES(short, short, 2, 4, 2, 8)
CUDASIM_VECTOR_TYPES(unsigned short, ushort, 2, 4, 2, 8)
CUDASIM_VECTOR_TYPES(int, int, 4, 8, 4, 16)
CUDASIM_VECTOR_TYPES(unsigned int, uint, 4, 8, 4, 16)
CUDASIM_VECTOR_TYPES(long, long, 8, 16, 8, 16)
CUDASIM_VECTOR_TYPES(unsigned long, ulong, 8, 16, 8, 16)
CUDASIM_VECTOR_TYPES(long long, longlong, 8, 16, 8, 16)
CUDASIM_VECTOR_TYPES(unsigned long long, ulonglong, 8, 16, 8, 16)
CUDASIM_VECTOR_TYPES(float, float, 4, 8, 4, 16)
CUDASIM_VECTOR_TYPES(double, double, 8, 16, 8, 16)

#undef CUDASIM_VECTOR_TYPES
