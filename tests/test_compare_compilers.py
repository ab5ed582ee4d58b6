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
    assert "examples/catalog.toml: nvcc 1 passed in 0.1s; nvrtc 1 passed in 0.1s; the runs agree" in capsys.readouterr().out


def test_a_kernel_judged_otherwise_by_one_compiler_is_a_difference_named(runs, capsys):
    judged, argv = runs
    judged.update(nvcc=verdicts("correct", None), nvrtc=verdicts("wrong_values", "wrong_values"))
    assert script.main(argv) == 1
    out = capsys.readouterr().out
    assert "instance k-float32: nvcc ('correct'" in out and "nvrtc ('wrong_values'" in out and "1 catalog(s) judged differently" in out


def test_a_missing_compiler_is_said_in_one_line(monkeypatch, capsys):
    from gemmcheck.compile import choice
    monkeypatch.setattr(choice, "installed", lambda: ("nvrtc",))
    assert script.main(["--catalog", "examples/catalog.toml"]) == 2
    out = capsys.readouterr().out
    assert out.startswith("compare_compilers: nvcc is not installed here") and out.count("\n") == 1


@pytest.mark.parametrize("catalog, name", [("examples/mixed/catalog.toml", "examples_mixed"),
                                           ("examples/blas_conventions.toml", "examples_blas_conventions"),
                                           ("builtin", "builtin")])
def test_each_catalog_has_a_directory_of_its_own(catalog, name):
    assert script.slug(catalog) == name


def test_the_default_catalogs_are_the_repositorys():
    from pathlib import Path
    files = {str(p.relative_to(script.ROOT)) for p in Path(script.ROOT).glob("examples/**/catalog.toml")}
    files |= {str(p.relative_to(script.ROOT)) for p in Path(script.ROOT).glob("tests/data/*/catalog.toml")
              if p.parent.name != "bad_inputs"}
    assert files <= set(script.CATALOGS)
