#!/usr/bin/env python
"""Fail a nightly run by name: read the merged verdicts.json and say which kernels are
not as the catalog declares (and which selected instantiations nothing checked).

    python scripts/nightly_failures.py merged/verdicts.json

Exit 1 naming the kernels when any instantiation is "unexpected" or "symptoms_only" (a
nightly runs every suite, so the declared class should have been established), 0 otherwise. In a
GitHub Actions job it also writes ::error annotations and the step summary.
"""

from __future__ import annotations

import json
import os
import sys
from collections import defaultdict
from pathlib import Path


# A nightly runs every suite: a broken variant seen only through symptoms of its declared
# class means the detector that names the class no longer does.
FAILING = {"unexpected": "", "symptoms_only": " (only symptoms: the declared class was not established)"}


def failures(document: dict) -> dict[str, list[str]]:
    """kernel -> ["float16-TILE16: wrong_values x3", ...] for every unexpected instantiation."""
    out: dict[str, list[str]] = defaultdict(list)
    for row in document["instances"]:
        if row["status"] not in FAILING:
            continue
        found = ", ".join(f"{d} x{n}" for d, n in row["defects"].items()) or "no defect"
        where = row["instance"].removeprefix(row["kernel"] + "-")
        out[row["kernel"]].append(f"{where}: expected {row['expect']}, found {found}{FAILING[row['status']]}")
    return dict(out)


def message(document: dict) -> tuple[list[str], int]:
    """(lines to print, exit status)."""
    bad = failures(document)
    unchecked = [r["instance"] for r in document["instances"] if r["status"] == "not_checked"]
    lines = []
    if bad:
        lines.append(f"nightly: {len(bad)} kernel(s) not as the catalog declares: {', '.join(sorted(bad))}")
        for kernel in sorted(bad):
            lines += [f"  {kernel} {what}" for what in bad[kernel]]
    else:
        checked = len(document["instances"]) - len(unchecked)
        lines.append(f"nightly: every kernel as the catalog declares ({checked} instantiations checked)")
    if unchecked:
        lines.append(f"nightly: {len(unchecked)} selected instantiation(s) not checked by any test: "
                     + ", ".join(unchecked[:20]) + (" ..." if len(unchecked) > 20 else ""))
    return lines, 1 if bad else 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: nightly_failures.py VERDICTS_JSON", file=sys.stderr)
        return 2
    path = Path(argv[0])
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        print(f"nightly: {path}: no verdicts to read ({exc}); did the merge job find the shards' reports?",
              file=sys.stderr)
        return 2
    lines, status = message(document)
    print("\n".join(lines))
    if os.environ.get("GITHUB_ACTIONS") and status:
        for kernel, what in sorted(failures(document).items()):
            print(f"::error title=gemmcheck nightly: {kernel}::{'; '.join(what)}")
    if os.environ.get("GITHUB_STEP_SUMMARY"):
        with open(os.environ["GITHUB_STEP_SUMMARY"], "a") as summary:
            summary.write("### gemmcheck nightly\n\n```\n" + "\n".join(lines) + "\n```\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
