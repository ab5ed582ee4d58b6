"""The catalog contract: kernels, their sources, launch policies, element types."""
