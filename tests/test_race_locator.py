"""The race locator: where hardware shows a race of unknown place (launches that differ), the
CPU simulator places it. The hardware side is a numpy stand-in whose launches differ, as a
racing kernel's do on a GPU; the locator runs the real builtin kernels on the real cpu-sim."""

import dataclasses
from pathlib import Path

import pytest

from gemmcheck.backends import BackendUnavailable
from gemmcheck.contract import catalog
from gemmcheck.judge import hazards, kill_matrix
from gemmcheck.verdict import Defect, Finding

from fakes import NumpyBackend, correct_product
from hazard_stand_ins import Racy
from simulator import simulator

BUILTIN = {s.name: s for s in catalog.load(catalog.BUILTIN)}
UNMODELLED = {s.name: s for s in catalog.load(Path(__file__).parent / "cpu_sim_kernels" / "unmodelled.toml")}
SETTINGS = kill_matrix.Settings(race_sizes=(64,), race_repeats=3)


def kernel(name, tile=16, **changes):
    spec = dataclasses.replace(BUILTIN[name], **changes) if changes else BUILTIN[name]
    return catalog.Instance(spec, "float32", tile)


@pytest.fixture(scope="module")
def sim():
    wanted = ["broken_splitk_global_race", "broken_no_sync_after_load", "matmul_tiled", "broken_divergent_barrier"]
    with simulator(kernel(name) for name in wanted) as backend:
        yield backend


@pytest.fixture
def on_this_simulator(sim, monkeypatch):
    """The kill matrix's locator on the module's simulator (the default makes one per process)."""
    monkeypatch.setattr(kill_matrix.building, "locate",
                        lambda instance, settings: hazards.locate_race(instance, sim, schedules=settings.schedules))


def hardware_row(instance, launches=Racy):
    """The kill-matrix row of `instance` as the GPU gives it: plain detectors on a device whose
    launches `launches` stands in for (by default, launches that differ: a race)."""
    return kill_matrix.build_row(NumpyBackend({instance.spec.entry: launches()}), instance, SETTINGS)


# -- the locator on its own ---------------------------------------------------------------------

def test_a_split_k_kernel_racing_in_global_memory_is_placed_at_an_element_of_c_and_two_blocks(sim):
    placement = hazards.locate_race(kernel("broken_splitk_global_race"), sim)
    assert placement.simulated and placement.placed, placement.why
    (found,) = placement.findings
    assert (found.defect, found.detector) == (Defect.GLOBAL_MEMORY_RACE, "global-tracking")
    i, j = found.where
    (b0, b1) = found.details["blocks"]
    assert b0 != b1
    place = f"C[{i}, {j}], blocks ({','.join(map(str, b0))}) and ({','.join(map(str, b1))})"
    assert found.details["place"] == place and found.details["placed_by"] == hazards.PLACED_BY
    assert found.summary.startswith("placed by the CPU simulator on ragged edges M33xN17xK65: cpu-sim tracked")
    diagnosis = hazards.classify([Finding(Defect.NONDETERMINISM, "repeat-launch", "launches differ", 3),
                                  *placement.findings])
    assert diagnosis.defect == Defect.GLOBAL_MEMORY_RACE and diagnosis.explains == (Defect.NONDETERMINISM,)
    assert diagnosis.label == f"global_memory_race (placed by the CPU simulator: {place})"
    assert diagnosis.to_json()["placed_by"] == "the CPU simulator"


def test_a_missing_barrier_is_placed_in_shared_memory_with_the_two_threads(sim):
    placement = hazards.locate_race(kernel("broken_no_sync_after_load"), sim)
    assert [(f.defect, f.detector) for f in placement.findings] == [(Defect.SHARED_MEMORY_RACE, "shared-tracking")]
    place = placement.findings[0].details["place"]
    assert place.startswith("shared As + ") and ", threads (" in place and place.endswith("(RAW)"), place


def test_a_divergent_barrier_is_placed_at_its_barriers(sim):
    placement = hazards.locate_race(kernel("broken_divergent_barrier"), sim)
    diagnosis = hazards.classify(placement.findings)
    assert diagnosis.defect == Defect.DIVERGENT_BARRIER and diagnosis.placed_by, placement.why
    assert "broken_tiled.cu:" in diagnosis.place, diagnosis.place


def test_a_correct_kernel_has_no_race_to_place(sim):
    placement = hazards.locate_race(kernel("matmul_tiled"), sim)
    assert placement.simulated and not placement.placed
    assert placement.why.startswith("the CPU simulator did not reproduce it: no two threads or blocks raced")


def test_a_gpu_only_kernel_is_not_simulated_and_says_so(sim):
    placement = hazards.locate_race(kernel("broken_splitk_global_race", gpu_only=True), sim)
    assert not placement.simulated and not placement.placed
    assert "gpu_only in its catalog" in placement.why


def test_a_kernel_using_what_the_simulator_does_not_model_is_not_simulated_and_says_what(sim):
    (inst,) = UNMODELLED["pipelined"].instances()
    placement = hazards.locate_race(inst, sim)
    assert not placement.simulated and not placement.placed
    assert placement.why.startswith("the CPU simulator does not model what it uses: cpu-sim does not model "
                                    "__pipeline_memcpy_async"), placement.why


def test_a_single_finding_carries_where_the_simulator_placed_its_race(sim):
    differ = Finding(Defect.NONDETERMINISM, "repeat-launch", "3 of 561 elements of C differ", 3, (0, 1))
    told = hazards.with_place(differ, hazards.locate_race(kernel("broken_splitk_global_race"), sim))
    assert (told.defect, told.detector, told.where) == (differ.defect, differ.detector, differ.where)
    assert told.summary.startswith("3 of 561 elements of C differ; placed by the CPU simulator (")
    assert "global_memory_race at C[" in told.summary and told.details["placement"]["placed"]
    untold = hazards.with_place(differ, hazards.locate_race(kernel("matmul_tiled"), sim))
    assert "; the CPU simulator did not reproduce it" in untold.summary


def test_the_default_simulator_is_made_once_per_process_beside_other_backends():
    try:
        first = hazards.cpu_simulator(10.0)
    except BackendUnavailable as exc:   # no g++ here
        pytest.skip(str(exc))
    assert hazards.cpu_simulator(10.0) is first and hazards.simulates_threads(first)


# -- the kill matrix on hardware, with the locator -------------------------------------------

def test_on_hardware_a_declared_global_race_placed_by_the_simulator_passes(on_this_simulator):
    row = hardware_row(kernel("broken_splitk_global_race"))
    assert hazards.classify(row.plain.hardware_findings).defect == Defect.NONDETERMINISM
    assert row.plain.placement.placed and row.plain.placed
    assert row.plain.label().startswith("global_memory_race (placed by the CPU simulator: C[")
    status, why = row.outcome()
    assert status == "pass" and why.startswith("caught as global_memory_race: global_memory_race (observed, "
                                               "by global-tracking; placed by the CPU simulator)"), why
    doc = row.to_json()["plain"]
    assert doc["diagnosis"]["established_by"] == ["global-tracking"] and doc["placed_by_simulator"]["placed"]
    assert doc["diagnosis"]["explains"] == ["nondeterminism", "wrong_values"]


def test_on_hardware_a_declared_shared_race_placed_by_the_simulator_passes_without_the_tool(on_this_simulator):
    row = hardware_row(kernel("broken_no_sync_after_load"))
    assert not row.sanitizer.ran
    assert row.plain.label().startswith("shared_memory_race (placed by the CPU simulator: shared As + ")
    assert row.outcome()[0] == "pass", row.outcome()
    line = next(line for line in kill_matrix.table([row]) if line.startswith(row.instance.id))
    assert "placed by the CPU simulator" in line and "pass" in line


def test_on_hardware_the_simulator_placing_another_race_than_declared_fails(on_this_simulator):
    row = hardware_row(kernel("broken_no_sync_after_load", expect="global_memory_race"))
    status, why = row.outcome()
    assert status == "fail" and why.startswith("plain detectors classify it as shared_memory_race (placed by the "
                                               "CPU simulator"), why


def test_on_hardware_a_global_race_of_a_kernel_the_simulator_cannot_run_needs_the_tool(on_this_simulator):
    row = hardware_row(kernel("broken_splitk_global_race", gpu_only=True))
    assert row.plain.label() == "nondeterminism (race of unknown place)"
    status, why = row.outcome()
    assert status == "needs-tool" and "global-memory tracking" in why, why
    assert why.endswith("broken_splitk_global_race is gpu_only in its catalog: the CPU simulator does not run it")
    (inst,) = UNMODELLED["pipelined"].instances()
    unmodelled = dataclasses.replace(inst.spec, expect="global_memory_race")
    status, why = hardware_row(catalog.Instance(unmodelled, "float32", 4)).outcome()
    assert status == "needs-tool" and "the CPU simulator does not model what it uses" in why, why


def test_on_hardware_a_race_the_simulator_does_not_reproduce_stays_of_unknown_place(on_this_simulator):
    row = hardware_row(kernel("matmul_tiled"))   # a reference whose (stand-in) launches differ
    assert row.plain.label() == "nondeterminism (race of unknown place)"
    assert not row.plain.placement.placed and row.plain.placement.simulated
    status, why = row.outcome()
    assert status == "fail" and "race of unknown place" in why
    assert "\nthe CPU simulator did not reproduce it" in why
    assert row.to_json()["plain"]["placed_by_simulator"]["why"].startswith("the CPU simulator did not reproduce it")


def test_the_locator_runs_only_on_a_race_of_unknown_place(monkeypatch):
    def must_not_run(*args):
        raise AssertionError("the locator ran on a row without a race of unknown place")

    monkeypatch.setattr(kill_matrix.building, "locate", must_not_run)
    clean = hardware_row(kernel("matmul_tiled"), lambda: correct_product)
    assert clean.plain.placement is None and clean.outcome()[0] == "pass"
    assert clean.to_json()["plain"]["placed_by_simulator"] is None
