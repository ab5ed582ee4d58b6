// Cooperative groups for gemmcheck's CPU simulator: the thread block and its warp-sized
// (or smaller) tiles. block.sync() is __syncthreads(); a tile's sync and collectives are
// the warp-synchronous calls over the tile's lanes (device_functions.h). Not modelled:
// grid and multi-grid groups, coalesced_threads(), cg::memcpy_async / cg::wait.
#pragma once
#include "cudasim.h"

namespace cooperative_groups {

class thread_block
{
public:
    void sync(const char *file = __builtin_FILE(), int line = __builtin_LINE()) const
    {
        cudasim_syncthreads(file, line);
    }
    unsigned long long thread_rank() const
    {
        return ((unsigned long long)threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
    }
    unsigned long long size() const { return (unsigned long long)blockDim.x * blockDim.y * blockDim.z; }
    unsigned long long num_threads() const { return size(); }
    dim3 group_index() const { return dim3(blockIdx.x, blockIdx.y, blockIdx.z); }
    dim3 thread_index() const { return dim3(threadIdx.x, threadIdx.y, threadIdx.z); }
    dim3 group_dim() const { return blockDim; }
    dim3 dim_threads() const { return blockDim; }
};

inline thread_block this_thread_block() { return thread_block(); }

// Tiles of Size consecutive threads (by thread_rank) of the block; Size a power of two <= 32.
template <unsigned int Size, typename Parent = void>
class thread_block_tile
{
    static_assert(Size >= 1 && Size <= 32 && (Size & (Size - 1)) == 0,
                  "cpu-sim models thread_block_tile sizes 1, 2, 4, 8, 16 and 32");
    static unsigned linear() { return (unsigned)thread_block().thread_rank(); }

public:
    unsigned int meta_group_rank() const { return linear() / Size; }
    unsigned int meta_group_size() const { return (unsigned)((thread_block().size() + Size - 1) / Size); }
    unsigned long long thread_rank() const { return linear() % Size; }
    unsigned long long size() const { return Size; }
    unsigned long long num_threads() const { return Size; }
    // The lanes of this tile within its warp.
    unsigned int cudasim_mask() const
    {
        unsigned int lanes = Size == 32 ? 0xffffffffu : ((1u << Size) - 1);
        return lanes << (linear() % 32 / Size * Size);
    }
    void sync(const char *file = __builtin_FILE(), int line = __builtin_LINE()) const
    {
        __syncwarp(cudasim_mask(), file, line);
    }
    template <typename T> T shfl(T var, int src, const char *file = __builtin_FILE(), int line = __builtin_LINE()) const
    {
        return __shfl_sync(cudasim_mask(), var, src, Size, file, line);
    }
    template <typename T> T shfl_down(T var, unsigned int delta, const char *file = __builtin_FILE(),
                                      int line = __builtin_LINE()) const
    {
        return __shfl_down_sync(cudasim_mask(), var, delta, Size, file, line);
    }
    template <typename T> T shfl_up(T var, unsigned int delta, const char *file = __builtin_FILE(),
                                    int line = __builtin_LINE()) const
    {
        return __shfl_up_sync(cudasim_mask(), var, delta, Size, file, line);
    }
    template <typename T> T shfl_xor(T var, unsigned int mask, const char *file = __builtin_FILE(),
                                     int line = __builtin_LINE()) const
    {
        return __shfl_xor_sync(cudasim_mask(), var, (int)mask, Size, file, line);
    }
    int any(int p, const char *file = __builtin_FILE(), int line = __builtin_LINE()) const
    {
        return __any_sync(cudasim_mask(), p, file, line);
    }
    int all(int p, const char *file = __builtin_FILE(), int line = __builtin_LINE()) const
    {
        return __all_sync(cudasim_mask(), p, file, line);
    }
    unsigned int ballot(int p, const char *file = __builtin_FILE(), int line = __builtin_LINE()) const
    {
        // The tile's own lanes, as bits from 0.
        return __ballot_sync(cudasim_mask(), p, file, line) >> (linear() % 32 / Size * Size);
    }
};

template <unsigned int Size, typename Parent> thread_block_tile<Size> tiled_partition(const Parent &)
{
    return thread_block_tile<Size>();
}

template <typename Group> void sync(const Group &g, const char *file = __builtin_FILE(), int line = __builtin_LINE())
{
    g.sync(file, line);
}

}  // namespace cooperative_groups
