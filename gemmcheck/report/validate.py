"""Is an allure-results directory well formed? (`python -m gemmcheck.report check`)"""

from __future__ import annotations

import json
import re
from pathlib import Path

REQUIRED_LABELS = ("epic", "feature", "story", "severity")
INSTANCE_LABELS = ("kernel", "instantiation", "tag")


def validate_results(results_dir: Path) -> list[str]:
    """Problems with an allure-results directory, one line each (empty: well formed).

    Every result parses and has epic/feature/story/severity labels; a result with an
    instantiation parameter also has kernel/instantiation/tag labels; every attachment a
    result or container names exists; environment.properties and categories.json exist.
    """
    results_dir = Path(results_dir)
    problems: list[str] = []
    if not results_dir.is_dir():
        return [f"{results_dir}: not a directory"]
    results = sorted(results_dir.glob("*-result.json"))
    if not results:
        problems.append(f"{results_dir}: no *-result.json files")
    for name in ("environment.properties", "categories.json"):
        if not (results_dir / name).is_file():
            problems.append(f"{results_dir}: {name} missing")
    if (results_dir / "categories.json").is_file():
        try:
            cats = json.loads((results_dir / "categories.json").read_text())
            for c in cats:
                re.compile(c["messageRegex"])
        except (ValueError, KeyError, TypeError, re.error) as exc:
            problems.append(f"categories.json: {type(exc).__name__}: {exc}")

    def attachments(node):
        for a in node.get("attachments", []) or []:
            yield a
        for key in ("steps", "befores", "afters"):
            for child in node.get(key, []) or []:
                yield from attachments(child)

    for path in results + sorted(results_dir.glob("*-container.json")):
        try:
            data = json.loads(path.read_text())
        except ValueError as exc:
            problems.append(f"{path.name}: not JSON: {exc}")
            continue
        for a in attachments(data):
            if not (results_dir / a.get("source", "")).is_file():
                problems.append(f"{path.name}: attachment {a.get('name')!r} -> {a.get('source')} missing")
        if not path.name.endswith("-result.json"):
            continue
        labels = {label["name"] for label in data.get("labels", [])}
        missing = [n for n in REQUIRED_LABELS if n not in labels]
        params = {p["name"] for p in data.get("parameters", [])}
        # An instance-parametrized test, unless pytest found no instance for it ([NOTSET]).
        if "kernel" in labels or (params & {"reference", "broken", "any_kernel"}
                                  and not data.get("name", "").endswith("[NOTSET]")):
            missing += [n for n in INSTANCE_LABELS if n not in labels]
            missing += [f"parameter {n}" for n in ("kernel", "instantiation", "dtype", "TILE", "profile")
                        if n not in params]
        if missing:
            problems.append(f"{path.name} ({data.get('name')}): missing {', '.join(missing)}")
        if data.get("status") not in ("passed", "failed", "broken", "skipped", "unknown"):
            problems.append(f"{path.name} ({data.get('name')}): status {data.get('status')!r}")
    return problems


