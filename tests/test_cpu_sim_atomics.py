"""The CPU simulator runs every atomic CUDA offers and every fence, and every atomic builtin
of the compiler, with their defined results under every schedule; the tracking sees an atomic
builtin as it sees CUDA's atomics (a write of its thread: no race against other atomics, a
race against another thread's plain store).

A build of the simulator used to lack the entry points the thread instrumentation emits for
atomic builtins and fences: a file whose kernel called __threadfence() did not load, and every
kernel of it was a crash. Kernels: tests/cpu_sim_kernels/atomics.cu (catalog atomics.toml).
"""

from pathlib import Path

import numpy as np
import pytest

from gemmcheck.contract import catalog
from gemmcheck.problems.harness import run_once
from simulator import simulator

cpu_sim = pytest.importorskip("gemmcheck.backends.cpu_sim")

HERE = Path(__file__).parent / "cpu_sim_kernels"
KERNELS = {s.name: s for s in catalog.load(HERE / "atomics.toml")}
THREADS = np.arange(64)


@pytest.fixture(scope="module")
def sim():
    with simulator(i for s in KERNELS.values() for i in s.instances()) as backend:
        yield backend


def kernel(name, tile):
    return catalog.Instance(KERNELS[name], "float64", tile)


def run_everywhere(sim, inst, N):
    """One launch under every race schedule (1 x 1 A, 1 x N B); the run of the first."""
    with sim.using_schedules(cpu_sim.RACE_SCHEDULES):
        return run_once(sim, inst, np.zeros((1, 1)), np.zeros((1, N)))


def xor_of(values):
    out = 0
    for v in values:
        out ^= int(v)
    return out


def assert_clean(report):
    assert report.outcome == "ok" and not report.race and not report.divergent, report.summary()
    assert report.uninitialized_shared_reads == 0, report.summary()


def wrap(value, bits):
    """`value` as the unsigned integer of `bits` bits holds it (two's complement)."""
    return value % (1 << bits)


@pytest.mark.parametrize("tile", [1, 2], ids=["shared", "global"])
def test_every_cuda_atomic_in_every_scope_gives_its_defined_result(sim, tile):
    run = run_everywhere(sim, kernel("every_cuda_atomic", tile), 64)
    spread = (THREADS * 7) % 64
    ints = [(THREADS - 20).sum(), -THREADS.sum(), 7, (spread - 30).min(), (spread - 30).max(), 1, 1,
            -(1 << 16), (1 << 20) - 1, xor_of(THREADS * 3), 1, 1]
    unsigned = [THREADS.sum(), 5000 - THREADS.sum(), 7, (spread + 10).min(), (spread + 10).max(),
                64 % 10,            # atomicInc(9) from 0, 64 times: wraps to 0 after 9
                (10 - 64 % 10) % 10,   # atomicDec(9) from 0: 9, 8, ..., 0, 9, ...
                1, 0, 0xFFFFFFFF, xor_of(THREADS * 5), 1, 1, 1]
    longs = [int(THREADS.sum()) << 33, 7, (1 << 40), 63 + (1 << 40), 1, 0, (1 << 40) - 1,
             xor_of(THREADS * 3) << 34, 1, 1]
    signed_longs = [-(1 << 40), 63 - (1 << 40)]
    rest = [0.5 * THREADS.sum(), 2.5, 0.25 * THREADS.sum(), 1]
    want = [float(v) for v in [*ints, *unsigned, *longs, *signed_longs, *rest]]
    assert run.C.reshape(-1)[:len(want)].tolist() == want
    assert_clean(sim.last_launch_report)


WIDTHS = {1: 8, 2: 16, 4: 32, 8: 64, 16: 128}


@pytest.mark.parametrize("tile", [1, 2], ids=["shared", "global"])
def test_every_atomic_builtin_of_every_width_gives_its_defined_result(sim, tile):
    run = run_everywhere(sim, kernel("atomic_builtins", tile), 80)
    got = run.C.reshape(-1)[:80].reshape(5, 16)
    for row, (size, bits) in enumerate(WIDTHS.items()):
        values = [THREADS.sum(), 200 - THREADS.sum(), 0, 0xFF, xor_of(THREADS * 3), 0x0F, 9, 4]
        counts = [1, 1, 1, 1, 2 * 64, 1, 0, 1]
        want = [float(wrap(int(v), min(bits, 32))) for v in [*values, *counts]]
        assert got[row].tolist() == want, f"{size}-byte atomics"
    assert_clean(sim.last_launch_report)


def test_the_atomic_builtins_reach_the_workers_entry_points(sim):
    """The builtins kernel exercises the worker's __tsan_atomic* functions, not inline code."""
    import subprocess

    module = sim._module(kernel("atomic_builtins", 1))
    out = subprocess.run(["nm", "-u", str(module.path)], capture_output=True, text=True, check=True).stdout
    called = {line.split()[-1] for line in out.splitlines()}
    for bits in WIDTHS.values():
        for op in ("load", "store", "exchange", "fetch_add", "fetch_sub", "fetch_and", "fetch_or", "fetch_xor",
                   "fetch_nand", "compare_exchange_strong"):
            assert f"__tsan_atomic{bits}_{op}" in called
    assert "__tsan_atomic_thread_fence" in called and "__tsan_atomic_signal_fence" in called


def test_atomic_builtins_of_different_threads_and_blocks_are_no_race(sim):
    run = run_everywhere(sim, kernel("atomic_builtin_tracking", 1), 3)
    assert run.C_bits.reshape(-1).view(np.uint64)[0] & 3 == 3   # both blocks' bits set
    assert run.C.reshape(-1)[1:3].tolist() == [32.0, 32.0]      # every thread's addition
    assert_clean(sim.last_launch_report)


def test_a_plain_store_beside_atomic_builtins_in_shared_memory_is_a_race(sim):
    run_everywhere(sim, kernel("atomic_builtin_tracking", 2), 3)
    report = sim.last_launch_report
    assert report.waw or report.raw or report.war, report.summary()
    assert not report.global_races, report.summary()


def test_a_plain_store_of_one_block_beside_atomic_builtins_of_another_is_a_global_race(sim):
    run_everywhere(sim, kernel("atomic_builtin_tracking", 3), 3)
    report = sim.last_launch_report
    assert report.global_races, report.summary()
    assert {(g.earlier, g.later) for g in report.global_conflicts} & {("atomic", "store"), ("store", "atomic")}
    assert not (report.raw or report.war or report.waw), report.summary()
