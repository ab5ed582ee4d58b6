"""The defect and detector registries: every list of defect classes derives from
gemmcheck.verdict.defects (adding a class touches one place), and a detector name that does not
exist fails loudly instead of matching nothing."""

import enum
from dataclasses import replace

import pytest

from gemmcheck.contract import catalog
from gemmcheck.verdict import defects
from gemmcheck.judge import hazards, kill_matrix
from gemmcheck.pytest_plugin import hazards_plugin
from gemmcheck import report
from gemmcheck.verdict.defects import DEFECTS, Defect, DefectClass
from gemmcheck.verdict.detectors import Detector, UnknownDetector
from gemmcheck.judge.kill_matrix import Column
from gemmcheck.verdict import Finding


def test_every_registered_class_reaches_every_derived_list():
    every = set(DEFECTS)
    assert set(Defect) == every
    assert set(hazards.PRIORITY) == every
    assert set(catalog.EXPECTATIONS) == {"correct"} | {d.value for d in every}
    assert {d for c in report.CATEGORIES for d in c.defects} == every
    # Each flag lands in its list, and only there.
    assert hazards.NEEDS_A_TOOL == {d: c.needs_tool for d, c in DEFECTS.items() if c.needs_tool}
    assert hazards.NEEDS_THE_SIMULATOR == {d: c.needs_simulator for d, c in DEFECTS.items() if c.needs_simulator}
    assert hazards.UNSEEN_ON_HARDWARE == {d: c.unseen_on_hardware for d, c in DEFECTS.items() if c.unseen_on_hardware}
    assert set(kill_matrix.ISOLATED) == {d.value for d, c in DEFECTS.items() if c.isolated}
    assert set(kill_matrix.NOT_IN_MATRIX) == {d.value for d, c in DEFECTS.items() if c.not_in_matrix}
    assert set(hazards_plugin.NOT_FOR_CORRECTNESS) == {d.value for d, c in DEFECTS.items()
                                                       if not c.correctness_suite}
    assert hazards.EXPLAINS[Defect.HANG] == every - {Defect.HANG}


def test_compile_error_is_a_class_of_its_own():
    c = DEFECTS[Defect.COMPILE_ERROR]
    assert Defect("compile_error") is Defect.COMPILE_ERROR
    assert hazards.PRIORITY[0] == Defect.COMPILE_ERROR and not c.correctness_suite
    assert hazards.classify([hazards.unfinished("compile_error", "g++ failed", detector=Detector.COMPILER)]
                            ).defect == Defect.COMPILE_ERROR


class Extra(str, enum.Enum):   # a class someone adds
    LOST_UPDATE = "lost_update"


def test_a_new_registry_entry_appears_in_each_derived_list():
    new = DefectClass(Extra.LOST_UPDATE, -1, "Wrong values", "an atomic update lost",
                      explains=frozenset({Defect.WRONG_VALUES}), needs_tool="racecheck",
                      needs_simulator="the simulator's tracking",
                      isolated=True, not_in_matrix="needs a multi-block race harness",
                      correctness_suite=False)
    registry = {**DEFECTS, Extra.LOST_UPDATE: new}
    assert defects.priority(registry)[0] == Extra.LOST_UPDATE   # its priority, -1, is the lowest
    assert defects.explains(registry)[Extra.LOST_UPDATE] == {Defect.WRONG_VALUES}
    assert Extra.LOST_UPDATE in defects.explains(registry)[Defect.HANG]
    assert defects.needs_a_tool(registry)[Extra.LOST_UPDATE] == "racecheck"
    assert defects.needs_the_simulator(registry)[Extra.LOST_UPDATE] == "the simulator's tracking"
    assert "lost_update" in defects.isolated(registry)
    assert "lost_update" in defects.not_in_matrix(registry)
    assert "lost_update" in defects.not_for_correctness(registry)
    assert "lost_update" in defects.expectations(registry)
    assert Extra.LOST_UPDATE in defects.in_category("Wrong values", registry)
    # Without the entry it is in none of them.
    assert "lost_update" not in defects.expectations() and Extra.LOST_UPDATE not in defects.priority()


def test_a_global_memory_race_is_named_where_the_simulator_sees_it_and_explains_what_hardware_shows():
    race = Defect.GLOBAL_MEMORY_RACE
    assert report.category_of("global_memory_race: cpu-sim tracked 3 write(s)") == "Global-memory race"
    assert hazards.NEEDS_THE_SIMULATOR == {race: DEFECTS[race].needs_simulator} and race not in hazards.NEEDS_A_TOOL
    assert hazards.EXPLAINS[race] == {Defect.NONDETERMINISM, Defect.WRONG_VALUES}
    # more specific than a race of unknown place, less than a write past the output (which races too)
    order = hazards.PRIORITY.index
    assert order(Defect.SHARED_MEMORY_RACE) < order(race) < order(Defect.NONDETERMINISM)
    assert race in hazards.EXPLAINS[Defect.OUT_OF_BOUNDS_WRITE]
    found = [Finding(Defect.NONDETERMINISM, Detector.SCHEDULES, "differs under reverse", 3),
             Finding(race, Detector.GLOBAL_TRACKING, "blocks (0, 0, 0) and (1, 0, 0) on C[0, 0]", 3)]
    diagnosis = hazards.classify(found)
    assert (diagnosis.defect, diagnosis.explains, diagnosis.label) == (race, (Defect.NONDETERMINISM,), race.value)


def test_an_invalid_warp_mask_is_a_class_of_its_own_that_hardware_may_not_show():
    mask = Defect.INVALID_WARP_MASK
    assert Defect("invalid_warp_mask") is mask and "invalid_warp_mask" in catalog.EXPECTATIONS
    assert report.category_of("invalid_warp_mask: cpu-sim: a warp-synchronous call ...") == "Invalid warp mask"
    assert hazards.NEEDS_A_TOOL[mask] == "synccheck" and mask not in hazards.NEEDS_THE_SIMULATOR
    assert "warp tracking" in hazards.UNSEEN_ON_HARDWARE[mask] and list(hazards.UNSEEN_ON_HARDWARE) == [mask]
    assert hazards.EXPLAINS[mask] == {Defect.SHARED_MEMORY_RACE, Defect.NONDETERMINISM, Defect.WRONG_VALUES}
    # right after a divergent barrier, before everything it explains
    order = hazards.PRIORITY.index
    assert order(mask) == order(Defect.DIVERGENT_BARRIER) + 1 and order(mask) < order(Defect.SHARED_MEMORY_RACE)
    # its values may be right: the correctness suite leaves it to the hazards suite
    assert "invalid_warp_mask" in hazards_plugin.NOT_FOR_CORRECTNESS
    assert Detector.WARP_TRACKING in hazards.PLACES_A_RACE


def test_an_unknown_category_names_the_known_ones():
    with pytest.raises(KeyError, match="unknown report category 'Races'; known: Crash or hang"):
        defects.in_category("Races")
    with pytest.raises(RuntimeError, match="wrong_values: unknown category 'Bad'"):
        defects._check({**DEFECTS, Defect.WRONG_VALUES: replace(DEFECTS[Defect.WRONG_VALUES], category="Bad")})


def test_a_misspelled_detector_name_fails_loudly():
    with pytest.raises(UnknownDetector, match="unknown detector 'shedules'; known detectors: .*schedules"):
        Finding(Defect.NONDETERMINISM, "shedules", "x")
    column = Column([Finding(Defect.NONDETERMINISM, Detector.SCHEDULES, "differs under reverse", 3)])
    with pytest.raises(UnknownDetector, match="'shedules'"):
        column.found(detector="shedules")
    with pytest.raises(UnknownDetector, match="'value-check'"):
        column.found(detector="value-check")   # the name nothing produced
    with pytest.raises(ValueError):
        column.found(defect="nondeterminsm")


def test_a_known_detector_name_finds_what_it_produced_and_nothing_else():
    column = Column([Finding(Defect.NONDETERMINISM, Detector.SCHEDULES, "differs under reverse", 3)])
    assert column.found(detector="schedules") == column.found(detector=Detector.SCHEDULES) != []
    assert column.found(detector=Detector.SHARED_TRACKING) == []
    finding = Finding("crash", "isolation", "x")
    assert (finding.defect, finding.detector) == (Defect.CRASH, Detector.ISOLATION)


def test_every_detector_the_hazards_module_names_is_registered():
    # Each detector function produces findings of the registry only (the Finding checks it);
    # here: the unfinished-launch builder maps every status to its class.
    assert {s: hazards.unfinished(s, "x").defect for s in hazards.UNFINISHED} == {
        "crash": Defect.CRASH, "failed": Defect.CRASH, "hang": Defect.HANG,
        "compile_error": Defect.COMPILE_ERROR}
    with pytest.raises(ValueError, match="unknown launch status 'stuck'"):
        hazards.unfinished("stuck", "x")


def test_every_detector_name_written_in_the_code_base_is_registered():
    # Findings are built with literal names in modules other engineers own too (the oracle,
    # the performance suite): each literal in a Finding(...) call must be a registered name.
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    call = re.compile(r"(?:Finding|_finding)\(\s*[\w.]+,\s*\"([\w-]+)\"")
    named = {m.group(1): path.name for path in [*root.glob("gemmcheck/**/*.py"), *root.glob("suites/**/*.py")]
             for m in call.finditer(path.read_text())}
    named.update({m.group(1): "oracle/judging.py" for m in re.finditer(
        r"detector, what = \"([\w-]+)\"", (root / "gemmcheck" / "judge" / "oracle" / "judging.py").read_text())})
    assert named, "no literal detector name found: the pattern is stale"
    unknown = {name: where for name, where in named.items() if name not in {d.value for d in Detector}}
    assert not unknown, f"detector names no Detector member has: {unknown}"
