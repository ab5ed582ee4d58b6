"""Report hooks the checks call. Placeholder: attachments are dropped until the
allure integration lands (issue 6); the signatures are the contract."""

from __future__ import annotations


def attach_text(name: str, text: str) -> None:
    """Attach a text (log, table, source excerpt) to the current test's report."""


def attach_png(name: str, png: bytes) -> None:
    """Attach a PNG image to the current test's report."""
