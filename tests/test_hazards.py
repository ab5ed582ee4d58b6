"""Every hazard detector fires on a stand-in with its defect and stays silent on a correct
one; the classifier names the root cause and what it explains."""

import pytest

from gemmcheck.contract import catalog
from gemmcheck.judge import hazards
from gemmcheck.verdict import Defect, Finding

from fakes import NumpyBackend, correct_product
from hazard_stand_ins import (LingeringNaN, NaNAt, Racy, StaleNaN, WrappingStore, always_nan, carries_the_poison,
                              drops_k_tail, floor_grid, instance, reads_past_A, scribbles_on_B)

INST = instance()                      # TILE 4, float32, any shape
RAGGED = hazards.exposing_problems(INST, race_sizes=())[0][1]


def observe(kernel, problem=RAGGED, repeats=2, control=True):
    return hazards.observe(NumpyBackend({"mine": kernel}), INST, problem, repeats=repeats,
                           control=control)


def defects(findings):
    return {f.defect for f in findings}


def test_exposing_problems_derive_from_the_tile():
    shapes = [(purpose, p.M, p.N, p.K) for purpose, p in hazards.exposing_problems(INST, race_sizes=(64,))]
    assert shapes == [("ragged edges", 9, 5, 17), ("tile-aligned", 16, 16, 16),
                      ("large ragged", 61, 61, 61), ("race stress", 64, 64, 64), ("K = 0", 9, 5, 0)]
    assert all(p.values == "exact" and p.dtype == "float32"
               for _, p in hazards.exposing_problems(INST, race_sizes=(64,)))


def test_blocks_of_one_or_four_threads_get_the_first_race_size_only():
    """The nightly's second race size (2048) cost a TILE-1 kill-matrix row 12-16 s on the H200."""
    def sizes(tile):
        inst = catalog.Instance(INST.spec, "float32", tile)
        return [p.M for purpose, p in hazards.exposing_problems(inst, race_sizes=(1024, 2048))
                if purpose == "race stress"]
    assert sizes(1) == sizes(2) == [1024]
    assert sizes(4) == sizes(16) == [1024, 2048]


def test_exposing_problems_keep_only_shapes_the_kernel_claims():
    square = instance(signature="square")
    object.__setattr__(square.spec, "shapes", "square-tile-multiple")
    shapes = [(p.M, p.N, p.K) for _, p in hazards.exposing_problems(square, race_sizes=(64,))]
    assert shapes == [(16, 16, 16), (64, 64, 64)]


@pytest.mark.parametrize("claim, ragged, large", [
    ("K % 8 == 0 and K > 0", (9, 5, 24), (61, 61, 64)),          # TMA: rows of 16 bytes
    ("K % 8 == 0 and N % 8 == 0", (9, 8, 24), (61, 64, 64)),     # 16-byte groups of B and C
])
def test_a_ragged_shape_the_kernel_does_not_claim_moves_to_a_claimed_one_still_ragged(claim, ragged, large):
    """A kernel that claims only K % 8 == 0 still has partial tiles in M and N, where a missing
    bounds guard shows: its ragged problems keep M (and N where it can) off the tile."""
    inst = catalog.Instance(catalog.KernelSpec(name="mine", source=catalog.BUILTIN, entry="mine", signature="mnk",
                                               policy="tile2d", tiles=(4,), dtypes=("float32",), expect="correct",
                                               shapes=claim), "float32", 4)
    shapes = {purpose: (p.M, p.N, p.K) for purpose, p in hazards.exposing_problems(inst, race_sizes=(64,))}
    assert shapes["ragged edges"] == ragged and shapes["large ragged"] == large
    assert all(inst.supports(*shape) for shape in shapes.values())
    if ragged[1] % 4:   # N still off the tile: a store without its column guard is seen there,
        # where on the whole-tile shapes alone it writes nothing past C
        seen = {purpose: hazards.check_out_of_bounds_write(hazards.observe(NumpyBackend({"mine": WrappingStore()}),
                                                                           inst, problem, repeats=2))
                for purpose, problem in hazards.exposing_problems(inst, race_sizes=())}
        assert seen["ragged edges"] and not seen["tile-aligned"]


DETECTOR_CASES = [
    # (detector, defective stand-in, the class it must report)
    (hazards.check_values, lambda: drops_k_tail, Defect.WRONG_VALUES),
    (hazards.check_unwritten, lambda: floor_grid, Defect.UNWRITTEN_OUTPUT),
    (hazards.check_out_of_bounds_read, lambda: reads_past_A, Defect.OUT_OF_BOUNDS_READ),
    (hazards.check_out_of_bounds_write, WrappingStore, Defect.OUT_OF_BOUNDS_WRITE),
    (hazards.check_input_mutation, lambda: scribbles_on_B, Defect.INPUT_MUTATION),
    (hazards.check_nondeterminism, Racy, Defect.NONDETERMINISM),
]
IDS = [case[0].__name__ for case in DETECTOR_CASES]


@pytest.mark.parametrize("detector, make_defective, defect", DETECTOR_CASES, ids=IDS)
def test_detector_fires_on_its_defect(detector, make_defective, defect):
    found = detector(observe(make_defective()))
    assert [f.defect for f in found] == [defect]
    assert found[0].count > 0 and found[0].summary


@pytest.mark.parametrize("detector", [case[0] for case in DETECTOR_CASES], ids=IDS)
def test_detector_is_silent_on_a_correct_kernel(detector):
    for _, problem in hazards.exposing_problems(INST, race_sizes=(32,)):
        assert detector(observe(correct_product, problem)) == []


@pytest.mark.parametrize("kernel, never_written", [(floor_grid, True), (carries_the_poison, False)],
                         ids=["skips_elements", "carries_the_poisons_payload"])
def test_the_poison_detector_and_the_oracle_agree_on_what_was_never_written(kernel, never_written):
    """One definition (harness.never_written), read by both: a kernel that skips elements leaves
    them never written; one that writes them with a NaN carrying the poison's payload wrote
    them (wrong values), though their bits are the poison's."""
    from gemmcheck.judge import oracle

    obs = observe(kernel)
    run = obs.runs[0]
    assert (run.C_bits == INST.dt.poison_bits).any()   # both leave the poison's bits in C
    judged = oracle.judge(run, *obs.operands, exact=True, problem=obs.problem)
    assert bool(hazards.check_unwritten(obs)) == never_written == (Defect.UNWRITTEN_OUTPUT in judged.defects)
    if not never_written:
        assert judged.defects == {Defect.WRONG_VALUES}, judged.message()
        assert hazards.classify(hazards.detect(obs)).defect == Defect.WRONG_VALUES


def test_every_plain_detector_is_covered_here():
    # check_reads_c_at_beta_zero needs a kernel that takes beta: tests/test_blas_contract.py
    assert {case[0] for case in DETECTOR_CASES} == set(hazards.PLAIN_DETECTORS) - {hazards.check_reads_c_at_beta_zero}


def test_out_of_bounds_read_counts_only_what_depends_on_the_guards():
    obs = observe(reads_past_A)
    (finding,) = hazards.check_out_of_bounds_read(obs)
    assert finding.count == 1 and finding.where == (RAGGED.M - 1, RAGGED.N - 1)
    # With zero guards the same stand-in computes the right product.
    assert hazards.check_values(hazards.Observation(INST, RAGGED, runs=obs.control)) == []


def test_a_nan_that_moves_between_launches_is_not_called_an_out_of_bounds_read():
    obs = observe(StaleNaN(), repeats=2)
    assert hazards.check_out_of_bounds_read(obs) == []
    assert defects(hazards.detect(obs)) >= {Defect.NONDETERMINISM, Defect.WRONG_VALUES}


def test_a_nan_that_lingers_for_two_launches_whatever_the_guards_is_not_an_out_of_bounds_read():
    # The zero-guard control goes between the NaN-guard launches: launched after both, it
    # would see the NaN gone and guard-swap would blame the guards.
    obs = observe(LingeringNaN(), repeats=2)
    assert hazards.check_out_of_bounds_read(obs) == []
    assert defects(hazards.detect(obs)) == {Defect.WRONG_VALUES, Defect.NONDETERMINISM}


# Launch order: NaN guards, zero guards (the control), NaN guards (hazards.launch_order).
@pytest.mark.parametrize("places", [
    ([0, 1], [], [0, 1, 2]),     # the NaN-guard launches disagree: NaN that moves is not the guards'
    ([0, 1], [5], [0, 1]),       # the control has NaN too: the kernel makes NaN without the guards
    ([0, 1, 2], [5], [0, 1, 7]),  # both, as the H200 showed in shard 1/10
], ids=["nan_guard_launches_disagree", "control_has_nan", "both"])
def test_nan_from_stale_memory_is_not_called_an_out_of_bounds_read(places):
    obs = observe(NaNAt(*places), repeats=2)
    assert hazards.check_out_of_bounds_read(obs) == []
    assert Defect.OUT_OF_BOUNDS_READ not in defects(hazards.detect(obs))


def test_a_nan_whatever_the_guards_hold_is_wrong_values_not_an_out_of_bounds_read():
    obs = observe(always_nan)
    assert hazards.check_out_of_bounds_read(obs) == []
    assert defects(hazards.detect(obs)) == {Defect.WRONG_VALUES}


def test_out_of_bounds_read_needs_a_control_launch():
    assert hazards.check_out_of_bounds_read(observe(reads_past_A, control=False)) == []


def test_nondeterminism_needs_two_launches():
    assert hazards.check_nondeterminism(observe(Racy(), repeats=1)) == []


def test_detectors_report_a_failed_launch_and_nothing_else():
    crash = Finding(Defect.CRASH, "isolation", "the launch failed")
    obs = hazards.Observation(INST, RAGGED, failure=crash)
    assert hazards.detect(obs) == [crash]


# -- the classifier ---------------------------------------------------------------------

def classify(kernel, **kw):
    return hazards.classify(hazards.detect(observe(kernel, **kw)))


def test_a_correct_kernel_is_classified_as_nothing():
    d = classify(correct_product)
    assert (d.defect, d.label) == (None, "none")


def test_nondeterminism_alone_is_a_race_of_unknown_place_not_a_shared_memory_race():
    """A split-K kernel whose slices race in global memory differs between launches too:
    nothing here says shared memory, so the diagnosis does not either."""
    d = classify(Racy())
    assert (d.defect, d.basis, d.label) == (Defect.NONDETERMINISM, "observed",
                                            "nondeterminism (race of unknown place)")
    assert set(d.explains) == {Defect.WRONG_VALUES}
    assert "race of unknown place" in d.explanation and "shared memory" not in d.explanation.split(":")[0]


def test_an_unguarded_store_is_an_out_of_bounds_write_that_explains_wrong_and_varying_values():
    d = classify(WrappingStore())
    assert d.defect == Defect.OUT_OF_BOUNDS_WRITE and d.basis == "observed"
    assert set(d.explains) == {Defect.WRONG_VALUES, Defect.NONDETERMINISM}
    assert d.also == ()


def test_nondeterminism_with_an_out_of_bounds_write_is_not_called_a_shared_memory_race():
    findings = hazards.detect(observe(WrappingStore()))
    assert Defect.NONDETERMINISM in defects(findings)
    assert Defect.SHARED_MEMORY_RACE not in hazards.classify(findings).explains


def test_an_out_of_bounds_read_explains_the_wrong_values():
    d = classify(reads_past_A)
    assert d.defect == Defect.OUT_OF_BOUNDS_READ and d.explains == (Defect.WRONG_VALUES,)


@pytest.mark.parametrize("kernel, defect", [(floor_grid, Defect.UNWRITTEN_OUTPUT),
                                            (drops_k_tail, Defect.WRONG_VALUES),
                                            (scribbles_on_B, Defect.INPUT_MUTATION)],
                         ids=["floor_grid", "drops_k_tail", "scribbles_on_B"])
def test_single_defect_stand_ins_are_classified_as_their_defect(kernel, defect):
    assert classify(kernel).defect == defect


def _finding(defect, detector):
    return Finding(defect, detector, f"{detector} saw {defect.value}", 1)


def test_synccheck_makes_a_divergent_barrier_the_root_of_races_and_wrong_values():
    d = hazards.classify([_finding(Defect.WRONG_VALUES, "exact-bits"),
                          _finding(Defect.SHARED_MEMORY_RACE, "racecheck"),
                          _finding(Defect.DIVERGENT_BARRIER, "synccheck")])
    assert d.defect == Defect.DIVERGENT_BARRIER and d.established_by == ("synccheck",)
    assert set(d.explains) == {Defect.SHARED_MEMORY_RACE, Defect.WRONG_VALUES}


def test_an_invalid_warp_mask_is_the_root_of_the_values_and_races_it_leaves():
    d = hazards.classify([_finding(Defect.WRONG_VALUES, "exact-bits"),
                          _finding(Defect.NONDETERMINISM, "schedules"),
                          _finding(Defect.INVALID_WARP_MASK, "warp-tracking")])
    assert d.defect == Defect.INVALID_WARP_MASK and d.established_by == ("warp-tracking",)
    assert set(d.explains) == {Defect.NONDETERMINISM, Defect.WRONG_VALUES}
    # a divergent barrier is the more specific cause of what both explain
    d = hazards.classify([_finding(Defect.INVALID_WARP_MASK, "synccheck"),
                          _finding(Defect.DIVERGENT_BARRIER, "synccheck")])
    assert d.defect == Defect.DIVERGENT_BARRIER and d.also == (Defect.INVALID_WARP_MASK,)


def test_racecheck_names_shared_memory_where_launches_that_differ_alone_do_not():
    d = hazards.classify([_finding(Defect.NONDETERMINISM, "repeat-launch"),
                          _finding(Defect.SHARED_MEMORY_RACE, "racecheck")])
    assert (d.defect, d.basis, d.established_by) == (Defect.SHARED_MEMORY_RACE, "observed", ("racecheck",))
    assert d.explains == (Defect.NONDETERMINISM,)


def test_a_crash_is_the_verdict_and_memcheck_says_where():
    d = hazards.classify([_finding(Defect.CRASH, "isolation"),
                          _finding(Defect.OUT_OF_BOUNDS_WRITE, "memcheck")])
    assert d.defect == Defect.CRASH and d.explains == (Defect.OUT_OF_BOUNDS_WRITE,)


def test_independent_defects_are_listed_besides_the_root_cause():
    d = hazards.classify([_finding(Defect.UNWRITTEN_OUTPUT, "poison"),
                          _finding(Defect.OUT_OF_BOUNDS_READ, "guard-swap")])
    assert d.defect == Defect.OUT_OF_BOUNDS_READ and d.also == (Defect.UNWRITTEN_OUTPUT,)
    assert "also unwritten_output" in d.explanation


def test_every_defect_class_has_a_place_in_the_priority():
    assert set(hazards.PRIORITY) == set(Defect)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_on_the_simulator_an_element_computed_from_the_poisons_payload_was_written(dtype):
    """A CUDA kernel on the CPU simulator whose first row is computed from a NaN with the
    poison's payload: the payload survives the arithmetic (the elements hold the poison's bits),
    and the poison detector stays silent: they were written."""
    from pathlib import Path

    from gemmcheck.backends import cpu_sim
    from gemmcheck.problems.problem import Problem

    spec = next(s for s in catalog.load(Path(__file__).parent / "cpu_sim_kernels" / "catalog.toml")
                if s.name == "computes_from_the_poison")
    inst = catalog.Instance(spec, dtype, 4)
    obs = hazards.observe(cpu_sim.CpuSimBackend(), inst, Problem(9, 5, 17, dtype, "exact", 1))
    assert all((run.C_bits[0] == inst.dt.poison_bits).all() for run in obs.runs)
    assert hazards.check_unwritten(obs) == []
    assert hazards.classify(hazards.detect(obs)).defect == Defect.WRONG_VALUES


def test_on_the_simulator_a_kernel_that_skips_elements_leaves_them_never_written():
    from gemmcheck.backends import cpu_sim

    spec = next(s for s in catalog.load(catalog.BUILTIN) if s.name == "broken_floor_grid")
    inst = catalog.Instance(spec, "float32", 4)
    problem = hazards.exposing_problems(inst, race_sizes=())[0][1]   # ragged: partial tiles unwritten
    (found,) = hazards.check_unwritten(hazards.observe(cpu_sim.CpuSimBackend(), inst, problem))
    assert found.defect == Defect.UNWRITTEN_OUTPUT and "never written (the poison bits after" in found.summary
