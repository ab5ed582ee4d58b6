"""A compile failure is one failure: the build test of its source fails once, with the
compiler's first errors at the user's file and line; every other test of those
instantiations is skipped with ``not compiled: see <that test>``.

Wiring only: the build itself is the backend's (``prepare`` / ``build_error``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gemmcheck.backends import KernelCompileError
from gemmcheck.contract.catalog import Instance
from gemmcheck.verdict import Defect, Finding, Verdict

BUILD_TEST = "suites/compile/test_builds.py::test_every_instantiation_of_the_source_builds"
COMPILE_ERROR = "compile_error"   # gemmcheck.verdict.defects.Defect.COMPILE_ERROR once the registry lands
MAX_LINES = 40                    # of compiler output per broken source on the terminal


def source_id(source: Path) -> str:
    return source.name


def build_test_id(instance: Instance) -> str:
    return f"{BUILD_TEST}[{source_id(instance.spec.source)}]"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "kernel_source" not in metafunc.fixturenames:
        return
    from gemmcheck.pytest_plugin.session import gemm_config   # the session's selection of instantiations

    by_source: dict[Path, list[Instance]] = {}
    for inst in gemm_config(metafunc.config).instances("any_kernel"):
        by_source.setdefault(inst.spec.source, []).append(inst)
    metafunc.parametrize("kernel_source", list(by_source.values()),
                         ids=[source_id(s) for s in by_source])


def failures(backend, instances) -> list[tuple[Instance, KernelCompileError]]:
    """Build `instances` on `backend`; the ones that did not compile, with why."""
    backend.prepare(instances)
    out = []
    for inst in instances:
        error = backend.build_error(inst)
        if error is not None:
            out.append((inst, error))
    return out


def verdicts_for(failed, test: str) -> list[Verdict]:
    """One compile_error verdict per instantiation that did not build (once the defect registry has it)."""
    defect = next((d for d in Defect if d.value == COMPILE_ERROR), None)
    if defect is None:
        return []   # until gemmcheck.verdict.defects adds COMPILE_ERROR, the failing test is the record
    return [Verdict.for_instance(inst, "build", [Finding(defect, "compiler", str(error).splitlines()[0])], test)
            for inst, error in failed]


def describe(source: Path, failed, total: int) -> str:
    """One message per broken source: which instantiations, then the first errors once."""
    first = str(failed[0][1]).splitlines()
    head = (f"{COMPILE_ERROR}: {len(failed)} of {total} instantiation(s) of {source} did not compile: "
            + ", ".join(inst.id for inst, _ in failed[:8]) + (" ..." if len(failed) > 8 else ""))
    shown = first[:MAX_LINES] + ([f"... ({len(first) - MAX_LINES} more lines)"] if len(first) > MAX_LINES else [])
    return "\n".join([head, *shown])


def _instance_of(item: pytest.Item) -> Instance | None:
    params = getattr(getattr(item, "callspec", None), "params", {})
    return next((v for v in params.values() if isinstance(v, Instance)), None)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is None or not report.failed or item.nodeid.startswith(BUILD_TEST):
        return
    if not call.excinfo.errisinstance(KernelCompileError):
        return
    source = getattr(call.excinfo.value, "source", None)    # set by the backend that built it
    instance = _instance_of(item)
    where = (f"{BUILD_TEST}[{source_id(source)}]" if source else
             build_test_id(instance) if instance else BUILD_TEST)
    report.outcome = "skipped"
    report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: not compiled: see {where}")
