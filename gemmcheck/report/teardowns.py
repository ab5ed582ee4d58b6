"""Fixture teardowns in the allure report, named for what they do.

allure-pytest records each finalizer a fixture holds after its setup as a teardown named
``<fixture>::<function name>``. Two of them are no user's teardown by that name: pytest
registers, for every fixture, a lambda that only runs its post-finalizer hook (every fixture of
every test got a ``matrix_row::<lambda>``, ``reference::<lambda>``, ... teardown), and a yield
fixture's teardown is a ``functools.partial``, which has no name (``gemm::1``).
"""

from __future__ import annotations

import functools

try:
    from allure_commons._allure import fixture as _AllureFixture
except ImportError:  # pragma: no cover - allure-pytest not installed: nothing is recorded
    _AllureFixture = None

YIELD_TEARDOWN = "_teardown_yield_fixture"   # pytest's function that resumes a yield fixture


def _is_pytest_bookkeeping(function) -> bool:
    """pytest's own lambda that calls pytest_fixture_post_finalizer: no teardown of the fixture."""
    return getattr(function, "__name__", "") == "<lambda>" and getattr(function, "__module__", "") == "_pytest.fixtures"


def teardown_name(fixture: str, function) -> str | None:
    """The report's name for a finalizer of ``fixture``, or None to keep allure's."""
    inner = function.func if isinstance(function, functools.partial) else function
    name = getattr(inner, "__name__", "")
    if name in (YIELD_TEARDOWN, "<lambda>", ""):
        return f"{fixture} (teardown)"
    if isinstance(function, functools.partial):
        return f"{fixture}::{name}"
    return None


def name_teardowns(fixturedef) -> None:
    """After allure-pytest wrapped ``fixturedef``'s finalizers: unwrap pytest's bookkeeping and
    rename the teardowns whose function has no telling name."""
    if _AllureFixture is None:
        return
    finalizers = getattr(fixturedef, "_finalizers", None) or []
    for index, finalizer in enumerate(finalizers):
        if not isinstance(finalizer, _AllureFixture):
            continue
        function = finalizer._fixture_function
        if _is_pytest_bookkeeping(function):
            finalizers[index] = function
            continue
        name = teardown_name(fixturedef.argname, function)
        if name:
            finalizer._name = name
