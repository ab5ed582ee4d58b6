"""The one text-table formatter: every table the suite prints or attaches goes through it.

Columns are as wide as their widest cell, two spaces apart. Numbers (cells that
start with a digit, a sign or a dot followed by a digit) are right-aligned so
their magnitudes line up; words are left-aligned. Trailing blanks are dropped.
"""

from __future__ import annotations

import re
from typing import Iterable, Sequence

_NUMBER = re.compile(r"^[-+]?\.?\d")


def format_table(header: Sequence[str], rows: Iterable[Sequence[object]], *,
                 align_numbers: bool = True) -> list[str]:
    """Lines of a table: the header, then one line per row. Cells are shown with str()."""
    header = tuple(str(c) for c in header)
    body = [tuple(str(c) for c in row) for row in rows]
    for n, row in enumerate(body):
        if len(row) != len(header):
            raise ValueError(f"table row {n + 1} has {len(row)} cells, the header {len(header)}: {row!r}")
    widths = [max(len(r[c]) for r in [header, *body]) for c in range(len(header))]

    def line(row, numeric: bool) -> str:
        cells = [cell.rjust(w) if numeric and c and _NUMBER.match(cell) else cell.ljust(w)
                 for c, (cell, w) in enumerate(zip(row, widths))]
        return "  ".join(cells).rstrip()

    return [line(header, False)] + [line(row, align_numbers) for row in body]
