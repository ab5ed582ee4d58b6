import sys
from pathlib import Path

# tests/fakes.py is imported as a plain module by the harness's own tests.
sys.path.insert(0, str(Path(__file__).parent))

import pytest


@pytest.fixture(autouse=True)
def _not_an_xdist_worker(monkeypatch):
    """The pytest runs a test starts (pytester, subprocesses) are plain runs even when this
    one is spread by pytest-xdist: they must not inherit its worker variables
    (pytest-benchmark turns itself off and warns when it sees PYTEST_XDIST_WORKER)."""
    import os

    for name in [n for n in os.environ if n.startswith("PYTEST_XDIST_")]:
        monkeypatch.delenv(name)


@pytest.fixture(autouse=True)
def _no_context_lost(monkeypatch):
    """A test that fakes a hang or a sticky fault in the GPU backend leaves its entry in the
    process-wide list of lost contexts: the next test starts with an empty one."""
    from gemmcheck import backends

    monkeypatch.setattr(backends, "_CONTEXT_LOST", [])
