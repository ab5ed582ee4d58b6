#!/usr/bin/env python
"""Where a gemmcheck run's time goes, per suite and per phase.

    python scripts/bench_suite.py                          # every suite, dev profile, warm cache
    python scripts/bench_suite.py --profile ci --cold      # each suite from an empty build cache
    python scripts/bench_suite.py suites/hazards -- -n 2   # after "--": extra pytest arguments
    python scripts/bench_suite.py --read s1.json s2.json   # the table of earlier runs' --gemm-phases
                                                           # files (shards on a GPU runner), summed
    python scripts/bench_suite.py --timeline run.json      # when each suite ran, on how many workers,
                                                           # and the tests that ended last

Runs pytest once per suite with --gemm-phases and prints a Markdown table: wall time,
collection (from configuration on: includes allure-pytest clearing old results), the instrumented phases (compile, inputs, harness, launch, oracle, detectors,
isolation children, compute-sanitizer children: exclusive times, summed over tests),
then what no phase covers: inside hypothesis tests ("hypothesis": its search,
shrinking, database, plus the test's own code) and in other tests, and pytest's
own share (wall - collection - test durations: session fixtures' teardown, reports).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gemmcheck.judge.isolation import startup_parts  # noqa: E402
from gemmcheck.perf.warm import LABEL as COMPILE_AHEAD  # noqa: E402
from gemmcheck.phases import PHASES  # noqa: E402

SUITES = ("suites/compile", "suites/correctness", "suites/hazards", "suites/performance")
COLUMNS = ("wall", "collection", *PHASES, "hypothesis", "other tests", "pytest")


def run_suite(suite: str, profile: str, extra: list[str], *, cold: bool) -> dict:
    """Run one suite; returns its row (seconds per column) plus the pytest summary line."""
    with tempfile.TemporaryDirectory(prefix="gemmcheck-bench-") as tmp:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
        if cold:
            env["GEMMCHECK_CACHE_DIR"] = str(Path(tmp) / "cache")
        out = Path(tmp) / "phases.json"
        cmd = [sys.executable, "-m", "pytest", suite, f"--gemm-profile={profile}", f"--gemm-phases={out}",
               "-q", "-p", "no:cacheprovider", *extra]
        started = time.monotonic()
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        wall = time.monotonic() - started
        lines = [line for line in proc.stdout.splitlines() if line.strip()]
        summary = lines[-1].strip("= ") if lines else f"exit {proc.returncode}"
        if not out.is_file():
            raise SystemExit(f"bench_suite: {suite}: pytest wrote no phases (exit {proc.returncode}):\n"
                             + "\n".join((proc.stdout + proc.stderr).splitlines()[-20:]))
        doc = json.loads(out.read_text())
    return {"suite": suite, "exit": proc.returncode, "summary": summary, **phase_row(doc, wall)}


def phase_row(doc: dict, wall: float) -> dict:
    """Seconds per column from a --gemm-phases document and the run's wall time."""
    row = {c: 0.0 for c in COLUMNS}
    row["wall"] = wall
    row["collection"] = doc.get("collection_s") or 0.0
    hypothesis = set(doc.get("hypothesis_tests", ()))
    for nodeid, duration in doc["durations"].items():
        spent = doc["tests"].get(nodeid, {})
        for name, seconds in spent.items():
            row[name] = row.get(name, 0.0) + seconds
        rest = max(0.0, duration - sum(spent.values()))
        row["hypothesis" if nodeid in hypothesis else "other tests"] += rest
    row["pytest"] = max(0.0, wall - row["collection"] - sum(doc["durations"].values()))
    row["tests"] = len(doc["durations"])
    return row


def read_rows(paths: list[Path], suites=SUITES) -> tuple[list[dict], dict]:
    """Rows per suite from --gemm-phases files of whole runs (each may hold every suite, as a
    shard does), summed over the files; and the "all" row. A file does not say how long each
    suite took on the wall, so a suite's wall is its tests' summed time; the all row's wall is
    the files' walls summed, and its pytest column what no test accounts for."""
    docs = [json.loads(Path(p).read_text()) for p in paths]
    rows = []
    for suite in suites:
        prefix = suite.rstrip("/") + "/"
        part = [{"collection_s": 0.0, "hypothesis_tests": doc.get("hypothesis_tests", ()),
                 "tests": doc["tests"],
                 "durations": {n: d for n, d in doc["durations"].items() if n.startswith(prefix)}}
                for doc in docs]
        if not any(p["durations"] for p in part):
            continue
        summed = [phase_row(p, sum(p["durations"].values())) for p in part]
        rows.append({"suite": suite, "exit": 0, "summary": "",
                     **{c: sum(r[c] for r in summed) for c in (*COLUMNS, "tests")}})
    whole = [phase_row(doc, doc["wall_s"]) for doc in docs]
    total = {c: sum(r[c] for r in whole) for c in (*COLUMNS, "tests")}
    return rows, {"suite": "**all**", "summary": f"{len(docs)} runs", **total}


def timeline(doc: dict, step: float = 5.0, last: int = 12) -> list[str]:
    """Worker-seconds per suite in each `step` seconds of a run (a test counts where its
    setup-to-teardown span falls), then the tests that ended last: what the wall waited for."""
    spans = doc.get("spans")
    if not spans:
        raise SystemExit("bench_suite: this --gemm-phases file has no spans (written before they were recorded)")
    workers = sorted({w for w, _, _ in spans.values()})
    end = max(b for _, _, b in spans.values())
    # each test's suite, once (a test outside the suites, e.g. tests/, counts as "other")
    suite_of = {n: next((s for s in SUITES if n.startswith(s + "/")), "other") for n in spans}
    suites = [s for s in (*SUITES, "other") if s in suite_of.values()]
    children = doc.get("children") or []   # [worker, what, start, ready, stop, marks]
    lines = [f"{len(spans)} tests on {len(workers)} workers, wall {doc['wall_s']:.1f} s, last test ended at "
             f"{end:.1f} s; worker-seconds per {step:g} s"
             + (", and the child processes running (on average)" if children else "") + ":",
             "| seconds | " + " | ".join(suites) + " | idle |" + (" children |" if children else ""),
             "|" + "---|" * (len(suites) + 2 + bool(children))]
    overlap = lambda a, b, lo, hi: max(0.0, min(b, hi) - max(a, lo))   # noqa: E731
    for lo in [i * step for i in range(int(end // step) + 1)]:
        hi = lo + step
        busy = {s: 0.0 for s in suites}
        for nodeid, (_, a, b) in spans.items():
            busy[suite_of[nodeid]] += overlap(a, b, lo, hi)
        idle = max(0.0, len(workers) * step - sum(busy.values()))
        running = sum(overlap(c[2], c[4], lo, hi) for c in children) / step
        lines.append(f"| {lo:g}-{hi:g} | " + " | ".join(f"{busy[s]:.1f}" for s in suites) + f" | {idle:.1f} |"
                     + (f" {running:.1f} |" if children else ""))
    lines += startup_lines(doc)
    lines += sampling_lines(doc, children)
    lines += ["", f"the {last} tests that ended last (worker, start, stop, phases):"]
    for nodeid, (w, a, b) in sorted(spans.items(), key=lambda kv: kv[1][2])[-last:]:
        spent = ", ".join(f"{k} {v:.1f}" for k, v in doc["tests"].get(nodeid, {}).items() if v >= 0.05)
        lines.append(f"  {w:>5} {a:6.1f} {b:6.1f}  {nodeid}  {spent}")
    return lines + (children_lines(children, last) if children else [])


PERF = "suites/performance"


def startup_lines(doc: dict) -> list[str]:
    """Where the run's first seconds went: the pytest process before its session (imports,
    configure), each pytest-xdist worker's start and collection (no test runs before every
    worker has collected), and the first test's start; [] for a file without them."""
    collected = doc.get("workers_collected") or {}
    if doc.get("process_s") is None and not collected:
        return []
    first = min(a for _, a, _ in doc["spans"].values())
    parts = []
    if doc.get("process_s") is not None:
        parts.append(f"the pytest process ran {doc['process_s']:.1f} s before its session began")
    if collected:
        parts.append(f"{len(collected)} workers had collected between {min(collected.values()):.1f} s and "
                     f"{max(collected.values()):.1f} s")
    return ["", "start-up: " + "; ".join(parts) + f"; the first test began at {first:.1f} s"]


def sampling_lines(doc: dict, children: list) -> list[str]:
    """How much of the performance suite's tail the device sampled: from when the last other
    test and the last child (the compile-ahead one aside) ended to its last test's end, the
    `timing` phase of its tests in that window (a test's, in proportion to its span there).
    One GPU samples one kernel at a time, so on one GPU this is the card's share of the tail."""
    spans, tests = doc["spans"], doc.get("tests", {})
    perf = [n for n in spans if n.startswith(PERF + "/")]
    if not any(tests.get(n, {}).get("timing") for n in perf):
        return []
    others = [b for n, (_, _, b) in spans.items() if not n.startswith(PERF + "/")]
    kids = [c[4] for c in children if c[1].partition(":")[0] != COMPILE_AHEAD]
    lo, hi = max(others + kids, default=0.0), max(spans[n][2] for n in perf)
    if hi <= lo:
        return ["", "performance suite: no tail of its own (other tests or children ran to its end)"]
    timing = {n: tests.get(n, {}).get("timing", 0.0) for n in perf}
    sampled = sum(timing[n] * max(0.0, min(b, hi) - max(a, lo)) / (b - a)
                  for n, (_, a, b) in ((n, spans[n]) for n in perf) if b > a)
    return ["", f"performance suite alone from {lo:.1f} s to {hi:.1f} s ({hi - lo:.1f} s): sampling "
                f"{sampled:.1f} s of it ({100 * sampled / (hi - lo):.0f} % of one card's time; "
                f"`timing` summed over all its tests {sum(timing.values()):.1f} s)"]


def children_lines(children: list, last: int) -> list[str]:
    """Per tool: how many children, how many of them ran one row (each paid a whole start
    for it: kill_matrix.RowChildren's rows alone, and rows run again alone) and their seconds,
    their summed seconds and start-up (to READY: the tool's and the interpreter's start with
    gemmcheck's imports, making the backend, preparing the kernels), the longest; the rows a
    tool ran in more than one child; then the children that ended last and the longest."""
    kinds: dict[str, list] = {}
    for c in children:
        kinds.setdefault(c[1].partition(":")[0], []).append(c)
    lines = ["", "child processes per tool (seconds summed; start-up: until the child said READY):",
             "| tool | children | of them one row (seconds) | summed | start-up | of it: start and imports | backend "
             "| prepare | longest | last ended at |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for kind, cs in sorted(kinds.items()):
        ups = [c[3] - c[2] for c in cs if c[3] is not None]
        parts = [0.0, 0.0, 0.0]
        for c in cs:
            for k, v in enumerate((startup_parts(c[2], c[5] if len(c) > 5 else {}) or {}).values()):
                parts[k] += v
        alone = [c for c in cs if len(_rows(c)) == 1]
        lines.append(f"| {kind} | {len(cs)} | {len(alone)} ({sum(c[4] - c[2] for c in alone):.1f}) "
                     f"| {sum(c[4] - c[2] for c in cs):.1f} | {sum(ups):.1f} | "
                     + " | ".join(f"{x:.1f}" for x in parts)
                     + f" | {max(c[4] - c[2] for c in cs):.1f} | {max(c[4] for c in cs):.1f} |")
    again: dict[tuple, list] = {}
    for c in children:
        for row in _rows(c):
            again.setdefault((c[1].partition(":")[0], row), []).append(c[0])
    again = {k: v for k, v in again.items() if len(v) > 1}
    lines += ["", f"a row under one tool in more than one child: {len(again)} (a fresh child for the "
                  "steps a crash left, a batch's verdict checked alone, or the same run twice)"]
    lines += [f"  {tool}: {row} ({', '.join(workers)})" for (tool, row), workers in list(again.items())[:last]]
    line = lambda c: f"  {c[0]:>5} {c[2]:6.1f} {c[4]:6.1f} {c[4] - c[2]:6.1f}  {c[1][:160]}"   # noqa: E731
    lines += ["", f"the {last} children that ended last (worker, start, stop, seconds, what):"]
    lines += [line(c) for c in sorted(children, key=lambda c: c[4])[-last:]]
    lines += ["", f"the {last} longest children:"]
    lines += [line(c) for c in sorted(children, key=lambda c: c[4] - c[2])[-last:]]
    return lines


def _rows(child: list) -> list[str]:
    """The rows a recorded child ran ("tool: row, row, ..." names them)."""
    return child[1].partition(": ")[2].split(", ")


def table(rows: list[dict], total: dict | None = None) -> list[str]:
    header = ["suite", "tests", *COLUMNS, "result"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    total = total or {"suite": "**all**", "tests": sum(r["tests"] for r in rows),
                      **{c: sum(r[c] for r in rows) for c in COLUMNS}, "summary": ""}
    for r in rows + [total]:
        cells = [r["suite"], str(r["tests"]), *(f"{r[c]:.1f}" for c in COLUMNS), r["summary"]]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("suites", nargs="*", default=list(SUITES), help=f"default: {' '.join(SUITES)}")
    parser.add_argument("--profile", default="dev", help="gemmcheck profile (default: dev)")
    parser.add_argument("--cold", action="store_true", help="each suite starts from an empty build cache")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the rows as JSON")
    parser.add_argument("--read", type=Path, nargs="+", metavar="PHASES",
                        help="run nothing: the table of these --gemm-phases files, summed")
    parser.add_argument("--timeline", type=Path, metavar="PHASES",
                        help="run nothing: when each suite of this --gemm-phases file's run ran")
    args = parser.parse_args(argv)
    if args.timeline:
        if not args.timeline.is_file():
            parser.error(f"--timeline: no such file: {args.timeline}")
        print("\n".join(timeline(json.loads(args.timeline.read_text()))))
        return 0
    if args.read:
        missing = [str(p) for p in args.read if not p.is_file()]
        if missing:
            parser.error(f"--read: no such file: {', '.join(missing)}")
        rows, total = read_rows(args.read)
        print(f"{len(args.read)} --gemm-phases files, seconds (a suite's wall: its tests' summed time)")
        for line in table(rows, total):
            print(line)
        return 0
    rows = [run_suite(s, args.profile, extra, cold=args.cold) for s in args.suites]
    print(f"profile {args.profile}, {'cold' if args.cold else 'warm'} build cache, seconds "
          f"(phases: exclusive time summed over tests){' , pytest ' + ' '.join(extra) if extra else ''}")
    for line in table(rows):
        print(line)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return max(r["exit"] for r in rows if r["exit"] != 5) if any(r["exit"] not in (0, 5) for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
