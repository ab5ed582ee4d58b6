"""The rest of a session in a fresh process, after the CUDA context was lost in this one.

A kernel that faults at a shape the isolated probe did not cover leaves a sticky CUDA error:
nothing more can launch in this process. The tests that would have launched later are
skipped here and run at the end of the session in one child pytest (same options, those
node ids, the lost kernel's tests left out). The child writes its verdicts and kill-matrix
rows as a pytest-xdist worker does (``<name>-gw-rerun<depth>.json`` beside the session's
files), which this session merges; its allure results land in the same directory. A child
that loses its context again does the same, up to MAX_DEPTH processes deep.

Not under pytest-xdist (a worker whose context is lost skips its remaining tests and says
so: rerun them in a fresh process).
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

RERUN_AS = "GEMMCHECK_RERUN_AS"      # set in a child: its name for the files it writes
MAX_DEPTH = 3
# Options the child must not take over: they would write over this session's files, clean
# its allure results, spread it over workers or deselect the node ids it is given.
DROPPED_WITH_VALUE = ("--junitxml", "--junit-xml", "--benchmark-json", "--benchmark-save", "--gemm-phases",
                      "--gemm-shard", "--gemm-shard-durations", "-n", "--numprocesses", "--dist")
DROPPED_FLAGS = ("--clean-alluredir", "--benchmark-autosave", "--lf", "--last-failed", "--ff",
                 "--failed-first", "--sw", "--stepwise")


def is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def runner_id(config: pytest.Config) -> str | None:
    """The name a process that is not the session's own writes its part of the files under:
    the pytest-xdist worker id, or this module's child's; None for the session itself."""
    worker = getattr(config, "workerinput", {}).get("workerid")
    return worker or os.environ.get(RERUN_AS) or None


def depth() -> int:
    name = os.environ.get(RERUN_AS, "")
    return int(name.removeprefix("gw-rerun")) if name.startswith("gw-rerun") else 0


def available(config: pytest.Config) -> bool:
    return not is_xdist_worker(config) and depth() < MAX_DEPTH


def child_args(config: pytest.Config, nodeids: list[str]) -> list[str]:
    """This session's command-line options (its test paths and the dropped options left out)
    and the node ids, relative to the directory pytest was started in."""
    positional = set(config.args)
    args, skip_value = [], False
    for arg in config.invocation_params.args:
        if skip_value:
            skip_value = False
            continue
        name = arg.split("=", 1)[0]
        if name in DROPPED_FLAGS or re.fullmatch(r"-n\w+", arg) or arg in positional:
            continue
        if name in DROPPED_WITH_VALUE:
            skip_value = "=" not in arg   # "--opt value": the value is the next argument
            continue
        args.append(arg)
    start, root = Path(config.invocation_params.dir), Path(config.rootpath)
    out = []
    for nodeid in nodeids:
        path, sep, rest = nodeid.partition("::")
        out.append(os.path.relpath(root / path, start) + sep + rest)
    return args + out


def run(config: pytest.Config, nodeids: list[str]) -> int:
    """Run `nodeids` in a child pytest, its output on this terminal; returns its exit code."""
    argv = [sys.executable, "-m", "pytest", *child_args(config, nodeids)]
    env = dict(os.environ, **{RERUN_AS: f"gw-rerun{depth() + 1}"})
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write("\n")   # after the progress dots
        reporter.write_sep("=", f"gemmcheck: {len(nodeids)} test(s) re-run in a fresh process "
                                "(the CUDA context of this one was lost)")
        reporter._tw.flush()   # before the child writes to the same terminal
    sys.stdout.flush()
    capture = config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
        return subprocess.run(argv, cwd=config.invocation_params.dir, env=env).returncode
