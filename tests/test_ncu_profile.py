"""scripts/ncu_profile.py: one instantiation's launch under ncu (a stand-in ncu, on cpu-sim)."""

import os
import stat
import sys
import textwrap

import pytest

import script_loader

CATALOG = script_loader.SCRIPTS.parent / "examples" / "catalog.toml"

FAKE_NCU = textwrap.dedent(f"""\
    #!{sys.executable}
    # Stands in for ncu: prints what it was asked, runs the profiled command, writes the report.
    import subprocess, sys
    args = sys.argv[1:]
    if "--import" in args:
        print("DETAILS OF", args[args.index("--import") + 1])
        sys.exit(0)
    first = next(i for i, a in enumerate(args) if "python" in a)
    print("==PROF== options", " ".join(args[:first]), flush=True)
    if "--export" in args:
        open(args[args.index("--export") + 1] + ".ncu-rep", "w").write("report")
    sys.exit(subprocess.run(args[first:]).returncode)
    """)


@pytest.fixture(scope="module")
def ncu_profile():
    return script_loader.load("ncu_profile")


@pytest.fixture
def fake_ncu(tmp_path, monkeypatch):
    ncu = tmp_path / "bin" / "ncu"
    ncu.parent.mkdir()
    ncu.write_text(FAKE_NCU)
    ncu.chmod(ncu.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{ncu.parent}{os.pathsep}{os.environ['PATH']}")
    return ncu


def test_it_launches_the_instantiation_once_under_ncu_and_prints_the_report(ncu_profile, fake_ncu, tmp_path,
                                                                            capfd):
    out = tmp_path / "ncu"
    assert ncu_profile.main([str(CATALOG), "sgemm-float32-BM64_BN64_BK8_TM4_TN4", "--size", "40",
                             "--backend", "cpu-sim", "--export", str(out)]) == 0
    printed = capfd.readouterr().out
    options = next(line for line in printed.splitlines() if line.startswith("==PROF== options"))
    assert all(o in options for o in ("--set full", "--launch-count 1", "--kernel-name regex:^sgemm(<.*)?$"))
    assert (out / "sgemm-float32-BM64_BN64_BK8_TM4_TN4.ncu-rep").is_file()
    assert f"DETAILS OF {out / 'sgemm-float32-BM64_BN64_BK8_TM4_TN4'}.ncu-rep" in printed


def test_an_unknown_id_is_named_with_the_ids_there_are(ncu_profile, fake_ncu):
    with pytest.raises(SystemExit, match="no instantiation 'sgemm-float32-BM1'.*sgemm-float32-BM64_BN64_BK8_TM4_TN4"):
        ncu_profile.main([str(CATALOG), "sgemm-float32-BM1"])


def test_without_ncu_it_says_so_in_one_line(ncu_profile, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SystemExit, match="needs ncu"):
        ncu_profile.main([str(CATALOG), "sgemm-float32-BM64_BN64_BK8_TM4_TN4"])


def test_a_kernel_that_crashes_costs_its_line_and_the_exit_status_not_the_run(ncu_profile, fake_ncu, tmp_path,
                                                                              capfd):
    """Its launch runs in an isolated child: a fault there (faults_at_large_m reads A far past its
    end from block row 48 on) is one line, and ncu_profile goes on (to cuBLAS, when asked)."""
    catalog = script_loader.SCRIPTS.parent / "tests" / "data" / "faults_at_shapes" / "catalog.toml"
    out = tmp_path / "ncu"
    assert ncu_profile.main([str(catalog), "faults_at_large_m-float32-TILE16", "--size", "64",
                             "--backend", "cpu-sim", "--export", str(out)]) == 1
    printed = capfd.readouterr()
    (line,) = [x for x in printed.err.splitlines() if x.startswith("ncu_profile: the launch")]
    assert line.startswith("ncu_profile: the launch failed: ") and "M64 N64 K64" in line, printed.err
    assert "Traceback" not in printed.err
