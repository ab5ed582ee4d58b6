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


# -- instantiations lost anywhere in the run -------------------------------------------------
# A crash, hang or compile error of an instantiation costs one failure in the run, not one per
# worker that meets it: the first process to fail a test with it records it here; the others
# skip that instantiation's tests naming that test (build_plugin). A worker that lost its CUDA
# context also leaves its name here before it ends (lost_context_plugin), for the controller.

def _lost_key(instance_id: str) -> str:
    return f"lost {instance_id}"


def first_lost(config: pytest.Config, instance_id: str, lost):
    """`lost` when this process is the run's first to lose `instance_id` (or not under xdist),
    else the first one's."""
    shared = once(config)
    return lost if shared is None else shared.first(_lost_key(instance_id), lost)


def lost_elsewhere(config: pytest.Config, instance_id: str):
    """What another process of the run recorded for `instance_id` (first_lost), or None."""
    shared = once(config)
    if shared is None:
        return None
    done, lost = shared.published(_lost_key(instance_id))
    return lost if done else None


def _left_key(workerid: str) -> str:
    return f"left {workerid}"


def leaving(config: pytest.Config, test: str) -> None:
    """This worker ends on purpose (its CUDA context was lost in `test`): said before it ends."""
    shared = once(config)
    if shared is not None:
        shared.first(_left_key(config.workerinput["workerid"]), test)


def left(config: pytest.Config, workerid: str) -> str | None:
    """The controller's view: the test in which worker `workerid` lost its context before it
    ended on purpose, or None (it crashed)."""
    if FOLDER not in config.stash:
        return None
    done, test = Once(config.stash[FOLDER]).published(_left_key(workerid))
    return test if done else None
