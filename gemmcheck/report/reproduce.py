"""How to rerun a failed test: the hypothesis example and its @reproduce_failure line, and
the pytest command with the options that selected it.

``rerun_command(nodeid)`` is the one command every ``reproduce:`` line and the report's
"reproduce" attachment print: run as printed (from the directory it names), it selects the
same test with the same catalogs, backend, profile and every other option that changes
what the test does. The session that is running sets what it needs (start_reruns); pytester
runs sessions inside sessions, so they stack.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
from pathlib import Path
from typing import Callable, Iterable

_REPRODUCE = re.compile(r"^(?:E\s+)?.*(@reproduce_failure\(.*?\)|@seed\(\d+\)|"
                        r"--hypothesis-seed=\d+).*$", re.M)


def hypothesis_reproduction(text: str) -> str:
    """The falsifying example (up to its closing parenthesis) and the @reproduce_failure line
    from hypothesis's report."""
    lines = [re.sub(r"^E\s{1,3}", "", line) for line in text.splitlines()]
    parts: list[str] = []
    for k, line in enumerate(lines):
        if re.match(r"\s*(?:Falsifying (?:explicit )?example|Failing test case):", line):
            block, depth = [], 0
            for follow in lines[k:]:
                block.append(follow)
                depth += follow.count("(") - follow.count(")")
                if depth <= 0:
                    break
            parts.append("\n".join(block).strip())
    parts += [m.group(0).strip() for m in _REPRODUCE.finditer("\n".join(lines))]
    return "\n".join(dict.fromkeys(parts))


# Options a rerun of one test leaves out: where this run wrote its outputs, how it spread its
# tests over hosts and GPUs (one test needs neither), and those written from the run itself.
NOT_FOR_A_RERUN = ("gemm_verdicts", "gemm_durations", "gemm_phases", "gemm_shard", "gemm_shard_durations",
                   "gemm_gpus", "gemm_catalog", "gemm_backend", "gemm_profile")
# Options of other plugins that change what a test does.
OTHER_OPTIONS = (("hypothesis_profile", "--hypothesis-profile"), ("hypothesis_seed", "--hypothesis-seed"))

_sessions: list[Callable[[str], str]] = []


def start_reruns(command_for: Callable[[str], str]) -> None:
    """The running session's rerun_command (a function of the node id)."""
    _sessions.append(command_for)


def end_reruns() -> None:
    if _sessions:
        _sessions.pop()


def rerun_command(nodeid: str) -> str:
    """The one shell command that reruns test `nodeid` as the running session ran it."""
    return _sessions[-1](nodeid) if _sessions else command(nodeid, [])


def rerun_options(declared: Iterable, value_of: Callable[[str], object], *, catalogs, catalog_names: dict,
                  backend: str, profile: str, root) -> list[str]:
    """The options that select a test and change what it does, each as ``--name=value`` (the
    form pytest reads before gemmcheck's plugin is loaded): the run's catalogs (by name, or
    relative to `root` where they are under it), its backend as it resolved here (``auto``
    differs between hosts), its profile, then every other option of `declared` (the
    gemmcheck option group) whose value is not its default, and OTHER_OPTIONS that are set."""
    names = {Path(p).resolve(): name for name, p in catalog_names.items()}
    args = [f"--gemm-catalog={names.get(Path(c).resolve()) or _path(c, root)}" for c in catalogs]
    args += [f"--gemm-backend={backend}", f"--gemm-profile={profile}"]
    for option in declared:
        if option.dest in NOT_FOR_A_RERUN:
            continue
        value = value_of(option.dest)
        if value != option.default and value is not None:
            args += _spelled(max(option.names(), key=len), value)
    for dest, name in OTHER_OPTIONS:
        value = value_of(dest)
        if value is not None:
            args += _spelled(name, value)
    return args


def _spelled(name: str, value) -> list[str]:
    if value is True:
        return [name]
    if isinstance(value, list):
        return [f"{name}={v}" for v in value]
    if isinstance(value, tuple):
        return [f"{name}={','.join(map(str, value))}"]
    return [f"{name}={value}"]


def _path(path, root) -> str:
    path = Path(path).resolve()
    try:
        return str(path.relative_to(Path(root).resolve()))
    except ValueError:
        return str(path)


def command(nodeid: str, options: list[str], *, root=None, cwd=None) -> str:
    """``python -m pytest <nodeid> <options>``, from `root` (node ids are relative to it): with
    ``cd <root> &&`` when the run started elsewhere; ``python`` is this interpreter where the
    PATH's python is another."""
    on_path = shutil.which("python")
    python = "python" if on_path and os.path.abspath(on_path) == os.path.abspath(sys.executable) else sys.executable
    line = shlex.join([python, "-m", "pytest", nodeid, *options])
    if root is None or Path(cwd or Path.cwd()).resolve() == Path(root).resolve():
        return line
    return f"cd {shlex.quote(str(root))} && {line}"
