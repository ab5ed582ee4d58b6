"""The kernel catalog: KernelSpec, and loading + validating catalog files.

A catalog is a TOML file with one ``[[kernel]]`` table per kernel. Tests never
name a kernel; they ask the catalog. Every error is one line naming the file,
the kernel and what to do.

One module per job, each public name importable from here:

- vocabulary: what an entry may say (fields, named catalogs, signatures, shape claims,
  expectations, declared CONVENTIONS, limits) and CatalogError
- model: KernelSpec and Instance, by_build_unit
- loading: load, load_all, resolve, read_toml, check_unique
- entry: one [[kernel]] table validated into a KernelSpec
- instantiations: an entry's parameters, configs and launch geometry, each instantiation checked
"""

from gemmcheck.contract.catalog.loading import check_unique, load, load_all, read_toml, resolve
from gemmcheck.contract.catalog.model import Instance, KernelSpec, by_build_unit
from gemmcheck.contract.catalog.vocabulary import (BUILTIN, CONVENTIONS, DEFAULT_SHAPE_EDGE, DEFAULT_TILE,
                                                   EXPECTATIONS, LADDER, LAYOUTS, MAX_STATIC_SHARED_BYTES,
                                                   MAX_THREADS_PER_BLOCK, NAMED, SHAPES, SIGNATURE_ROLES,
                                                   SIGNATURES, TEMPLATE_FIELDS, TILE_SHAPES, CatalogError)

__all__ = [
    "BUILTIN", "CONVENTIONS", "DEFAULT_SHAPE_EDGE", "DEFAULT_TILE", "EXPECTATIONS", "LADDER", "LAYOUTS",
    "MAX_STATIC_SHARED_BYTES", "MAX_THREADS_PER_BLOCK", "NAMED", "SHAPES", "SIGNATURE_ROLES", "SIGNATURES",
    "TEMPLATE_FIELDS", "TILE_SHAPES", "CatalogError", "Instance", "KernelSpec", "by_build_unit",
    "check_unique", "load", "load_all", "read_toml", "resolve",
]
