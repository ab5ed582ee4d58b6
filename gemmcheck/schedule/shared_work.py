"""Work a run's pytest-xdist workers do once for all of them (gemmcheck.judge.once): the
controller makes the run's folder and names it to each worker (once_plugin removes it at
the end); `once(config)` is a worker's handle on it (None in a session without workers:
nothing to share)."""

from __future__ import annotations

import pytest

from gemmcheck.judge.once import Once, make_folder

WORKER_ONCE = "gemm_once"            # workerinput: the run's folder
FOLDER = pytest.StashKey[str]()      # the controller's folder
ONCE = pytest.StashKey[Once]()       # a worker's handle


def worker_input(config: pytest.Config) -> dict:
    """What the controller adds to every worker's workerinput (its folder, made once)."""
    if FOLDER not in config.stash:
        config.stash[FOLDER] = make_folder()
    return {WORKER_ONCE: config.stash[FOLDER]}


def once(config: pytest.Config) -> Once | None:
    """This worker's handle on the run's shared work; None outside pytest-xdist workers."""
    if ONCE not in config.stash:
        folder = getattr(config, "workerinput", {}).get(WORKER_ONCE)
        config.stash[ONCE] = Once(folder) if folder else None
    return config.stash[ONCE]
