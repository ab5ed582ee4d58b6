"""The layout docs/layout.md describes: the pytest wiring (gemmcheck/pytest_plugin) calls the
run scheduling (gemmcheck/schedule), never the other way round, and holds only wiring."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# What the pytest wiring is made of: hook implementations, fixtures and options (plugin.py and
# the suite plugins), the session object and gemmcheck's own hook specifications.
WIRING = ("__init__.py", "plugin.py", "session.py", "hookspecs.py")


def imported_modules(source: str) -> set[str]:
    """Every module `source` imports, at the top or inside a function, by its dotted name
    (`from a import b` counts as a and a.b)."""
    tree = ast.parse(source)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return found


def test_imported_modules_sees_imports_inside_functions_too():
    source = "import os\ndef f():\n    from gemmcheck.pytest_plugin import session\n"
    assert imported_modules(source) == {"os", "gemmcheck.pytest_plugin", "gemmcheck.pytest_plugin.session"}


def test_the_schedule_never_imports_the_pytest_wiring():
    paths = sorted((ROOT / "gemmcheck" / "schedule").glob("*.py"))
    assert len(paths) >= 8, paths   # the glob still finds the package
    for path in paths:
        wiring = {m for m in imported_modules(path.read_text()) if m.startswith("gemmcheck.pytest_plugin")}
        assert not wiring, (f"gemmcheck/schedule/{path.name} imports {sorted(wiring)}: the plugins call "
                            "the schedule, not the other way round; pass what it needs as arguments")


def test_the_pytest_plugin_package_holds_only_wiring():
    names = sorted(p.name for p in (ROOT / "gemmcheck" / "pytest_plugin").glob("*.py"))
    assert "plugin.py" in names, names
    other = [n for n in names if n not in WIRING and not n.endswith("_plugin.py")]
    assert not other, (f"gemmcheck/pytest_plugin holds {other}: pytest's hooks, fixtures and options "
                       "live there; what they call goes to its own package (run scheduling: "
                       "gemmcheck/schedule)")
