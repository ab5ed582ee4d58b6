"""A bad kernel costs one failure: it is contained, recorded as a verdict, and its other
tests skip naming that failure.

- Compile failure: the build test of its source fails once, with the compiler's first
  errors at the user's file and line; every other test of those instantiations is
  skipped with ``not compiled: see <that test>``.
- Crash or hang (KernelLaunchError / KernelHang): the first test of the instantiation
  that meets it fails with one line (``crash: ...`` / ``hang: ...``) and records the
  verdict; its other tests skip with ``not run: <crash|hang>; see <that test>``, never
  launching it again (a hang would cost --gemm-hang-timeout per launch).
- On a backend whose launches share this process's CUDA context (cupy), every
  instantiation a test will launch here is first probed in one isolated child
  (gemmcheck.judge.isolation) on small ragged and tile-aligned shapes it claims: one that
  crashes or hangs there is never launched here. The probe starts at the session's first
  instantiation test and runs beside the tests that launch nothing (the compile suite's);
  the session's backend, once made, waits for it before any launch. Under pytest-xdist
  one worker probes for all (gemmcheck.judge.once). A fault the probe
  missed that loses the context (a sticky CUDA error, or an in-process hang) is that
  instantiation's crash / hang, and every later test that runs kernels skips with one
  line naming the test that lost it.

Wiring only: the build is the backend's (``prepare`` / ``build_error``), the launch in a
child is gemmcheck.judge.isolation's.
"""

from __future__ import annotations

import hashlib
import os
import sys
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gemmcheck import backends
from gemmcheck.backends import DEFAULT_HANG_TIMEOUT_S, KernelCompileError, KernelHang, KernelLaunchError
from gemmcheck.contract.catalog import Instance
from gemmcheck.schedule import rerun, shared_work
from gemmcheck.pytest_plugin.session import instances_of, runs_kernels
from gemmcheck.verdict import Defect, Verdict

BUILD_TEST = "suites/compile/test_builds.py::test_every_instantiation_of_the_source_builds"
COMPILE_ERROR = Defect.COMPILE_ERROR.value   # a Lost status, beside "crash" and "hang"
MAX_LINES = 40                    # of compiler output per broken source on the terminal


def source_id(source: Path) -> str:
    return source.name


def build_test_id(instance: Instance) -> str:
    return f"{BUILD_TEST}[{source_id(instance.spec.source)}]"


def pytest_configure(config: pytest.Config) -> None:
    rerun.forward_reports_if_asked(config)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("gemmcheck").addoption(
        "--gemm-probe", choices=("on", "off"), default="on", metavar="on|off",
        help="on the GPU backend, launch every instantiation once in one isolated child before "
             "its first launch in this process, so a crash or hang cannot take the session's "
             "CUDA context down (default: on; docs/reliability.md)")


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


def _instance_of(item: pytest.Item) -> Instance | None:
    return next(iter(instances_of(item)), None)


# -- crash and hang: one failure per instantiation, the rest skip --------------------------

@dataclass
class Lost:
    """An instantiation that did not build, crashed or hung: never launched again in this session."""

    status: str            # "compile_error" | "crash" | "hang"
    message: str           # what happened, where (one line; the compiler's first lines)
    test: str = ""         # the test that failed with it ("" : the probe found it, no test yet)


@dataclass
class Containment:
    """This session's lost instantiations and, on the GPU, whether the CUDA context is lost."""

    lost: dict[str, Lost] = field(default_factory=dict)     # Instance.id -> Lost
    context_lost_by: str = ""                                # the test that lost it
    deferred: list[str] = field(default_factory=list)        # node ids to re-run in a fresh process
    # A fault leaves a sticky error: a fresh process can run the rest. A hang leaves its kernel
    # spinning on the GPU for as long as this process lives: a child would share the GPU with it.
    rerun_after_loss: bool = False
    probe: Future | None = None       # the isolated probe's {Instance.id: Lost}, started ahead
    probe_stop: threading.Event = field(default_factory=threading.Event)
    probed: bool = False              # its findings are in: launches here may begin
    items: list = field(default_factory=list)
    session: pytest.Session | None = None
    lost_before: int = 0        # contexts lost in this process before this session (an outer one's)


CONTAINMENT = pytest.StashKey[Containment]()


def containment(config: pytest.Config) -> Containment:
    if CONTAINMENT not in config.stash:
        config.stash[CONTAINMENT] = Containment()
    return config.stash[CONTAINMENT]


def status_of(exc: BaseException) -> str:
    if isinstance(exc, KernelCompileError):
        return COMPILE_ERROR
    return "hang" if isinstance(exc, KernelHang) else "crash"


def refuse_lost(config: pytest.Config, instance: Instance) -> None:
    """Raise (without launching) when `instance` crashed or hung earlier in this session:
    a search (hypothesis) that retries a failing example then fails at once, not after
    another --gemm-hang-timeout per example."""
    lost = containment(config).lost.get(instance.id)
    if lost is not None:
        error = {"hang": KernelHang, COMPILE_ERROR: KernelCompileError}.get(lost.status, KernelLaunchError)
        raise error(f"{instance.id}: not launched again: {lost.message}")


def lose(config: pytest.Config, instance: Instance, exc: BaseException, test: str) -> Lost:
    """Remember that `instance` crashed or hung in `test` (the first time only)."""
    state = containment(config)
    if instance.id not in state.lost:
        if isinstance(exc, KernelCompileError):
            first = _compiler_lines(exc)
        else:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            first = first.removeprefix(f"{instance.id}: ")   # the failing line names it already
        state.lost[instance.id] = Lost(status_of(exc), first, test)
    elif not state.lost[instance.id].test:
        state.lost[instance.id].test = test
    if getattr(exc, "context_lost", False) and not state.context_lost_by:
        state.context_lost_by = test
        state.rerun_after_loss = rerun.available(config) and not isinstance(exc, KernelHang)
    return state.lost[instance.id]


def uniform(exc: BaseException) -> BaseException:
    """`exc` as the plain class of its status (KernelCompileError, KernelLaunchError,
    KernelHang), to be raised from one place: hypothesis tells failures apart by type and
    origin, and a replay refused by refuse_lost must look like the first launch's failure."""
    cls = {COMPILE_ERROR: KernelCompileError, "hang": KernelHang}.get(status_of(exc), KernelLaunchError)
    out = cls(str(exc))
    for attr in ("source", "context_lost"):
        if hasattr(exc, attr):
            setattr(out, attr, getattr(exc, attr))
    return out


def _kernel_error(excinfo: pytest.ExceptionInfo):
    """The KernelCompileError / KernelLaunchError a test failed with, also from inside an
    exception group (hypothesis reports distinct failures of one search as a group)."""
    exc = excinfo.value
    while isinstance(exc, BaseExceptionGroup):
        exc = next((e for e in exc.exceptions if isinstance(e, (KernelCompileError, KernelLaunchError,
                                                                 BaseExceptionGroup))), None)
    return exc if isinstance(exc, (KernelCompileError, KernelLaunchError)) else None


def unfinished_verdict(instance: Instance, exc: BaseException, test: str) -> Verdict:
    """The compile_error / crash / hang verdict for a launch (or build) that raised `exc`."""
    from gemmcheck.judge import hazards

    return Verdict.for_instance(instance, "launch", [hazards.launch_failure(exc)], test)


@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session: pytest.Session):
    """After this process's tests: what the lost CUDA context kept from running, in one fresh
    child pytest whose reports are this session's (rerun.run), so pytest's summary, -x and the
    exit status count them here, once. Before the verdicts and the kill matrix are written
    (they merge the child's parts)."""
    result = yield
    state = containment(session.config)
    if state.deferred:
        rerun.run(session, state.deferred)
    return result


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    stop_probe(containment(session.config))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """Once the CUDA context is lost: a pytest-xdist worker ends before this test (xdist runs it
    in a fresh worker: lost_context_plugin); serially a test that runs other kernels is not run here
    at all, nor reported: it runs at the end of the session in a fresh process (rerun), where
    it is reported once."""
    state = containment(item.config)
    if not state.context_lost_by:
        return None
    if rerun.is_xdist_worker(item.config):
        from gemmcheck.schedule import worker_exit

        worker_exit.leave(item, state.context_lost_by)
    instance = _instance_of(item)
    if state.rerun_after_loss and uses_the_device(item) and (instance is None or instance.id not in state.lost):
        state.deferred.append(item.nodeid)
        rerun.not_reported_here(item)
        # what runtestprotocol does after a test: the fixtures `nextitem` does not share end
        item.session._setupstate.teardown_exact(nextitem)
        return True
    return None


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """Leave at once when a launch of this session left the CUDA context unusable. After a
    hang the interpreter's exit frees CuPy's memory, which waits for the spinning kernel
    forever (seen on the H200: a re-run child stalled after its summary); after a sticky
    fault CuPy's destructors print a traceback each. Everything is written and printed by
    now; the driver ends the kernel with the process."""
    state = containment(config)
    session = state.session
    # Only this session's loss: a pytest run inside another process (pytester) must not end
    # that process for a context that process lost earlier.
    # (A pytest-xdist worker too: it has told the controller it finished, so leaving now is clean.)
    if len(backends.contexts_lost()) <= state.lost_before or session is None:
        return
    capture = config.pluginmanager.get_plugin("capturemanager")
    if capture is not None:
        capture.stop_global_capturing()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(int(session.exitstatus))


def pytest_collection_finish(session: pytest.Session) -> None:
    state = containment(session.config)
    state.session, state.items = session, list(session.items)
    state.lost_before = len(backends.contexts_lost())
    backends.clear_refusals()   # a session's probe speaks for that session only


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip what must not launch: a lost instantiation's tests, every kernel test once the
    CUDA context is lost; probe instantiations in a child before their first launch here."""
    state = containment(item.config)
    instance = _instance_of(item)
    if state.context_lost_by and uses_the_device(item):
        lost = instance is not None and instance.id in state.lost
        if not lost:
            pytest.skip(f"not run: the CUDA context was lost in {state.context_lost_by} (a fault or "
                        "hang its probe did not show); rerun without that kernel (--gemm-kernels) in "
                        "a fresh process")
    if instance is None or item.nodeid.startswith(BUILD_TEST):
        return
    if _not_compiled(item, instance, state):
        return
    if state.probe is None and not state.probed and _needs_probe(item.config):
        start_probe(item.config, state)   # awaited when the backend is made (pytest_gemm_backend_made)
    lost = state.lost.get(instance.id)
    if lost is None:   # another process of the run met it first (shared_work.first_lost)
        lost = shared_work.lost_elsewhere(item.config, instance.id)
        if lost is not None:
            state.lost[instance.id] = lost
            backends.refuse(instance.id, lost.status, lost.message)
    if lost is not None and lost.test:
        pytest.skip(skip_reason(lost))
    # Found by the probe, not yet by a test: this one, its first, meets the backend's refusal
    # (backends.refuse_if_lost) at its first launch and fails with it, once.


def uses_the_device(item: pytest.Item) -> bool:
    """Whether a test needs a usable CUDA context: it runs catalog kernels, or is marked gpu
    (the performance suite's ceilings: the FP32 peak, cuBLAS, the roofline)."""
    return runs_kernels(item) or item.get_closest_marker("gpu") is not None


def skip_reason(lost: Lost) -> str:
    what = "not compiled:" if lost.status == COMPILE_ERROR else f"not run: {lost.status};"
    return f"{what} see {lost.test}"


def _not_compiled(item: pytest.Item, instance: Instance, state: Containment) -> bool:
    """An instantiation that did not build (known once the backend prepared it): skip, naming
    its source's build test when that runs in this session. Otherwise the test runs and meets
    the compile error itself: the first such test fails with it, later ones skip (makereport)."""
    from gemmcheck.pytest_plugin.session import gemm_config

    backend = gemm_config(item.config).backend
    error = backend.build_error(instance) if backend is not None else None
    if error is None:
        return False
    if isinstance(error, backends.NotSupported):
        pytest.skip(str(error).splitlines()[0])
    build_test = build_test_id(instance)
    if any(i.nodeid == build_test for i in state.items):
        pytest.skip(f"not compiled: see {build_test}")
    return False


def _compiler_lines(error: BaseException, n: int = 12) -> str:
    lines = str(error).strip().splitlines()
    return "\n".join(lines[:n] + ([f"... ({len(lines) - n} more lines)"] if len(lines) > n else []))


def _needs_probe(config: pytest.Config) -> bool:
    """Probe only where a launch shares this process with the session (the GPU backend);
    the CPU simulator's worker process is its own isolation."""
    from gemmcheck.pytest_plugin.session import gemm_config

    from gemmcheck.backends import device

    return (config.getoption("gemm_probe") == "on" and not gemm_config(config).simulated
            and device.cuda_device()[0])


PROBE_SEED = 11


def probe_steps(instances) -> list:
    """One small ragged and one tile-aligned problem per instantiation, where it claims them."""
    from gemmcheck.judge import isolation
    from gemmcheck.problems.problem import Problem

    steps = []
    for inst in instances:
        t = inst.tile
        for M, N, K in ((t + 3, t + 1, t + 5), (2 * t, 2 * t, 2 * t)):
            if inst.supports(M, N, K):
                steps.append(isolation.Step.of(len(steps), inst, Problem(M, N, K, inst.dtype, "exact", PROBE_SEED),
                                               purpose="probe", repeats=1, control=False))
    return steps


def probe_instances(instances, backend_name: str, timeout: float,
                    stop: threading.Event | None = None) -> dict[str, Lost]:
    """Launch each instantiation on its probe problems in one isolated child (a fresh one
    only after a crash or hang); the ones that crashed or hung, by Instance.id.
    Raises isolation.IsolationError when the child itself cannot run."""
    from gemmcheck.judge import isolation

    by_key = {(str(i.spec.catalog), i.spec.name, i.dtype, i.tile): i for i in instances}
    steps = probe_steps(by_key.values())
    if not steps:
        return {}
    # An instantiation that does not build is UNBUILT there: its build test reports it.
    # The child's backend stops a hung launch itself (HUNG); the parent's clock is the backstop.
    outcomes, _ = isolation.run_steps(steps, backend=backend_name, step_timeout=timeout + 5.0,
                                      hang_timeout_s=timeout, stop=stop)
    lost: dict[str, Lost] = {}
    for out in sorted(outcomes.values(), key=lambda o: o.step.id):
        if out.status in ("crash", "failed", "hang"):
            step, inst_id = out.step, by_key[out.step.instance_key].id
            lost.setdefault(inst_id, Lost(
                "hang" if out.status == "hang" else "crash",
                f"in the isolated probe on M{step.M}xN{step.N}xK{step.K}: "
                + out.message.removeprefix(f"{inst_id}: ")))
    return lost


def _launches_here(item: pytest.Item) -> bool:
    """Whether the test launches kernels in this process: every launch goes through the
    session's backend fixture."""
    return "backend" in getattr(item, "fixturenames", ())


def start_probe(config: pytest.Config, state: Containment) -> None:
    """Start probing, on a thread of its own, every instantiation that a test of this session
    will launch here (kernels declared crash or hang are launched only in children already:
    the hazards suite's)."""
    from gemmcheck.pytest_plugin.session import gemm_config
    from gemmcheck.verdict import defects

    seen: dict[str, Instance] = {}
    for item in state.items:
        inst = _instance_of(item)
        if inst is not None and _launches_here(item) and not item.get_closest_marker("skip") \
                and inst.spec.expect not in defects.isolated():
            seen.setdefault(inst.id, inst)
    timeout = config.getoption("gemm_hang_timeout") or DEFAULT_HANG_TIMEOUT_S
    state.probe = Future()
    backend_name = gemm_config(config).backend_name
    shared = shared_work.once(config)
    # pytest-xdist workers collect the same tests: one of them probes for all (8 probe
    # children at the start of ci's -n 8, when the host starts children slowest).
    key = "probe " + hashlib.sha256(repr((sorted(seen), backend_name, timeout)).encode()).hexdigest()

    def probe():
        return probe_instances(seen.values(), backend_name, timeout, stop=state.probe_stop)

    def run() -> None:
        try:
            state.probe.set_result(probe() if shared is None else shared.do(key, probe, stop=state.probe_stop))
        except BaseException as exc:   # handed to whoever waits for it
            state.probe.set_exception(exc)
    threading.Thread(target=run, name="gemmcheck-probe", daemon=True).start()


@pytest.hookimpl(tryfirst=True)   # before the hazards plugin starts children that read its refusals
def pytest_gemm_backend_made(session: pytest.Session, backend) -> None:
    """Before the first launch here: the probe's findings are in (started now if no
    instantiation test started it), each a refusal the backend meets at that kernel's launch."""
    from gemmcheck.judge import isolation

    state = containment(session.config)
    if state.probed or not _needs_probe(session.config):
        return
    if state.probe is None:
        start_probe(session.config, state)
    state.probed = True
    try:
        found = state.probe.result()
    except isolation.IsolationError as exc:
        print(f"\ngemmcheck: the isolated probe could not run, kernels launch unprobed: "
              f"{str(exc).splitlines()[0]}")
        return
    for inst_id, lost in found.items():
        state.lost.setdefault(inst_id, lost)
        backends.refuse(inst_id, lost.status, lost.message)


def stop_probe(state: Containment) -> None:
    """A session that ends before any launch here (its launching tests deselected by -x,
    skipped, interrupted) does not wait for the probe: its child is killed, no other starts."""
    from gemmcheck.judge import isolation

    if state.probe is None or state.probe.done():
        return
    state.probe_stop.set()
    isolation.stop_running_children()
    state.probe.exception()   # until its thread has let go of the child


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and call.when == "setup" and isinstance(report.longrepr, tuple) \
            and report.longrepr[0] == __file__:
        # a skip raised here is reported at the test, not at this plugin's line
        report.longrepr = (str(item.path), item.location[1] or 0, report.longrepr[2])
    if call.excinfo is None or not report.failed or item.nodeid.startswith(BUILD_TEST):
        return
    exc = _kernel_error(call.excinfo)
    if isinstance(exc, KernelLaunchError):
        _launch_failed(item, exc, report)
        return
    if exc is None:
        return
    source = getattr(exc, "source", None)    # set by the backend that built it
    instance = _instance_of(item)
    where = (f"{BUILD_TEST}[{source_id(source)}]" if source else
             build_test_id(instance) if instance else BUILD_TEST)
    if instance is not None and not any(i.nodeid == where for i in containment(item.config).items):
        _launch_failed(item, exc, report)   # no build test here: this one fails
        return
    report.outcome = "skipped"
    report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: not compiled: see {where}")


def _launch_failed(item: pytest.Item, exc: BaseException, report) -> None:
    """The first crash / hang of an instantiation is one failing line and one verdict; a
    later one (another test reached it first) is a skip naming that test."""
    from gemmcheck.pytest_plugin.session import gemm_config

    instance = _instance_of(item)
    if instance is None:
        return
    state = containment(item.config)
    earlier = state.lost.get(instance.id)
    if earlier is not None and earlier.test and earlier.test != item.nodeid:
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: {skip_reason(earlier)}")
        return
    lost = lose(item.config, instance, exc, item.nodeid)
    first = shared_work.first_lost(item.config, instance.id, lost)
    if first.test != item.nodeid:
        # another worker of the run failed a test with it first: one failure per instantiation
        state.lost[instance.id] = first
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: {skip_reason(first)}")
        return
    log = gemm_config(item.config).verdicts
    if not any(v.test == item.nodeid and v.instance == instance.id and not v.ok for v in log.verdicts):
        log.record(unfinished_verdict(instance, exc, item.nodeid))
    line = f"{lost.status}: {instance.id} ({instance.name_expression}): {lost.message}"
    if state.context_lost_by == item.nodeid:
        line += ("\nthe CUDA context of this process is lost: " + (
            "this pytest-xdist worker ends before its next test, which a fresh worker runs"
            if rerun.is_xdist_worker(item.config) else
            "every later test that runs other kernels runs at the end of this session in a fresh process"
            if state.rerun_after_loss else
            "every later test that runs other kernels is skipped; rerun without this kernel "
            "(--gemm-kernels) in a fresh process"))
    report.longrepr = line
