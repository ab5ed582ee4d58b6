"""The evidence attached to a failed value check: heatmap, worst elements, source, resources."""

from __future__ import annotations

import numpy as np

from gemmcheck.report.attach import active, attach_csv, attach_png, attach_text, parameter
from gemmcheck.report.heatmap import heatmap_png, worst_elements_csv
from gemmcheck.report.source import kernel_source_excerpt, resource_report


def attach_judgement(judgement, run, *, worst: int = 20) -> None:
    """Attach the evidence of a failed value check: the error/bound heatmap with the tile grid,
    the worst elements, the kernel source and the compiler's resource report.

    ``judgement``: gemmcheck.judge.oracle.Judgement (``error_map``, ``findings``, ``message()``);
    ``run``: the gemmcheck.problems.harness.Run it judged.
    """
    if not active():
        return
    instance = run.instance
    for name, value in (("M", run.M), ("N", run.N), ("K", run.K)):
        parameter(name, value)
    error_map = np.asarray(judgement.error_map, dtype=np.float64)
    title = (f"{instance.id}  M{run.M} N{run.N} K{run.K}  grid {tuple(run.grid)} "
             f"block {tuple(run.block)}")
    attach_png("error / bound heatmap", heatmap_png(error_map, instance.declared_tile,
                                                    unwritten=run.unwritten, title=title))
    if not hasattr(judgement, "worst_table"):   # the oracle attaches its own, with the bound
        attach_csv("worst elements", worst_elements_csv(error_map, run, n=worst,
                                                        expected=getattr(judgement, "expected", None)))
    attach_instance_evidence(instance)


def attach_instance_evidence(instance) -> None:
    """The kernel's source and ptxas's resource report for one instantiation."""
    if not active():
        return
    excerpt, where = kernel_source_excerpt(instance.spec.source, instance.spec.entry)
    attach_text(f"kernel source: {instance.spec.entry} ({where})", excerpt)
    attach_text("compiler resource report", resource_report(instance))


