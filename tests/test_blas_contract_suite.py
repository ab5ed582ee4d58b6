"""End to end, on cpu-sim: the tutorial epilogue (C = alpha * acc + beta * C[i]) gets exactly
one failing check naming reads_c_at_beta_zero, every other failure points at it in its first
line; the same kernel declared reads_c_at_beta_zero = true is correct, the convention on record.
(examples/blas_conventions.toml, the catalog docs/blas-contract.md shows.)"""

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from child_env import child_env

ROOT = Path(__file__).resolve().parents[1]
CATALOG = ROOT / "examples" / "blas_conventions.toml"
SUITES = ["suites/correctness/test_blas_rules.py", "suites/correctness/test_exact_results.py",
          "suites/correctness/test_memory_effects.py", "suites/correctness/test_worked_example.py",
          "suites/correctness/test_special_values.py"]
ESTABLISHED = "reads_c_at_beta_zero: tutorial_epilogue-float32-TILE16 (broken_reads_c_at_beta_zero<float, 16>)"
POINTS = "reads_c_at_beta_zero: this failure is the read of C at beta = 0 that test_beta_zero_never_reads_c"


def test_one_check_names_the_read_of_c_the_others_point_at_it_and_the_convention_is_correct(tmp_path):
    env = child_env()
    out = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--gemm-backend=cpu-sim",
                          f"--gemm-catalog={CATALOG}", f"--gemm-verdicts={tmp_path / 'verdicts.json'}",
                          f"--alluredir={tmp_path / 'allure'}", f"--junitxml={tmp_path / 'junit.xml'}", *SUITES],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    text = out.stdout + out.stderr
    failures = {tc.get("name"): tc.find("failure").get("message").removeprefix("Failed: ")
                for tc in ET.parse(tmp_path / "junit.xml").iter("testcase") if tc.find("failure") is not None}
    assert failures and all("tutorial_epilogue-float32" in name for name in failures), text
    established = [n for n, m in failures.items() if m.startswith(ESTABLISHED)]
    assert established == ["test_beta_zero_never_reads_c[tutorial_epilogue-float32-TILE16]"], failures
    assert "Fix: skip the C load when beta == 0" in failures[established[0]]
    assert all(m.startswith(POINTS) for n, m in failures.items() if n not in established), failures
    # the alpha/beta form (2, -1) reads C as it must and passes
    assert not [n for n in failures if "alpha2-beta-1" in n], failures
    rows = {r["instance"]: r for r in json.loads((tmp_path / "verdicts.json").read_text())["instances"]}
    epilogue, declared = rows["tutorial_epilogue-float32-TILE16"], rows["tutorial_epilogue_c_initialized-float32-TILE16"]
    assert [c["defect"] for c in epilogue["causes"]] == ["reads_c_at_beta_zero"]
    assert epilogue["causes"][0]["checks"] == len(failures) and epilogue["causes"][0]["established"]
    assert (declared["verdict"], declared["status"], declared["conventions"]) == \
        ("correct", "as_expected", ["reads_c_at_beta_zero = true"])
    assert any("declared reads_c_at_beta_zero = true" in n for n in declared["notes"])
