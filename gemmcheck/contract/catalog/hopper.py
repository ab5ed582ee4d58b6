"""The catalog fields of Hopper kernels: ``tensor_maps`` (the TMA descriptors the suite builds
for the ``tensor_map_A/B/C/D`` roles), ``cluster`` (thread-block cluster dimensions) and ``arch``
(the compile target the kernel needs); each read and checked, every error one line."""

from __future__ import annotations

from gemmcheck.contract import launch, tensor_map
from gemmcheck.contract.catalog.vocabulary import ARCH

# Shapes the cluster check launches the grid at when the grid depends on M, N or K: a cluster
# launch of a grid that is not a whole number of clusters is refused, so a grid must be
# rounded up to clusters at every shape, ragged ones first.
_SAMPLE_SHAPES = ((1, 1, 8), (17, 9, 8), (100, 130, 64), (129, 257, 72), (256, 256, 256))


def tensor_maps(entry, roles, fail) -> dict[str, tensor_map.TensorMapSpec]:
    """``tensor_maps = { A = { box = ["BK", "BM"], swizzle = "128B" } }``: one per tensor_map_ role."""
    raw = entry.get("tensor_maps", {})
    if not isinstance(raw, dict):
        fail(f"'tensor_maps' must be a table such as {{ A = {{ box = [\"BK\", \"BM\"], swizzle = \"128B\" }} }}, "
             f"got {raw!r}")
    wanted = [tensor_map.operand_of(r) for r in roles if r in tensor_map.ROLES]
    for operand in wanted:
        if operand not in raw:
            fail(f"args lists tensor_map_{operand} but tensor_maps has no {operand}; add "
                 f"tensor_maps = {{ {operand} = {{ box = [inner, outer], swizzle = \"128B\" }} }}")
    out = {}
    for operand, table in raw.items():
        if operand not in tensor_map.OPERANDS:
            fail(f"tensor_maps: {operand!r} is not an operand; use {', '.join(tensor_map.OPERANDS)}")
        if operand not in wanted:
            fail(f"tensor_maps gives {operand}, but args has no tensor_map_{operand}; add the role where "
                 f"the kernel takes the CUtensorMap, or drop tensor_maps.{operand}")
        if not isinstance(table, dict) or set(table) - {"box", "swizzle"}:
            fail(f"tensor_maps.{operand} must be a table with box = [inner, outer] and swizzle, got {table!r}")
        box = table.get("box")
        if not isinstance(box, list) or len(box) != 2 or not all(isinstance(b, (int, str)) for b in box):
            fail(f"tensor_maps.{operand}: box must be [inner, outer] (elements; integers or expressions "
                 f"over the parameters, inner along the operand's contiguous dimension), got {box!r}")
        swizzle = table.get("swizzle", "none")
        if swizzle not in tensor_map.SWIZZLES:
            fail(f"tensor_maps.{operand}: unknown swizzle {swizzle!r}; use one of "
                 f"{', '.join(repr(s) for s in tensor_map.SWIZZLES)}")
        try:
            exprs = tuple(launch.Expression(str(b)) for b in box)
        except launch.ExpressionError as exc:
            fail(f"tensor_maps.{operand}: box: {exc}")
        out[operand] = tensor_map.TensorMapSpec(exprs, swizzle)
    return out


def cluster(entry, fail) -> tuple | None:
    """``cluster = [2, 1, 1]``: 1 to 3 expressions, x first; None when not given."""
    if "cluster" not in entry:
        return None
    value = entry["cluster"]
    if not isinstance(value, list) or not 1 <= len(value) <= 3 or not all(isinstance(v, (int, str)) for v in value):
        fail(f"'cluster' must be a list of 1 to 3 cluster dimensions (x first), such as [2, 1, 1], got {value!r}")
    try:
        return tuple(launch.Expression(str(v)) for v in value)
    except launch.ExpressionError as exc:
        fail(f"cluster: {exc}")


def arch(entry, fail) -> str | None:
    """``arch = "sm_90a"``: the compile target; None: the device's own."""
    if "arch" not in entry:
        return None
    value = entry["arch"]
    if not isinstance(value, str) or not ARCH.fullmatch(value):
        fail(f"'arch' must be a compile target such as \"sm_90a\" or \"sm_90\", got {value!r}")
    return value


def check(spec, fail) -> None:
    """Every instantiation's boxes fit TMA at each dtype, its cluster is portable, and its grid is
    a whole number of clusters at the sample shapes it claims."""
    for config, values in spec.assignments():
        where = config or ", ".join(f"{k} {v}" for k, v in values.items()) or "its one instantiation"
        for operand, tm in spec.tensor_maps.items():
            for expr in tm.box:
                if expr.unknown(values):
                    fail(f"tensor_maps.{operand}: box {expr.text!r} names {', '.join(expr.unknown(values))}, "
                         f"which is not a parameter ({', '.join(sorted(values)) or 'none'}) at {where}")
            try:
                box = tm.box_at(values)
            except launch.ExpressionError as exc:
                fail(f"tensor_maps.{operand}: box at {where}: {exc}")
            for name in spec.dtypes:
                why = tensor_map.box_problem(box, spec.types_of(name).of(operand).itemsize, tm.swizzle)
                if why:
                    fail(f"tensor_maps.{operand}: {why} ({name}, {where})")
        if spec.cluster is None:
            continue
        known = {*values, *launch.DIMENSIONS}
        for expr in spec.cluster:
            if expr.unknown(known):
                fail(f"cluster: {expr.text!r} names {', '.join(expr.unknown(known))}, which is not M, N, K "
                     f"or a parameter at {where}")
        for M, N, K in _SAMPLE_SHAPES:
            if not spec.supports(M, N, K, params=values):
                continue
            env = {**values, "M": M, "N": N, "K": K}
            try:
                grid, _, _ = spec.geometry.evaluate(env)
                dims = tuple(e.integer(env) for e in spec.cluster) + (1,) * (3 - len(spec.cluster))
            except launch.ExpressionError as exc:
                fail(f"cluster at {where}: {exc}")
            why = launch.check_cluster(grid, dims)
            if why:
                fail(f"{why} (at {where}, M={M} N={N} K={K})")
