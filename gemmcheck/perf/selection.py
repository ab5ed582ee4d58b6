"""Which instantiations and claims the performance suite runs, from the catalog and thresholds."""

from __future__ import annotations

from dataclasses import dataclass

from gemmcheck.contract.catalog import Instance
from gemmcheck.perf.thresholds import Refusal, Threshold, Thresholds


def timed_instances(instances, thresholds: Thresholds) -> list[Instance]:
    """References and declared-too-slow kernels at the TILEs the thresholds file times."""
    tiles = thresholds.timing.tiles
    return [i for i in instances if i.spec.expect in ("correct", "too_slow") and i.tile in tiles]


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
    by_key = {(i.spec.name, i.dtype, i.tile): i for i in timed_instances(instances, thresholds)}
    cases = []
    for t in thresholds.thresholds:
        inst = by_key.get((t.kernel, t.dtype, t.tile))
        if inst is None or inst.spec.expect != expect:
            continue
        cases += [Case(t, n) for n in sizes if t.applies(n) and inst.supports(n, n, n)]
    return cases


def refusal_cases(instances, thresholds: Thresholds, sizes) -> list[tuple[Case, Instance]]:
    """(refusal, N) with its instantiation, for every refusal whose kernel the run selected."""
    by_key = {(i.spec.name, i.dtype, i.tile): i for i in instances}
    out = []
    for r in thresholds.refusals:
        inst = by_key.get((r.kernel, r.dtype, r.tile))
        if inst is not None:
            out += [(Case(r, n), inst) for n in sizes if inst.supports(n, n, n)]
    return out
