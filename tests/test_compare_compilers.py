"""scripts/compare_compilers.py: each catalog judged once per compiler and the runs compared;
a difference is reported (exit 1), agreement is silent (exit 0), a missing compiler says so."""

import json

import pytest

from script_loader import load

script = load("compare_compilers")


def verdicts(verdict: str, defect: str | None) -> dict:
    findings = [{"defect": defect, "detector": "exact-bits", "count": 3}] if defect else []
    return {"instances": [{"instance": "k-float32", "verdict": verdict, "status": "as_expected",
                           "defects": [defect] if defect else []}],
            "verdicts": [{"test": "test_exact", "instance": "k-float32", "problem": "M5xN6xK7", "findings": findings}]}


@pytest.fixture
def runs(monkeypatch, tmp_path):
    """main() with both compilers installed and each run's verdicts given by `judged[compiler]`."""
    judged = {}

    def fake(catalog, compiler, out, workers, extra):
        out.mkdir(parents=True, exist_ok=True)
        (out / "verdicts.json").write_text(json.dumps(judged[compiler]))
        return "1 passed in 0.1s"
    monkeypatch.setattr(script, "judge", fake)
    from gemmcheck.compile import choice
    monkeypatch.setattr(choice, "installed", lambda: ("nvrtc", "nvcc"))
    return judged, ["--catalog", "examples/catalog.toml", "--out", str(tmp_path)]


def test_runs_that_judge_alike_agree(runs, capsys):
    judged, argv = runs
    judged.update(nvcc=verdicts("correct", None), nvrtc=verdicts("correct", None))
    assert script.main(argv) == 0
    assert ("examples/catalog.toml: nvcc 1 passed in 0.1s; nvrtc 1 passed in 0.1s; 1 of 1 instantiations judged "
            "alike; the runs agree") in capsys.readouterr().out


def test_a_kernel_judged_otherwise_by_one_compiler_is_a_difference_named(runs, capsys):
    judged, argv = runs
    judged.update(nvcc=verdicts("correct", None), nvrtc=verdicts("wrong_values", "wrong_values"))
    assert script.main(argv) == 1
    out = capsys.readouterr().out
    assert "instance k-float32: nvcc ('correct'" in out and "nvrtc ('wrong_values'" in out and "1 catalog(s) judged differently" in out
    assert "0 of 1 instantiations judged alike" in out


def test_a_missing_compiler_is_said_in_one_line(monkeypatch, capsys):
    from gemmcheck.compile import choice
    monkeypatch.setattr(choice, "installed", lambda: ("nvrtc",))
    assert script.main(["--catalog", "examples/catalog.toml"]) == 2
    out = capsys.readouterr().out
    assert out.startswith("compare_compilers: nvcc is not installed here") and out.count("\n") == 1


@pytest.mark.parametrize("catalog, name", [("examples/mixed/catalog.toml", "examples_mixed"),
                                           ("examples/blas_conventions.toml", "examples_blas_conventions"),
                                           ("builtin", "builtin"),
                                           ("examples/bad/catalog.toml,tests/data/perf_faults/catalog.toml",
                                            "examples_bad+tests_data_perf_faults")])
def test_each_catalog_has_a_directory_of_its_own(catalog, name):
    assert script.slug(catalog) == name


def test_a_long_group_gets_a_name_a_file_system_holds():
    """Seventeen catalogs in one session: their names joined passed 255 bytes (File name too long)."""
    group = ",".join(c for c in script.CATALOGS if c.startswith(("examples/", "tests/data/")))
    assert script.slug(group) == f"examples+{group.count(',')}_more"


def test_the_default_catalogs_are_the_repositorys():
    from pathlib import Path
    files = {str(p.relative_to(script.ROOT)) for p in Path(script.ROOT).glob("examples/**/catalog.toml")}
    files |= {str(p.relative_to(script.ROOT)) for p in Path(script.ROOT).glob("tests/data/*/catalog.toml")
              if p.parent.name != "bad_inputs"}
    assert files <= set(script.CATALOGS)


def test_tests_that_saw_the_same_defects_on_other_problems_agree(runs, capsys):
    """A failing kernel's recorded problems are those hypothesis found in each run: the runs
    agree on what each test saw, not on the problems."""
    judged, argv = runs
    one, other = verdicts("wrong_values", "wrong_values"), verdicts("wrong_values", "wrong_values")
    other["verdicts"][0]["problem"] = "M9xN1xK65"
    judged.update(nvcc=one, nvrtc=other)
    assert script.main(argv) == 0, capsys.readouterr().out


def test_a_catalog_neither_run_judged_is_said_so_and_not_a_difference(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(script, "judge", lambda catalog, compiler, out, workers, extra: "3 skipped in 0.1s")
    from gemmcheck.compile import choice
    monkeypatch.setattr(choice, "installed", lambda: ("nvrtc", "nvcc"))
    assert script.main(["--catalog", "examples/hopper/catalog.toml", "--out", str(tmp_path)]) == 0
    assert "no instantiation judged by either run" in capsys.readouterr().out


def test_a_clean_test_one_run_skipped_is_no_difference_but_a_defect_only_one_run_saw_is(runs, capsys):
    """After a kernel crashed its later tests skip, in an order pytest-xdist chooses per run:
    a clean check missing from one run is not a disagreement; a defect seen in one only is."""
    judged, argv = runs
    clean, none = verdicts("correct", None), verdicts("correct", None)
    none["verdicts"] = []
    judged.update(nvcc=clean, nvrtc=none)
    assert script.main(argv) == 0
    found = verdicts("correct", None)
    found["verdicts"][0]["findings"] = [{"defect": "wrong_values", "detector": "exact-bits", "count": 1}]
    judged.update(nvcc=found, nvrtc=none)
    assert script.main(argv) == 1
    assert "check test_exact: (('wrong_values', 'exact-bits'),) x1 nvcc, x0 nvrtc" in capsys.readouterr().out


def test_which_test_met_a_crash_first_is_no_difference_but_a_crash_one_run_missed_is(runs, capsys):
    """A crash ends the instantiation in its process: the test that meets it first is the one
    pytest-xdist ran first, in each run its own (at M64 the faults_at_large_m kernel crashed
    in test_backends_agree with nvcc, elsewhere with NVRTC); the instance's defects say whether
    both runs met it."""
    judged, argv = runs
    crash = {"defect": "crash", "detector": "isolation", "count": 1}
    here, there = verdicts("crash", "crash"), verdicts("crash", "crash")
    here["verdicts"][0]["findings"] = [crash]
    there["verdicts"] = [{"test": "test_backends_agree", "instance": "k-float32", "problem": "M64xN64xK64",
                          "findings": [crash]}]
    judged.update(nvcc=here, nvrtc=there)
    assert script.main(argv) == 0, capsys.readouterr().out
    judged.update(nvcc=here, nvrtc=verdicts("correct", None))
    assert script.main(argv) == 1
    assert "instance k-float32: nvcc ('crash', 'as_expected', ('crash',)), nvrtc ('correct'" in capsys.readouterr().out


def test_a_group_of_catalogs_runs_in_one_session(monkeypatch, tmp_path):
    ran = []
    monkeypatch.setattr(script.subprocess, "run", lambda cmd, **kw: ran.append(cmd) or
                        type("Done", (), {"stdout": "1 passed in 0.1s", "stderr": "", "returncode": 0})())
    script.judge("a/catalog.toml,b.toml", "nvrtc", tmp_path / "out", "2", [])
    (cmd,) = ran
    assert [a for a in cmd if a.startswith("--gemm-catalog")] == ["--gemm-catalog=a/catalog.toml", "--gemm-catalog=b.toml"]
