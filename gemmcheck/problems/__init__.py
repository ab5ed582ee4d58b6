"""GEMM problems: shapes and inputs, hypothesis strategies and profiles, the guarded run."""
