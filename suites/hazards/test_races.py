"""Shared-memory races: on hardware a missing barrier shows as output that differs between
launches on identical exact inputs (at 1024^3, where a WAR race shows on an H200);
racecheck sees it directly. Launches that differ alone do not say where threads raced (a
split-K kernel's slices race in global memory), so the plain detectors alone name a race of
unknown place; the race locator then runs the kernel on the CPU simulator, whose tracking
places it (gemmcheck.judge.hazards.locating). References give identical bits launch after launch.
On the CPU simulator the race shows at small sizes: its tracking sees the conflicting
accesses, and the output depends on the thread schedule.

Global-memory races (two blocks of a launch writing one address, not both atomically): the
simulator's global-memory tracking names the element and the two blocks; on hardware
racecheck is silent (shared memory only) and launches that differ, or wrong values, are
what the hardware shows; the race locator places them there as on cpu-sim, and a kernel the
simulator cannot run is reported as needing it."""

import pytest

from gemmcheck.verdict.detectors import Detector
from gemmcheck.judge import hazards
from gemmcheck.judge.kill_matrix import declares
from gemmcheck.verdict import Defect

race = pytest.mark.instances.with_args(declares("shared_memory_race"))
global_race = pytest.mark.instances.with_args(declares("global_memory_race"))
reference = pytest.mark.instances(lambda i: i.spec.is_reference)


def require_race_stress(row) -> None:
    """Skip, saying why, a kernel whose sizes are compiled in: it computes one shape, so it has no
    race-stress size (compute-sanitizer's racecheck and the simulator look for its races there)."""
    if why := hazards.no_race_stress(row.instance):
        pytest.skip(f"{why}; racecheck and the simulator judge its races")


@race
@pytest.mark.gpu
def test_a_declared_race_makes_launches_on_identical_inputs_differ(matrix_row):
    require_race_stress(matrix_row)
    assert matrix_row.plain.found(defect=Defect.NONDETERMINISM), (
        f"{matrix_row.instance.id}: no launch-to-launch difference on {matrix_row.problems}")


@race
@pytest.mark.gpu
def test_hardware_alone_names_a_race_of_unknown_place_and_the_simulator_places_it_in_shared_memory(matrix_row):
    require_race_stress(matrix_row)
    on_hardware = hazards.classify(matrix_row.plain.hardware_findings)
    assert on_hardware.label == "nondeterminism (race of unknown place)", on_hardware.explanation
    placement = matrix_row.plain.placement
    if placement is not None and not placement.simulated:
        pytest.skip(f"{matrix_row.instance.id}: {placement.why}")
    diagnosis = matrix_row.plain.diagnosis
    assert (diagnosis.defect, diagnosis.placed_by) == (Defect.SHARED_MEMORY_RACE, hazards.PLACED_BY), (
        placement.why if placement is not None else diagnosis.explanation)
    assert ", threads (" in diagnosis.place, diagnosis.place


@race
@pytest.mark.gpu
@pytest.mark.sanitizer
def test_racecheck_reports_the_declared_race(matrix_row, sanitizer_exe):
    assert matrix_row.sanitizer.found(detector=Detector.RACECHECK, defect=Defect.SHARED_MEMORY_RACE), (
        f"{matrix_row.instance.id}: racecheck silent; sanitizer column: {matrix_row.sanitizer.to_json()}")


@reference
@pytest.mark.gpu
def test_references_give_identical_bits_over_repeated_launches_at_race_sizes(finished_row):
    require_race_stress(finished_row)
    assert any(p.startswith("race stress") for p in finished_row.problems), finished_row.problems
    assert not finished_row.plain.found(defect=Defect.NONDETERMINISM), finished_row.plain.diagnosis.explanation


@reference
@pytest.mark.gpu
@pytest.mark.sanitizer
def test_racecheck_is_silent_on_references(finished_row, sanitizer_exe):
    assert not finished_row.sanitizer.found(detector=Detector.RACECHECK), finished_row.sanitizer.diagnosis.explanation


@race
@pytest.mark.simulator
def test_the_simulator_observes_the_declared_race(matrix_row):
    found = matrix_row.plain.found(detector=Detector.SHARED_TRACKING, defect=Defect.SHARED_MEMORY_RACE)
    assert found, f"{matrix_row.instance.id}: no conflicting shared access on {matrix_row.problems}"
    diagnosis = matrix_row.plain.diagnosis
    assert (diagnosis.defect, diagnosis.basis) == (Defect.SHARED_MEMORY_RACE, "observed"), diagnosis.explanation
    assert any(found[0].details["lockstep"].values()), found[0].summary


@race
@pytest.mark.simulator
def test_a_declared_race_makes_the_output_depend_on_the_thread_schedule(matrix_row):
    found = matrix_row.plain.found(detector=Detector.SCHEDULES, defect=Defect.NONDETERMINISM)
    assert found, f"{matrix_row.instance.id}: same bits under every schedule on {matrix_row.problems}"
    assert found[0].details["exposing_schedule"], found[0].summary


@reference
@pytest.mark.simulator
def test_references_give_identical_bits_under_every_schedule_and_no_memory_conflict(finished_row):
    for detector in (Detector.SCHEDULES, Detector.SHARED_TRACKING, Detector.GLOBAL_TRACKING,
                     Detector.REPEAT_LAUNCH):
        assert not finished_row.plain.found(detector=detector), finished_row.plain.diagnosis.explanation


@global_race
@pytest.mark.simulator
def test_the_simulator_names_the_element_and_the_two_blocks_of_a_declared_global_race(matrix_row):
    found = matrix_row.plain.found(detector=Detector.GLOBAL_TRACKING, defect=Defect.GLOBAL_MEMORY_RACE)
    assert found, f"{matrix_row.instance.id}: no two blocks wrote one address on {matrix_row.problems}"
    earlier, later = found[0].details["blocks"]
    assert earlier != later and "global-memory race on C[" in found[0].summary, found[0].summary
    diagnosis = matrix_row.plain.diagnosis
    assert (diagnosis.defect, diagnosis.basis) == (Defect.GLOBAL_MEMORY_RACE, "observed"), diagnosis.explanation


@global_race
@pytest.mark.gpu
def test_on_hardware_a_declared_global_race_shows_as_what_it_explains(matrix_row):
    on_hardware = hazards.classify(matrix_row.plain.hardware_findings)
    assert on_hardware.defect in (Defect.NONDETERMINISM, Defect.WRONG_VALUES), on_hardware.explanation


@global_race
@pytest.mark.gpu
def test_on_hardware_the_simulator_places_a_declared_global_race_at_an_element_and_two_blocks(matrix_row):
    placement = matrix_row.plain.placement
    if placement is not None and not placement.simulated:
        status, why = matrix_row.outcome()
        assert status == "needs-tool" and placement.why in why, why
        pytest.skip(f"{matrix_row.instance.id}: {placement.why}")
    assert placement is not None and placement.placed, (
        placement.why if placement is not None else
        f"the locator did not run: hardware showed {matrix_row.plain.label()}, not a race of unknown place")
    diagnosis = matrix_row.plain.diagnosis
    assert (diagnosis.defect, diagnosis.placed_by) == (Defect.GLOBAL_MEMORY_RACE, hazards.PLACED_BY), placement.why
    assert diagnosis.place.startswith("C[") and ", blocks (" in diagnosis.place, diagnosis.place
    status, why = matrix_row.outcome()
    assert status == "pass", why


@global_race
@pytest.mark.gpu
@pytest.mark.sanitizer
def test_racecheck_does_not_call_a_global_race_a_shared_memory_race(matrix_row, sanitizer_exe):
    assert not matrix_row.sanitizer.found(defect=Defect.SHARED_MEMORY_RACE), matrix_row.sanitizer.diagnosis.explanation
