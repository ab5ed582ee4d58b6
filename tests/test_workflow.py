"""The nightly workflow is a valid GitHub Actions file that runs the shards, merges them and
fails by kernel name; scripts/nightly_failures.py names the kernels. Its `newest` job runs the
tests on the newest versions pyproject.toml allows and names what moved since the lock."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

import script_loader

ROOT = Path(__file__).parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "nightly.yml"


def _schema_check(path: Path) -> subprocess.CompletedProcess:
    exe = shutil.which("check-jsonschema")
    if exe is None:
        pytest.skip("needs check-jsonschema on PATH (a dependency: pip install -e .); not installed")
    return subprocess.run([exe, "--builtin-schema", "vendor.github-workflows", str(path)],
                          capture_output=True, text=True)


def test_the_nightly_workflow_is_valid():
    result = _schema_check(WORKFLOW)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_schema_check_rejects_a_broken_workflow(tmp_path):
    broken = yaml.safe_load(WORKFLOW.read_text())
    del broken["jobs"]["suites"]["runs-on"]
    path = tmp_path / "broken.yml"
    path.write_text(yaml.safe_dump(broken))
    assert _schema_check(path).returncode != 0


def test_shards_suites_merge_report_and_history_are_wired():
    flow = yaml.safe_load(WORKFLOW.read_text())
    on = flow.get("on", flow.get(True))          # YAML 1.1 reads a bare `on` as true
    assert on["schedule"][0]["cron"]
    shards = flow["jobs"]["suites"]["strategy"]["matrix"]["shard"]
    assert shards == list(range(1, int(flow["env"]["SHARDS"]) + 1))
    text = WORKFLOW.read_text()
    for needed in ("--gemm-shard", "--gemm-profile \"$PROFILE\"", "WORKERS_PER_GPU", "python -m gemmcheck.report.merge",
                   "build_report.sh --single-file", "--benchmark-compare-fail", "allure-history.jsonl",
                   "scripts/nightly_failures.py merged/verdicts.json", "actions/cache/save"):
        assert needed in text, needed
    assert flow["env"]["PROFILE"] == "nightly"


def _run_lines(job: dict) -> list[str]:
    return [line.strip() for step in job["steps"] for line in step.get("run", "").splitlines()]


def test_the_newest_job_tests_the_newest_versions_allowed_and_names_what_moved():
    flow = yaml.safe_load(WORKFLOW.read_text())
    job = flow["jobs"]["newest"]
    assert "needs" not in job, "the early warning must not wait on the GPU shards"
    assert job["runs-on"] == "ubuntu-latest", "the CPU run, as .ci/run"
    lines = _run_lines(job)
    assert ".venv/bin/python -m pip install --upgrade --upgrade-strategy eager -e '.[docs]'" in lines
    assert not [line for line in lines if "requirements.lock" in line and "install" in line], \
        "the newest job must not install from the lock"
    assert "python -m venv .venv" in lines, "a fresh environment, nothing left from another install"
    drift = next(i for i, line in enumerate(lines) if line.startswith("python scripts/lock_drift.py"))
    tests = lines.index("pytest")
    assert drift < tests, "what moved is printed before the tests, so a failing night still shows it"
    assert lines[tests - 1] == "set +e" and lines[-1] == 'exit "$status"', \
        "the job fails with pytest's exit status"


def _nightly_failures():
    return script_loader.load("nightly_failures")


def _row(kernel, rest, expect, defects, status):
    return {"kernel": kernel, "instance": f"{kernel}-{rest}", "expect": expect, "defects": defects,
            "status": status}


def test_a_failed_night_names_the_kernels(tmp_path, capsys):
    doc = {"instances": [
        _row("matmul_tiled", "float16-TILE16", "correct", {"wrong_values": 3}, "unexpected"),
        _row("matmul_tiled", "float32-TILE16", "correct", {}, "as_expected"),
        _row("broken_no_barriers", "float32-TILE8", "shared_memory_race", {}, "unexpected"),
        _row("broken_no_sync_after_dot", "float32-TILE8", "shared_memory_race", {"wrong_values": 2},
             "symptoms_only"),
        _row("matmul_naive", "float32-TILE8", "correct", {}, "not_checked")]}
    path = tmp_path / "verdicts.json"
    path.write_text(json.dumps(doc))
    assert _nightly_failures().main([str(path)]) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[0] == ("nightly: 3 kernel(s) not as the catalog declares: "
                                   "broken_no_barriers, broken_no_sync_after_dot, matmul_tiled")
    assert ("broken_no_sync_after_dot float32-TILE8: expected shared_memory_race, found wrong_values x2 "
            "(only symptoms: the declared class was not established)") in out
    assert "matmul_tiled float16-TILE16: expected correct, found wrong_values x3" in out
    assert "broken_no_barriers float32-TILE8: expected shared_memory_race, found no defect" in out
    assert "1 selected instantiation(s) not checked by any test: matmul_naive-float32-TILE8" in out


def test_a_good_night_passes(tmp_path, capsys):
    path = tmp_path / "verdicts.json"
    path.write_text(json.dumps({"instances": [_row("k", "float32-TILE8", "correct", {}, "as_expected")]}))
    assert _nightly_failures().main([str(path)]) == 0
    assert "every kernel as the catalog declares (1 instantiations checked)" in capsys.readouterr().out
    assert _nightly_failures().main([str(tmp_path / "missing.json")]) == 2
