# gemmcheck's options and fixtures come from its plugin, installed as the pytest11
# entry point `gemmcheck.pytest_plugin.plugin` (pyproject.toml). Run from a bare source tree
# (PYTHONPATH=. pytest, no install) the entry point is absent: load it by name.
from importlib.metadata import entry_points

if not any(ep.value == "gemmcheck.pytest_plugin.plugin" for ep in entry_points(group="pytest11")):
    pytest_plugins = ["gemmcheck.pytest_plugin.plugin"]
