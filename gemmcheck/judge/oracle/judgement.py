"""The Judgement: what the oracle concluded about one run, and how it reads (the failure
message, the worst elements' table, the command that reproduces it)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from gemmcheck import report
from gemmcheck.tables import format_table
from gemmcheck.verdict import Defect, Finding, HasFindings

WORST_ROWS = 10


@dataclass
class Judgement(HasFindings):
    """What the oracle concluded about one run; `.ok` only if nothing was found."""

    instance: object                     # catalog.Instance
    problem: str                         # label: "float16 normal M33xN17xK65 seed 7"
    M: int
    N: int
    K: int
    exact: bool
    bound_text: str
    findings: list[Finding] = field(default_factory=list)
    ratio: float = 0.0                   # worst error / bound (0 for an exact match; inf if unbounded)
    error_map: np.ndarray | None = None  # M x N: error / bound; inf where unwritten or NaN/Inf wrong
    C: np.ndarray | None = None          # actual values (float64)
    expected: np.ndarray | None = None   # expected values (float64; NaN/Inf where IEEE says)
    bound: np.ndarray | None = None      # per-element bound (zeros when exact)
    failing: np.ndarray | None = None    # M x N bool: every element that is wrong in any way
    unwritten: np.ndarray | None = None  # M x N bool: still the poison bits
    reproduction: str = ""
    run: object = None                   # the harness.Run judged (for the report's evidence)

    def worst(self) -> tuple[int, int] | None:
        if self.error_map is None or self.error_map.size == 0:
            return None
        if self.failing is not None and self.failing.any():
            masked = np.where(self.failing, self.error_map, -1.0)
        else:
            masked = self.error_map
        i, j = np.unravel_index(int(np.argmax(masked)), masked.shape)
        return int(i), int(j)

    def _errors(self):
        # against an expected 0 the relative error is inf (or nan for 0/0) by intent
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            abs_err = np.abs(self.C - self.expected)
            rel_err = abs_err / np.abs(self.expected)
        return abs_err, rel_err

    def _element(self, i: int, j: int) -> str:
        output = getattr(self.run, "output", "C") if self.run is not None else "C"
        return f"{output}[{i}, {j}]" + _tile_of(i, j, self.instance)

    def _actual(self, i: int, j: int) -> str:
        if self.unwritten is not None and self.unwritten[i, j]:
            return "unwritten (poison bits)"
        return repr(float(self.C[i, j]))

    def message(self) -> str:
        """The full failure message: who, on what, against which bound, how wrong, where, how to rerun."""
        inst = self.instance
        total = self.M * self.N
        head = f"{inst.id} ({inst.name_expression}) on {self.problem}"
        if not self.ok:
            # The report's defect categories match on this prefix (gemmcheck.report).
            head = report.defect_message(sorted({f.defect for f in self.findings}, key=_order), head)
        lines = [head,
                 f"  judged: {self.bound_text}"]
        if getattr(self.run, "operands_text", ""):
            lines.append(f"  operands: {self.run.operands_text}")
        if self.ok:
            lines.append(f"  ok: every element written and within the bound, nothing outside C changed; "
                         f"worst ratio {self.ratio:.3g}")
            return "\n".join(lines)
        for f in self.findings:
            lines.append(f"  {f.defect.value} [{f.detector}]: {f.summary}")
        n_fail = int(self.failing.sum())
        abs_err, rel_err = self._errors()
        measurable = self.failing & np.isfinite(abs_err)
        if measurable.any():
            lines.append(f"  failing: {n_fail} of {total} elements ({n_fail / total:.2%}); "
                         f"max abs error {np.max(abs_err[measurable]):.6g}, "
                         f"max rel error {np.max(np.where(measurable, rel_err, 0)):.6g}; "
                         f"worst error/bound {self.ratio:.6g}")
        elif n_fail:
            lines.append(f"  failing: {n_fail} of {total} elements ({n_fail / total:.2%})")
        where = self.worst()
        if where is not None:
            i, j = where
            lines.append(f"  worst: {self._element(i, j)}: actual {self._actual(i, j)}, expected "
                         f"{float(self.expected[i, j])!r}, bound {self.bound[i, j]:.6g}")
        if self.reproduction:
            lines.append(f"  reproduce: {self.reproduction}")
        return "\n".join(lines)

    def worst_table(self, rows: int = WORST_ROWS) -> str:
        """The worst elements, one per line: index, tile (where the kernel has one), actual,
        expected, error, bound, ratio."""
        tile = self.instance.declared_tile
        header = ("i", "j", *(("tile",) if tile else ()), "actual", "expected", "abs err", "bound", "ratio")
        lines = []
        if self.error_map is not None:
            order = np.argsort(-np.where(self.failing, self.error_map, -1.0), axis=None, kind="stable")
            abs_err, _ = self._errors()
            for flat in order[:rows]:
                i, j = np.unravel_index(int(flat), self.error_map.shape)
                if not self.failing[i, j]:
                    break
                unwritten = self.unwritten is not None and self.unwritten[i, j]
                lines.append((i, j, *((f"{i // tile},{j // tile}",) if tile else ()),
                              "unwritten" if unwritten else f"{self.C[i, j]:.7g}", f"{self.expected[i, j]:.7g}",
                              f"{abs_err[i, j]:.4g}", f"{self.bound[i, j]:.4g}", f"{self.error_map[i, j]:.3g}"))
        return "\n".join(format_table(header, lines))


def _tile_of(i: int, j: int, instance) -> str:
    """" (tile a, b)" of element (i, j), where its kernel has a tile; "" where it has none."""
    tile = instance.declared_tile
    return f" (tile {i // tile}, {j // tile})" if tile else ""


def _order(defect: Defect) -> int:
    return list(Defect).index(defect)


def current_test() -> str:
    """The running pytest node id (from PYTEST_CURRENT_TEST), or ''."""
    return os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]


def reproduction(problem=None) -> str:
    node = current_test()
    parts = [report.rerun_command(node)] if node else []
    if problem is not None and hasattr(problem, "operands"):
        parts.append(f"inputs: {problem!r}.operands()")
    return "; ".join(parts)
