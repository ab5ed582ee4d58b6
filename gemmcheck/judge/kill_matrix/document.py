"""The matrix as a document and as text: its JSON, documents merged from several processes, the table."""

from __future__ import annotations

from gemmcheck.tables import format_table
from gemmcheck.judge.kill_matrix.rows import (COLUMN_TITLES, HARDWARE, SANITIZER_NOT_APPLICABLE,
                                              SANITIZER_ON_SIMULATOR, SIMULATOR, Row)
from gemmcheck.judge.kill_matrix.settings import Settings


def table(rows) -> list[str]:
    """The matrix as text: one line per row (Row objects, or rows of a document's JSON)."""
    rows = [r.to_json() if isinstance(r, Row) else r for r in rows]
    detectors = {r["plain"]["detectors"] for r in rows}
    first = COLUMN_TITLES[detectors.pop()] if len(detectors) == 1 else "first column"
    header = ("instantiation", "declared", first, "with sanitizer", "result", "s")
    return format_table(header, [(r["instance"], r["declared"], r["plain"]["label"], r["with_sanitizer"]["label"],
                                  r["status"], f"{r['seconds']:.1f}") for r in rows])


def merge(documents, order=()) -> dict:
    """One document from several (pytest-xdist workers each write the rows they ran): the
    first document's settings, every row once, in `order` (instance ids) where given."""
    documents = [d for d in documents if d]
    if not documents:
        return {}
    rows = {r["instance"]: r for d in documents for r in d["rows"]}
    rank = {inst_id: n for n, inst_id in enumerate(order)}
    merged = dict(documents[0])
    merged["rows"] = sorted(rows.values(), key=lambda r: (rank.get(r["instance"], len(rank)), r["instance"]))
    merged["seconds"] = round(sum(r["seconds"] for r in merged["rows"]), 1)
    return merged


def runs_on(rows: list[Row], settings: Settings) -> str:
    """The backend the rows ran on: the simulator for simulator rows, else the option resolved."""
    from gemmcheck import backends

    if rows and all(r.plain.detectors == SIMULATOR for r in rows):
        return "cpu-sim"
    return backends.resolve(settings.backend_name)


def document(rows: list[Row], settings: Settings) -> dict:
    simulated = bool(rows) and all(r.plain.detectors == SIMULATOR for r in rows)
    if simulated:
        tool = f"{SANITIZER_NOT_APPLICABLE}: {SANITIZER_ON_SIMULATOR}"
        sizes = {"race_sizes": [], "schedules": list(settings.schedules),
                 "address_check": settings.address_check}
    else:
        tool = settings.sanitizer_exe or f"not run: {settings.sanitizer_note}"
        sizes = {"race_sizes": list(settings.race_sizes), "race_repeats": settings.race_repeats,
                 "race_locator": (f"cpu-sim on the small problems, schedules {', '.join(settings.schedules)}, "
                                  "for rows whose plain detectors show a race of unknown place")}
    return {"schema": 1,
            "settings": {**sizes, "backend": runs_on(rows, settings), "backend_option": settings.backend_name,
                         "detectors": SIMULATOR if simulated else HARDWARE,
                         "sanitizer": tool, "tools": [] if simulated else list(settings.tools),
                         "hang_timeout_s": settings.hang_timeout},
            "rows": [r.to_json() for r in rows]}
