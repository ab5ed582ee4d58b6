"""What a session's test reports said: durations, phase times, and whether any test that
runs catalog kernels actually ran (a run that checked nothing must not pass).

Fed one pytest report at a time, on the process that sees them all (the pytest-xdist
controller, or the only process).
"""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path

from gemmcheck import phases

# The keyword gemmcheck gives every test that runs catalog kernels; it travels with the
# test's report (report.keywords), also from pytest-xdist workers.
KERNEL_CHECK = "kernel_check"
PHASES_PROPERTY = "gemm_phases"   # report.user_properties key of a test's phase tally
# ... and of the seconds a test waited for other workers' turns on its GPU (gpu_turns): not
# the test's cost, so not in its recorded duration. On one H200 with -n 8 the nightly's
# performance tests at N = 1024 waited ~150 s each behind the others' sampling, and the next
# run's plan dealt them as the largest units.
WAITED_PROPERTY = "gemm_waited_s"
HYPOTHESIS_PROPERTY = "gemm_hypothesis"   # set on the reports of hypothesis tests
INSTANCES_PROPERTY = "gemm_instances"     # the ids of the catalog instantiations a test runs


def process_age() -> float | None:
    """Seconds since this process started (Linux's /proc), None where that cannot be read."""
    try:
        fields = Path("/proc/self/stat").read_text().rpartition(")")[2].split()
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return round(uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK"), 3)   # field 22: starttime
    except (OSError, ValueError, IndexError):
        return None


class RunStats:
    def __init__(self) -> None:
        self.started = time.monotonic()
        self.started_epoch = time.time()   # reports' start and stop are epoch seconds
        self.process_s = process_age()     # how long the process ran before (imports, configure)
        self.collection_s: float | None = None
        self.workers_collected: dict[str, float] = {}   # pytest-xdist: worker -> when it had collected
        self.durations: dict[str, float] = {}            # node id -> setup + call + teardown, less waits
        self.phases: dict[str, dict[str, float]] = {}    # node id -> phase -> seconds
        self.spans: dict[str, list] = {}   # node id -> [worker, start, stop], seconds from the session's start
        self.children: list[list] = []     # [worker, what, start, ready, stop, marks], seconds likewise
        self.hypothesis_tests: set[str] = set()
        self.kernel_tests: set[str] = set()
        self.kernel_tests_ran: set[str] = set()
        self.skip_reasons: Counter[str] = Counter()
        self.skips_by_instance: dict[str, Counter[str]] = {}   # instance id -> its skipped tests' reasons

    def collected(self) -> None:
        self.collection_s = time.monotonic() - self.started

    def worker_collected(self, worker: str) -> None:
        """(The controller.) A worker reported its collection: no test runs before all have."""
        self.workers_collected[worker] = round(time.monotonic() - self.started, 3)

    def add(self, report) -> None:
        self.durations[report.nodeid] = self.durations.get(report.nodeid, 0.0) + report.duration
        self._span(report)
        instances = ()
        for key, value in report.user_properties:
            if key == PHASES_PROPERTY:
                self.phases[report.nodeid] = value
            elif key == HYPOTHESIS_PROPERTY:
                self.hypothesis_tests.add(report.nodeid)
            elif key == WAITED_PROPERTY:
                self.durations[report.nodeid] = max(0.0, self.durations[report.nodeid] - value)
            elif key == INSTANCES_PROPERTY:
                instances = value
        if KERNEL_CHECK not in report.keywords:
            return
        self.kernel_tests.add(report.nodeid)
        if report.skipped and not hasattr(report, "wasxfail"):
            if report.when != "teardown":
                reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
                self.skip_reasons[reason.removeprefix("Skipped: ")] += 1
                for instance in instances:
                    self.skips_by_instance.setdefault(instance, Counter())[reason.removeprefix("Skipped: ")] += 1
        elif report.when == "call" or report.failed:
            # passed, failed or xfailed: a check ran (an error in setup counts too: it is
            # a failure the run reports)
            self.kernel_tests_ran.add(report.nodeid)

    def _span(self, report) -> None:
        """When the test ran and where (the timeline of scripts/bench_suite.py --timeline)."""
        start, stop = getattr(report, "start", 0.0), getattr(report, "stop", 0.0)
        if not start:
            return
        node = getattr(report, "node", None)   # pytest-xdist's worker, on the controller
        worker = getattr(getattr(node, "gateway", None), "id", "main")
        start, stop = start - self.started_epoch, stop - self.started_epoch
        span = self.spans.setdefault(report.nodeid, [worker, start, stop])
        span[1], span[2] = min(span[1], start), max(span[2], stop)

    def add_children(self, worker: str, children) -> None:
        """Child processes a process ran (phases.children: epoch seconds), on the run's clock."""
        at = lambda t: None if t is None else round(t - self.started_epoch, 3)   # noqa: E731
        self.children += [[worker, what, at(start), at(ready), at(stop), {k: at(v) for k, v in marks.items()}]
                          for what, start, ready, stop, marks in children]

    def nothing_checked(self, *, collect_only: bool, exitstatus: int, empty: int = 0) -> str | None:
        """One line saying why this run checked nothing, or None when it checked something
        (or selected no kernel test, or already failed, or only collected). `empty`: tests
        deselected because the selection gave them no kernel (their parameter list was empty)."""
        if collect_only or exitstatus not in (0, 5) or self.kernel_tests_ran or not (self.kernel_tests or empty):
            return None   # (5: pytest's own "no tests ran", when every test was deselected)
        if not self.kernel_tests:
            return (f"gemmcheck: no kernel was checked: the selected kernels and filters leave no "
                    f"instantiation for the {empty} test(s) that run kernels")
        why = ""
        if self.skip_reasons:
            reason, count = self.skip_reasons.most_common(1)[0]
            why = f"; {count} of them: {reason}"
        return (f"gemmcheck: no kernel was checked: all {len(self.kernel_tests)} tests that run "
                f"kernels were skipped{why}")

    def durations_document(self) -> dict:
        return {"durations": {k: round(v, 4) for k, v in sorted(self.durations.items())}}

    def phases_document(self) -> dict:
        return {"collection_s": self.collection_s, "wall_s": time.monotonic() - self.started,
                "process_s": self.process_s, "workers_collected": self.workers_collected,
                "phases": list(phases.PHASES), "durations": self.durations, "tests": self.phases,
                "hypothesis_tests": sorted(self.hypothesis_tests),
                "spans": {k: [w, round(a, 3), round(b, 3)] for k, (w, a, b) in self.spans.items()},
                "children": sorted(self.children, key=lambda c: c[2])}
