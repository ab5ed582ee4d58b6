"""A broken source costs one failure; unclaimed shapes are information, never failures.

Each test runs the real suites in a child pytest on cpu-sim, as a user would."""

import json
import re
import subprocess
import sys
from pathlib import Path
from child_env import child_env

ROOT = Path(__file__).resolve().parent.parent
BUILD_TEST = "suites/compile/test_builds.py::test_every_instantiation_of_the_source_builds[mixed.cu]"

MIXED = (ROOT / "tests" / "cpu_sim_kernels" / "good_and_bad.cu").read_text()
ENTRY = """
[[kernel]]
name = "{name}"
source = "mixed.cu"
entry = "{name}"
signature = "mnk"
policy = "naive"
tiles = [8]
dtypes = ["float32"]
expect = "correct"
"""


def run_suites(tmp_path, *args):
    env = child_env()
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rsxX",
                           "--gemm-backend=cpu-sim", f"--gemm-verdicts={tmp_path / 'verdicts.json'}",
                           f"--alluredir={tmp_path / 'allure'}", *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def test_a_source_that_does_not_compile_fails_once_and_its_other_tests_skip(tmp_path):
    (tmp_path / "mixed.cu").write_text(MIXED)
    (tmp_path / "catalog.toml").write_text(ENTRY.format(name="good") + ENTRY.format(name="bad"))
    out = run_suites(tmp_path, "suites/compile/test_builds.py", "suites/correctness/test_exact_results.py",
                     f"--gemm-catalog={tmp_path / 'catalog.toml'}")
    text = out.stdout + out.stderr
    assert out.returncode == 1, text
    assert re.search(r"\b1 failed", text.splitlines()[-1]), text
    assert "_ test_every_instantiation_of_the_source_builds[mixed.cu] _" in text   # the one failure
    assert f"{tmp_path / 'mixed.cu'}:15:" in text and "no_such_member" in text   # the user's file and line
    assert f"not compiled: see {BUILD_TEST}" in text
    rows = {r["instance"]: r for r in json.loads((tmp_path / "verdicts.json").read_text())["instances"]}
    assert rows["good-float32-TILE8"]["verdict"] == "correct" and rows["good-float32-TILE8"]["checks"] >= 10
    assert len(text.splitlines()) < 60 and "Traceback" not in text


def test_out_of_scope_shapes_skip_or_run_as_information_never_failing(tmp_path):
    catalog = ROOT / "examples" / "catalog.toml"
    common = ["suites/correctness/test_exact_results.py", f"--gemm-catalog={catalog}",
              "--gemm-kernels=sgemm_aligned", "-k", "bit_for_bit"]
    skipped = run_suites(tmp_path, *common)
    assert skipped.returncode == 0, skipped.stdout
    assert "out of scope: sgemm_aligned declares shapes = 'M % BM == 0 and N % BN == 0 and K % BK == 0'" \
        in skipped.stdout
    assert "xfailed" not in skipped.stdout
    informed = run_suites(tmp_path, *common, "--gemm-out-of-scope")
    assert informed.returncode == 0, informed.stdout
    summary = informed.stdout.splitlines()[-1]
    assert not re.search(r"\d+ failed", summary) and re.search(r"\d+ xfailed", summary), summary
    assert "for information, there: Failed: wrong_values: sgemm_aligned" in informed.stdout
    assert "not as the catalog declares" in informed.stdout and "0 not as the catalog declares" in informed.stdout
