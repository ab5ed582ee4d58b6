"""compute-sanitizer reports become Findings with the class they establish (parsers on logs
recorded on an H200), and a tool run attributes each report to the kernel it names."""

import os
from pathlib import Path

import pytest

from gemmcheck.contract import catalog
from gemmcheck.judge import hazards, sanitizer
from gemmcheck.verdict import Defect

from hazard_stand_ins import fake_sanitizer

DATA = Path(__file__).resolve().parent / "data" / "sanitizer"
TESTS = Path(__file__).resolve().parent


def parsed(name):
    tool = name.split("-")[1]
    return sanitizer.parse(tool, sanitizer.blocks((DATA / f"{name}.log").read_text()))


def test_racecheck_reports_a_shared_memory_race_without_claiming_its_direction():
    report = parsed("broken_no_sync_after_dot-racecheck")
    (finding,) = report.findings
    assert finding.defect == Defect.SHARED_MEMORY_RACE and finding.detector == "racecheck"
    # 16 reads of the error report + 4 of the warning, hazard counts as the log gives them.
    races = finding.details["races"]
    assert [r["severity"] for r in races] == ["error", "warning"]
    assert [len(r["with"]) for r in races] == [16, 4]
    assert races[1]["with"][0]["hazards"] == 6144
    assert "RAW vs WAR not established" in finding.summary
    assert "RAW race" not in finding.summary and "WAR race" not in finding.summary
    assert report.unrecognized == []


def test_racecheck_also_sees_the_race_a_divergent_barrier_leaves():
    (finding,) = parsed("broken_divergent_barrier-racecheck").findings
    assert finding.defect == Defect.SHARED_MEMORY_RACE


def test_synccheck_reports_a_divergent_barrier():
    report = parsed("broken_divergent_barrier-synccheck")
    (finding,) = report.findings
    assert finding.defect == Defect.DIVERGENT_BARRIER and finding.detector == "synccheck"
    assert finding.count == 2  # the trimmed log keeps two of the reports
    assert finding.details["reports"][0]["thread"] == "by thread (0,6,0) in block (0,2,0)"


def synccheck_log(head: str, kernel: str = "broken_half_mask_syncwarp") -> str:
    """Two synccheck reports with `head`, laid out as the H200's logs lay them out."""
    fn = f"void {kernel}<float, (int)8>(const T1 *, const T1 *, T1 *, int, int, int)"
    return "".join(["========= COMPUTE-SANITIZER\n",
                    *(f"========= {head}\n=========     at {fn}+0x650\n"
                      f"=========     by thread ({lane},0,0) in block (0,0,0)\n========= \n" for lane in (16, 17)),
                    "========= ERROR SUMMARY: 2 errors\n"])


# The report NVIDIA's documentation gives for a __syncwarp() whose calling lane is not in its
# mask (Compute Sanitizer, "Understanding Synccheck Reports": "Invalid arguments: A barrier
# instruction or primitive was used with invalid arguments. This can occur for example if not
# all threads reaching a __syncwarp() declare themselves in the mask parameter"), with and
# without the period the H200's 2025.3.1 puts after a head ("Divergent thread(s) in block.").
# Not yet recorded on a GPU: broken_half_mask_syncwarp's synccheck log is to confirm it.
@pytest.mark.parametrize("head", ["Barrier error detected. Invalid arguments",
                                  "Barrier error detected. Invalid arguments."])
def test_synccheck_reports_a_lane_outside_its_syncwarp_mask_as_an_invalid_warp_mask(head):
    report = sanitizer.parse("synccheck", sanitizer.blocks(synccheck_log(head)))
    (finding,) = report.findings
    assert finding.defect == Defect.INVALID_WARP_MASK and finding.detector == "synccheck"
    assert finding.count == 2 and report.unrecognized == []
    assert finding.details["reports"][0]["thread"] == "by thread (16,0,0) in block (0,0,0)"
    assert finding.summary.startswith(f"synccheck: {head} (2 report(s); first by thread (16,0,0) in block (0,0,0) "
                                      "at void broken_half_mask_syncwarp<float, (int)8>")
    assert "invalid_warp_mask" in sanitizer.FLOODS["synccheck"]   # one report per lane: it ends a batch


def test_a_barrier_error_of_another_kind_is_kept_not_named():
    report = sanitizer.parse("synccheck", sanitizer.blocks(synccheck_log("Barrier error detected. Barrier overflow")))
    assert report.findings == [] and report.unrecognized[0].startswith("Barrier error detected. Barrier overflow")


def test_memcheck_reports_an_invalid_global_write_as_out_of_bounds_write():
    report = parsed("broken_faults-memcheck")
    (finding,) = report.findings
    assert finding.defect == Defect.OUT_OF_BOUNDS_WRITE and finding.detector == "memcheck"
    assert "__global__" in finding.summary and "by thread (0,0,0) in block (0,0,0)" in finding.summary
    # The failed API calls after the fault are consequences, kept apart.
    assert len(report.api_errors) == 2 and report.unrecognized == []


@pytest.mark.parametrize("name", ["matmul_tiled_guarded-racecheck", "matmul_tiled_guarded-synccheck",
                                  "matmul_tiled_guarded-memcheck", "matmul_tiled_guarded-initcheck",
                                  "broken_faults-racecheck", "broken_unguarded_store-memcheck"])
def test_clean_logs_give_no_findings(name):
    report = parsed(name)
    assert report.findings == [] and report.unrecognized == []


def test_reports_name_the_kernel_as_the_catalog_does():
    line = ("at void broken_faults<float, (int)16>(const T1 *, const T1 *, T1 *, int, int, int)+0x710")
    assert sanitizer.kernel_in(line) == sanitizer.normalize("broken_faults<float, 16>")
    assert sanitizer.kernel_in("at void matmul_naive<__half>(const T1 *, int)+0x10") == "matmul_naive<__half>"
    assert sanitizer.kernel_in("at 0x7f00 in libcuda.so") is None
    blocks = sanitizer.blocks((DATA / "broken_no_sync_after_dot-racecheck.log").read_text())
    assert {b.function() for b in blocks} - {None} == {"broken_no_sync_after_dot<float,16>"}


def test_an_option_is_known_from_the_tools_own_help(tmp_path):
    tool = tmp_path / "compute-sanitizer"
    tool.write_text("#!/bin/sh\necho 'Usage: compute-sanitizer [options]'\n"
                    "echo '  --target-processes arg (=all)   Select which processes are tracked'\n")
    tool.chmod(0o755)
    assert sanitizer.takes_option(str(tool), "--target-processes")
    assert not sanitizer.takes_option(str(tool), "--padding")
    assert not sanitizer.takes_option(str(tmp_path / "missing"), "--target-processes")


def test_an_unknown_report_is_kept_not_dropped():
    text = "========= COMPUTE-SANITIZER\n========= Invalid __global__ atomic of size 4 bytes\n=========     at void k<float, (int)4>()+0x10\n========= \n"
    report = sanitizer.parse("memcheck", sanitizer.blocks(text))
    assert report.findings == [] and report.unrecognized[0].startswith("Invalid __global__ atomic")


def test_every_run_passes_an_error_exitcode_and_memcheck_gets_padding(monkeypatch):
    monkeypatch.setattr(sanitizer, "takes_option", lambda exe, option: True)
    argv = sanitizer.command("racecheck")
    assert "--error-exitcode" in argv
    assert argv[argv.index("--show-backtrace") + 1] == "device"   # no host backtraces
    assert "--destroy-on-device-error" not in argv   # "kernel" hung synccheck on an H200
    assert argv[argv.index("--target-processes") + 1] == "application-only"   # not the compilers it runs
    monkeypatch.setattr(sanitizer, "takes_option", lambda exe, option: False)
    assert "--target-processes" not in sanitizer.command("racecheck")   # a tool without the option
    argv = sanitizer.command("memcheck", padding=1 << 20)
    assert argv[argv.index("--padding") + 1] == str(1 << 20)
    with pytest.raises(ValueError, match="unknown compute-sanitizer tool 'leakcheck'"):
        sanitizer.command("leakcheck")


# -- a whole tool run, with a stand-in compute-sanitizer ------------------------------------

CATALOG = """
[[kernel]]
name = "{name}"
source = "k.cu"
entry = "shared"
signature = "mnk"
policy = "tile2d"
tiles = [4]
dtypes = ["float32"]
expect = "{expect}"
"""


def test_a_tool_run_attributes_reports_to_the_right_kernel(tmp_path, monkeypatch):
    # "racy" and "calm" share one function (as broken_floor_grid shares matmul_tiled_guarded):
    # they must run in different children, or a report could not be told apart.
    (tmp_path / "k.cu").write_text("template <typename T, int TILE> __global__ void shared();\n")
    path = tmp_path / "catalog.toml"
    path.write_text(CATALOG.format(name="calm", expect="correct")
                    + CATALOG.format(name="racy", expect="shared_memory_race"))
    fn = "void shared<float, (int)4>(const T1 *, T1 *, int, int, int)"
    tool = fake_sanitizer(tmp_path, {"racecheck": {"racy": [
        f"========= Error: Race reported between Write access at {fn}+0x10",
        f"=========     and Read access at {fn}+0x20 [7 hazards]", "========= "]}}, monkeypatch)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))
    specs = catalog.load(path)
    instances = [catalog.Instance(s, "float32", 4) for s in specs]
    plan = [(i, [(p, q) for p, q in hazards.exposing_problems(i, race_sizes=()) if p in hazards.SMALL_PURPOSES])
            for i in instances]   # what the kill matrix gives the tools (kill_matrix.small_problems)
    run = sanitizer.run("racecheck", plan, exe=str(tool), backend="hazard_stand_ins:shared_backend")
    calm, racy = instances
    assert run.findings(calm) == []
    (finding,) = run.findings(racy)
    # One report after each of racy's two launches (ragged and tile-aligned), 7 hazards each.
    assert finding.defect == Defect.SHARED_MEMORY_RACE and finding.count == 14
    assert len(finding.details["races"]) == 2
    assert run.unattributed == []
    assert all(o.status == "ok" for o in run.outcomes.values())


def test_a_launch_is_a_hang_under_a_tool_only_after_the_tools_own_timeout(tmp_path, monkeypatch):
    """A tool slows every launch: on an H200 memcheck and racecheck kept 1024-thread launches the
    plain run finishes in milliseconds past the 10 s hang timeout. Under a tool a launch is the
    kernel's hang only after TOOL_SLOWDOWN times --gemm-hang-timeout: a slow launch is judged by
    what the tool says of it, one that never returns is still a hang."""
    (tmp_path / "k.cu").write_text("template <typename T, int TILE> __global__ void shared();\n"
                                   "template <typename T, int TILE> __global__ void stuck();\n")
    path = tmp_path / "catalog.toml"
    path.write_text(CATALOG.format(name="slow", expect="correct")
                    + CATALOG.format(name="stuck", expect="hang").replace('entry = "shared"', 'entry = "stuck"'))
    tool = fake_sanitizer(tmp_path, {}, monkeypatch)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))
    slow, stuck = [catalog.Instance(s, "float32", 4) for s in catalog.load(path)]
    plain_timeout = 0.25     # the launch takes 0.5 s: a hang without a tool, not under one
    assert 0.5 + 0.5 < sanitizer.hang_timeout_under_tool(plain_timeout) < 3
    plan = [(i, [next((p, q) for p, q in hazards.exposing_problems(i, race_sizes=()) if p in hazards.SMALL_PURPOSES)])
            for i in (slow, stuck)]
    run = sanitizer.run("racecheck", plan, exe=str(tool), backend="hazard_stand_ins:deadline_backend",
                        hang_timeout_s=plain_timeout)
    assert run.findings(slow) == []
    assert {o.status for o in run.outcomes_of(slow).values()} == {"ok"}
    (hang,) = run.findings(stuck)
    assert hang.defect == Defect.HANG and hang.summary.startswith("under racecheck: ")


# -- a launch that fails after the tool reported an access -------------------------------------

def test_memcheck_reports_the_access_and_keeps_the_launch_failure_after_it_apart():
    report = parsed("broken_unguarded_store_launch_failure-memcheck")
    (finding,) = report.findings
    assert finding.defect == Defect.OUT_OF_BOUNDS_WRITE and finding.count == 1
    assert "32 bytes after the nearest allocation" in finding.summary
    assert report.api_errors == ['Program hit cudaErrorLaunchFailure (error 719) due to "unspecified launch '
                                 'failure" on CUDA API call to cudaEventQuery.']


def test_a_launch_that_fails_after_memcheck_reported_an_access_is_judged_by_the_access(tmp_path, monkeypatch):
    """memcheck reports broken_unguarded_store's store past C's end and ends the kernel there
    (cudaErrorLaunchFailure); under racecheck the same store faults with nothing reported. The
    row's root cause is the out-of-bounds write, which explains both launch failures; it is not
    a crash."""
    (tmp_path / "k.cu").write_text("template <typename T, int TILE> __global__ void shared();\n")
    path = tmp_path / "catalog.toml"
    path.write_text(CATALOG.format(name="stores", expect="out_of_bounds_write"))
    logged = (DATA / "broken_unguarded_store_launch_failure-memcheck.log").read_text().splitlines()
    report = [line for line in logged if line.startswith("=========")][1:-1]   # what it printed in the launch
    tool = fake_sanitizer(tmp_path, {"memcheck": {"stores": ["!reports-then-fails", *report]},
                                     "racecheck": {"stores": ["!fails"]}}, monkeypatch)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))
    (inst,) = [catalog.Instance(s, "float32", 4) for s in catalog.load(path)]
    plan = [(inst, [(p, q) for p, q in hazards.exposing_problems(inst, race_sizes=()) if p in hazards.SMALL_PURPOSES])]
    runs = {t: sanitizer.run(t, plan, exe=str(tool), backend="hazard_stand_ins:shared_backend")
            for t in ("memcheck", "racecheck")}
    (access,) = runs["memcheck"].findings(inst)
    assert access.defect == Defect.OUT_OF_BOUNDS_WRITE
    assert "it explains the launch failure: under memcheck: the launch failed: " in access.summary
    (crash,) = runs["racecheck"].findings(inst)     # alone, a failure with nothing reported is a crash
    assert crash.defect == Defect.CRASH
    row = sanitizer.judged(runs["memcheck"].findings(inst) + runs["racecheck"].findings(inst))
    diagnosis = hazards.classify(row)
    assert diagnosis.defect == Defect.OUT_OF_BOUNDS_WRITE and Defect.CRASH not in {f.defect for f in row}
    assert "under racecheck: the launch failed" in diagnosis.explanation


def test_a_launch_failure_with_no_access_reported_stays_a_crash():
    from gemmcheck.judge.hazards import outcomes
    from gemmcheck.verdict import Finding

    crash = outcomes.unfinished("failed", "the launch failed: cudaErrorIllegalAddress")
    race = Finding(Defect.SHARED_MEMORY_RACE, "racecheck", "racecheck reports 1 shared-memory race(s)", 1)
    assert sanitizer.judged([crash, race]) == [crash, race]
    assert hazards.classify(sanitizer.judged([crash, race])).defect == Defect.CRASH
