"""Where a test's time goes: compile, inputs, harness, launch, oracle, detectors, children, waiting
for a turn on a shared GPU, device timing.

Off unless a run asks for it (``--gemm-phases PATH``). When on, every function wrapped
with ``@timed("oracle")`` (or a block ``with phase("oracle"):``) adds its *exclusive*
time to the current test's tally: a launch inside a detector counts as launch, not
twice. The plugin starts a tally per test and ships it with the test's report, so it
survives pytest-xdist; scripts/bench_suite.py turns the file into a table.
"""

from __future__ import annotations

import functools
import threading
import time
from contextlib import contextmanager

# The phases the code base reports, in table order. Time a test spends outside all of
# them (its own code, hypothesis's search, pytest) is "other" in the table.
PHASES = ("compile", "inputs", "harness", "launch", "oracle", "detectors", "isolation", "sanitizer",
          "turns", "timing")

_enabled = False
_tally: dict[str, float] = {}
_stack: list[list] = []   # [name, started, seconds spent in nested phases]
# The test's own thread. Phases entered on other threads (compute-sanitizer children
# waited on by a thread pool) are not counted there: they overlap the test's time, and
# the test counts its wait for them instead (a phase around the wait).
_owner = threading.get_ident()
# The children this process ran (any thread): [what, start, ready, stop, marks] in epoch seconds,
# so a run's timeline can show how many ran at once and which ones the wall waited for.
_children: list[list] = []
_children_lock = threading.Lock()


def enable(on: bool = True) -> None:
    global _enabled, _owner
    _enabled = on
    _owner = threading.get_ident()


def enabled() -> bool:
    return _enabled


def begin() -> None:
    """Start a fresh tally (one per test), counted on the calling thread."""
    global _owner
    _owner = threading.get_ident()
    _tally.clear()
    _stack.clear()


def take() -> dict[str, float]:
    """The tally since begin(), rounded; clears it."""
    out = {name: round(seconds, 6) for name, seconds in _tally.items() if seconds > 0}
    _tally.clear()
    return out


@contextmanager
def phase(name: str):
    """Count the block's exclusive time as `name` (nothing at all when timing is off)."""
    if name not in PHASES:
        raise ValueError(f"unknown phase {name!r}; known: {', '.join(PHASES)}")
    if not _enabled or threading.get_ident() != _owner:
        yield
        return
    frame = [name, time.perf_counter(), 0.0]
    _stack.append(frame)
    try:
        yield
    finally:
        _stack.pop()
        spent = time.perf_counter() - frame[1]
        _tally[name] = _tally.get(name, 0.0) + spent - frame[2]
        if _stack:
            _stack[-1][2] += spent


def child_ran(what: str, start: float, ready: float | None, stop: float, marks=None) -> None:
    """Record a child process (nothing when timing is off): `what` names its tool and rows;
    `ready` is when it said it was ready (after its start-up), None if it never did; `marks`
    the moments of its start-up it reported ({"main": its imports done, "backend": ...})."""
    if _enabled:
        with _children_lock:
            _children.append([what, round(start, 3), round(ready, 3) if ready else None, round(stop, 3),
                              {k: round(v, 3) for k, v in (marks or {}).items()}])


def children() -> list[list]:
    """The children recorded so far ([what, start, ready, stop, marks], epoch seconds)."""
    with _children_lock:
        return [list(c) for c in _children]


def timed(name: str):
    """Decorator: the function's calls count as phase `name`."""
    if name not in PHASES:
        raise ValueError(f"unknown phase {name!r}; known: {', '.join(PHASES)}")

    def wrap(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if not _enabled or threading.get_ident() != _owner:
                return fn(*args, **kwargs)
            with phase(name):
                return fn(*args, **kwargs)
        return wrapper
    return wrap
