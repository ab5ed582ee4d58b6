"""Which instantiations the matrix runs: the kernels it leaves out, those launched in a child,
and one instantiation per kernel (or every one)."""

from __future__ import annotations

from gemmcheck.verdict import defects
from gemmcheck.contract.catalog import Instance


NOT_IN_MATRIX = defects.not_in_matrix()   # expect value -> why the matrix leaves it out
ISOLATED = defects.isolated()             # expect values launched in a child process
PREFERRED_DTYPE, PREFERRED_TILE = "float32", 16


def in_matrix(instance: Instance) -> bool:
    return instance.spec.expect not in NOT_IN_MATRIX


def declares(expect: str):
    """A predicate for `@pytest.mark.instances.with_args(...)` (a named function given alone
    to a mark would be taken for the test it decorates): kernels that declare `expect`."""
    def predicate(instance: Instance) -> bool:
        return instance.spec.expect == expect
    predicate.__name__ = f"declares_{expect}"
    return predicate


def select(instances, *, every: bool = False) -> list[Instance]:
    """The instantiations the matrix runs: one per kernel, or all of them when `every`."""
    instances = [i for i in instances if in_matrix(i)]
    if every:
        return instances
    chosen: dict[str, Instance] = {}
    for inst in instances:
        best = chosen.get(inst.spec.name)
        if best is None or _rank(inst) < _rank(best):
            chosen[inst.spec.name] = inst
    return [i for i in instances if chosen.get(i.spec.name) is i]


def _rank(inst: Instance):
    return (inst.dtype != PREFERRED_DTYPE, abs(inst.tile - PREFERRED_TILE), inst.tile)
