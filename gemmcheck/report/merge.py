"""One report from several runs: ``python -m gemmcheck.report.merge OUT DIR...``.

Each DIR is the reports/ directory of one runner (a --gemm-shard part, a host, a GPU):
verdicts.json, kill_matrix.json, performance/perf.json, durations.json and
allure-results/. OUT receives the same layout, as if one run had done all the work:
verdicts are pooled and every instantiation's status is judged again over all of them;
kill-matrix rows, timed kernels and durations are joined; allure results are copied.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import filecmp
import json
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

from gemmcheck import report
from gemmcheck.verdict import Defect, Finding, Verdict

VERDICTS = Path("verdicts.json")
KILL_MATRIX = Path("kill_matrix.json")
PERF = Path("performance") / "perf.json"
DURATIONS = Path("durations.json")
ALLURE = Path("allure-results")
# Files every runner writes once per results directory: the first runner's copy is kept.
ALLURE_SINGLETONS = ("environment.properties", "categories.json", "executor.json")


class MergeError(ValueError):
    """Inputs that cannot be one report; the message names the file and the conflict."""


def _defect(value: str):
    try:
        return Defect(value)
    except ValueError:
        return value   # a class this version does not know still counts, under its name


def verdict_from_json(data: dict) -> Verdict:
    findings = [Finding(**{**f, "defect": _defect(f["defect"]),
                           "where": tuple(f["where"]) if f.get("where") else None})
                for f in data.get("findings", [])]
    return Verdict(**{k: v for k, v in data.items() if k != "findings"}, findings=findings)


def _instance_of_row(row: dict):
    """What report.summarize needs of an Instance, from a verdicts.json row."""
    return SimpleNamespace(id=row["instance"], name_expression=row["name_expression"],
                           dtype=row["dtype"], tile=row["tile"], declared_tile=row["tile"],
                           spec=SimpleNamespace(name=row["kernel"], expect=row["expect"]))


def merge_verdicts(docs: list[dict]) -> dict:
    """One verdicts.json from several: every verdict kept, each instantiation judged again
    over all of them (checked in any part is checked)."""
    if not docs:
        raise MergeError("no verdicts.json to merge")
    versions = {d.get("schema_version") for d in docs}
    if len(versions) != 1:
        raise MergeError(f"verdicts.json schema versions differ: {sorted(map(str, versions))}")
    instances, seen = [], set()
    for doc in docs:
        for row in doc["instances"]:
            if row["instance"] not in seen:
                seen.add(row["instance"])
                instances.append(_instance_of_row(row))
    verdicts = [verdict_from_json(v) for doc in docs for v in doc["verdicts"]]
    merged = report.verdicts_document(instances, verdicts, run_info=_merged_run(docs))
    return merged


def _merged_run(docs: list[dict]) -> dict:
    runs = [d.get("run", {}) for d in docs]
    out = dict(runs[0])
    for key in {k for r in runs for k in r}:
        values = [r.get(key) for r in runs]
        if key == "exit_status":
            out[key] = max((v for v in values if isinstance(v, int)), default=0)
        elif any(v != values[0] for v in values):
            out[key] = values   # e.g. two devices: keep both, in input order
    out["parts"] = len(docs)
    return out


def merge_kill_matrix(docs: list[dict]) -> dict:
    """One kill_matrix.json: the rows of every part (a row judged twice must agree)."""
    if not docs:
        raise MergeError("no kill_matrix.json to merge")
    rows: dict[str, dict] = {}
    for doc in docs:
        for row in doc["rows"]:
            old = rows.get(row["instance"])
            if old is not None and old["status"] != row["status"]:
                raise MergeError(f"kill_matrix.json: row {row['instance']} is {old['status']} in one "
                                 f"part and {row['status']} in another; rerun that row")
            rows.setdefault(row["instance"], row)
    settings = [d.get("settings", {}) for d in docs]
    out = {k: v for k, v in docs[0].items() if k not in ("rows", "seconds")}
    if any(s != settings[0] for s in settings):
        out["settings"] = {**settings[0], "parts": settings}
    out["seconds"] = round(sum(d.get("seconds", 0) for d in docs), 1)
    out["rows"] = list(rows.values())
    return out


def merge_perf(docs: list[dict]) -> dict:
    """One perf.json: every timed kernel and cuBLAS ceiling (from different devices: refused)."""
    if not docs:
        raise MergeError("no perf.json to merge")
    devices = {d.get("device") for d in docs}
    if len(devices) > 1:
        raise MergeError(f"perf.json: parts were timed on different devices ({sorted(map(str, devices))}); "
                         "their ratios are not comparable in one table")
    out = dict(docs[0])
    for key in ("kernels", "cublas"):
        joined: dict = {}
        for doc in docs:
            joined.update(doc.get(key, {}))
        out[key] = dict(sorted(joined.items()))
    return out


PERF_PARTS = "parts"   # performance/parts/<worker>/: one pytest-xdist worker's (or re-run child's) reports


def join_summaries(parts: list[tuple[str, str]]) -> str:
    """One summary.txt from several parts' (name, table text): each under its part's name (a
    part's ratios are to the cuBLAS ceilings it measured itself)."""
    return "\n".join(f"== {name} ==\n{text}" for name, text in parts)


def merge_perf_parts(out: Path, since: float) -> list[Path]:
    """out/perf.json and out/summary.txt from the parts a session's pytest-xdist workers (or a
    re-run child) wrote under out/parts/<name>/ since `since` (a time.time()): perf.json merged
    as merge_perf does, the summaries joined; each part's roofline.png stays in its folder.
    Parts older than `since` (an earlier run's) are removed. Returns the paths written and the
    parts' rooflines; [] when there are none. Raises MergeError (parts timed on different
    devices), leaving the parts as they are."""
    fresh = []
    for part in sorted(p for p in (Path(out) / PERF_PARTS).glob("*") if p.is_dir()):
        if (part / "perf.json").is_file() and (part / "perf.json").stat().st_mtime >= since:
            fresh.append(part)
        elif part.stat().st_mtime < since:
            shutil.rmtree(part, ignore_errors=True)
    if not fresh:
        return []
    merged = merge_perf([_load(part / "perf.json") for part in fresh])
    written = [Path(out) / "summary.txt", Path(out) / "perf.json"]
    written[0].write_text(join_summaries([(part.name, (part / "summary.txt").read_text())
                                          for part in fresh if (part / "summary.txt").is_file()]))
    written[1].write_text(json.dumps(merged, indent=2) + "\n")
    return written + [part / "roofline.png" for part in fresh if (part / "roofline.png").is_file()]


def copy_rooflines(parts: list[Path], out: Path) -> list[Path]:
    """Each part's performance/roofline.png into out/performance/: as roofline.png when one part
    has one, else as parts/part-<n>/roofline.png (n: the part's place in the command line), where
    the report's kernel overview finds them."""
    found = [(n, p / PERF.parent / "roofline.png") for n, p in enumerate(parts, 1)
             if (p / PERF.parent / "roofline.png").is_file()]
    targets = ([out / PERF.parent / "roofline.png"] if len(found) == 1 else
               [out / PERF.parent / PERF_PARTS / f"part-{n}" / "roofline.png" for n, _ in found])
    for (_, source), target in zip(found, targets):
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    return targets


def merge_durations(docs: list[dict]) -> dict:
    joined: dict[str, float] = {}
    for doc in docs:
        joined.update(doc.get("durations", {}))
    return {"durations": dict(sorted(joined.items()))}


def copy_allure(sources: list[Path], out: Path) -> int:
    """Copy every part's allure results into `out`; returns how many files were copied.
    Results and attachments carry UUIDs in their names; a name clash with other content
    is refused rather than overwritten."""
    out.mkdir(parents=True, exist_ok=True)
    copied = 0
    for src in sources:
        for path in sorted(p for p in src.iterdir() if p.is_file()):
            target = out / path.name
            if target.exists():
                if path.name in ALLURE_SINGLETONS or filecmp.cmp(path, target, shallow=False):
                    continue
                raise MergeError(f"{path}: {target} exists with other content; allure results "
                                 "are named by UUID, so two parts should never clash")
            shutil.copy2(path, target)
            copied += 1
    return copied


def _load(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except ValueError as exc:
        raise MergeError(f"{path}: not JSON ({exc})") from None


def merge(out: Path, parts: list[Path]) -> list[str]:
    """Merge the reports directories `parts` into `out`; returns one line per file written."""
    missing = [str(p) for p in parts if not p.is_dir()]
    if missing:
        raise MergeError(f"not a directory: {', '.join(missing)}")
    lines = []
    for rel, how in ((VERDICTS, merge_verdicts), (KILL_MATRIX, merge_kill_matrix),
                     (PERF, merge_perf), (DURATIONS, merge_durations)):
        found = [p / rel for p in parts if (p / rel).is_file()]
        if not found:
            continue
        doc = how([_load(f) for f in found])
        target = out / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if rel == VERDICTS:
            report.write_verdicts(target, doc)
        else:
            target.write_text(json.dumps(doc, indent=2) + "\n")
        lines.append(f"{target}: from {len(found)} of {len(parts)} parts")
    summaries = [(str(p), (p / PERF.parent / "summary.txt").read_text()) for p in parts
                 if (p / PERF.parent / "summary.txt").is_file()]
    if summaries:
        target = out / PERF.parent / "summary.txt"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(join_summaries(summaries))
        lines.append(f"{target}: the tables of {len(summaries)} of {len(parts)} parts")
    rooflines = copy_rooflines(parts, out)
    if rooflines:
        lines.append(f"{out / PERF.parent}: the roofline plots of {len(rooflines)} of {len(parts)} parts")
    allure = [p / ALLURE for p in parts if (p / ALLURE).is_dir()]
    if allure:
        n = copy_allure(allure, out / ALLURE)
        lines.append(f"{out / ALLURE}: {n} files from {len(allure)} parts")
    if not lines:
        raise MergeError(f"nothing to merge in {', '.join(map(str, parts))}: expected "
                         f"{VERDICTS}, {KILL_MATRIX}, {PERF} or {ALLURE}/ in each")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gemmcheck.report.merge", description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, metavar="OUT", help="reports directory to write")
    parser.add_argument("parts", type=Path, nargs="+", metavar="DIR",
                        help="reports directory of one runner (repeat)")
    args = parser.parse_args(argv)
    try:
        lines = merge(args.out, args.parts)
    except MergeError as exc:
        print(f"gemmcheck.report.merge: {exc}", file=sys.stderr)
        return 2
    for line in lines:
        print(line)
    print(f"merged {len(args.parts)} parts at {_dt.datetime.now(_dt.timezone.utc):%Y-%m-%d %H:%M} UTC")
    return 0


if __name__ == "__main__":
    sys.exit(main())
