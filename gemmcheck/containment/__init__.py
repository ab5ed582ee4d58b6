"""Containment: a bad kernel costs one failure. What is lost (an instantiation that did not
build, crashed or hung) and what follows from it, the build test's work, the isolated probe,
and failures of the suite's own tools (never a kernel's verdict).
Called by the pytest wiring (gemmcheck.pytest_plugin.build_plugin), which it never imports.

One module per job, each name importable from here (loaded when first asked for, so a
module that needs only ToolFailure, like the isolated child's, does not import pytest):

- lost: the session's lost instantiations (Lost, Containment, containment, lose, refuse_lost,
  uniform, unfinished_verdict, status_of, skip_reason, COMPILE_ERROR)
- builds: the build test's work (BUILD_TEST, failures, unsupported, verdicts_for, describe,
  source_id, build_test_id)
- probe: the isolated probe (probe_steps, probe_instances, start, stop_probe, PROBE_SEED) and the
  sized probe (sized_probe_steps, probe_sizes, start_sized, sized_findings)
- tools: failures of the suite's own tools (ToolFailure, retry_once, REPORT_ATTRIBUTE)
"""

import importlib

_MODULES = {
    "builds": ("BUILD_TEST", "MAX_LINES", "build_test_id", "describe", "failures", "source_id", "unsupported",
               "verdicts_for"),
    "lost": ("COMPILE_ERROR", "CONTAINMENT", "Containment", "Lost", "containment", "lose", "refuse_lost",
             "skip_reason", "status_of", "unfinished_verdict", "uniform"),
    "probe": ("PROBE_SEED", "probe_instances", "probe_sizes", "probe_steps", "sized_findings",
              "sized_probe_steps", "start", "start_sized", "stop_probe"),
    "tools": ("REPORT_ATTRIBUTE", "ToolFailure", "retry_once"),
}
_WHERE = {name: module for module, names in _MODULES.items() for name in names}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name in _MODULES:
        return importlib.import_module(f"gemmcheck.containment.{name}")
    if name not in _WHERE:
        raise AttributeError(f"module 'gemmcheck.containment' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"gemmcheck.containment.{_WHERE[name]}"), name)
    globals()[name] = value
    return value
