"""The kernel overview, the report's first screen: which kernels are correct and what is wrong
with the others, read from what the run wrote (reports/verdicts.json, reports/kill_matrix.json,
reports/performance/, the results' environment.properties) and linked to the allure test that
established each cause.

Allure 3 addresses a test result by ``#<id>`` in the report's URL, where the id is the md5 of
the result file's ``uuid`` (@allurereport/core, store/convert.js); ``report_ids`` computes it
from the results directory, so the links hold in the multi-file and the single-file report.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from gemmcheck.report.environment import read_properties

VERDICTS = Path("verdicts.json")
KILL_MATRIX = Path("kill_matrix.json")
PERFORMANCE = Path("performance")
MATRIX_TEST = "test_kill_matrix"     # suites/hazards/test_kill_matrix.py: one test per matrix row

# Failing rows first: a kernel not as its catalog declares, then one seen only through the
# symptoms of its declared defect, then the broken variants caught as declared; unchecked last.
_ORDER = {"unexpected": 0, "symptoms_only": 1, "as_expected": 3, "not_checked": 4}


@dataclass
class Overview:
    """Everything the first screen shows, gathered once."""

    generated: str                                   # when the run wrote verdicts.json
    run: dict
    rows: list[dict]                                 # verdicts.json "instances", failing first
    links: dict[str, str] = field(default_factory=dict)      # test node id -> allure result id
    matrix: dict | None = None                       # kill_matrix.json
    perf: dict | None = None                         # performance/perf.json
    perf_table: str | None = None                    # performance/summary.txt
    rooflines: list[tuple[str, bytes]] = field(default_factory=list)
    environment: dict[str, str] = field(default_factory=dict)
    previous: dict | None = None                     # the previous run's entry (overview_history)
    earlier: list[str] = field(default_factory=list)  # summaries left by an earlier run: not shown

    def link(self, nodeid: str | None) -> str | None:
        """The report's fragment for a test (``#<id>``), or None when it has no result here."""
        found = self.links.get(nodeid or "")
        return f"#{found}" if found else None

    def matrix_link(self, instance: str) -> str | None:
        return self.link(next((n for n in self.links if n.endswith(f"::{MATRIX_TEST}[{instance}]")), None))


def report_id(uuid: str) -> str:
    """The id Allure 3 gives the test result whose file carries ``uuid``."""
    return hashlib.md5(uuid.encode()).hexdigest()


def nodeid_of(result: dict) -> str | None:
    """The pytest node id of an allure-pytest result: its title path (the file's path segments,
    then any classes) and its name."""
    path = result.get("titlePath") or []
    files = [n for n, part in enumerate(path) if part.endswith(".py")]
    if not files or not result.get("name"):
        return None
    cut = files[-1] + 1
    return "::".join(["/".join(path[:cut]), *path[cut:], result["name"]])


def report_ids(results: Path) -> dict[str, str]:
    """Test node id -> the allure report's id of its result (the latest, when a test ran twice)."""
    found: dict[str, tuple[int, str]] = {}
    for path in Path(results).glob("*-result.json"):
        try:
            result = json.loads(path.read_text())
        except (OSError, ValueError):
            continue   # python -m gemmcheck.report check names a malformed file
        nodeid, uuid = nodeid_of(result), result.get("uuid")
        if nodeid and uuid:
            stop = int(result.get("stop") or 0)
            if nodeid not in found or stop >= found[nodeid][0]:
                found[nodeid] = (stop, report_id(uuid))
    return {nodeid: rid for nodeid, (_, rid) in found.items()}


def row_rank(row: dict) -> tuple:
    status = row.get("status", "not_checked")
    rank = _ORDER.get(status, 0)
    if status == "as_expected" and row.get("verdict") == "defective":
        rank = 2
    tile = row.get("tile")
    return (rank, row.get("kernel", ""), row.get("dtype", ""), tile if isinstance(tile, int) else 0,
            row.get("instance", ""))


def best_tflops(perf: dict | None) -> dict[str, dict]:
    """Instance id -> {"tflops", "n"}: its rate at the largest N it was timed at (perf.json keys
    are ``<instance>-N<size>``); a wrong or refused measurement has no rate."""
    out: dict[str, dict] = {}
    for key, data in ((perf or {}).get("kernels") or {}).items():
        instance, sep, size = key.rpartition("-N")
        if not sep or not size.isdigit() or not isinstance(data, dict) or data.get("tflops") is None:
            continue
        if data.get("impossible") or data.get("last_check_nans") or (data.get("last_check_ratio") or 0) > 1:
            continue
        if instance not in out or int(size) > out[instance]["n"]:
            out[instance] = {"tflops": float(data["tflops"]), "n": int(size)}
    return out


def _read_json(path: Path) -> dict | None:
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except ValueError as exc:
        raise SystemExit(f"{path}: not JSON ({exc}); rerun the suite that writes it") from None


def rooflines(performance: Path) -> list[tuple[str, bytes]]:
    """The roofline plots of a run: performance/roofline.png, or each pytest-xdist part's."""
    found = [performance / "roofline.png"] if (performance / "roofline.png").is_file() else sorted(
        performance.glob("parts/*/roofline.png"))
    return [(str(p.relative_to(performance.parent)), p.read_bytes()) for p in found]


def _started(run: dict) -> float | None:
    """When the run began (verdicts.json's run.started; a merged run's earliest part), or None."""
    started = run.get("started")
    stamps = started if isinstance(started, list) else [started]
    try:
        return min(_dt.datetime.fromisoformat(s).timestamp() for s in stamps if s) if any(stamps) else None
    except ValueError:
        return None


def _earlier(path: Path, started: float | None) -> bool:
    """Whether ``path`` was written before this run began: another run's, left in reports/."""
    return started is not None and path.exists() and path.stat().st_mtime < started


def collect(results: Path, reports: Path) -> Overview | None:
    """The overview of the run whose allure results are in ``results`` and whose summaries are in
    ``reports`` (verdicts.json, kill_matrix.json, performance/); None without a verdicts.json.
    A kill matrix or performance summary older than the run is an earlier run's (this one did
    not run that suite): it is named, not shown."""
    results, reports = Path(results), Path(reports)
    verdicts = _read_json(reports / VERDICTS)
    if verdicts is None:
        return None
    run = verdicts.get("run", {})
    started = _started(run)
    earlier = [p for p in (reports / KILL_MATRIX, reports / PERFORMANCE / "perf.json") if _earlier(p, started)]
    perf = None if reports / PERFORMANCE / "perf.json" in earlier else _read_json(reports / PERFORMANCE / "perf.json")
    rates = best_tflops(perf)
    rows = []
    for row in verdicts.get("instances", []):
        row = dict(row)
        if row["instance"] in rates:
            row["performance"] = rates[row["instance"]]
        rows.append(row)
    rows.sort(key=row_rank)
    summary = reports / PERFORMANCE / "summary.txt"
    environment = results / "environment.properties"
    return Overview(
        generated=verdicts.get("generated", ""), run=run, rows=rows, links=report_ids(results),
        matrix=None if reports / KILL_MATRIX in earlier else _read_json(reports / KILL_MATRIX),
        perf=perf, perf_table=summary.read_text() if perf is not None and summary.is_file() else None,
        rooflines=rooflines(reports / PERFORMANCE) if perf is not None else [],
        environment=read_properties(environment.read_text()) if environment.is_file() else {},
        earlier=[str(p.relative_to(reports)) for p in earlier])
