"""Containment: a bad kernel costs one failure. What is lost (an instantiation that did not
build, crashed or hung) and what follows from it, the build test's work, and the isolated probe.
Called by the pytest wiring (gemmcheck.pytest_plugin.build_plugin), which it never imports.

One module per job, each name importable from here:

- lost: the session's lost instantiations (Lost, Containment, containment, lose, refuse_lost,
  uniform, unfinished_verdict, status_of, skip_reason, COMPILE_ERROR)
- builds: the build test's work (BUILD_TEST, failures, unsupported, verdicts_for, describe,
  source_id, build_test_id)
- probe: the isolated probe (probe_steps, probe_instances, start, stop_probe, PROBE_SEED)
"""

from gemmcheck.containment.builds import (BUILD_TEST, MAX_LINES, build_test_id, describe, failures, source_id,
                                          unsupported, verdicts_for)
from gemmcheck.containment.lost import (COMPILE_ERROR, CONTAINMENT, Containment, Lost, containment, lose,
                                        refuse_lost, skip_reason, status_of, unfinished_verdict, uniform)
from gemmcheck.containment.probe import PROBE_SEED, probe_instances, probe_steps, start, stop_probe

__all__ = [
    "BUILD_TEST", "COMPILE_ERROR", "CONTAINMENT", "MAX_LINES", "PROBE_SEED", "Containment", "Lost",
    "build_test_id", "containment", "describe", "failures", "lose", "probe_instances", "probe_steps",
    "refuse_lost", "skip_reason", "source_id", "start", "status_of", "stop_probe", "unfinished_verdict",
    "uniform", "unsupported", "verdicts_for",
]
