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

Wiring only: the build is the backend's (``prepare`` / ``build_error``), what is lost, the
build test's work and the probe are gemmcheck.containment's, the launch in a child is
gemmcheck.judge.isolation's; the suites call gemmcheck.containment themselves.
"""


from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from gemmcheck import backends
from gemmcheck.backends import DEFAULT_HANG_TIMEOUT_S, KernelCompileError, KernelLaunchError
from gemmcheck.containment import probe
from gemmcheck.containment.builds import BUILD_TEST, build_test_id, source_id
from gemmcheck.containment.lost import Containment, containment, lose, skip_reason, unfinished_verdict
from gemmcheck.containment.probe import stop_probe
from gemmcheck.contract.catalog import Instance
from gemmcheck.schedule import rerun, shared_work
from gemmcheck.pytest_plugin.session import instances_of, runs_kernels


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


def _instance_of(item: pytest.Item) -> Instance | None:
    return next(iter(instances_of(item)), None)


def _kernel_error(excinfo: pytest.ExceptionInfo):
    """The KernelCompileError / KernelLaunchError a test failed with, also from inside an
    exception group (hypothesis reports distinct failures of one search as a group)."""
    exc = excinfo.value
    while isinstance(exc, BaseExceptionGroup):
        exc = next((e for e in exc.exceptions if isinstance(e, (KernelCompileError, KernelLaunchError,
                                                                 BaseExceptionGroup))), None)
    return exc if isinstance(exc, (KernelCompileError, KernelLaunchError)) else None


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
    if state.rerun_after_loss and uses_the_device(item) and not _loss_reported(state, _instance_of(item)):
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
        if not _loss_reported(state, instance):
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


def _loss_reported(state: Containment, instance: Instance | None) -> bool:
    """Whether `instance` is lost and a test has already failed with it: its tests then skip
    naming that test, touching nothing. One the probe found lost, no test yet, still needs a
    test that fails with the loss, and that test reads and writes device buffers before the
    refused launch: after another kernel's sticky fault it runs in the fresh process too."""
    lost = state.lost.get(instance.id) if instance is not None else None
    return lost is not None and bool(lost.test)


def uses_the_device(item: pytest.Item) -> bool:
    """Whether a test needs a usable CUDA context: it runs catalog kernels, or is marked gpu
    (the performance suite's ceilings: the FP32 peak, cuBLAS, the roofline)."""
    return runs_kernels(item) or item.get_closest_marker("gpu") is not None


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
        if item.get_closest_marker("nvrtc"):
            return False   # what the simulator does not run, nvcc and NVRTC still compile (no device needed)
        pytest.skip(str(error).splitlines()[0])
    build_test = build_test_id(instance)
    if any(i.nodeid == build_test for i in state.items):
        pytest.skip(f"not compiled: see {build_test}")
    return False


def _needs_probe(config: pytest.Config) -> bool:
    """Probe only where a launch shares this process with the session (the GPU backend);
    the CPU simulator's worker process is its own isolation."""
    from gemmcheck.pytest_plugin.session import gemm_config

    from gemmcheck.backends import device

    return (config.getoption("gemm_probe") == "on" and not gemm_config(config).simulated
            and device.cuda_device()[0])


def _launches_here(item: pytest.Item) -> bool:
    """Whether the test launches kernels in this process: every launch goes through the
    session's backend fixture."""
    return "backend" in getattr(item, "fixturenames", ())


def start_probe(config: pytest.Config, state: Containment) -> None:
    """Start probing, on a thread of its own, every instantiation that a test of this session
    will launch here (kernels declared crash or hang are launched only in children already:
    the hazards suite's); and beside it, on another, the large sizes tests launch here
    (pytest_gemm_sized_launches: the performance suite's)."""
    from gemmcheck.pytest_plugin.session import gemm_config
    from gemmcheck.verdict import defects

    isolated = defects.isolated()
    seen: dict[str, Instance] = {}
    sized: dict[Instance, dict[int, int]] = {}   # {size: products one launch holds}
    for item in state.items:
        if item.get_closest_marker("skip"):
            continue
        # A test a plugin names sized launches for launches here, whether or not it asks for
        # the backend by name (the performance suite reaches it through perf_session).
        answers = [a for a in config.hook.pytest_gemm_sized_launches(config=config, item=item) if a]
        if not (answers or _launches_here(item)):
            continue
        inst = _instance_of(item)
        if inst is not None and inst.spec.expect not in isolated:
            seen.setdefault(inst.id, inst)
        for launched, size, *products in (launch for answer in answers for launch in answer):
            if launched.spec.expect not in isolated:
                sized.setdefault(launched, {})[size] = products[0] if products else 1
    timeout = config.getoption("gemm_hang_timeout") or DEFAULT_HANG_TIMEOUT_S
    backend_name = gemm_config(config).backend_name
    probe.start(config, state, seen, backend_name, timeout)
    if sized:
        probe.start_sized(config, state, sized, backend_name, timeout)


@pytest.hookimpl(tryfirst=True)   # before the hazards plugin starts children that read its refusals
def pytest_gemm_backend_made(session: pytest.Session, backend) -> None:
    """Before the first launch here: the probe's findings are in (started now if no
    instantiation test started it), each a refusal the backend meets at that kernel's launch."""
    state = containment(session.config)
    if state.probed or not _needs_probe(session.config):
        return
    if state.probe is None:
        start_probe(session.config, state)
    state.probed = True
    # A probe whose child could not run twice (isolation.IsolationError, a ToolFailure) is
    # raised: the backend fixture errors, and so does every test that launches here.
    found = state.probe.result()
    for inst_id, lost in found.items():
        state.lost.setdefault(inst_id, lost)
        backends.refuse(inst_id, lost.status, lost.message)


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
    if isinstance(exc, backends.NotSupported):
        # the backend's limit met in the test (cpu-sim's NotSimulated at a launch): the kernel
        # was not run, so neither a crash nor a compile error of it
        _skipped(item, report, str(exc).splitlines()[0])
        return
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
    _skipped(item, report, f"not compiled: see {where}")


def _skipped(item: pytest.Item, report, reason: str) -> None:
    """`report` (a failure) turned into a skip for `reason`, reported at the test."""
    report.outcome = "skipped"
    report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: {reason}")


def _launch_failed(item: pytest.Item, exc: BaseException, report) -> None:
    """The first crash / hang of an instantiation is one failing line and one verdict; a
    later one (another test reached it first) is a skip naming that test."""
    from gemmcheck.pytest_plugin.session import gemm_config

    # (a test parametrized with no instantiation, a performance claim, meets one through the
    # launch error: the instantiation it timed, or its baseline)
    instance = _instance_of(item) or getattr(exc, "instance", None)
    if instance is None:
        return
    state = containment(item.config)
    earlier = state.lost.get(instance.id)
    if _loss_reported(state, instance) and earlier.test != item.nodeid:
        _skipped(item, report, skip_reason(earlier))
        return
    lost = lose(item.config, instance, exc, item.nodeid)
    first = shared_work.first_lost(item.config, instance.id, lost)
    if first.test != item.nodeid:
        # another worker of the run failed a test with it first: one failure per instantiation
        state.lost[instance.id] = first
        _skipped(item, report, skip_reason(first))
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
