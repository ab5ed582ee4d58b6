"""The CPU simulator as the harness's own tests use it: one backend per test module."""

from contextlib import contextmanager

import numpy as np
import pytest

from gemmcheck.backends import BackendUnavailable


@contextmanager
def simulator(instances=()):
    """A CpuSimBackend with `instances` built as a session builds them (one build per source),
    closed at the end; the test skips with the reason where the simulator cannot run."""
    from gemmcheck.backends import cpu_sim

    try:
        backend = cpu_sim.CpuSimBackend()
    except BackendUnavailable as exc:
        pytest.skip(str(exc))
    if instances:
        backend.prepare(list(instances))
    try:
        yield backend
    finally:
        backend.close()


def exact_inputs(M, N, K, seed=0):
    """Small-integer operands: every summation order gives the same bits."""
    rng = np.random.default_rng(seed)
    A = rng.integers(-4, 5, (M, K)).astype(np.float64)
    B = rng.integers(-4, 5, (K, N)).astype(np.float64)
    A[0, 0] = B[0, 0] = 3  # never all zero
    return A, B


def first_instances(catalog) -> dict:
    """Each kernel of an examples catalog by name: its first instantiation."""
    from gemmcheck.contract.catalog import load

    return {spec.name: spec.instances()[0] for spec in load(catalog)}


def catalog_fixtures(catalog):
    """A test module's fixtures for one examples catalog, module-scoped: `kernels` (each
    kernel's first instantiation by name) and `backend` (a simulator, closed after the module).
    Bind both at module level: ``kernels, backend = catalog_fixtures(CATALOG)``."""
    @pytest.fixture(scope="module")
    def kernels():
        return first_instances(catalog)

    @pytest.fixture(scope="module")
    def backend():
        with simulator() as running:
            yield running
    return kernels, backend

