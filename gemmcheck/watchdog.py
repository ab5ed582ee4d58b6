"""A wait on another process that lasts too long leaves a report behind.

A ci run with -n 8 on an H200 (2026-12-01) once stopped for good: three workers stopped
finishing tests at ~30 s, the others then waited for a turn to time, and nothing said why.
Each wait that can block on another process (a turn on a shared GPU, the shared hold for a
test or for children, the kill matrix's children) runs inside `reporting`: once it has lasted
REPORT_AFTER_S (env GEMMCHECK_STALL_REPORT_S; 0 turns it off), it writes the thread stacks of
this process and who holds or waits for the watched lock files (from /proc/locks) to
reports/stalls/<pid>.txt, once, and the wait goes on. Every waiting process writes its own,
so the one the others wait for shows where it is too.
"""

from __future__ import annotations

import faulthandler
import os
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

REPORT_AFTER_S = float(os.environ.get("GEMMCHECK_STALL_REPORT_S", "300"))

_folder: Path | None = None        # where reports go (the plugin sets <rootdir>/reports/stalls)
_locks: set[str] = set()           # lock files whose holders and waiters a report lists


def configure(folder) -> None:
    global _folder
    _folder = Path(folder) if folder is not None else None


def watch_lock(path: str) -> None:
    """List this lock file's holders and waiters in every report."""
    _locks.add(str(path))


@contextmanager
def reporting(what: str, after: float | None = None):
    """Write a report if the block lasts longer than `after` seconds (REPORT_AFTER_S)."""
    after = REPORT_AFTER_S if after is None else after
    if _folder is None or after <= 0:
        yield
        return
    timer = threading.Timer(after, _report, args=(what, time.monotonic()))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def lock_table(paths) -> str:
    """/proc/locks' lines about these files (holders; waiters marked "->"), each with the
    process's command line."""
    inodes = {}
    for p in paths:
        try:
            inodes[os.stat(p).st_ino] = p
        except OSError:
            continue
    try:
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return "  (no /proc/locks here)\n"
    out = []
    for line in lines:
        words = line.replace("->", " -> ").split()
        if "FLOCK" not in words:
            continue
        at = words.index("FLOCK")
        pid, where = words[at + 3], words[at + 4]
        inode = int(where.rsplit(":", 1)[-1]) if where.rsplit(":", 1)[-1].isdigit() else None
        if inode in inodes:
            waiting = "waits for" if "->" in words else "holds"
            out.append(f"  pid {pid} {waiting} {words[at + 2]} on {inodes[inode]}: {_command(pid)}")
    return "\n".join(out) + "\n" if out else "  (nobody holds or waits for them)\n"


def _command(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").replace(b"\n", b" ").decode(errors="replace")[:200]
    except OSError:
        return "?"


def _report(what: str, started: float) -> None:
    try:
        _folder.mkdir(parents=True, exist_ok=True)
        path = _folder / f"{os.getpid()}.txt"
        with open(path, "a") as out:
            out.write(f"gemmcheck: process {os.getpid()} ({os.environ.get('PYTEST_XDIST_WORKER', 'main')}) "
                      f"has waited {time.monotonic() - started:.0f} s for {what}\n")
            if _locks:
                out.write("locks:\n" + lock_table(sorted(_locks)))
            out.write("threads:\n")
            out.flush()
            faulthandler.dump_traceback(file=out, all_threads=True)
            out.write("\n")
        print(f"gemmcheck: process {os.getpid()} has waited long for {what}; see {path}",
              file=sys.__stderr__, flush=True)
    except Exception:   # a report must never break the wait it watches
        pass
