"""The verdict summary: reports/verdicts.json (schema in docs/report.md), its table,
and reading back the files pytest-xdist workers write."""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
from collections import Counter
from pathlib import Path

from gemmcheck.report.jsonable import json_default as _json_default
from gemmcheck.tables import format_table
from gemmcheck.verdict import Defect, defects as registry

SCHEMA_VERSION = 1


def summarize(instances, verdicts, skips: dict | None = None) -> list[dict]:
    """Per instantiation: how many checks, which defects (with counts), and whether that is
    what the catalog declares. ``instances``: every instantiation the run selected; ``skips``:
    instance id -> Counter of its skipped tests' reasons, for why one was not checked."""
    by_id: dict[str, list] = {}
    for v in verdicts:
        by_id.setdefault(v.instance, []).append(v)
    rows, seen = [], set()
    known = {i.id: i for i in instances}
    for inst_id in [i.id for i in instances] + [v.instance for v in verdicts]:
        if inst_id in seen:
            continue
        seen.add(inst_id)
        mine = by_id.get(inst_id, [])
        inst = known.get(inst_id)
        first = mine[0] if mine else None
        defects = Counter(f.defect.value if isinstance(f.defect, Defect) else str(f.defect)
                          for v in mine for f in {f.defect: f for f in v.findings}.values())
        expect = inst.spec.expect if inst else "unknown"
        declared = getattr(inst.spec, "declared_conventions", None) if inst else None
        conventions = (list(declared()) if declared
                       else list(getattr(first, "conventions", []) or []) if first else [])
        why_not = ""
        if not mine:
            verdict, status = "not_checked", "not_checked"
            why_not = why_not_checked((skips or {}).get(inst_id))
        else:
            verdict = "correct" if not defects else "defective"
            status = _status(expect, set(defects))
        rows.append({
            "kernel": inst.spec.name if inst else first.kernel,
            "instance": inst_id,
            "name_expression": inst.name_expression if inst else first.name_expression,
            "dtype": inst.dtype if inst else first.dtype,
            "tile": inst.declared_tile if inst else first.tile,   # None: the kernel has no tile
            "expect": expect,
            "verdict": verdict,
            "causes": causes(mine),
            "defects": dict(sorted(defects.items())),
            "conventions": conventions,
            "notes": [n for v in mine for n in getattr(v, "notes", [])],
            "checks": len(mine),
            "checks_failed": sum(1 for v in mine if v.findings),
            "status": status,
            "why_not_checked": why_not,
        })
    return rows


def why_not_checked(reasons: Counter | None) -> str:
    """Why an instantiation got no verdict, from its skipped tests' reasons: the most frequent
    kind (reasons alike but for their numbers: the shapes), one reason of that kind, and how
    many of the skipped tests it stands for. "" when none of its tests was skipped (none ran)."""
    if not reasons:
        return ""
    kinds, example = Counter(), {}
    for reason, count in reasons.items():
        kind = re.sub(r"\d+", "#", reason)
        kinds[kind] += count
        example.setdefault(kind, reason)
    kind, count = kinds.most_common(1)[0]
    return f"{example[kind]} ({count} of its {sum(reasons.values())} skipped tests)"


def _root(verdict) -> Defect | None:
    """The most specific defect among one check's findings (the registry's priority)."""
    found = {Defect(f.defect) for f in verdict.findings}
    return next((d for d in registry.priority() if d in found), None)


def _points_elsewhere(verdict) -> bool:
    """Whether the check's finding only points at the check that established its cause."""
    return all(f.details.get("explained_by") for f in verdict.findings)


def causes(verdicts) -> list[dict]:
    """Root causes first, one per bug: each check's most specific defect, and a defect that
    another one found in the same instantiation explains (the registry's `explains`) counted
    under that one. Each cause: the defect, the shape and the check that first established
    it (not one that points at it), and how many checks (tests) it accounts for; most
    specific first."""
    rooted = [(v, _root(v)) for v in verdicts]
    rooted = [(v, d) for v, d in rooted if d is not None]
    present = {d for _, d in rooted}
    explains = registry.explains()
    owner = {}
    for d in registry.priority():
        if d in present:
            owner[d] = next((e for e in registry.priority() if e in present and e != d
                             and d in explains.get(e, ()) and owner.get(e) == e), d)
    out = []
    for cause in [d for d in registry.priority() if owner.get(d) == d]:
        accounted = [v for v, d in rooted if owner[d] == cause]
        establishing = [v for v, d in rooted if d == cause and not _points_elsewhere(v)] or accounted
        first = establishing[0]
        # a test's hypothesis examples and shrinking replays are many verdicts of one check
        out.append({"defect": cause.value, "shape": first.problem, "test": first.test,
                    "checks": len({v.test or id(v) for v in accounted}),
                    "established": any(not _points_elsewhere(v) for v, d in rooted if d == cause)})
    return out


SYMPTOMS_ONLY = "symptoms_only"


def _status(expect: str, found: set[str]) -> str:
    """as_expected: a reference with no defect, or a broken variant showing its declared one.
    symptoms_only: a broken variant showing only what its declared class explains (a declared
    race seen as wrong values by a run without the hazards suite): consistent, not
    established. unexpected: anything else."""
    if expect == "correct":
        return "as_expected" if not found else "unexpected"
    if expect in found:
        return "as_expected"
    try:
        explained = {d.value for d in registry.explains().get(Defect(expect), ())}
    except ValueError:       # an expect value that is no defect class
        explained = set()
    return SYMPTOMS_ONLY if found and found <= explained else "unexpected"


def verdicts_document(instances, verdicts, *, run_info: dict | None = None, skips: dict | None = None) -> dict:
    """reports/verdicts.json (schema in docs/report.md)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "generated": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "run": run_info or {},
        "instances": summarize(instances, verdicts, skips),
        "verdicts": [v.to_json() for v in verdicts],
    }


def write_verdicts(path: Path, document: dict) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(document, indent=2, default=_json_default) + "\n")
    os.replace(tmp, path)


def verdict_table(rows: list[dict]) -> list[str]:
    """The terminal summary: one line per instantiation, and one more per further root cause
    (each cause with the shape that first showed it and the checks it accounts for)."""
    header = ("instantiation", "expect", "verdict", "checks", "status")
    table = [header]
    for r in sorted(rows, key=lambda r: (r["expect"] != "correct", r["kernel"], r["dtype"], r["tile"] or 0)):
        lines = [f"{c['defect']} ({c['shape']}): {c['checks']} check{'s' if c['checks'] != 1 else ''}"
                 for c in r.get("causes", [])]
        if r["status"] == "not_checked":
            lines = ["not checked (see below)"]
        elif not lines:
            lines = [(", ".join(f"{d} x{n}" for d, n in r["defects"].items()) if r["defects"]
                      else r["verdict"])]
        if r.get("conventions"):
            lines[0] += f" [declared: {', '.join(r['conventions'])}]"
        table.append((r["instance"], r["expect"], lines[0], str(r["checks"]), r["status"]))
        table += [("", "", line, "", "") for line in lines[1:]]
    return format_table(table[0], table[1:], align_numbers=False)


def worker_file(path: Path, worker: str) -> Path:
    """Where a part of the session (pytest-xdist worker ``worker``, or a re-run child) writes
    its share of the file at ``path``; the session merges the parts (worker_parts)."""
    path = Path(path)
    return path.with_name(f"{path.stem}-{worker}.json")


def worker_parts(path: Path, since: float, *, remove_stale: bool = False) -> list[dict]:
    """The JSON documents the session's parts wrote next to ``path`` after ``since`` (a
    time.time()); their files are removed, and with ``remove_stale`` the older ones too (an
    interrupted run's)."""
    path = Path(path)
    docs = []
    for part in sorted(path.parent.glob(f"{path.stem}-gw*.json")):
        fresh = part.stat().st_mtime >= since
        if fresh:
            docs.append(json.loads(part.read_text()))
        if fresh or remove_stale:
            part.unlink()
    return docs


def read_worker_verdicts(path: Path, since: float) -> list:
    """The verdicts the session's parts wrote next to ``path`` after ``since``, as Verdict
    objects; their files are removed."""
    from gemmcheck.verdict import Finding, Verdict

    out = []
    for doc in worker_parts(path, since):
        for v in doc["verdicts"]:
            findings = [Finding(**{**f, "defect": Defect(f["defect"]),
                                   "where": tuple(f["where"]) if f["where"] else None})
                        for f in v.pop("findings")]
            out.append(Verdict(**v, findings=findings))
    return out


def run_info(gemm, exitstatus) -> dict:
    """The "run" object of verdicts.json: what selected and ran the kernels."""
    from gemmcheck.backends import device

    return {"profile": gemm.profile.name, "backend": gemm.backend_name,
            "device": device.cuda_device()[1], "catalogs": [str(c) for c in gemm.catalogs],
            "exit_status": int(exitstatus)}


NOT_CHECKED_SHOWN = 10   # not-checked instantiations named one per line; verdicts.json has them all


def summary_lines(rows: list[dict]) -> list[str]:
    """The terminal summary: the table of checked instantiations and of those whose tests were
    all skipped (not checked, each with why), and how many are not as declared. An
    instantiation none of whose tests ran (deselected) is left out."""
    checked = [r for r in rows if r["status"] != "not_checked"]
    if not checked:   # (a run of the compile suite alone, say: the skip reasons say why)
        return [f"no instantiation was checked ({len(rows)} selected); see the skip reasons above"]
    unchecked = [r for r in rows if r["status"] == "not_checked" and r.get("why_not_checked")]
    unexpected = [r["instance"] for r in checked if r["status"] == "unexpected"]
    symptoms = [r["instance"] for r in checked if r["status"] == SYMPTOMS_ONLY]
    lines = verdict_table(checked + unchecked) + [
        f"{len(checked)} instantiations checked, {len(unexpected)} not as the catalog declares"
        + (f": {', '.join(unexpected)}" if unexpected else "")
        + (f"; {len(symptoms)} showed only symptoms of the declared defect, which the suite that "
           f"names it (hazards) did not establish in this run: {', '.join(symptoms)}" if symptoms else "")
        + (f"; {len(unchecked)} not checked: every test that would judge it skipped" if unchecked else "")]
    lines += [f"not checked: {r['instance']}: {r['why_not_checked']}" for r in unchecked[:NOT_CHECKED_SHOWN]]
    if len(unchecked) > NOT_CHECKED_SHOWN:
        lines.append(f"... and {len(unchecked) - NOT_CHECKED_SHOWN} more not checked (why_not_checked in verdicts.json)")
    return lines
