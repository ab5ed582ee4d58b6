// CUDA's warp matrix (WMMA) API for gemmcheck's CPU simulator: the namespace only. The
// simulator models no tensor core, so a kernel that uses nvcuda::wmma stops its build on the
// first name it takes from there, and g++'s error names it ('fragment' is not a member of
// 'nvcuda::wmma'): the kernel skips on cpu-sim with that one reason, and the other kernels of
// its file build without it.
#pragma once

namespace nvcuda
{
namespace wmma
{
}
}  // namespace nvcuda
