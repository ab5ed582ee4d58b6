#!/usr/bin/env python3
"""Do two runs judge kernels alike? Compare their verdicts.json and kill_matrix.json.

    python scripts/compare_runs.py BEFORE_DIR AFTER_DIR [--counts]

Each directory holds a verdicts.json and, optionally, a kill_matrix.json. Times,
durations, paths and the generation stamp are ignored. By default finding
counts are ignored too: a racy kernel's element counts differ from launch to
launch; what must agree is which defect each detector saw, per check, and each
instantiation's verdict and status. Exit 0 when they agree, 1 with the
differences listed otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from gemmcheck.verdict.defects import Defect


def _load(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.is_file() else None


def instances(doc: dict) -> dict[str, tuple]:
    return {i["instance"]: (i["verdict"], i["status"], tuple(sorted(i["defects"])))
            for i in doc["instances"]}


def checks(doc: dict, counts: bool) -> Counter:
    out = Counter()
    for v in doc["verdicts"]:
        found = tuple(sorted((f["defect"], f["detector"]) + ((f["count"],) if counts else ())
                             for f in v["findings"]))
        out[(v["test"], v["instance"], v["problem"], found)] += 1
    return out


# Defects that end an instantiation's run in its process (a fault's sticky error, a hang):
# the test that meets one first is whichever pytest-xdist ran first, and that test alone
# records it (the later ones skip); the instance's verdict, status and defects compare it.
LOSING = {Defect.CRASH.value, Defect.HANG.value}


def tests_found(doc: dict) -> Counter:
    """Per test and instance, which defect each detector saw on any of its problems: what two
    runs must agree on when hypothesis chose their problems (a failing kernel's recorded
    problems are the ones each run's search found and shrank to). Tests that saw nothing are
    left out: a test that ran clean in one run may not have run in the other (after a kernel
    crashed, its later tests skip, and pytest-xdist orders them differently in each run); the
    instance's verdict says whether that mattered. So is a crash or hang (LOSING): which test
    met it first is the schedule's, and the instance's defects say whether both runs met it."""
    seen: dict[tuple, set] = {}
    for v in doc["verdicts"]:
        seen.setdefault((v["test"], v["instance"]), set()).update(
            (f["defect"], f["detector"]) for f in v["findings"] if f["defect"] not in LOSING)
    return Counter({(test, instance, None, tuple(sorted(found))): 1 for (test, instance), found in seen.items() if found})


def matrix_rows(doc: dict) -> dict[str, tuple]:
    def column(col: dict | None):
        if not col:
            return None
        return (col.get("ran"), col.get("applicable"), (col.get("diagnosis") or {}).get("defect"))
    return {r["instance"]: (r["declared"], r["status"], column(r.get("plain")),
                            column(r.get("with_sanitizer"))) for r in doc["rows"]}


def _diff(name: str, before: dict, after: dict, labels=("before", "after")) -> list[str]:
    lines = []
    for key in sorted(set(before) | set(after), key=str):
        if before.get(key) != after.get(key):
            lines.append(f"{name} {key}: {labels[0]} {before.get(key)!r}, {labels[1]} {after.get(key)!r}")
    return lines


def compare(before: Path, after: Path, *, counts: bool = False, labels=("before", "after"),
            per_test: bool = False) -> list[str]:
    """The differences between two runs, one line each; `labels` name the runs in them.
    `per_test`: checks compared per test and instance over all their problems (tests_found),
    not problem by problem."""
    lines: list[str] = []
    vb, va = _load(before / "verdicts.json"), _load(after / "verdicts.json")
    if vb is None or va is None:
        return [f"verdicts.json missing in {before if vb is None else after}"]
    lines += _diff("instance", instances(vb), instances(va), labels)
    cb, ca = (tests_found(vb), tests_found(va)) if per_test else (checks(vb, counts), checks(va, counts))
    for key in sorted(set(cb) | set(ca), key=str):
        if cb[key] != ca[key]:
            on = f" on {key[2]}" if key[2] is not None else ""
            lines.append(f"check {key[0]}{on}: {key[3]} x{cb[key]} {labels[0]}, x{ca[key]} {labels[1]}")
    kb, ka = _load(before / "kill_matrix.json"), _load(after / "kill_matrix.json")
    if (kb is None) != (ka is None):
        lines.append("kill_matrix.json present in one run only")
    elif kb is not None:
        lines += _diff("kill-matrix row", matrix_rows(kb), matrix_rows(ka), labels)
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--counts", action="store_true", help="compare finding counts too")
    parser.add_argument("--per-test", action="store_true",
                        help="compare what each test saw over all its problems (runs whose problems hypothesis chose)")
    args = parser.parse_args(argv)
    lines = compare(args.before, args.after, counts=args.counts, per_test=args.per_test)
    for line in lines:
        print(line)
    print(f"{len(lines)} difference(s)" if lines else "the runs agree (times, paths and counts aside)")
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
