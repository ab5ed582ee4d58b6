"""Compiling kernels: NVRTC, ptxas resources, CUDA headers, shared build caches."""
