// The CUDA execution model for kernels compiled by g++: gemmcheck's CPU simulator.
//
// Included before the kernel source (kernels/*.cu, unchanged). Every CUDA thread of
// a block runs as a fiber of the worker process (runtime.cpp); a scheduler runs the
// fibers of one block between barriers, one block at a time. `__shared__` variables
// are function-local statics: one copy, used by the one block that runs; the runtime
// knows their addresses (from the symbol table) and makes them per block: a read of
// a shared element no thread of this block has written returns poison (0xFF bytes).
#pragma once

#include <cmath>
#include <ctime>
#include <cstddef>
#include <cstdint>

// The typedefs glibc's <sys/types.h> gives device code under nvcc (through the host headers).
typedef unsigned int uint;
typedef unsigned short ushort;
typedef unsigned long ulong;

#include "vector_types.h"
struct dim3
{
    unsigned int x, y, z;
    constexpr dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1) : x(x_), y(y_), z(z_) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
};

// Set by the scheduler before it resumes a fiber; read-only for kernels.
extern uint3 threadIdx;
extern uint3 blockIdx;
extern dim3 blockDim;
extern dim3 gridDim;
constexpr int warpSize = 32;

extern "C" void cudasim_syncthreads(const char *file, int line);
extern "C" long long cudasim_clock64(void);

#define __global__
#define __device__
#define __host__
#define __noinline__ __attribute__((noinline))
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
#define __syncthreads() cudasim_syncthreads(__FILE__, __LINE__)

inline long long clock64() { return cudasim_clock64(); }
// CUDA's device clock() is the simulator's clock too. <ctime> first: its host clock() is
// declared once, before the name becomes the simulator's (a kernel file that includes
// <iostream> or <ctime> after the prelude then declares nothing new).
#define clock() cudasim_clock64()
// Fences: in the kernel module the instrumentation makes each a call of the worker's
// __tsan_atomic_thread_fence. Blocks run one after another and a block's fibers one at a
// time, so every write is visible to whatever runs next: a fence has nothing more to order.
inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

#include "device_functions.h"
#include "sm_61_intrinsics.h"

// Entry table of a generated module: one launcher per catalog instantiation.
// arguments: the by-value arguments, each in the bytes of the type the kernel declares.
typedef void (*cudasim_launcher)(void *const *pointers, const unsigned char *arguments);
struct cudasim_kernel { const char *name; cudasim_launcher launch; };
