"""Where an address lies in a launch's kernel buffers: the buffer slots (A, B, C, then D and
the scale factors of a kernel that takes them) and the element of an operand's matrix a byte
offset falls on."""

from __future__ import annotations

import numpy as np

from gemmcheck.contract import launch
from gemmcheck.contract.catalog import Instance
from gemmcheck.contract.launch import tight_leading_dimensions

BUFFER_NAMES = ("A", "B", "C")


def buffer_names(instance: Instance) -> tuple[str, ...]:
    """The buffers a launch of `instance` passes by pointer, in slot order (the order of
    launch.POINTER_ROLES): A, B, C for a kernel that takes those three, as always; then alpha,
    beta or output_scale where it takes them through pointers; then the operands it reaches only
    through arrays of pointers (A for A_array: its products' storage)."""
    roles = instance.spec.roles
    passed = tuple(r for r in launch.POINTER_ROLES if r in roles and not launch.by_value(instance, r))
    scalars = tuple(r for r in launch.SCALAR_ROLES if r in roles and launch.scalar_pointee(instance, r))
    return passed + scalars + tuple(X for X in instance.pointer_arrays if X not in passed)


def is_pointer_array(name: str) -> bool:
    """Whether the buffer in a slot of that name holds pointers (A_array ... D_array)."""
    return name in launch.ARRAY_ROLES


def _element_locator(instance: Instance, by_role: dict):
    """A function (buffer name, byte offset from its start) -> (row, column) of that operand's
    matrix, or None where the offset lies outside it (a guard band): read from the launch's
    sizes and leading dimensions and the catalog's layouts."""
    # by role name (a literal role, passed as is, names nothing)
    ints = {k: int(v) for k, v in by_role.items() if isinstance(k, str) and isinstance(v, (int, np.integer))}
    M, N, K = (ints.get(k, ints.get("N", 0)) for k in ("M", "N", "K"))
    shapes = {"A": (M, K), "B": (K, N), "C": (M, N), "D": (M, N)}
    lds = {**tight_leading_dimensions(instance.spec.layouts, M, N, K),
           **{k: v for k, v in ints.items() if k.startswith("ld")}}

    def locate(name: str, byte_offset: int):
        if name not in shapes or byte_offset < 0:
            return None
        itemsize = instance.types.of(name).itemsize
        e, ld = byte_offset // itemsize, lds[f"ld{name.lower()}"]
        rows, cols = shapes[name]
        row_major = instance.spec.layouts.get(name, "row") == "row"
        r, c = (e // ld, e % ld) if row_major else (e % ld, e // ld)
        return (int(r), int(c)) if r < rows and c < cols else None

    return locate
