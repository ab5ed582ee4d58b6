"""Which instantiations and claims the performance suite runs, from the catalog and thresholds.

A threshold names its instantiation by TILE (kernels with one tile parameter) or by a named
catalog config (kernels whose configs share a tile value, e.g. BM = 128 for a dozen ladder
configs). The suite times the TILE kernels at the thresholds file's timed TILEs, plus every
config some threshold names: a config kernel's many tuning variants are not all timed.
"""

from __future__ import annotations

from dataclasses import dataclass

from gemmcheck.contract.catalog import Instance, KernelSpec
from gemmcheck.perf.thresholds import Refusal, Threshold, Thresholds

TIMED_EXPECTATIONS = ("correct", "too_slow")


def instance_key(instance: Instance) -> tuple[str, str, int | str | None]:
    """(kernel, dtype, config name or TILE, or None for a kernel with neither): how a threshold
    names this instantiation (Threshold.key)."""
    return (instance.spec.name, instance.dtype,
            instance.config if instance.config is not None else instance.declared_tile)


def named_configs(thresholds: Thresholds) -> set[tuple[str, str, str]]:
    return {t.key for t in thresholds.thresholds if t.config is not None}


def timed_instances(instances, thresholds: Thresholds, every_config: bool = False,
                    every_dtype: bool = True) -> list[Instance]:
    """References and declared-too-slow kernels: unnamed instantiations at the TILEs the
    thresholds file times (a kernel with no compile-time parameter: its one), and the named
    configs its thresholds hold (every named config with ``every_config``: a tuning sweep,
    --gemm-perf-configs all). Without ``every_dtype`` (the ci profile) a kernel is timed at its
    lead dtype and at the dtypes a claim names it or its baseline at (claimed_dtypes)."""
    tiles, named = thresholds.timing.tiles, named_configs(thresholds)

    def unnamed_and_timed(i: Instance) -> bool:
        return i.config is None and (i.declared_tile in tiles if i.spec.has_tile else not i.params)
    timed = [i for i in instances if i.spec.expect in TIMED_EXPECTATIONS
             and (unnamed_and_timed(i) or instance_key(i) in named or (every_config and i.config is not None))]
    if every_dtype:
        return timed
    keep = kept_dtypes(instances, thresholds)
    return [i for i in timed if (i.spec.name, i.dtype) in keep]


def untimed_dtypes(instances, thresholds: Thresholds, every_config: bool = False) -> dict[str, tuple[str, ...]]:
    """{kernel: the dtypes every_dtype would time and the lead-dtype rule leaves out}: what the
    table says it did not time."""
    keep = kept_dtypes(instances, thresholds)
    out: dict[str, dict[str, None]] = {}
    for i in timed_instances(instances, thresholds, every_config):
        if (i.spec.name, i.dtype) not in keep:
            out.setdefault(i.spec.name, {})[i.dtype] = None
    return {name: tuple(dtypes) for name, dtypes in out.items()}


def kept_dtypes(instances, thresholds: Thresholds) -> set[tuple[str, str]]:
    """(kernel, dtype) the lead-dtype rule times: each kernel's lead dtype and those a claim names."""
    return claimed_dtypes(thresholds) | set(lead_dtypes(instances).items())


def lead_dtypes(instances) -> dict[str, str]:
    """{kernel: the first of its dtypes this run selected}: its catalog's order, the one its
    author leads with (--gemm-dtypes may leave it out)."""
    selected: dict[str, set[str]] = {}
    specs = {}
    for i in instances:
        selected.setdefault(i.spec.name, set()).add(i.dtype)
        specs[i.spec.name] = i.spec
    return {name: next(d for d in specs[name].dtypes if d in dtypes) for name, dtypes in selected.items()}


def claimed_dtypes(thresholds: Thresholds) -> set[tuple[str, str]]:
    """(kernel, dtype) of every kernel a threshold or refusal names, as its kernel or baseline."""
    out = {(t.kernel, t.dtype) for t in thresholds.thresholds}
    out |= {(t.baseline, t.dtype) for t in thresholds.thresholds}
    return out | {(r.kernel, r.dtype) for r in thresholds.refusals}


def claimed_instance(spec: KernelSpec, threshold: Threshold) -> Instance:
    """The instantiation of `spec` that `threshold` holds; ValueError naming the fix if it has none."""
    if threshold.config is None:
        return Instance(spec, threshold.dtype, threshold.tile)
    for name, params in spec.assignments():
        if name == threshold.config:
            return Instance(spec, threshold.dtype, params=params, config=name)
    known = [n for n, _ in spec.assignments() if n]
    raise ValueError(f"threshold {threshold.id}: kernel {spec.name!r} has no config {threshold.config!r} "
                     f"in {spec.catalog}; its configs: {', '.join(known) or 'none'}")


def unknown_instantiations(specs, thresholds: Thresholds) -> list[str]:
    """Why each threshold naming a catalog kernel names no instantiation of it (empty: all fine).
    Thresholds naming kernels of other catalogs are not checked (the report header lists them)."""
    by_name = {s.name: s for s in specs}
    problems = []
    for t in thresholds.thresholds:
        spec = by_name.get(t.kernel)
        if spec is None:
            continue
        try:
            instance = claimed_instance(spec, t)
        except ValueError as exc:
            problems.append(str(exc))
            continue
        if t.dtype not in spec.dtypes:
            problems.append(f"threshold {t.id}: {spec.name} declares dtypes {list(spec.dtypes)}, not {t.dtype}")
        elif t.config is None and spec.has_tile and t.tile is None:
            problems.append(f"threshold {t.id}: {spec.name} has a tile parameter ({spec.tile_param}: "
                            f"{list(spec.tiles)}); name one with 'tile' (or a config with 'config')")
        elif t.config is None and not spec.has_tile and t.tile is not None:
            problems.append(f"threshold {t.id}: {spec.name} has no tile parameter; drop 'tile = {t.tile}'")
        elif t.config is None and spec.has_tile and instance.tile not in spec.tiles:
            problems.append(f"threshold {t.id}: {spec.name} declares tiles {list(spec.tiles)}, not {t.tile}")
    return problems


def baseline_instances(base: KernelSpec, threshold: Threshold, size: int, timed_tiles) -> list[Instance]:
    """The instantiations of kernel `base` that `threshold` compares with at N = size: its
    baseline_tile, or every TILE timed ("best"); a kernel without a tile, its one."""
    if threshold.dtype not in base.dtypes:
        return []
    if not base.has_tile:
        candidates = [Instance(base, threshold.dtype)]
    elif threshold.baseline_tile == "best":
        candidates = [Instance(base, threshold.dtype, t) for t in base.tiles if t in timed_tiles]
    else:
        candidates = [Instance(base, threshold.dtype, threshold.baseline_tile)] \
            if threshold.baseline_tile in base.tiles else []
    return [i for i in candidates if i.supports(size, size, size)]


def claim_instances(specs, threshold: Threshold, size: int, thresholds: Thresholds) -> list[Instance]:
    """Every instantiation a threshold times at N = size: its own, and its baseline kernel's
    (none for cuBLAS or the FP32 peak); what the catalog lacks is left out (the claim says so
    when it runs)."""
    by_name = {s.name: s for s in specs}
    out = []
    if threshold.kernel in by_name:
        try:
            out.append(claimed_instance(by_name[threshold.kernel], threshold))
        except ValueError:
            pass
    if threshold.baseline in by_name:
        out += baseline_instances(by_name[threshold.baseline], threshold, size, thresholds.timing.tiles)
    return [i for i in out if i.supports(size, size, size)]


@dataclass(frozen=True)
class Case:
    """A claim at one size: a threshold, or a refusal (a positive control)."""

    claim: Threshold | Refusal
    size: int

    @property
    def id(self) -> str:
        return f"{self.claim.id}-N{self.size}"


def threshold_cases(instances, thresholds: Thresholds, sizes, expect: str) -> list[Case]:
    """(threshold, N) for every threshold whose kernel is timed and declares ``expect``."""
    by_key = {instance_key(i): i for i in timed_instances(instances, thresholds)}
    cases = []
    for t in thresholds.thresholds:
        inst = by_key.get(t.key)
        if inst is None or inst.spec.expect != expect:
            continue
        cases += [Case(t, n) for n in sizes if t.applies(n) and inst.supports(n, n, n)]
    return cases


def refusal_cases(instances, thresholds: Thresholds, sizes) -> list[tuple[Case, Instance]]:
    """(refusal, N) with its instantiation, for every refusal whose kernel the run selected."""
    by_key = {(i.spec.name, i.dtype, i.declared_tile): i for i in instances}
    out = []
    for r in thresholds.refusals:
        inst = by_key.get((r.kernel, r.dtype, r.tile))
        if inst is not None:
            out += [(Case(r, n), inst) for n in sizes if inst.supports(n, n, n)]
    return out
