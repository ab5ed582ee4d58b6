"""BLAS's rules: the reads_c_at_beta_zero detector fires on the tutorial epilogue and stays
silent on a kernel that skips C at beta = 0 (and on one that leaves C unwritten); declared
conventions parse and change what C holds; empty problems launch nothing; a verdict lists
root causes first."""

import dataclasses

import numpy as np
import pytest

from gemmcheck.contract import catalog
from gemmcheck.contract import dtypes as dt
from gemmcheck.judge import beta_zero, hazards
from gemmcheck.problems.harness import GuardedGemm, finite_garbage, run_problem
from gemmcheck.problems.problem import Problem
from gemmcheck.report import categories, verdicts as verdict_report
from gemmcheck.verdict import Defect, Finding, Verdict, defects
from gemmcheck.verdict.detectors import Detector

from fakes import RoleBackend, RoleSpec, role_gemm

ROLES = ("A", "B", "C", "M", "N", "K", "alpha", "beta")


def instance(**conventions):
    spec = RoleSpec("epilogue", ROLES)
    return catalog.Instance(dataclasses.replace(spec, **conventions), "float32", 4)


def tutorial_epilogue(instance, v):
    """C = alpha * acc + beta * C, C read whatever beta is (0 * NaN = NaN)."""
    old = dt.from_bits(v["C"].copy(), instance.dt).astype(np.float64)
    role_gemm(instance, v, beta=0)
    with np.errstate(invalid="ignore"):
        new = dt.from_bits(v["C"], instance.dt).astype(np.float64) + float(v["beta"]) * old
    v["C"][:] = dt.to_bits(new, instance.dt)


def skips_c_at_beta_zero(instance, v):
    role_gemm(instance, v)   # reads C only when beta != 0


def leaves_last_row_unwritten(instance, v):
    saved = v["C"][-v["N"]:].copy()
    role_gemm(instance, v)
    v["C"][-v["N"]:] = saved


def backend(kernel):
    return RoleBackend({"epilogue": kernel})


# -- the probe and the detector ------------------------------------------------------------

def test_the_probe_names_the_tutorial_epilogue_with_its_elements_and_the_fix():
    probe = beta_zero.probe(backend(tutorial_epilogue), instance())
    assert probe.reads_c
    f = probe.finding
    M, N = probe.problem.M, probe.problem.N
    assert (f.defect, f.detector, f.count, f.where) == (Defect.READS_C_AT_BETA_ZERO, Detector.BETA_ZERO_READ,
                                                        M * N, (0, 0))
    assert beta_zero.FIX in f.summary and f"with C finite, {M * N} of them hold the right product" in f.summary


@pytest.mark.parametrize("kernel", [skips_c_at_beta_zero, leaves_last_row_unwritten])
def test_the_probe_is_silent_on_a_kernel_that_does_not_read_c(kernel):
    assert not beta_zero.probe(backend(kernel), instance()).reads_c


def test_the_probe_does_not_apply_to_a_kernel_without_beta():
    spec = RoleSpec("epilogue", ("A", "B", "C", "M", "N", "K"))
    assert not beta_zero.probe(backend(tutorial_epilogue), catalog.Instance(spec, "float32", 4)).reads_c


@pytest.mark.parametrize("kernel, found", [(tutorial_epilogue, True), (skips_c_at_beta_zero, False),
                                           (leaves_last_row_unwritten, False)])
def test_the_kill_matrix_detector_fires_only_on_a_read_of_c(kernel, found):
    inst = instance()
    for purpose, problem in hazards.exposing_problems(inst, race_sizes=()):
        obs = hazards.observe(backend(kernel), inst, problem, purpose=purpose)
        findings = hazards.check_reads_c_at_beta_zero(obs)
        assert bool(findings) == (found and purpose in hazards.SMALL_PURPOSES), (purpose, findings)


def test_a_read_of_c_explains_the_nan_it_leaves_as_unwritten_or_wrong():
    inst = instance()
    _, problem = hazards.exposing_problems(inst, race_sizes=())[0]
    d = hazards.classify(hazards.detect(hazards.observe(backend(tutorial_epilogue), inst, problem,
                                                        purpose="ragged edges")))
    assert d.defect == Defect.READS_C_AT_BETA_ZERO and d.also == (), d.explanation


def test_a_kernel_declaring_the_convention_gets_finite_c_and_is_clean():
    inst = instance(reads_c_at_beta_zero=True)
    problem = Problem(9, 5, 7, "float32", "exact", 1)
    run = run_problem(backend(tutorial_epilogue), inst, problem)
    from gemmcheck.judge.oracle import judge
    assert run.c_fill == "finite" and judge(run, *problem.operands(), exact=True, problem=problem).ok
    # the same kernel without the convention: the poison's NaN comes back
    run = run_problem(backend(tutorial_epilogue), instance(), problem)
    assert run.c_fill == "poison" and not judge(run, *problem.operands(), exact=True, problem=problem).ok
    assert not hazards.watches_c_reads(inst, "ragged edges") and hazards.watches_c_reads(instance(), "ragged edges")


def test_finite_garbage_is_finite_far_from_results_and_exact_in_the_dtype():
    for name in ("float32", "float16", "bfloat16", "float64"):
        d = dt.get(name)
        G = finite_garbage(6, 5, d)
        assert np.isfinite(G).all() and (np.abs(G) >= float(dt.finfo(d).max) / 2 * 0.99).all()
        assert (dt.from_bits(dt.to_bits(G, d), d).astype(np.float64) == G).all()


# -- empty problems -------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(0, 5, 3), (5, 0, 3), (0, 0, 0)])
def test_M_or_N_zero_launches_nothing_and_keeps_the_guards(shape):
    fake = backend(skips_c_at_beta_zero)
    problem = Problem(*shape, "float32", "exact", 1)
    run = run_problem(fake, instance(), problem)
    assert fake.launches == 0 and not run.launched and not any(run.guard_damage.values())


def test_K_zero_launches_and_a_correct_kernel_writes_zeros_or_beta_c0():
    from gemmcheck.judge.oracle import judge
    for alpha, beta in ((1, 0), (2, -1)):
        problem = Problem(9, 5, 0, "float32", "exact", 1, alpha, beta)
        operands = problem.operands()
        run = run_problem(backend(skips_c_at_beta_zero), instance(), problem, operands=operands)
        assert run.launched and judge(run, *operands[:2], exact=True, problem=problem).ok
        expected = np.zeros((9, 5)) if beta == 0 else beta * operands[2]
        assert (run.C.astype(np.float64) == expected).all()


def test_an_early_return_at_K_zero_is_unwritten_output():
    from gemmcheck.judge.oracle import judge

    def returns_early(instance, v):
        if v["K"] != 0:
            role_gemm(instance, v)
    problem = Problem(9, 5, 0, "float32", "exact", 1)
    run = run_problem(backend(returns_early), instance(), problem)
    assert {f.defect for f in judge(run, *problem.operands(), exact=True, problem=problem).findings} == \
        {Defect.UNWRITTEN_OUTPUT}


def test_empty_operands_keep_a_leading_dimension_of_at_least_one():
    gemm = GuardedGemm(backend(skips_c_at_beta_zero), instance(), np.zeros((4, 0)), np.zeros((0, 3)))
    assert gemm.leading_dimensions == {"lda": 1, "ldb": 3, "ldc": 3} and gemm.operands_text == ""


def test_shape_claims_include_the_empty_sizes_they_are_multiples_of():
    spec = RoleSpec("epilogue", ROLES)
    tiled = dataclasses.replace(spec, shapes="tile-multiple")
    assert spec.supports(0, 5, 3, 4) and spec.supports(5, 7, 0, 4)
    assert tiled.supports(0, 8, 4, 4) and tiled.supports(8, 8, 0, 4) and not tiled.supports(0, 5, 4, 4)
    assert not dataclasses.replace(spec, shapes="K >= 1").supports(5, 7, 0, 4)


# -- the catalog's conventions --------------------------------------------------------------

def write_entry(tmp_path, extra: str):
    (tmp_path / "k.cu").write_text("template <typename T, int TILE>\n__global__ void k(const T *A, const T *B, "
                                   "T *C, int M, int N, int K) {}\n")
    (tmp_path / "catalog.toml").write_text(
        f'[[kernel]]\nname = "k"\nsource = "k.cu"\nentry = "k"\nsignature = "mnk"\npolicy = "tile2d"\ntiles = [4]\n'
        f'dtypes = ["float32"]\nexpect = "correct"\n{extra}')
    return tmp_path / "catalog.toml"


def test_conventions_default_to_blas_and_are_read_as_declared(tmp_path):
    (spec,) = catalog.load(write_entry(tmp_path, ""))
    assert (spec.reads_c_at_beta_zero, spec.deterministic, spec.declared_conventions()) == (False, True, ())
    (spec,) = catalog.load(write_entry(tmp_path, "reads_c_at_beta_zero = true\ndeterministic = false\n"))
    assert spec.declared_conventions() == ("reads_c_at_beta_zero = true", "deterministic = false")


@pytest.mark.parametrize("field", ["reads_c_at_beta_zero", "deterministic"])
def test_a_convention_that_is_not_a_boolean_is_refused_with_the_file_kernel_and_field(tmp_path, field):
    with pytest.raises(catalog.CatalogError, match=rf"catalog.toml: kernel 'k': '{field}' must be true or false"):
        catalog.load(write_entry(tmp_path, f'{field} = "yes"\n'))


# -- the registry and the verdict -----------------------------------------------------------

def test_the_defect_has_a_category_a_priority_and_explains_the_nan_it_leaves():
    entry = defects.DEFECTS[Defect.READS_C_AT_BETA_ZERO]
    assert entry.category == "Reads C at beta = 0" and Defect.READS_C_AT_BETA_ZERO.value in defects.expectations()
    assert defects.explains()[Defect.READS_C_AT_BETA_ZERO] == {Defect.UNWRITTEN_OUTPUT, Defect.WRONG_VALUES}
    assert categories.category_of("reads_c_at_beta_zero: this failure is the read of C ...") == "Reads C at beta = 0"
    assert categories.category_of("nondeterminism: 3 of 9 elements differ") == "Race of unknown place"


def test_a_verdict_lists_the_established_cause_first_with_the_checks_it_explains():
    inst = instance()
    read = Finding(Defect.READS_C_AT_BETA_ZERO, "beta-zero-read", "read", 9, (0, 0))
    pointer = Finding(Defect.READS_C_AT_BETA_ZERO, "beta-zero-read", "explained", 9, (0, 0),
                      {"explained_by": beta_zero.ESTABLISHED_BY})
    unwritten = Finding(Defect.UNWRITTEN_OUTPUT, "poison", "poison", 4, (0, 0))
    log = [Verdict.for_instance(inst, "M9xN5xK0", [pointer], "t_k0"),
           Verdict.for_instance(inst, "M33xN19xK34", [read], "t_probe"),
           Verdict.for_instance(inst, "M4xN4xK4", [unwritten], "t_memory"),
           Verdict.for_instance(inst, "M4xN4xK4", [], "t_ok")]
    (row,) = verdict_report.summarize([inst], log)
    assert row["causes"] == [{"defect": "reads_c_at_beta_zero", "shape": "M33xN19xK34", "test": "t_probe",
                              "checks": 3, "established": True}]
    (line,) = verdict_report.verdict_table([row])[1:]
    assert "reads_c_at_beta_zero (M33xN19xK34): 3 checks" in line


def test_a_verdict_records_the_declared_conventions():
    inst = instance(reads_c_at_beta_zero=True)
    v = Verdict.for_instance(inst, "M4", [], "t", notes=["declared"])
    assert v.conventions == ["reads_c_at_beta_zero = true"] and v.to_json()["notes"] == ["declared"]
    (row,) = verdict_report.summarize([inst], [v])
    assert "[declared: reads_c_at_beta_zero = true]" in verdict_report.verdict_table([row])[1]


def test_a_plan_whose_grid_is_empty_for_a_nonempty_C_is_not_launched_and_C_stays_unwritten(tmp_path):
    """A split-K grid over ceil(K / TILE) is empty at K = 0: launching it is an error, and
    BLAS's beta C is then never written."""
    path = write_entry(tmp_path, "").read_text().replace(
        'policy = "tile2d"\n', 'grid = ["ceil(N / TILE)", "ceil(M / TILE)", "ceil(K / TILE)"]\nblock = ["TILE", "TILE"]\n')
    (tmp_path / "catalog.toml").write_text(path)
    (spec,) = catalog.load(tmp_path / "catalog.toml")
    fake = RoleBackend({"k": skips_c_at_beta_zero})
    run = run_problem(fake, catalog.Instance(spec, "float32", 4), Problem(9, 5, 0, "float32", "exact", 1))
    assert fake.launches == 0 and not run.launched and run.unwritten.all()
    run = run_problem(fake, catalog.Instance(spec, "float32", 4), Problem(9, 5, 3, "float32", "exact", 1))
    assert fake.launches == 1 and run.launched


# -- deterministic = false: same bits on random inputs is information --------------------------

def _determinism_claim():
    """suites/correctness/test_determinism.py's claim, called with stand-in fixtures."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "suites" / "correctness" / "test_determinism.py"
    module_spec = importlib.util.spec_from_file_location("determinism_claim", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module.test_repeated_launches_give_identical_bits


@pytest.mark.parametrize("deterministic", [True, False])
def test_launches_that_differ_fail_unless_the_kernel_declares_floating_point_atomics(deterministic):
    from types import SimpleNamespace

    from fakes import NumpyBackend
    from hazard_stand_ins import Racy, instance as racy_instance
    from gemmcheck.verdict import VerdictLog

    inst = racy_instance()
    inst = catalog.Instance(dataclasses.replace(inst.spec, deterministic=deterministic), "float32", 4)
    concluded, log = [], VerdictLog()
    _determinism_claim()(NumpyBackend({"mine": Racy()}), inst, SimpleNamespace(determinism_repeats=3),
                         lambda instance, problem, finding=None: concluded.append(finding), log)
    if deterministic:
        assert len(concluded) == 1 and concluded[0].defect == Defect.NONDETERMINISM and not log.verdicts
    else:
        (verdict,) = log.verdicts
        assert not concluded and verdict.ok and verdict.conventions == ["deterministic = false"]
        assert "differ between 3 launches" in verdict.notes[0]


@pytest.mark.parametrize("values", ["exact", "normal", "uniform", "wide"])
def test_empty_problems_have_operands_of_every_kind_but_special(values):
    for shape in ((0, 5, 3), (5, 0, 3), (5, 7, 0)):
        A, B = Problem(*shape, "float16", values, 2).operands()
        assert A.shape == shape[::2] and B.shape == shape[:0:-1]
    with pytest.raises(ValueError, match="values='special' places NaN and Inf"):
        Problem(5, 7, 0, "float32", "special")


def test_a_kernel_that_adds_into_a_zeroed_c_is_given_zeros_and_its_twin_is_caught(tmp_path):
    """adds_into_c: C starts as zeros (its callers' cudaMemset), so a split-K that atomicAdds is right
    at every K, K = 0 included; nothing is called unwritten (0 is a right result too), and a split
    that drops the tail of K is a wrong value."""
    from simulator import first_instances, simulator

    kernels = first_instances("examples/catalog.toml")
    with simulator() as backend:
        for K in (0, 13):
            problem = Problem(9, 7, K, "float32", "exact", 1)
            gemm = GuardedGemm.for_problem(backend, kernels["splitk_atomic"], problem)
            assert gemm.c_fill == "zeros" and not gemm.out.matrix(gemm.out.bits).any()
            run = gemm.run()
            assert not run.unwritten.any()
            judgement = judge_run(run, problem)
            assert judgement.ok, judgement.message()
        twin = judge_run(run_problem(backend, kernels["broken_splitk_atomic_drops_the_tail"], problem), problem)
        assert twin.defects == {Defect.WRONG_VALUES}, twin.message()
    with pytest.raises(catalog.CatalogError, match="adds_into_c = true says the kernel adds its result into C"):
        catalog.load(_adds_into_c_with_beta(tmp_path))


def judge_run(run, problem):
    from gemmcheck.judge.oracle import judge
    return judge(run, *problem.operands()[:2], exact=problem.exact, problem=problem)


def _adds_into_c_with_beta(tmp_path):
    (tmp_path / "k.cu").write_text("__global__ void k(const float *A, const float *B, float *C, int M, int N, int K, "
                                   "float beta) {}\n")
    path = tmp_path / "adds.toml"
    path.write_text('[[kernel]]\nname = "k"\nsource = "k.cu"\nentry = "k"\nargs = ["A", "B", "C", "M", "N", "K", '
                    '"beta"]\ngrid = ["N", "M"]\nblock = [1]\ndtypes = ["float32"]\nadds_into_c = true\n'
                    'expect = "correct"\n')
    return path
