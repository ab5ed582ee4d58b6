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
// <climits> do; int64_t, uint32_t ..., INT64_MAX ... as <cstdint> and <stdint.h> do (globally,
// under NVRTC), and their std:: names as <cstdint> gives them.
#if __has_include(<cuda/std/climits>)
#include <cuda/std/cfloat>
#include <cuda/std/climits>
#include <cuda/std/cstdint>
namespace std {
using ::int8_t; using ::int16_t; using ::int32_t; using ::int64_t;
using ::uint8_t; using ::uint16_t; using ::uint32_t; using ::uint64_t;
using ::int_least8_t; using ::int_least16_t; using ::int_least32_t; using ::int_least64_t;
using ::uint_least8_t; using ::uint_least16_t; using ::uint_least32_t; using ::uint_least64_t;
using ::int_fast8_t; using ::int_fast16_t; using ::int_fast32_t; using ::int_fast64_t;
using ::uint_fast8_t; using ::uint_fast16_t; using ::uint_fast32_t; using ::uint_fast64_t;
using ::intptr_t; using ::uintptr_t; using ::intmax_t; using ::uintmax_t;
}
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
