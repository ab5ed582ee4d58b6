"""What a catalog entry instantiates: its compile-time parameters and configs (with the
source's #defines folded in), its launch geometry, and the check that every instantiation
names only known symbols and fits a GPU."""

from __future__ import annotations

import re

from gemmcheck.contract import launch
from gemmcheck.contract.catalog.model import KernelSpec
from gemmcheck.contract.catalog.vocabulary import _IDENTIFIER, MAX_STATIC_SHARED_BYTES, MAX_THREADS_PER_BLOCK, SHAPES


def _in_configs(name, configs) -> bool:
    return all(name in values for _, values in configs) and bool(configs)


def _parameters(entry, tile_param, source_defines, fail, tile_required=True):
    """({name: values}, [(config name, {name: value})]) with the source's #defines folded in."""
    params: dict[str, tuple[int, ...]] = {}
    raw = entry.get("params", {})
    if not isinstance(raw, dict):
        fail(f"'params' must be a table of value lists such as {{BM = [64, 128]}}, got {raw!r}")
    if "tiles" in entry:
        if tile_param in raw:
            fail(f"both 'tiles' and params.{tile_param} give the tile's values; keep one")
        raw = {tile_param: entry["tiles"], **raw}
    for name, values in raw.items():
        what = "'tiles'" if name == tile_param and "tiles" in entry else f"params.{name}"
        if not _IDENTIFIER.fullmatch(name) or name in launch.ROLES or name == "T":
            fail(f"{what}: {name!r} cannot name a parameter (roles, T and non-identifiers are taken)")
        if type(values) is int:
            values = [values]
        if not isinstance(values, list) or not values or not all(type(v) is int and v >= (name == tile_param) for v in values):
            fail(f"{what} must be a non-empty list of {'positive' if name == tile_param else 'non-negative'} "
                 f"integers, got {values!r}; "
                 "an empty list gives no instantiation")
        if len(set(values)) != len(values):
            fail(f"{what} lists a value twice: {values!r}")
        params[name] = tuple(values)
    configs = []
    raw_configs = entry.get("configs", [])
    if not isinstance(raw_configs, list) or ("configs" in entry and not raw_configs):
        fail(f"'configs' must be a non-empty list of tables such as [{{name = \"128x128\", BM = 128}}], "
             f"got {raw_configs!r}")
    for number, config in enumerate(raw_configs, 1):
        if not isinstance(config, dict):
            fail(f"configs #{number} must be a table, got {config!r}")
        name = config.get("name")
        if name is not None and (not isinstance(name, str) or not re.fullmatch(r"[\w.+-]+", name)):
            fail(f"configs #{number}: name {name!r} must be letters, digits, _ . + - (it is in test ids)")
        values = {k: v for k, v in config.items() if k != "name"}
        if not values or not all(type(v) is int and v >= (k == tile_param) and _IDENTIFIER.fullmatch(k)
                                 for k, v in values.items()):
            fail(f"configs #{number}: {config!r} must give parameters non-negative integers "
                 f"(the tile parameter {tile_param} a positive one)")
        configs.append((name, {**{k: v[0] for k, v in params.items() if len(v) == 1 and k not in values},
                               **values}))
    if configs:
        params = {k: v for k, v in params.items() if len(v) > 1}   # single values were folded into configs
    for name, value in source_defines.items():
        given = set(params.get(name, ())) | {c[name] for _, c in configs if name in c}
        if given and given != {value}:
            fail(f"the source defines {name} {value} but the catalog gives {name} = {sorted(given)}; "
                 f"drop {name} from the catalog or make it [{value}]")
        if name == tile_param and not given:
            if configs:
                for _, c in configs:
                    c[name] = value
            else:
                params[name] = (value,)
    if not tile_required:
        return params, configs   # grid and block are expressions: a kernel may have no tile
    if not params and not configs:
        fail(f"no value for the tile parameter {tile_param}: set 'tiles', 'params' or 'configs' "
             f"(or #define {tile_param} in the source; a kernel with grid and block expressions needs no tile)")
    if any(tile_param not in c for _, c in configs) or (not configs and tile_param not in params):
        fail(f"the tile parameter {tile_param!r} has no value in every instantiation; give it in 'params', "
             f"'tiles' or each config, or name another with tile = \"...\"")
    return params, configs


def _geometry(entry, tile_param, fail) -> tuple[launch.Geometry, str | None]:
    has_policy, has_exprs = "policy" in entry, ("grid" in entry or "block" in entry)
    if has_policy == has_exprs:
        fail("give the launch geometry either as policy = one of "
             f"{sorted(launch.POLICIES)} or as grid = [...] and block = [...], not both or neither")
    if has_policy:
        if entry["policy"] not in launch.POLICIES:
            fail(f"unknown launch policy {entry['policy']!r}; use one of {sorted(launch.POLICIES)} "
                 "or give grid and block expressions")
        if "shared_bytes" in entry:
            fail("shared_bytes goes with grid and block expressions, not with a policy")
        return launch.POLICIES[entry["policy"]].geometry(tile_param), entry["policy"]
    exprs = {}
    for key in ("grid", "block"):
        value = entry.get(key)
        if not isinstance(value, list) or not 1 <= len(value) <= 3 or not all(isinstance(v, (str, int)) for v in value):
            fail(f"'{key}' must be a list of 1 to 3 expressions (x first), got {value!r}")
        exprs[key] = [str(v) for v in value]
    shared = entry.get("shared_bytes", "0")
    if not isinstance(shared, (str, int)):
        fail(f"'shared_bytes' must be an expression in bytes, got {shared!r}")
    try:
        return launch.Geometry.of(exprs["grid"], exprs["block"], str(shared)), None
    except launch.ExpressionError as exc:
        fail(f"launch geometry: {exc}")


def _check_instantiations(spec: KernelSpec, fail) -> None:
    """Every instantiation names only known symbols, and its block and shared memory fit a GPU."""
    for config, values in spec.assignments():
        where = f"{config or ', '.join(f'{k} {v}' for k, v in values.items())}"
        known = {*values, *launch.GEOMETRY_NAMES}
        for what, exprs in (("grid", spec.geometry.grid), ("block", spec.geometry.block),
                            ("shared_bytes", (spec.geometry.shared_bytes,)),
                            ("shapes", (spec._scope,) if spec._scope else ()),
                            *((f"scratch.{role}", (size,)) for role, size in spec.scratch.items())):
            for expr in exprs:
                if expr.unknown(known) and what == "shapes":
                    fail(f"unknown shapes {expr.text!r}: neither one of {sorted(SHAPES)} nor a constraint "
                         f"over M, N, K and the parameters ({', '.join(sorted(values))}): it names "
                         f"{', '.join(expr.unknown(known))}")
                if expr.unknown(known):
                    fail(f"{what}: {expr.text!r} names {', '.join(expr.unknown(known))}, which is not "
                         f"M, N, K, batch, groups or a parameter ({', '.join(sorted(values))}) at {where}")
        try:
            block = spec.geometry.block_dims({**values, "M": 1, "N": 1, "K": 1, "batch": 1, "groups": 1}) \
                if not spec.geometry.block[0].names & set(launch.GEOMETRY_NAMES) else None
            shared = spec.geometry.shared_bytes.integer({**values, "M": 1, "N": 1, "K": 1, "batch": 1, "groups": 1}) \
                if not spec.geometry.shared_bytes.names & set(launch.GEOMETRY_NAMES) else 0
        except launch.ExpressionError as exc:
            fail(f"at {where}: {exc}")
        if block is not None:
            why = launch.check_block(block)
            if why:
                tile = values.get(spec.tile_param)
                if spec.policy is not None and why.startswith("block") and "per block" in why:
                    why = (f"{spec.tile_param} {tile} gives {block[0] * block[1] * block[2]} threads per block "
                           f"(max {MAX_THREADS_PER_BLOCK})")
                fail(f"{why}; drop {where} from the parameters")
        why = launch.check_shared(shared)
        if why:
            fail(f"{why} at {where}; lower it or drop that instantiation")
        tile = values.get(spec.tile_param)
        for name in spec.dtypes:
            smem = spec.shared_bytes(name, tile)
            if smem is not None and smem > MAX_STATIC_SHARED_BYTES:
                fail(f"{spec.tile_param} {tile} {name} needs {smem} bytes of static shared memory "
                     f"(max {MAX_STATIC_SHARED_BYTES}); drop {spec.tile_param} {tile} or that dtype")
