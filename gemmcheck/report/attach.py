"""Is allure recording the current test, and the attach_* calls checks make.

Each call is a no-op when allure is not recording (allure-pytest missing, no
results directory, a nested pytester session, or a hypothesis shrinking step),
so a check never needs to know whether a report is being made.
"""

from __future__ import annotations

import json

from gemmcheck.report.jsonable import json_default as _json_default

try:  # allure-pytest is optional: without it every attach_* is a no-op
    import allure
    import allure_commons
    from allure_commons.types import AttachmentType, ParameterMode
except ImportError:  # pragma: no cover - exercised on machines without allure-pytest
    allure = allure_commons = AttachmentType = ParameterMode = None


# One entry per pytest session in this process (gemmcheck.pytest_plugin.report_plugin pushes and pops it):
# a session run inside a recording one (pytester) pushes False, so its checks attach nothing
# to the outer session's current test.
_recording: list[bool] = []
# Names attached to the current test through this module (so evidence is attached once);
# reset by the report plugin when a test starts.
_attached: list[str] = []


def installed() -> bool:
    """allure-pytest (and so allure-python-commons) is importable."""
    return allure is not None


def start_session(recording: bool) -> None:
    _recording.append(recording)


def end_session() -> None:
    if _recording:
        _recording.pop()


def start_test() -> None:
    _attached.clear()


def attached_names() -> list[str]:
    """What this module attached to the current test so far."""
    return list(_attached)


def nested_in_recording_session() -> bool:
    """allure_commons' plugin manager is process-global: a session started inside another
    (pytester's in-process runs) must not write into the outer session's results."""
    if allure_commons is None:
        return False
    from allure_commons.logger import AllureFileLogger

    return any(isinstance(p, AllureFileLogger) for p in allure_commons.plugin_manager.get_plugins())


def _attach(body, name: str, attachment_type) -> None:
    allure.attach(body, name=name, attachment_type=attachment_type)
    _attached.append(name)


def active() -> bool:
    """True when an allure listener is recording the current test (and, inside a hypothesis
    test, this is the final replay of the failing example: not one of the shrinking steps)."""
    if allure_commons is None or (_recording and not _recording[-1]):
        return False
    if not allure_commons.plugin_manager.hook.attach_data.get_hookimpls():
        return False
    return _final_example()


def _final_example() -> bool:
    try:
        from hypothesis import currently_in_test_context
        from hypothesis.control import current_build_context
    except ImportError:
        return True
    return not currently_in_test_context() or bool(getattr(current_build_context(), "is_final", True))


# -- attachments ----------------------------------------------------------------------------

def attach_text(name: str, text: str) -> None:
    """Attach a text (log, table, source excerpt) to the current test's report."""
    if active():
        _attach(text, name, AttachmentType.TEXT)


def attach_png(name: str, png: bytes) -> None:
    """Attach a PNG image to the current test's report."""
    if active():
        _attach(png, name, AttachmentType.PNG)


def attach_csv(name: str, text: str) -> None:
    """Attach a CSV table (allure renders it as a table)."""
    if active():
        _attach(text, name, AttachmentType.CSV)


def attach_json(name: str, data) -> None:
    if active():
        _attach(json.dumps(data, indent=2, default=_json_default), name, AttachmentType.JSON)


def attach_sanitizer_log(tool: str, log: str) -> None:
    """Attach a compute-sanitizer log (``tool``: racecheck, synccheck, memcheck, initcheck)."""
    attach_text(f"compute-sanitizer {tool} log", log)


def attach_hypothesis_reproduction(text: str) -> None:
    attach_text("hypothesis reproduction", text)


class _Shown:
    """A parameter value allure shows as is (it quotes plain strings: 'float32')."""

    def __init__(self, text) -> None:
        self.text = str(text)

    def __repr__(self) -> str:
        return self.text


def parameter(name: str, value, *, in_history: bool = False) -> None:
    """Show a parameter on the current test; by default it does not split the test's history
    (hypothesis draws new shapes every run; the test is still the same test)."""
    if active():
        allure.dynamic.parameter(name, _Shown(value), excluded=not in_history)


def label(name: str, *values: str) -> None:
    if active() and values:
        allure.dynamic.label(name, *values)


def attach_session_text(name: str, text: str) -> None:
    """Attach a text to the whole run (allure's global attachment), not to one test."""
    if allure is not None and (not _recording or _recording[-1]):
        allure.global_attach(text, name=name, attachment_type=AttachmentType.TEXT)
