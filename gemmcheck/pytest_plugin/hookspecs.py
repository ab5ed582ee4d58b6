"""Hooks gemmcheck's plugins implement for each other (registered by gemmcheck.pytest_plugin.plugin)."""

from __future__ import annotations

import pytest


@pytest.hookspec(firstresult=True)
def pytest_gemm_skip_reason(config: pytest.Config, item: pytest.Item) -> str | None:
    """Why `item` cannot run in this session (it is skipped with this reason), or None.

    The one collection hook that adds skips (gemmcheck.pytest_plugin.plugin) asks every suite's plugin
    through this hook; the first reason given wins. Implement it in a suite plugin
    instead of adding another pytest_collection_modifyitems that adds skip markers.
    """


@pytest.hookspec(firstresult=True)
def pytest_gemm_work_unit(config: pytest.Config, nodeid: str) -> str | None:
    """The unit of work the test `nodeid` belongs to, or None (a unit of its own).

    Tests of one unit share a costly fixture built once per process (a kill-matrix row), so
    the two places that divide a run keep a unit together: the --gemm-shard split over hosts
    and the pytest-xdist scheduler over workers (gemmcheck.pytest_plugin.plugin).
    """


@pytest.hookspec
def pytest_gemm_before_device_timing(config: pytest.Config) -> None:
    """Called before the performance suite times anything on the GPU: end or wait for
    whatever this process started there in the background (the kill matrix's children,
    gemmcheck.pytest_plugin.hazards_plugin), so no sample shares the card with it."""


@pytest.hookspec
def pytest_gemm_backend_made(session: pytest.Session, backend) -> None:
    """Called once, when the session's backend has been made and has built the catalog, before
    any test launches on it: finish what must precede the first launch in this process (the
    isolated probe, gemmcheck.pytest_plugin.build_plugin) and start what follows it (the kill
    matrix's children, gemmcheck.pytest_plugin.hazards_plugin)."""


@pytest.hookspec
def pytest_gemm_sized_launches(config: pytest.Config, item: pytest.Item) -> list | None:
    """The large square problems `item` launches in this process: [(Instance, N)], each an
    N x N x N launch (the performance suite's sizes), or None.

    The isolated probe's small problems say nothing of a kernel that faults only at large
    sizes: gemmcheck.pytest_plugin.build_plugin launches each of these once in an isolated child
    first (the sized probe), and the session refuses those that crashed or hung there
    (gemmcheck.containment.probe.sized_findings). Every plugin's answers are taken together.
    """
