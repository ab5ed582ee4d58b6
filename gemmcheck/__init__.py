"""gemmcheck: a pytest conformance and correctness suite for tiled GEMM CUDA kernels."""

__version__ = "0.1.0"
