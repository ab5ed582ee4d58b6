"""The kill matrix end to end on numpy stand-ins: one instantiation per kernel, the plain
column (isolated children for crash / hang), the sanitizer column (a stand-in tool), and
the pass / fail / needs-tool rule per row."""

import json
import os
from pathlib import Path

import pytest

from gemmcheck.contract import catalog
from gemmcheck.judge import hazards, kill_matrix
from gemmcheck.judge.kill_matrix import Column, Row
from gemmcheck.verdict import Defect, Finding

from hazard_stand_ins import MATRIX_KERNELS, fake_sanitizer, matrix_backend, matrix_catalog

TESTS = Path(__file__).resolve().parent


@pytest.fixture
def instances(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))
    specs = catalog.load(matrix_catalog(tmp_path))
    return kill_matrix.select([i for s in specs for i in s.instances()])


def settings(**kw):
    return kill_matrix.Settings(race_sizes=(32,), race_repeats=3, hang_timeout=1,
                                backend_name="hazard_stand_ins:matrix_backend", **kw)


def race_report(kernel: str) -> list[str]:
    """What the stand-in racecheck prints on `kernel` (float32, TILE 8)."""
    return [f"========= Error: Race reported between Write access at void {kernel}<float, (int)8>(const T1 *)+0x10",
            f"=========     and Read access at void {kernel}<float, (int)8>(const T1 *)+0x20 [5 hazards]",
            "========= "]


def batch_row(name: str, expect: str):
    """(instance, problems) of a catalog entry declared `expect`, as RowChildren.batches takes."""
    spec = catalog.KernelSpec(name=name, source=catalog.BUILTIN, entry=name, signature="mnk",
                              policy="tile2d", tiles=(16,), dtypes=("float32",), expect=expect)
    return (catalog.Instance(spec, "float32", 16), ["problems"])


def test_one_instantiation_per_kernel_float32_at_the_tile_nearest_16(instances):
    assert [i.id for i in instances] == [f"{name}-float32-TILE8" for name in MATRIX_KERNELS
                                         if name != "slow"]


def test_without_the_tool_every_kernel_is_caught_and_classified_where_hardware_can(instances):
    rows = kill_matrix.build(matrix_backend(), instances, settings())
    outcome = {r.instance.spec.name: r.outcome()[0] for r in rows}
    # Launches that differ say nothing of where threads raced: naming shared memory takes racecheck.
    assert outcome == {name: "pass" for name in outcome} | {"divergent": "needs-tool", "racy": "needs-tool"}
    plain = {r.instance.spec.name: r.plain.label() for r in rows}
    assert plain == {"good": "none", "good_too": "none", "racy": "nondeterminism (race of unknown place)",
                     "reads_past_A": "out_of_bounds_read", "wrapping_store": "out_of_bounds_write",
                     "floor_grid": "unwritten_output", "drops_k_tail": "wrong_values",
                     "skips_repeats": "wrong_values",   # not nondeterminism: launched once before
                     "divergent": "wrong_values", "segfaults": "crash", "sleeps": "hang"}
    assert all(not r.sanitizer.ran for r in rows)
    needs = next(r for r in rows if r.instance.spec.name == "divergent").outcome()[1]
    assert "needs synccheck" in needs and "caught by the plain detectors as wrong_values" in needs
    # The race locator asked the CPU simulator to place the race of unknown place: a stand-in has
    # no kernel body for it to build, so it placed nothing and the row says why.
    racy = next(r for r in rows if r.instance.spec.name == "racy")
    assert not racy.plain.placement.simulated and not racy.plain.placed
    assert "\nthe CPU simulator could not build it: " in racy.outcome()[1], racy.outcome()[1]
    assert all(r.plain.placement is None for r in rows if r is not racy)
    # Race stress ran at the profile's size; the aligned 4T cube (32) is not run twice.
    good = rows[0]
    assert good.problems == ["ragged edges: M17xN9xK33", "tile-aligned: M32xN32xK32",
                             "large ragged: M27xN27xK27", "K = 0: M17xN9xK0"]
    text = kill_matrix.table(rows)
    assert text[0].split()[:3] == ["instantiation", "declared", "plain"] and len(text) == len(rows) + 1
    json.dumps(kill_matrix.document(rows, settings()))


def test_a_kernel_that_keeps_state_across_launches_is_wrong_values_in_a_child_too(instances):
    """Observed in a fresh child (--gemm-isolate all), its first launch there is right and the
    next zeros: the child launches it once before observing it, as the parent does."""
    skips = next(i for i in instances if i.spec.name == "skips_repeats")
    row = kill_matrix.build_row(matrix_backend(), skips, settings(isolate_all=True))
    assert row.plain.label() == "wrong_values" and row.outcome()[0] == "pass"


def test_with_the_tool_every_kernel_is_classified_as_declared(instances, tmp_path, monkeypatch):
    def at(kernel):
        return f"=========     at void {kernel}<float, (int)8>(const T1 *, const T1 *, T1 *, int, int, int)+0x40"
    invalid = ["=========     by thread (0,0,0) in block (0,0,0)", "========= "]
    tool = fake_sanitizer(tmp_path, {
        "racecheck": {"racy": race_report("racy")},
        "synccheck": {"divergent": ["========= Barrier error detected. Divergent thread(s) in block.",
                                    at("divergent"), *invalid]},
        "memcheck": {"reads_past_A": ["========= Invalid __global__ read of size 4 bytes",
                                      at("reads_past_A"), *invalid],
                     "wrapping_store": ["========= Invalid __global__ write of size 4 bytes",
                                        at("wrapping_store"), *invalid],
                     "segfaults": ["========= Invalid __global__ write of size 4 bytes",
                                   at("segfaults"), *invalid]},
    }, monkeypatch)
    calls = tmp_path / "calls.jsonl"
    monkeypatch.setenv("FAKE_SANITIZER_CALLS", str(calls))
    s = settings(sanitizer_exe=str(tool), sanitizer_note="", tools=("racecheck", "synccheck", "memcheck"),
                 log_dir=tmp_path / "logs")
    rows = kill_matrix.build(matrix_backend(), instances, s)
    # Each tool ran in few children, not one per row: the rows together, and a kernel declared
    # to crash alone, as one whose defect floods the tool (a read or write out of bounds under
    # memcheck, a divergent barrier under synccheck).
    children = [json.loads(line) for line in calls.read_text().splitlines()]
    rest = ["drops_k_tail", "floor_grid", "good", "good_too", "racy", "reads_past_A", "skips_repeats",
            "wrapping_store"]
    # (And one that floods the tool ends a batch, one a batch: test_a_row_whose_declared_defect_...)
    floods = {"memcheck": {"reads_past_A", "wrapping_store"}, "synccheck": {"divergent"}, "racecheck": set()}
    by_tool = {}
    for tool_, kernels in children:
        by_tool.setdefault(tool_, []).append(kernels)
    assert {t: len(runs) for t, runs in by_tool.items()} == {"racecheck": 2, "memcheck": 3, "synccheck": 2}
    for tool_, runs in by_tool.items():
        assert sorted(k for run in runs for k in run) == sorted(["divergent", "segfaults", *rest])   # once each
        assert ["segfaults"] in runs
        assert all(len(floods[tool_] & set(run)) <= 1 for run in runs), (tool_, runs)
    racy_log = (tmp_path / "logs" / "racecheck-racy-float32-TILE8.log").read_text()
    assert "Race reported" in racy_log and "ran this row with" in racy_log
    assert "Race reported" not in (tmp_path / "logs" / "racecheck-floor_grid-float32-TILE8.log").read_text()
    assert "Divergent thread(s) in block" in (tmp_path / "logs" / "synccheck-divergent-float32-TILE8.log").read_text()
    assert {r.instance.spec.name: r.outcome()[0] for r in rows} == {n: "pass" for n in MATRIX_KERNELS
                                                                   if n != "slow"}
    by_name = {r.instance.spec.name: r for r in rows}
    assert by_name["divergent"].sanitizer.label() == "divergent_barrier"
    assert by_name["racy"].sanitizer.diagnosis.basis == "observed"
    assert by_name["segfaults"].sanitizer.diagnosis.explains == (Defect.OUT_OF_BOUNDS_WRITE,)
    assert "tools not run" in by_name["sleeps"].sanitizer.note
    assert by_name["good"].sanitizer.findings == [] and by_name["good"].sanitizer.ran


def test_a_batch_whose_launch_failed_with_no_report_runs_that_row_again_alone(instances, tmp_path, monkeypatch):
    """What memcheck once did on an H200: in a batch of defects it said nothing of a read
    outside A, and the launch faulted. The row is run again in a child of its own, whose
    report is the row's; the batch's other rows keep the batch's."""
    tool = fake_sanitizer(tmp_path, {"memcheck": {"drops_k_tail": [
        "!fails-in-a-batch", "========= Invalid __global__ read of size 4 bytes",
        "=========     at void drops_k_tail<float, (int)8>(const T1 *, const T1 *, T1 *, int, int, int)+0x40",
        "=========     by thread (0,0,0) in block (0,0,0)", "========= "]}}, monkeypatch)
    calls = tmp_path / "calls.jsonl"
    monkeypatch.setenv("FAKE_SANITIZER_CALLS", str(calls))
    batch = [i for i in instances if i.spec.name in ("drops_k_tail", "floor_grid", "good")]
    s = settings(sanitizer_exe=str(tool), sanitizer_note="", tools=("memcheck",), log_dir=tmp_path / "logs")
    rows = {r.instance.spec.name: r for r in kill_matrix.build(matrix_backend(), batch, s)}
    children = [json.loads(line) for line in calls.read_text().splitlines()]
    assert children[0] == ["memcheck", ["drops_k_tail", "floor_grid", "good"]]
    assert ["memcheck", ["drops_k_tail"]] in children            # again, alone
    assert ["memcheck", ["floor_grid"]] not in children and ["memcheck", ["good"]] not in children
    # What the tool says of the child that died names no kernel: it is not the reference's
    # (on an H200 "process didn't terminate successfully" failed five references of a batch).
    assert rows["good"].outcome()[0] == "pass" and rows["good"].sanitizer.unrecognized == []
    found = rows["drops_k_tail"].sanitizer.found(detector="memcheck")
    assert [f.defect for f in found] == [Defect.OUT_OF_BOUNDS_READ]
    log = (tmp_path / "logs" / "memcheck-drops_k_tail-float32-TILE8.log").read_text()
    assert log.startswith("(run again alone: in a batch of 3 rows its launch failed under memcheck "
                          "with no report from it)")
    assert rows["floor_grid"].sanitizer.found(detector="memcheck") == []


def test_a_batch_that_reports_on_a_kernel_declared_correct_is_checked_alone(instances, tmp_path, monkeypatch):
    """A report on a reference in a batch (of references) is confirmed in a child of its own:
    never call a correct kernel wrong because of a neighbour. Here the alone run is clean."""
    tool = fake_sanitizer(tmp_path, {"racecheck": {"good": ["!only-in-a-batch", *race_report("good")]}},
                          monkeypatch)
    calls = tmp_path / "calls.jsonl"
    monkeypatch.setenv("FAKE_SANITIZER_CALLS", str(calls))
    references = [i for i in instances if i.spec.name in ("good", "good_too")]
    s = settings(sanitizer_exe=str(tool), sanitizer_note="", tools=("racecheck",))
    rows = kill_matrix.build(matrix_backend(), references, s)
    assert [r.outcome()[0] for r in rows] == ["pass", "pass"]
    assert rows[0].sanitizer.found(detector="racecheck") == []
    assert [json.loads(line) for line in calls.read_text().splitlines()] == [
        ["racecheck", ["good", "good_too"]], ["racecheck", ["good"]]]


def test_what_makes_a_batchs_verdict_on_a_row_suspect():
    from gemmcheck.judge import isolation, sanitizer

    def verdict(expect, status, reported):
        spec = catalog.KernelSpec(name="k", source=catalog.BUILTIN, entry="k", signature="mnk",
                                  policy="tile2d", tiles=(16,), dtypes=("float32",), expect=expect)
        instance = catalog.Instance(spec, "float32", 16)
        step = isolation.Step(0, str(spec.catalog), "k", "float32", 16, 33, 17, 65, seed=1)
        report = sanitizer.Report("memcheck", findings=[_f(Defect.OUT_OF_BOUNDS_READ, "memcheck")] if reported else [])
        run = sanitizer.ToolRun("memcheck", {instance.id: report}, {0: isolation.StepOutcome(step, status)}, "")
        return kill_matrix.RowChildren.suspect(run, instance)

    assert verdict("wrong_values", "crash", False) == "its launch failed under memcheck with no report from it"
    assert verdict("wrong_values", "failed", False) is not None
    assert verdict("wrong_values", "crash", True) is None        # the tool said why it failed
    assert verdict("wrong_values", "hang", False) is None        # a defect's hang stands
    assert verdict("wrong_values", "ok", True) is None
    assert verdict("correct", "ok", True) == "memcheck reported on a kernel declared correct"
    assert "did not finish" in verdict("correct", "hang", False)
    assert verdict("correct", "ok", False) is None


def _row(expect, plain=(), tool=None, note="needs compute-sanitizer on PATH; not found",
         problems=("ragged: M19xN17xK21",)):
    spec = catalog.KernelSpec(name="k", source=catalog.BUILTIN, entry="k", signature="mnk",
                              policy="tile2d", tiles=(16,), dtypes=("float32",), expect=expect)
    sanitizer = Column(list(tool), note="ran") if tool is not None else Column(ran=False, note=note)
    return Row(catalog.Instance(spec, "float32", 16), Column(list(plain)), sanitizer, list(problems))


def test_a_row_that_launched_nothing_is_not_checked_never_a_pass():
    # a kernel that claims none of the row's problems: before, a clean verdict ("pass")
    for expect in ("correct", "wrong_values"):
        status, why = _row(expect, problems=()).outcome()
        assert status == "not-checked" and "none of the kill matrix's problems" in why
    assert _row("correct").outcome()[0] == "pass"


def _f(defect, detector="exact-bits"):
    return Finding(defect, detector, f"{detector}: {defect.value}", 1)


def test_a_reference_with_any_finding_fails():
    assert _row("correct").outcome()[0] == "pass"
    assert _row("correct", [_f(Defect.NONDETERMINISM)]).outcome()[0] == "fail"
    assert _row("correct", tool=[_f(Defect.SHARED_MEMORY_RACE, "racecheck")]).outcome()[0] == "fail"
    unknown = _row("correct", tool=[])
    unknown.sanitizer.unrecognized.append("memcheck: Invalid __global__ atomic")
    assert unknown.outcome()[0] == "fail"


def test_a_tool_that_could_not_run_is_an_error_of_the_suite_not_the_rows_fail():
    row = _row("correct", tool=[])
    row.sanitizer.errors.append("memcheck: unrecognized option '--padding'")
    status, why = row.outcome()
    assert status == "error" and "--padding" in why


def test_a_broken_kernel_nothing_catches_fails():
    status, why = _row("out_of_bounds_write").outcome()
    assert status == "fail" and "no detector found anything" in why


def test_a_broken_kernel_caught_as_another_class_fails():
    status, why = _row("out_of_bounds_read", [_f(Defect.WRONG_VALUES)]).outcome()
    assert status == "fail" and "classify it as wrong_values, declared out_of_bounds_read" in why


def test_the_tool_column_must_agree_too():
    row = _row("shared_memory_race", [_f(Defect.NONDETERMINISM)],
               tool=[_f(Defect.NONDETERMINISM), _f(Defect.OUT_OF_BOUNDS_WRITE, "memcheck")])
    status, why = row.outcome()
    assert status == "fail" and "with compute-sanitizer it classifies as out_of_bounds_write" in why


def test_a_divergent_barrier_caught_only_by_the_tool_passes_and_without_it_needs_the_tool():
    plain = [_f(Defect.WRONG_VALUES)]
    assert _row("divergent_barrier", plain).outcome()[0] == "needs-tool"
    with_tool = _row("divergent_barrier", plain, tool=plain + [_f(Defect.DIVERGENT_BARRIER, "synccheck")])
    assert with_tool.outcome()[0] == "pass"
    assert _row("divergent_barrier", plain, tool=plain).outcome()[0] == "fail"


def test_an_invalid_warp_mask_hardware_shows_nothing_of_needs_the_simulator_and_passes_where_synccheck_names_it():
    # A converged warp forgives the mask: nothing on hardware, and synccheck has no shuffle mask to see.
    for tool in (None, []):
        status, why = _row("invalid_warp_mask", tool=tool).outcome()
        assert status == "needs-tool" and "nothing on hardware showed it" in why, why
        assert why.endswith("needs the CPU simulator's warp tracking (--gemm-backend cpu-sim)"), why
    synccheck = [_f(Defect.INVALID_WARP_MASK, "synccheck")]
    assert _row("invalid_warp_mask", tool=synccheck).outcome()[0] == "pass"
    # Values hardware gets wrong need the tool, as a divergent barrier's do.
    assert _row("invalid_warp_mask", [_f(Defect.WRONG_VALUES)]).outcome()[0] == "needs-tool"
    # A class hardware always shows something of still fails when it shows nothing.
    assert _row("divergent_barrier", tool=[]).outcome()[0] == "fail"


def test_a_row_that_could_not_show_its_defect_gives_no_verdict_never_a_clean_one():
    # On a GPU a warp-mask twin shows nothing (before: a "correct" verdict, "not as declared")
    assert _row("invalid_warp_mask", tool=[]).verdict("t") is None
    assert _row("wrong_values", problems=()).verdict("t") is None   # launched nothing
    seen = _row("invalid_warp_mask", [_f(Defect.WRONG_VALUES)]).verdict("t")   # symptoms are kept
    assert seen is not None and [f.defect for f in seen.findings] == [Defect.WRONG_VALUES]
    clean = _row("correct", tool=[]).verdict("t")
    assert clean is not None and clean.findings == [] and clean.problem == "kill matrix: ragged: M19xN17xK21"


def test_on_the_simulator_its_warp_tracking_establishes_an_invalid_warp_mask_and_nothing_is_a_failure():
    tracked = [_f(Defect.WRONG_VALUES), _f(Defect.INVALID_WARP_MASK, "warp-tracking")]
    assert _simulated_row("invalid_warp_mask", tracked).outcome()[0] == "pass"
    status, why = _simulated_row("invalid_warp_mask", []).outcome()
    assert status == "fail" and "no detector found anything" in why, why


def test_a_global_race_on_hardware_the_simulator_did_not_place_is_caught_as_what_it_shows_there_and_needs_it():
    # racecheck sees shared memory only: launches that differ, or wrong values, are all hardware shows;
    # the simulator could not run it (gpu_only here), or the locator did not run (wrong values).
    for shown in (Defect.NONDETERMINISM, Defect.WRONG_VALUES):
        for tool in (None, [_f(shown)]):
            row = _row("global_memory_race", [_f(shown)], tool=tool)
            if shown == Defect.NONDETERMINISM:
                row.plain.placement = hazards.Placement(False, why="k is gpu_only in its catalog: the CPU "
                                                                   "simulator does not run it")
            status, why = row.outcome()
            assert status == "needs-tool", why
            assert f"as {shown.value}" in why and "global-memory tracking" in why and "cpu-sim" in why
            assert why.endswith("k is gpu_only in its catalog: the CPU simulator does not run it"
                                if shown == Defect.NONDETERMINISM else "a race of unknown place (launches that differ)")


def _placed(defect, detector, place="C[1, 2], blocks (0,0,0) and (1,0,0)"):
    return Finding(defect, detector, f"placed by the CPU simulator: {defect.value}", 4, None,
                   {"placed_by": hazards.PLACED_BY, "place": place})


def test_a_race_the_simulator_placed_as_declared_passes_on_hardware_with_or_without_the_tool():
    for declared, detector in ((Defect.GLOBAL_MEMORY_RACE, "global-tracking"),
                               (Defect.SHARED_MEMORY_RACE, "shared-tracking")):
        placed = [_f(Defect.NONDETERMINISM, "repeat-launch"), _placed(declared, detector)]
        for tool in (None, placed):
            row = _row(declared.value, placed, tool=tool)
            status, why = row.outcome()
            assert status == "pass" and f"caught as {declared.value}" in why, why
        assert row.plain.label() == (f"{declared.value} (placed by the CPU simulator: "
                                     "C[1, 2], blocks (0,0,0) and (1,0,0))")


def test_a_race_the_simulator_placed_as_another_class_fails_on_hardware():
    placed = [_f(Defect.NONDETERMINISM, "repeat-launch"), _placed(Defect.SHARED_MEMORY_RACE, "shared-tracking")]
    status, why = _row("global_memory_race", placed).outcome()
    assert status == "fail" and "plain detectors classify it as shared_memory_race (placed by" in why, why
    # racecheck naming shared memory where the simulator placed a global race: a mismatch too
    global_race = [_f(Defect.NONDETERMINISM, "repeat-launch"), _placed(Defect.GLOBAL_MEMORY_RACE, "global-tracking")]
    row = _row("global_memory_race", global_race, tool=global_race + [_f(Defect.SHARED_MEMORY_RACE, "racecheck")])
    status, why = row.outcome()
    assert status == "fail" and "with compute-sanitizer it classifies as shared_memory_race" in why, why


def test_a_race_the_simulator_did_not_reproduce_stays_of_unknown_place_and_says_so():
    row = _row("shared_memory_race", [_f(Defect.NONDETERMINISM, "repeat-launch")])
    row.plain.placement = hazards.Placement(True, why="the CPU simulator did not reproduce it: ...")
    assert row.plain.label() == "nondeterminism (race of unknown place)"
    status, why = row.outcome()
    assert status == "needs-tool" and why.endswith("\nthe CPU simulator did not reproduce it: ..."), why


def test_a_global_race_on_hardware_shown_as_anything_else_or_nothing_fails():
    status, why = _row("global_memory_race").outcome()
    assert status == "fail" and "no detector found anything" in why
    status, why = _row("global_memory_race", [_f(Defect.OUT_OF_BOUNDS_WRITE, "guard-bands")]).outcome()
    assert status == "fail" and "plain detectors: classified as out_of_bounds_write" in why
    racecheck = _row("global_memory_race", [_f(Defect.NONDETERMINISM)],
                     tool=[_f(Defect.NONDETERMINISM), _f(Defect.SHARED_MEMORY_RACE, "racecheck")])
    status, why = racecheck.outcome()
    assert status == "fail" and "with compute-sanitizer: classified as shared_memory_race" in why


def test_on_the_simulator_a_global_race_is_established_by_its_tracking_only():
    tracked = [_f(Defect.NONDETERMINISM, "schedules"), _f(Defect.GLOBAL_MEMORY_RACE, "global-tracking")]
    assert _simulated_row("global_memory_race", tracked).outcome()[0] == "pass"
    status, why = _simulated_row("global_memory_race", [_f(Defect.NONDETERMINISM, "schedules")]).outcome()
    assert status == "fail" and "declared global_memory_race" in why


def _simulated_row(expect, found):
    row = _row(expect, found)
    row.plain.detectors = kill_matrix.SIMULATOR
    row.sanitizer = Column(ran=False, note=kill_matrix.SANITIZER_ON_SIMULATOR, detectors=kill_matrix.SIMULATOR,
                           not_applicable=kill_matrix.SANITIZER_NOT_APPLICABLE)
    return row


def test_on_the_simulator_its_barrier_tracking_establishes_a_divergent_barrier():
    established = _simulated_row("divergent_barrier", [_f(Defect.WRONG_VALUES),
                                                       _f(Defect.DIVERGENT_BARRIER, "barrier-tracking")])
    assert established.outcome()[0] == "pass"
    # Only wrong values on the simulator is a failure there, not a "needs the tool" skip.
    status, why = _simulated_row("divergent_barrier", [_f(Defect.WRONG_VALUES)]).outcome()
    assert status == "fail" and "classify it as wrong_values, declared divergent_barrier" in why


def test_on_the_simulator_the_sanitizer_column_says_not_applicable_and_fails_nothing():
    rows = [_simulated_row("correct", []), _simulated_row("wrong_values", [_f(Defect.WRONG_VALUES)])]
    assert [r.outcome()[0] for r in rows] == ["pass", "pass"]
    assert rows[0].sanitizer.label() == "not applicable on cpu-sim"
    header, *lines = kill_matrix.table(rows)
    assert "simulator detectors" in header and "plain detectors" not in header
    assert all("not applicable on cpu-sim" in line for line in lines)
    doc = kill_matrix.document(rows, settings())
    assert doc["settings"]["backend"] == "cpu-sim" and doc["settings"]["detectors"] == "simulator"
    assert doc["rows"][0]["with_sanitizer"]["applicable"] is False
    # A reference with a simulator finding still fails.
    assert _simulated_row("correct", [_f(Defect.SHARED_MEMORY_RACE, "shared-tracking")]).outcome()[0] == "fail"


def test_the_hardware_table_and_document_are_unchanged_by_the_simulator_columns():
    rows = [_row("correct")]
    assert "plain detectors" in kill_matrix.table(rows)[0]
    doc = kill_matrix.document(rows, settings())
    assert doc["settings"]["detectors"] == "hardware" and doc["settings"]["race_sizes"] == [32]


@pytest.mark.parametrize("isolate_all", [False, True], ids=["in-process", "isolated"])
def test_a_row_that_cannot_build_is_its_own_verdict_and_the_good_row_is_judged(
        tmp_path, monkeypatch, isolate_all):
    from hazard_stand_ins import unbuildable_backend

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))
    (tmp_path / "k.cu").write_text("".join(
        f"template <typename T, int TILE> __global__ void {n}(const T *A, const T *B, T *C, int M, int N, int K) {{}}\n"
        for n in ("good", "unbuildable")))
    entries = "".join(f'''
[[kernel]]
name = "{name}"
source = "k.cu"
entry = "{name}"
signature = "mnk"
policy = "tile2d"
tiles = [8]
dtypes = ["float32"]
expect = "correct"
''' for name in ("unbuildable", "good"))
    (tmp_path / "catalog.toml").write_text(entries)
    instances = [i for s in catalog.load(tmp_path / "catalog.toml") for i in s.instances()]
    s = kill_matrix.Settings(race_sizes=(32,), race_repeats=2, hang_timeout=5, isolate_all=isolate_all,
                             backend_name="hazard_stand_ins:unbuildable_backend")
    broken, good = kill_matrix.build(unbuildable_backend(), instances, s)
    assert good.outcome()[0] == "pass" and len(good.problems) == 4
    assert broken.plain.diagnosis.defect == Defect.COMPILE_ERROR
    assert broken.plain.unfinished.detector == "compiler"
    assert "expected ';'" in broken.plain.unfinished.summary
    status, why = broken.outcome()
    assert status == "fail" and "compile_error" in why
    assert len(broken.problems) == 1   # nothing more was tried after the build failed


def test_rows_written_by_several_workers_merge_into_one_matrix_in_catalog_order(instances):
    rows = kill_matrix.build(matrix_backend(), [i for i in instances if i.spec.expect not in ("crash", "hang")],
                             settings())
    s = settings()
    first, second = kill_matrix.document(rows[::2], s), kill_matrix.document(rows[1::2], s)
    merged = kill_matrix.merge([second, {}, first], order=[r.instance.id for r in rows])
    assert [r["instance"] for r in merged["rows"]] == [r.instance.id for r in rows]
    assert merged["settings"] == first["settings"]
    assert kill_matrix.table(merged["rows"]) == kill_matrix.table(rows)
    assert kill_matrix.merge([first, first], order=[r.instance.id for r in rows])["rows"] == first["rows"]
    assert kill_matrix.merge([{}, {}]) == {}


def test_the_matrix_table_aligns_its_columns_and_seconds_right():
    def row(instance, plain, seconds):
        return {"instance": instance, "declared": "wrong_values", "status": "pass", "seconds": seconds,
                "plain": {"detectors": "hardware", "label": plain}, "with_sanitizer": {"label": "not run"}}
    lines = kill_matrix.table([row("broken-float32-TILE8", "caught: wrong_values", 1.25),
                               row("broken-float32-TILE16", "missed", 12.0)])
    title = kill_matrix.COLUMN_TITLES["hardware"]
    width = max(len(title), len("caught: wrong_values"))
    assert lines == [
        f"instantiation          declared      {title:<{width}}  with sanitizer  result  s",
        f"broken-float32-TILE8   wrong_values  {'caught: wrong_values':<{width}}  not run         pass     1.2",
        f"broken-float32-TILE16  wrong_values  {'missed':<{width}}  not run         pass    12.0"]


def test_a_tools_rows_go_in_batches_of_consecutive_rows_and_declared_faults_alone():
    rows = [batch_row(name, expect) for name, expect in (
        ("r1", "correct"), ("b1", "shared_memory_race"), ("r2", "correct"), ("crash", "crash"),
        ("b2", "wrong_values"), ("r3", "correct"), ("oob", "out_of_bounds_write"),
        ("b3", "unwritten_output"), ("oobr", "out_of_bounds_read"))]
    names = lambda batches: [[i.spec.name for i, _ in b] for b in batches]   # noqa: E731
    assert names(kill_matrix.RowChildren.batches(rows, 1)) == [
        ["r1", "b1", "r2", "b2", "r3", "oob", "b3", "oobr"], ["crash"]]
    assert names(kill_matrix.RowChildren.batches(rows, 2)) == [["r1", "b1", "r2", "b2"], ["r3", "oob", "b3", "oobr"],
                                                                ["crash"]]
    assert names(kill_matrix.RowChildren.batches(rows, 1, "memcheck")) == [   # they flood memcheck: one
        ["r1", "b1", "r2", "oob"], ["b2", "r3", "b3", "oobr"], ["crash"]]      # ends each batch
    assert names(kill_matrix.RowChildren.batches(rows[6:], 1, "memcheck")) == [["b3", "oob"], ["oobr"]]
    assert names(kill_matrix.RowChildren.batches(rows[:1], 4)) == [["r1"]]
    most = kill_matrix.RowChildren.MAX_BATCH_ROWS
    many = [batch_row(f"r{n}", "correct") for n in range(2 * most + 1)]   # 3 batches, alike
    assert [len(b) for b in kill_matrix.RowChildren.batches(many, 1)] == [-(-len(many) // 3)] * 3
    assert kill_matrix.RowChildren.batches([], 2) == []
    flooding = many[:most] + [batch_row("oob", "out_of_bounds_read")]
    assert [len(b) for b in kill_matrix.RowChildren.batches(flooding, 1, "memcheck")] == [most // 2 + 1, most // 2]


def test_a_hanging_rows_child_starts_when_submitted_and_its_row_only_collects_it(instances, monkeypatch):
    """RowChildren runs the plain observation of a kernel declared to hang (or crash) in a
    child ahead of its row, on a pool thread; building the row then waits for that result and
    observes nothing again."""
    import threading

    calls = []
    observe = kill_matrix.isolated_observations

    def counted(instances_, settings_):
        calls.append((tuple(i.id for i in instances_), threading.current_thread().name))
        return observe(instances_, settings_)

    monkeypatch.setattr(kill_matrix.row_children, "isolated_observations", counted)
    s = settings()
    sleeps = next(i for i in instances if i.spec.name == "sleeps")
    good = next(i for i in instances if i.spec.name == "good")
    children = kill_matrix.RowChildren(s)
    try:
        children.submit(sleeps)
        children.submit(good)          # a reference is observed in this process, not ahead
        children.wait()
        assert [ids for ids, _ in calls] == [(sleeps.id,)]
        assert calls[0][1].startswith("row-children-isolated")   # never behind the tools' runs
        row = kill_matrix.build_row(matrix_backend(), sleeps, s, children)
    finally:
        children.close()
    assert row.plain.label() == "hang" and len(calls) == 1


def test_a_rows_tool_runs_once_per_run_and_the_other_processes_wait_for_its_result(instances, tmp_path,
                                                                                  monkeypatch):
    """Two processes of a run (here two RowChildren over one folder) that both build a row: the
    first to claim its tool runs it, the other gets the same verdict without a child; a claim
    given up (its process ended first) is run by the one waiting."""
    from gemmcheck.judge.once import Once

    tool = fake_sanitizer(tmp_path, {"racecheck": {"racy": race_report("racy")}}, monkeypatch)
    calls = tmp_path / "calls.jsonl"
    monkeypatch.setenv("FAKE_SANITIZER_CALLS", str(calls))
    rows = [i for i in instances if i.spec.name in ("good", "racy")]
    s = settings(sanitizer_exe=str(tool), sanitizer_note="", tools=("racecheck",))
    folder = tmp_path / "run"
    folder.mkdir()
    planned, taker = (kill_matrix.RowChildren(s, shared=Once(folder)) for _ in range(2))
    try:
        planned.submit_rows(rows)
        taker.submit_rows(rows)                       # e.g. xdist moved the rows to it
        for row in rows:
            (_, mine, _), = planned.results(row)
            (_, theirs, _), = taker.results(row)
            assert [f.summary for f in theirs.findings(row)] == [f.summary for f in mine.findings(row)]
        racy = rows[[r.spec.name for r in rows].index("racy")]
        (_, got, _), = taker.results(racy)
        assert [f.defect for f in got.findings(racy)] == [Defect.SHARED_MEMORY_RACE]
        assert [json.loads(line) for line in calls.read_text().splitlines()] == [["racecheck", ["good", "racy"]]]

        # So is a hanging kernel's isolated observation (its timeout waited out once).
        observed = []
        isolated = kill_matrix.isolated_observations
        monkeypatch.setattr(kill_matrix.row_children, "isolated_observations",
                            lambda i, st: observed.append(i[0].id) or isolated(i, st))
        sleeps = next(i for i in instances if i.spec.name == "sleeps")
        planned.submit(sleeps)
        taker.submit(sleeps)
        assert [o.failure.defect for o in taker.isolated(sleeps)] == [Defect.HANG]
        assert [o.failure.defect for o in planned.isolated(sleeps)] == [Defect.HANG]
        assert observed == [sleeps.id]

        owner, waiter = Once(folder), kill_matrix.RowChildren(s, shared=Once(folder))
        late = [i for i in instances if i.spec.name == "floor_grid"]
        assert owner.claim(f"racecheck {late[0].id}")
        waiter.submit_rows(late)
        owner.abandon()                               # its session ended with the run queued
        (_, alone, error), = waiter.results(late[0])
        assert error is None and alone.findings(late[0]) == []
        assert json.loads(calls.read_text().splitlines()[-1]) == ["racecheck", ["floor_grid"]]
        waiter.close()
    finally:
        planned.close()
        taker.close()


def test_a_kernel_declared_to_flood_a_tool_that_a_batch_says_nothing_of_is_checked_alone(instances, tmp_path,
                                                                                         monkeypatch):
    """A flood ends its batch so that nothing silences it; a batch that still says nothing of it
    is not the row's verdict: a child of its own is."""
    invalid = ["=========     by thread (0,0,0) in block (0,0,0)", "========= "]
    tool = fake_sanitizer(tmp_path, {"memcheck": {"reads_past_A": [
        "!only-alone", "========= Invalid __global__ read of size 4 bytes",
        "=========     at void reads_past_A<float, (int)8>(const T1 *, const T1 *, T1 *, int, int, int)+0x40",
        *invalid]}}, monkeypatch)
    calls = tmp_path / "calls.jsonl"
    monkeypatch.setenv("FAKE_SANITIZER_CALLS", str(calls))
    by_name = {i.spec.name: i for i in instances}
    s = settings(sanitizer_exe=str(tool), sanitizer_note="", tools=("memcheck",))
    children = kill_matrix.RowChildren(s)
    try:
        children.submit_rows([by_name["reads_past_A"], by_name["good"]])
        (_, oob, _), = children.results(by_name["reads_past_A"])
    finally:
        children.close()
    assert [f.defect for f in oob.findings(by_name["reads_past_A"])] == [Defect.OUT_OF_BOUNDS_READ]
    assert oob.log.startswith("(run again alone: in a batch of 2 rows memcheck said nothing of a kernel "
                              "declared to flood it")
    assert [json.loads(line) for line in calls.read_text().splitlines()] == [
        ["memcheck", ["good", "reads_past_A"]], ["memcheck", ["reads_past_A"]]]


def test_a_row_silent_in_a_child_that_reached_the_print_limit_is_checked_alone(instances, tmp_path, monkeypatch):
    """A child prints 100 reports in all: after a kernel that fills them, a neighbour's report
    goes unprinted (synccheck over two divergent barriers on an H200). A row with no report
    from such a child is run again alone."""
    seen, by_name, calls = _racecheck_after_a_filler(instances, tmp_path, monkeypatch, ["floor_grid", "racy", "good"])
    assert [f.defect for f in seen["racy"].findings(by_name["racy"])] == [Defect.SHARED_MEMORY_RACE]
    assert seen["racy"].log.startswith("(run again alone: in a batch of 3 rows racecheck stopped printing")
    assert seen["good"].findings(by_name["good"]) == []
    assert [json.loads(line) for line in calls.read_text().splitlines()] == [
        ["racecheck", ["floor_grid", "good", "racy"]], ["racecheck", ["racy"]], ["racecheck", ["good"]]]


def _racecheck_after_a_filler(instances, tmp_path, monkeypatch, order):
    """racecheck over the rows named in `order`, in one batch, floor_grid's report filling the
    print limit: ({name: the row's ToolRun}, {name: instance}, the stand-in's calls file)."""
    tool = fake_sanitizer(tmp_path, {"racecheck": {
        "floor_grid": ["!fills-the-print-limit", *race_report("floor_grid")], "racy": race_report("racy")}},
        monkeypatch)
    calls = tmp_path / "calls.jsonl"
    monkeypatch.setenv("FAKE_SANITIZER_CALLS", str(calls))
    by_name = {i.spec.name: i for i in instances}
    children = kill_matrix.RowChildren(settings(sanitizer_exe=str(tool), sanitizer_note="", tools=("racecheck",)))
    try:
        children.submit_rows([by_name[name] for name in order])
        seen = {name: children.results(by_name[name])[0][1] for name in order}
    finally:
        children.close()
    return seen, by_name, calls


def test_a_row_before_the_step_that_reached_the_print_limit_keeps_the_batchs_verdict(instances, tmp_path,
                                                                                     monkeypatch):
    """The tool printed reports until the step that reached its limit: a row whose steps all
    came before it printed all of its own (a flood ends its batch, and the references before it
    are not run again: in an H200 nightly that ran them again 183 rows ran twice)."""
    seen, by_name, calls = _racecheck_after_a_filler(instances, tmp_path, monkeypatch,
                                                     ["good", "racy", "floor_grid", "good_too"])
    assert [f.defect for f in seen["racy"].findings(by_name["racy"])] == [Defect.SHARED_MEMORY_RACE]
    assert seen["good"].findings(by_name["good"]) == [] and not seen["good"].log.startswith("(run again")
    assert seen["good_too"].log.startswith("(run again alone: in a batch of 4 rows racecheck stopped printing")
    assert [json.loads(line) for line in calls.read_text().splitlines()] == [
        ["racecheck", ["floor_grid", "good", "good_too", "racy"]], ["racecheck", ["good_too"]]]


def test_a_row_whose_declared_defect_floods_a_tool_ends_a_batch_of_that_tool_one_a_batch():
    """Its reports, by the hundred, come after every other row's in the child: they silence none
    (a child prints 100 in all); a second flood in the child would go unprinted."""
    rows = [batch_row("r1", "correct"), batch_row("d1", "divergent_barrier"), batch_row("d2", "divergent_barrier")]
    names = lambda batches: [[i.spec.name for i, _ in b] for b in batches]   # noqa: E731
    assert names(kill_matrix.RowChildren.batches(rows, tool="synccheck")) == [["r1", "d1"], ["d2"]]
    assert names(kill_matrix.RowChildren.batches(rows, tool="racecheck")) == [["r1", "d1", "d2"]]


@pytest.mark.parametrize("fails", ["!fails-once", "!fails"])
def test_a_launch_that_fails_silently_under_a_tool_alone_is_run_once_more(instances, tmp_path, monkeypatch, fails):
    """memcheck once faulted on broken_unguarded_loads-float64-TILE8, alone, with no report (an
    H200's one-GPU nightly); the tool is asked once more, and a second such failure stands."""
    tool = fake_sanitizer(tmp_path, {"memcheck": {"reads_past_A": [
        fails, "========= Invalid __global__ read of size 4 bytes",
        "=========     at void reads_past_A<float, (int)8>(const T1 *, const T1 *, T1 *, int, int, int)+0x40",
        "=========     by thread (0,0,0) in block (0,0,0)", "========= "]}}, monkeypatch)
    calls = tmp_path / "calls.jsonl"
    monkeypatch.setenv("FAKE_SANITIZER_CALLS", str(calls))
    reads = next(i for i in instances if i.spec.name == "reads_past_A")
    children = kill_matrix.RowChildren(settings(sanitizer_exe=str(tool), sanitizer_note="", tools=("memcheck",)))
    try:
        (_, run, _), = children.results(reads)
    finally:
        children.close()
    assert [json.loads(line) for line in calls.read_text().splitlines()] == [["memcheck", ["reads_past_A"]]] * 2
    assert run.log.startswith("(run again: alone, its launch failed under memcheck with no report from it)")
    found = [f.defect for f in run.findings(reads)]
    assert found == ([Defect.OUT_OF_BOUNDS_READ] if fails == "!fails-once" else [Defect.CRASH])
