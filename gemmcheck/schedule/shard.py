"""Deterministic sharding of a run over hosts: ``--gemm-shard i/n``.

Every shard collects the same tests (same options, same catalog) and keeps its own
part, so the n shards together run each test exactly once. Tests of one unit of work
(a kill-matrix row's tests, which share the row built once per process) go to one
shard. With recorded durations (reports/durations.json of an earlier run) the parts are
balanced by time: the longest unit first onto the least-loaded shard; a test without a
record counts as the median of the recorded ones. Without durations every test counts
the same.
"""

from __future__ import annotations

import argparse
import heapq
import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Callable


@dataclass(frozen=True)
class Shard:
    index: int   # 1-based, as written on the command line
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse(value: str) -> Shard:
    """--gemm-shard "i/n" with 1 <= i <= n."""
    try:
        i, n = (int(part) for part in value.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not i/n; e.g. --gemm-shard 2/4 runs the second of four shards") from None
    if not 1 <= i <= n:
        raise argparse.ArgumentTypeError(f"{value!r}: need 1 <= i <= n, e.g. 1/{max(n, 1)}")
    return Shard(i, n)


def load_durations(path: Path) -> dict[str, float]:
    """node id -> seconds from a durations JSON ({"durations": {...}} or a plain mapping)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: cannot read recorded durations ({exc}); give the "
                         "reports/durations.json of an earlier run, or drop the option") from None
    data = data.get("durations", data) if isinstance(data, dict) else None
    if not isinstance(data, dict) or not all(isinstance(v, (int, float)) for v in data.values()):
        raise ValueError(f"{path}: expected {{\"durations\": {{node id: seconds}}}}")
    return {str(k): float(v) for k, v in data.items()}


def assign(nodeids: list[str], count: int, durations: dict[str, float] | None = None,
           unit_of: Callable[[str], str] = lambda nodeid: nodeid) -> dict[str, int]:
    """node id -> shard index (1-based); the tests of one unit (unit_of) share a shard.
    Depends only on the set of node ids, the durations and the units, never on the order
    the ids come in."""
    unit_by = {nodeid: unit_of(nodeid) for nodeid in sorted(set(nodeids))}
    weight = unit_weights(nodeids, durations, unit_of)
    loads = [(0.0, shard) for shard in range(1, count + 1)]   # a heap of (seconds, shard)
    where = {}
    for unit in sorted(weight, key=lambda u: (-weight[u], u)):
        load, shard = heapq.heappop(loads)
        where[unit] = shard
        heapq.heappush(loads, (load + weight[unit], shard))
    return {nodeid: where[unit_by[nodeid]] for nodeid in nodeids}


def unit_weights(nodeids: list[str], durations: dict[str, float] | None = None,
                 unit_of: Callable[[str], str] = lambda nodeid: nodeid) -> dict[str, float]:
    """unit -> its tests' summed recorded seconds (a test without one: the median of those
    known, or 1 s each without durations)."""
    known = [durations[n] for n in nodeids if durations and n in durations]
    default = statistics.median(known) if known else 1.0
    # sorted: the float sums below come out the same in every process (xdist's controller
    # and its workers compute one plan), whatever the order of a set there
    weight: dict[str, float] = {}
    for nodeid in sorted(set(nodeids)):
        unit = unit_of(nodeid)
        weight[unit] = weight.get(unit, 0.0) + (durations or {}).get(nodeid, default)
    return weight

