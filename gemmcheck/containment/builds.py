"""The build test's work: which instantiations of a source did not compile (or are not
supported by the backend), their compile_error verdicts, and the one message per broken source."""

from __future__ import annotations

from pathlib import Path

from gemmcheck import backends
from gemmcheck.backends import KernelCompileError
from gemmcheck.containment.lost import COMPILE_ERROR
from gemmcheck.contract.catalog import Instance
from gemmcheck.verdict import Verdict

BUILD_TEST = "suites/compile/test_builds.py::test_every_instantiation_of_the_source_builds"
MAX_LINES = 40                    # of compiler output per broken source on the terminal


def source_id(source: Path) -> str:
    return source.name


def build_test_id(instance: Instance) -> str:
    return f"{BUILD_TEST}[{source_id(instance.spec.source)}]"


def failures(backend, instances) -> list[tuple[Instance, KernelCompileError]]:
    """Build `instances` on `backend`; the ones that did not compile, with why."""
    backend.prepare(instances)
    out = []
    for inst in instances:
        error = backend.build_error(inst)
        if error is not None and not isinstance(error, backends.NotSupported):
            out.append((inst, error))
    return out


def unsupported(backend, instances) -> list[tuple[Instance, backends.NotSupported]]:
    """The instantiations `backend` cannot run (what they use it does not model), with why:
    skipped, never failed (after `failures`, which prepared them)."""
    return [(inst, error) for inst in instances
            if isinstance(error := backend.build_error(inst), backends.NotSupported)]


def verdicts_for(failed, test: str) -> list[Verdict]:
    """One compile_error verdict per instantiation that did not build (its finding built
    where every compile_error / crash / hang finding is: hazards.launch_failure)."""
    from gemmcheck.judge import hazards

    return [Verdict.for_instance(inst, "build", [hazards.launch_failure(error)], test) for inst, error in failed]


def describe(source: Path, failed, total: int) -> str:
    """One message per broken source: which instantiations, then the first errors once."""
    first = str(failed[0][1]).splitlines()
    head = (f"{COMPILE_ERROR}: {len(failed)} of {total} instantiation(s) of {source} did not compile: "
            + ", ".join(inst.id for inst, _ in failed[:8]) + (" ..." if len(failed) > 8 else ""))
    shown = first[:MAX_LINES] + ([f"... ({len(first) - MAX_LINES} more lines)"] if len(first) > MAX_LINES else [])
    return "\n".join([head, *shown])
