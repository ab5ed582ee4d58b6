"""The words a catalog entry may use: its fields, the named catalogs, signatures and shape
claims, the expectations, the declared conventions and the limits an instantiation must fit;
CatalogError for a file that says anything else."""

from __future__ import annotations

import re
from pathlib import Path

from gemmcheck.verdict import defects
from gemmcheck.contract import launch

BUILTIN = Path(__file__).resolve().parents[3] / "kernels" / "catalog.toml"
LADDER = BUILTIN.with_name("ladder_catalog.toml")
# Catalogs named on the command line (--gemm-catalog NAME); anything else is a path. The ladder is
# not in the default run: its dozens of register-blocked configs take the CPU simulator many minutes.
NAMED = {"builtin": (BUILTIN,), "ladder": (LADDER,), "all": (BUILTIN, LADDER)}

SIGNATURES = {
    "square": "(A, B, C, N): square N x N operands",
    "mnk": "(A, B, C, M, N, K): C[M x N] = A[M x K] B[K x N]",
}
SHAPES = {
    "square-tile-multiple": "M = N = K, a multiple of TILE",
    "tile-multiple": "M, N and K each a multiple of TILE",
    "any": "any M, N, K >= 0 (BLAS: M or N = 0 is an empty result, K = 0 gives beta C)",
}
# What a kernel is declared to be: correct, or caught with one defect class.
EXPECTATIONS = defects.expectations()
MAX_THREADS_PER_BLOCK = launch.MAX_THREADS_PER_BLOCK
MAX_STATIC_SHARED_BYTES = launch.MAX_STATIC_SHARED_BYTES
TEMPLATE_FIELDS = {"T", "TILE"}
# The type placeholders of template_args besides {T}: each operand's C type and the accumulator's.
TYPE_FIELDS = ("T", "A", "B", "C", "D", "ACC")
# The argument lists the named signatures stand for.
SIGNATURE_ROLES = {"square": ("A", "B", "C", "N"), "mnk": ("A", "B", "C", "M", "N", "K")}
LAYOUTS = ("row", "col")
DEFAULT_TILE = "TILE"
# The edge the shape generators use for a kernel with no tile parameter (a naive kernel
# launched by grid and block expressions): shapes around multiples of 32, a warp's width.
# Only the generated shapes see it; such a kernel's ids and launches have no tile.
DEFAULT_SHAPE_EDGE = 32
# The named shape claims that speak of the tile.
TILE_SHAPES = ("square-tile-multiple", "tile-multiple")

_FIELDS = {
    "name", "description", "source", "entry", "template_args", "signature", "args", "layout", "policy",
    "grid", "block", "shared_bytes", "tiles", "tile", "params", "configs", "macros", "dtypes", "shapes",
    "shared_tiles", "shared_pad", "expect", "gpu_only", "sim_configs", "include_dirs", "defines",
    "tensor_maps", "cluster", "arch", "compiler", "sources", "accumulator", "scalar", "scales",
    "sums",                                        # what adds the products (operand_types.SUMS)
    *("reads_c_at_beta_zero", "adds_into_c", "deterministic", "saturates_output", "d_aliases_c"),   # CONVENTIONS
    "epilogue",                                    # a fused epilogue (gemmcheck.contract.epilogue)
    "resources",                                   # a claim on ptxas's report (RESOURCE_CLAIMS)
    "sizes",                                       # M, N, K compiled into a kernel that takes none
    "scratch", "scratch_zeroed",                   # scratch memory the caller provides (launch.SCRATCH_ROLES)
}
# Conventions a kernel may declare, each a boolean field with its default (BLAS's rule) and
# what the suite does when the kernel declares the other value (docs/blas-contract.md).
CONVENTIONS = {
    "reads_c_at_beta_zero": (False, "C is always initialized by the kernel's callers: at beta = 0 the "
                                    "suite fills C with finite values instead of NaN"),
    "adds_into_c": (False, "the kernel adds its result into C, which its callers zero first (a split-K "
                           "whose slices atomicAdd into C): the suite zeroes C instead of filling it with "
                           "NaN; an element never written then shows as a wrong value, 0"),
    "deterministic": (True, "the kernel reduces with floating-point atomics: same bits on every "
                            "launch is not claimed for random inputs"),
    "saturates_output": (False, "the output conversion saturates to the finite range (__NV_SATFINITE, "
                                "cvt.satfinite): a result beyond it is judged as the largest finite value "
                                "of its sign, not Inf (or NaN)"),
    "d_aliases_c": (False, "D may be the same buffer as C (an in-place update): the suite also runs the "
                           "kernel with D and C one buffer"),
}
# What a kernel may claim of ptxas's report of its build (`resources`), checked by
# suites/compile; a kernel that claims nothing gets its local memory as information.
RESOURCE_CLAIMS = {
    "no-spills": "no register spills: 0 bytes of spill stores and loads",
    "no-stack-frame": "no local memory at all: no spills and a 0-byte stack frame (no printf, no local "
                      "array indexed at run time)",
}
# gemmcheck's own reference kernels (the catalogs in NAMED) claim this unless they say otherwise.
OWN_REFERENCE_RESOURCES = "no-stack-frame"
# `arch`: a compile target such as sm_90a (the "a" suffix: architecture-specific features,
# wgmma and setmaxnreg, that run only on that exact compute capability).
ARCH = re.compile(r"sm_(?P<major>\d+)(?P<minor>\d)(?P<suffix>[af]?)")
# `compiler`: the device compiler an entry pins (gemmcheck.compile.choice); unpinned, the run's --gemm-compiler.
COMPILERS = ("nvcc", "nvrtc")
_REQUIRED = ("name", "source", "entry", "dtypes", "expect")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")


class CatalogError(ValueError):
    """A catalog file is malformed; the message names the file, the kernel and the fix."""
