"""Scratch memory a kernel's callers provide (a split-K kernel's workspace and semaphores):
the catalog's sizes, the harness's guarded byte buffers reset before every launch, and the
twins caught (cpu-sim)."""

import shutil

import numpy as np
import pytest

from gemmcheck.contract import catalog, launch
from gemmcheck.contract.catalog import CatalogError
from gemmcheck.judge.oracle import judge
from gemmcheck.problems import harness
from gemmcheck.problems.harness import SCRATCH_GARBAGE_BYTE, SCRATCH_GUARD_BYTE, GuardedGemm, run_problem
from gemmcheck.problems.problem import Problem
from gemmcheck.verdict import Defect
from simulator import catalog_fixtures

CATALOG = "examples/splitk/catalog.toml"
SOURCE = "examples/splitk/splitk_workspace.cu"
ENTRY = '''[[kernel]]
name = "splitk"
source = "splitk_workspace.cu"
entry = "sgemm_splitk_workspace"
template_args = "{SPLITS}"
params = { SPLITS = [4] }
args = ["A", "B", "C", "workspace", "semaphores", "M", "N", "K", "alpha", "beta"]
grid = ["ceil(N / TILE)", "ceil(M / TILE)", "SPLITS"]
block = ["TILE", "TILE"]
scratch = { workspace = "4 * SPLITS * M * N", semaphores = "4 * ceil(M / TILE) * ceil(N / TILE)" }
dtypes = ["float32"]
expect = "correct"
'''

kernels, backend = catalog_fixtures(CATALOG)


@pytest.fixture
def write_entry(tmp_path):
    shutil.copy(SOURCE, tmp_path)

    def write(text: str):
        path = tmp_path / "splitk.toml"
        path.write_text(text)
        return path
    return write


def test_each_scratch_buffer_is_sized_by_its_expression(write_entry):
    (spec,) = catalog.load(write_entry(ENTRY))
    instance = spec.instances()[0]
    assert launch.scratch_bytes(instance, 33, 17, 65) == {"workspace": 4 * 4 * 33 * 17, "semaphores": 4 * 3 * 2}
    assert spec.scratch_zeroed


@pytest.mark.parametrize("change, message", [
    (('scratch = { workspace = "4 * SPLITS * M * N", semaphores = "4 * ceil(M / TILE) * ceil(N / TILE)" }\n', ''),
     "args lists workspace, semaphores but 'scratch' gives no size: write scratch = { workspace = \"4 * M * N\", "
     "semaphores = \"4 * M * N\" }"),
    (('semaphores = "4 * ceil(M / TILE) * ceil(N / TILE)"', 'semaphores = "4", locks = "4"'),
     "scratch gives the size of 'locks', which args does not list; the scratch roles are workspace, semaphores"),
    (('"4 * SPLITS * M * N"', '"4 * SPLITS * M * N * WIDTH"'),
     "scratch.workspace: '4 * SPLITS * M * N * WIDTH' names WIDTH, which is not M, N, K, batch, groups or a "
     "parameter"),
    (('"4 * SPLITS * M * N"', '["4"]'), "scratch.workspace must be a number of bytes or an expression string"),
    (('expect = "correct"', 'expect = "correct"\nscratch_zeroed = "yes"'),
     "'scratch_zeroed' must be true or false, got 'yes'"),
], ids=["no-size", "role-not-taken", "unknown-name", "not-an-expression", "zeroed-not-a-bool"])
def test_a_bad_scratch_declaration_fails_in_one_line_naming_the_fix(write_entry, change, message):
    with pytest.raises(CatalogError) as caught:
        catalog.load(write_entry(ENTRY.replace(*change)))
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_a_size_that_is_no_whole_number_is_refused_at_the_launch_that_meets_it(write_entry):
    (spec,) = catalog.load(write_entry(ENTRY.replace('"4 * SPLITS * M * N"', '"M / 2"')))
    assert launch.scratch_bytes(spec.instances()[0], 4, 4, 4)["workspace"] == 2
    with pytest.raises(launch.LaunchError, match=r"scratch.workspace: 'M / 2' is 3/2"):
        launch.scratch_bytes(spec.instances()[0], 3, 4, 4)


def test_zeroed_scratch_sits_between_guard_bands_and_is_reset_before_every_launch(kernels, backend):
    problem = Problem(33, 17, 65, "float32", "exact", 1)
    gemm = GuardedGemm.for_problem(backend, kernels["splitk_workspace"], problem)
    workspace, semaphores = gemm.scratch_buffers
    assert (workspace.name, workspace.span) == ("workspace", 4 * 4 * 33 * 17)
    assert (semaphores.name, semaphores.span) == ("semaphores", 4 * 3 * 2)
    for buf in gemm.scratch_buffers:
        assert (buf.bits[buf.guard:buf.guard + buf.span] == 0).all()
        assert (buf.guard_cells(buf.bits) == SCRATCH_GUARD_BYTE).all() and buf.guard >= 16 * gemm.A.guard
    # the kernel counts arrivals in semaphores: run twice on one GuardedGemm, each launch (and
    # each confirming launch) must find them zero again, as its callers leave them
    for _ in range(2):
        run = gemm.run()
        assert run.guard_damage["workspace"] == run.guard_damage["semaphores"] == 0
        judgement = judge(run, *problem.operands()[:2], exact=True, problem=problem)
        assert judgement.ok, judgement.message()


def test_scratch_its_callers_do_not_zero_holds_all_ones_bytes(kernels, backend):
    problem = Problem(9, 7, 13, "float32", "exact", 1)
    gemm = GuardedGemm.for_problem(backend, kernels["broken_splitk_semaphores_not_zeroed"], problem)
    for buf in gemm.scratch_buffers:
        assert (buf.bits[buf.guard:buf.guard + buf.span] == SCRATCH_GARBAGE_BYTE).all()
    assert harness.scratch_fill(kernels["broken_splitk_semaphores_not_zeroed"].spec) == SCRATCH_GARBAGE_BYTE


def test_a_workspace_overrun_is_an_out_of_bounds_write_naming_the_workspace(kernels, backend):
    problem = Problem(33, 17, 65, "float32", "exact", 1)
    judgement = judge(run_problem(backend, kernels["broken_splitk_workspace_tile_padded"], problem),
                      *problem.operands()[:2], exact=True, problem=problem)
    (oob,) = [f for f in judgement.findings if f.defect == Defect.OUT_OF_BOUNDS_WRITE]
    assert "in workspace's guards" in oob.summary and set(oob.details["guard_damage"]) == {"workspace"}
    # only its slabs' lengths are wrong: with N a multiple of the tile nothing runs past the end
    tiled = Problem(33, 32, 65, "float32", "exact", 1)
    assert judge(run_problem(backend, kernels["broken_splitk_workspace_tile_padded"], tiled),
                 *tiled.operands()[:2], exact=True, problem=tiled).ok


def test_counters_left_unzeroed_leave_every_tile_unwritten(kernels, backend):
    problem = Problem(9, 7, 13, "float32", "exact", 1)
    run = run_problem(backend, kernels["broken_splitk_semaphores_not_zeroed"], problem)
    assert run.unwritten.all()


def test_a_plain_launch_gets_fresh_scratch_each_time(kernels, backend):
    instance = kernels["splitk_workspace"]
    operands = harness.plain_operands(backend, instance, 20, 20, 20)
    assert set(operands["scratch"]) == {"workspace", "semaphores"}
    for _ in range(2):   # the operands' own copy stays as callers leave it
        harness.plain_launch(backend, instance, 20, 20, 20, operands)
        assert not np.asarray(backend.to_host(operands["scratch"]["semaphores"])).any()
