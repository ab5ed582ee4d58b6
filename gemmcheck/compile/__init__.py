"""Compiling kernels: nvcc and NVRTC (which builds an entry: choice), ptxas resources, CUDA headers,
shared build caches."""
