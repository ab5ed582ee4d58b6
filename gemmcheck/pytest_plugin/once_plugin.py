"""The controller removes the run's folder of shared work (shared_work) at the end."""

from __future__ import annotations

import pytest

from gemmcheck.judge.once import remove_folder
from gemmcheck.schedule.shared_work import FOLDER


def pytest_unconfigure(config: pytest.Config) -> None:
    if FOLDER in config.stash:
        remove_folder(config.stash[FOLDER])
