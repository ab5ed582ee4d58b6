"""What changed since the previous run: a small history of the overview's rows
(reports/overview-history.jsonl, one line per run, kept next to Allure's own history), so the
first screen shows each kernel's previous verdict and TFLOP/s beside the current ones.

A report built again from the same run (same verdicts.json ``generated``) is not a new run: it
replaces nothing and compares with the run before it.
"""

from __future__ import annotations

import json
from pathlib import Path

# A rate that moved by this fraction or more is flagged; the nightly fails a benchmark at
# median:5% (--benchmark-compare-fail), so the overview flags what that comparison would.
TFLOPS_CHANGE = 0.05


def history_path(allure_history: Path) -> Path:
    """Where the overview's history lives: beside Allure's history file, named after it
    (reports/allure-history.jsonl -> reports/overview-history.jsonl; h.jsonl -> h-overview.jsonl)."""
    path = Path(allure_history)
    if "allure-history" in path.name:
        return path.with_name(path.name.replace("allure-history", "overview-history"))
    return path.with_name(f"{path.stem}-overview{path.suffix or '.jsonl'}")


def entry_row(row: dict) -> dict:
    """What the history keeps of one overview row: verdict, status, root causes, rate."""
    data = {"verdict": row.get("verdict"), "status": row.get("status"),
            "causes": [c["defect"] for c in row.get("causes", [])]}
    if row.get("performance"):
        data.update(tflops=row["performance"]["tflops"], n=row["performance"]["n"])
    return data


def entry(overview) -> dict:
    """One run's line: per instantiation what entry_row keeps."""
    run = {k: overview.run.get(k) for k in ("profile", "backend", "device", "catalogs") if k in overview.run}
    return {"generated": overview.generated, "run": run,
            "rows": {row["instance"]: entry_row(row) for row in overview.rows}}


def read(path: Path) -> list[dict]:
    path = Path(path)
    if not path.is_file():
        return []
    out = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except ValueError as exc:
            raise SystemExit(f"{path}:{number}: not a JSON line ({exc}); remove that line or the "
                             "file (it only holds the overview's history)") from None
    return out


def record(path: Path, current: dict) -> dict | None:
    """Append ``current`` (unless this run is there already) and return the run before it, or None."""
    runs = read(path)
    same = [n for n, run in enumerate(runs) if run.get("generated") == current["generated"]]
    before = runs[:same[-1]] if same else runs
    previous = next((run for run in reversed(before) if run.get("generated") != current["generated"]), None)
    if not same:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as out:
            out.write(json.dumps(current, sort_keys=True) + "\n")
    return previous


def changes(now: dict, before: dict | None) -> list[str]:
    """What changed for one instantiation since the previous run, in words ([] when nothing did)."""
    if before is None:
        return ["new"]
    out = []
    if (now.get("verdict"), now.get("causes")) != (before.get("verdict"), before.get("causes")):
        out.append(f"verdict was {describe(before)}")
    elif now.get("status") != before.get("status"):
        out.append(f"status was {before.get('status')}")
    rate, old = now.get("tflops"), before.get("tflops")
    if rate is not None and old and abs(rate - old) / old >= TFLOPS_CHANGE:
        out.append(f"TFLOP/s {100 * (rate - old) / old:+.1f}%")
    return out


def describe(row: dict) -> str:
    """A row of the history in a few words: ``correct``, or its causes."""
    if row.get("verdict") == "defective" and row.get("causes"):
        return ", ".join(row["causes"])
    return str(row.get("verdict"))
