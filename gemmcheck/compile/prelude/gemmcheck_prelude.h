// gemmcheck's prelude, included before a kernel source in every device compile (NVRTC's
// --pre-include, g++'s -include or a first line): what device code sees under nvcc without
// including it itself, because nvcc's host headers bring it in.
#pragma once

// glibc's <sys/types.h>, reached through <cstdio>, <cstdlib> ... under nvcc.
typedef unsigned char u_char;
typedef unsigned short ushort, u_short;
typedef unsigned int uint, u_int;
typedef unsigned long ulong, u_long;

#if defined(__CUDACC_RTC__)
// NVRTC: the CUDA runtime's math constants (nvcc's cuda_runtime.h reaches them through
// math_functions.h), and what <cassert>, <cfloat> and <climits> give device code
// (those headers are host headers NVRTC cannot open; the compile leaves them out).
#include <math_constants.h>
#if !defined(assert)
#if defined(NDEBUG)
#define assert(e) ((void)0)
#else
#define assert(e) ((e) ? (void)0 : __assertfail(#e, __FILE__, __LINE__, __func__, sizeof(char)))
#endif
#endif
// FLT_MAX, INT_MAX ...: libcu++ (the CCCL headers) defines the C macros as <cfloat> and
// <climits> do.
#if __has_include(<cuda/std/climits>)
#include <cuda/std/cfloat>
#include <cuda/std/climits>
#endif
// CUtensorMap, the TMA descriptor Hopper kernels take as a const __grid_constant__ parameter:
// kernels get it from <cuda.h>, a host header NVRTC cannot open (it needs <stdlib.h>). The
// same struct and tag as cuda.h's, so kernel names mangle as nvcc mangles them.
#if !defined(__cuda_cuda_h__)
typedef struct CUtensorMap_st {
    alignas(64) unsigned long long opaque[16];
} CUtensorMap;
#endif
#else
// A host compiler (the CPU simulator): glibc gives the types and the C library its macros;
// only the CUDA math constants are missing.
#include "math_constants_host.h"
#endif
