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
