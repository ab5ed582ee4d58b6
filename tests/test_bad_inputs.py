"""Bad or unusual inputs, as a new user gives them, each with its one line or its right verdict on
cpu-sim: sources in any encoding, <cstdint> under NVRTC, a user kernel with printf, a failure's
reproduce line, a shape claim that matches nothing, the draft command, where durations go.
The catalogs are under tests/data/bad_inputs/ (docs/reliability.md, "Bad input: what you see")."""

import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from gemmcheck import report
from gemmcheck.compile import compiler, cubin, device_includes, resources
from gemmcheck.contract import catalog, cuda_source
from child_env import child_env

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "tests" / "data" / "bad_inputs"


def run_suites(tmp_path, case: str, *args, cwd=ROOT, backend="cpu-sim"):
    """The suites over one case's catalog, as a user runs them (on cpu-sim unless `backend`
    says otherwise); outputs under tmp_path."""
    env = child_env()
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", f"--rootdir={ROOT}",
                           f"--gemm-backend={backend}", f"--gemm-verdicts={tmp_path / 'reports' / 'verdicts.json'}",
                           f"--alluredir={tmp_path / 'allure'}", f"--gemm-catalog={CASES / case / 'catalog.toml'}",
                           *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


def rows(tmp_path) -> dict:
    document = json.loads((tmp_path / "reports" / "verdicts.json").read_text())
    return {r["instance"]: r for r in document["instances"]}


def said(out) -> list[str]:
    """The lines of a run's output besides pytest's progress dots and its skip summary."""
    return [line for line in (out.stdout + out.stderr).splitlines()
            if line.strip() and not line.startswith("SKIPPED") and not re.fullmatch(r"[.sFEx]+\s*(\[\s*\d+%\])?", line)]


# -- sources in any encoding ------------------------------------------------------------------

@pytest.mark.parametrize("case", ["gbk_comment", "latin1_comment"])
def test_a_source_with_a_comment_in_another_encoding_is_judged_as_written(tmp_path, case):
    # (before: an INTERNALERROR of 36 lines at catalog load that never named the file)
    source = CASES / case / "gemm.cu"
    with pytest.raises(UnicodeDecodeError):
        source.read_text(encoding="utf-8")
    out = run_suites(tmp_path, case, "suites/compile", "suites/correctness/test_exact_results.py")
    text = out.stdout + out.stderr
    assert out.returncode == 0 and "INTERNALERROR" not in text and "Traceback" not in text, text
    row = rows(tmp_path)[f"{case}-float32-TILE8"]
    assert (row["verdict"], row["status"]) == ("correct", "as_expected") and row["checks"] >= 5, row


def test_the_compilers_get_the_sources_bytes_exactly(tmp_path):
    data = (CASES / "gbk_comment" / "gemm.cu").read_bytes()
    text = cuda_source.read_source(CASES / "gbk_comment" / "gemm.cu")
    assert cuda_source.source_bytes(text) == data and not cuda_source.is_utf8(text)
    assert "\ufffd" in cuda_source.readable(text) and cuda_source.kernels(text) == ["good"]
    # NVRTC takes a UTF-8 string: the program is then an #include of a byte-exact copy
    files = device_includes.DeviceFiles(cuda_source.device_part(text), (), tmp_path, name="/x/gemm.cu")
    program = files.program(())
    copy = Path(re.fullmatch(r'#include "(.*)"\n', program)[1])
    assert copy.read_bytes() == b'#line 1 "/x/gemm.cu"\n' + cuda_source.source_bytes(cuda_source.device_part(text))


def test_an_error_in_a_source_in_another_encoding_names_its_file_and_line(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMMCHECK_CACHE_DIR", str(tmp_path / "cache"))
    source = tmp_path / "bad.cu"
    source.write_bytes("// 注释\n__global__ void k(float *a) { a[0] = nope; }\n".encode("gbk"))
    with pytest.raises(compiler.CompileError) as info:
        compiler.compile_source(source, ("k",), "sm_90")
    assert f'{source}(2): error: identifier "nope" is undefined' in str(info.value)


def test_a_binary_source_is_one_line_naming_the_file(tmp_path):
    out = run_suites(tmp_path, "binary_source", "suites/")
    assert out.returncode == 4, out.stdout + out.stderr
    assert said(out)[0] == (
        f"ERROR: --gemm-catalog: {CASES / 'binary_source' / 'catalog.toml'}: kernel 'binary_source': source "
        f"'gemm.cu': {CASES / 'binary_source' / 'gemm.cu'}: not a text file (a NUL byte at offset 3: a binary "
        "file, or UTF-16); give the CUDA C source, saved as UTF-8 or another 8-bit encoding")


def test_a_catalog_that_is_not_utf8_is_one_line_naming_the_file(tmp_path):
    out = run_suites(tmp_path, "catalog_not_utf8", "suites/")
    assert out.returncode == 4 and "Traceback" not in out.stdout + out.stderr
    assert said(out)[0].startswith(f"ERROR: --gemm-catalog: {CASES / 'catalog_not_utf8' / 'catalog.toml'}: "
                                   "not UTF-8 (byte 0xfc at offset 11); a TOML file is UTF-8: save it as UTF-8")


# -- <cstdint> under NVRTC -----------------------------------------------------------------------

def test_cstdint_types_compile_under_nvrtc_as_under_nvcc(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMMCHECK_CACHE_DIR", str(tmp_path / "cache"))
    source = CASES / "cstdint" / "gemm.cu"
    assert compiler.compile_source(source, ("gemm_i64<float, 8>",), "sm_90", compiler="nvcc").cubin
    built = compiler.compile_source(source, ("gemm_i64<float, 8>",), "sm_90", compiler="nvrtc")
    assert built.cubin
    for header in ("<stdint.h>", "<cuda/std/cstdint>"):   # the C header, and libcu++'s own
        other = tmp_path / "other.cu"
        other.write_text(source.read_text().replace("<cstdint>", header))
        assert compiler.compile_source(other, ("gemm_i64<float, 8>",), "sm_90", compiler="nvrtc").cubin
    # the prelude is what gives them: without it, NVRTC's own error, and the hint names libcu++
    empty = tmp_path / "empty_prelude.h"
    empty.write_text("#pragma once\n")
    monkeypatch.setattr(compiler, "PRELUDE", empty)
    monkeypatch.setattr(compiler, "_DECISIONS", device_includes.Decisions(lambda: tmp_path / "includes"))
    with pytest.raises(compiler.CompileError) as info:
        compiler.compile_source(source, ("gemm_i64<float, 8>",), "sm_90", compiler="nvrtc")
    assert 'identifier "uint32_t" is undefined' in str(info.value) and "<cuda/std/" in str(info.value)


# -- resources: the suite's rule for its own kernels, information (or a claim) for a user's ------

def test_a_user_kernel_with_printf_is_green_and_the_report_says_its_stack_frame_and_why(tmp_path):
    # (before: red, through the reference kernels' no-stack-frame rule, in an assert dump)
    out = run_suites(tmp_path, "printf", "suites/compile", "suites/correctness/test_exact_results.py")
    text = out.stdout + out.stderr
    assert out.returncode == 0, text
    note = ("printf-float32-TILE8: 16 B stack frame: it calls printf (vprintf takes its arguments through "
            "the stack) (information: its catalog claims no resources)")
    assert note in text.splitlines(), text
    assert rows(tmp_path)["printf-float32-TILE8"]["verdict"] == "correct"
    attached = [p.read_text() for p in (tmp_path / "allure").glob("*-attachment.txt")]
    assert any("it calls printf" in a for a in attached)
    # a user catalog's run has no "got empty parameter set" skips: those tests are not generated
    assert "empty parameter set" not in text and re.search(r"\d+ deselected", text.splitlines()[-1]), text


def test_a_resources_claim_the_kernel_breaks_fails_in_one_line_that_says_why(tmp_path):
    out = run_suites(tmp_path, "printf_claims_no_stack_frame", "suites/compile")
    text = out.stdout + out.stderr
    assert out.returncode == 1, text
    failed = re.findall(r"^FAILED (\S+)", text, re.M)
    assert failed == ["suites/compile/test_resources.py::test_kernels_keep_the_resources_their_catalog_claims"
                      "[printf_claims_no_stack_frame-float32-TILE8]"], text
    assert re.search(r"^printf_claims_no_stack_frame-float32-TILE8 \(chatty<float, 8>\): 16 B stack frame: it calls "
                     r"printf \(vprintf .*\), on sm_90 built by (NVRTC|nvcc) [\d.]+[^;]*; its catalog claims resources = "
                     r"'no-stack-frame'", text, re.M), text
    assert "AssertionError" not in text


def test_only_the_suites_own_reference_kernels_claim_no_stack_frame_by_default(tmp_path):
    builtin = catalog.load_all(catalog.resolve(["all"]))
    assert {s.resources for s in builtin if s.is_reference} == {"no-stack-frame"}
    assert {s.resources for s in builtin if not s.is_reference} == {None}
    assert [s.resources for s in catalog.load(CASES / "printf" / "catalog.toml")] == [None]
    bad = tmp_path / "catalog.toml"
    bad.write_text((CASES / "printf_claims_no_stack_frame" / "catalog.toml").read_text()
                   .replace("../printf/", str(CASES / "printf") + "/").replace('"no-stack-frame"', '"tiny"'))
    with pytest.raises(catalog.CatalogError, match=r"resources: unknown claim 'tiny'; use one of 'no-spills'"):
        catalog.load(bad)


def test_the_cubins_call_graph_names_printf_and_nothing_for_a_kernel_without_calls(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMMCHECK_CACHE_DIR", str(tmp_path / "cache"))
    chatty = compiler.compile_source(CASES / "printf" / "gemm.cu", ("chatty<float, 8>",), "sm_90")
    assert cubin.calls(chatty.cubin) == {chatty.mangled["chatty<float, 8>"]: ("vprintf",)}
    plain = compiler.compile_source(CASES / "cstdint" / "gemm.cu", ("gemm_i64<float, 8>",), "sm_90")
    assert cubin.calls(plain.cubin) == {} and cubin.calls(b"not an ELF") == {}
    found = resources.compile_report(CASES / "printf" / "gemm.cu", ("chatty<float, 8>",))["chatty<float, 8>"]
    assert resources.claim_broken(found, "no-spills") is None
    assert "calls printf" in resources.claim_broken(found, "no-stack-frame")


# -- a failure's reproduce line runs as printed ------------------------------------------------

def test_a_failures_reproduce_line_runs_as_printed(tmp_path):
    # (before: `pytest '<node id>'` alone: without --gemm-catalog, "not found")
    options = ("--gemm-tiles=8", "--gemm-hang-timeout=5", "--gemm-oracle=host")
    out = run_suites(tmp_path, "wrong_values", "suites/correctness/test_exact_results.py", "-k", "aligned", *options)
    assert out.returncode == 1, out.stdout + out.stderr
    line = re.search(r"^  reproduce: (.*); inputs: Problem\(", out.stdout, re.M)[1]
    assert f"--gemm-catalog=tests/data/bad_inputs/wrong_values/catalog.toml" in line
    assert all(o in line for o in ("--gemm-backend=cpu-sim", "--gemm-profile=dev", "--gemm-tiles=8",
                                   "--gemm-hang-timeout=5.0", "--gemm-oracle=host")), line
    assert "--gemm-verdicts" not in line and "--alluredir" not in line   # outputs stay where they were
    # run as given, from the root; its outputs under tmp_path (a run empties its allure results
    # directory at start: the repository's, under a parallel outer run's feet)
    outputs = f" --alluredir={tmp_path / 'again-allure'} --gemm-verdicts={tmp_path / 'again-verdicts.json'}"
    again = subprocess.run(line + outputs, shell=True, cwd=ROOT, capture_output=True, text=True, timeout=600,
                           env=child_env())
    node = shlex.split(line)[3]
    assert again.returncode == 1 and f"FAILED {node}" in again.stdout, again.stdout + again.stderr
    # the report's attachment is the same command
    attached = [p.read_text() for p in (tmp_path / "allure").glob("*-attachment.txt")]
    assert line + "\n" in attached


def test_a_reproduce_line_from_another_directory_goes_to_the_root_first():
    line = report.rerun_command_line("suites/x.py::t[a b]", ["--gemm-catalog=c.toml"], root=ROOT, cwd="/")
    assert line.startswith(f"cd {shlex.quote(str(ROOT))} && ") and "'suites/x.py::t[a b]'" in line
    assert report.rerun_command_line("n", [], root=ROOT, cwd=ROOT).endswith("-m pytest n")


# -- a shape claim that matches nothing is not checked, and said so -----------------------------

def test_a_kernel_whose_claim_matches_no_shape_of_the_run_is_not_checked_with_the_reason(tmp_path):
    # (before: a green run, and the kernel gone from the table: the kill matrix recorded a clean
    # verdict for a row that launched nothing)
    out = run_suites(tmp_path, "no_claimed_shape", "suites/correctness/test_exact_results.py",
                     "suites/hazards/test_kill_matrix.py")
    text = out.stdout + out.stderr
    row = rows(tmp_path)["no_claimed_shape-float32-TILE8"]
    assert (row["status"], row["checks"]) == ("not_checked", 0), row
    assert row["why_not_checked"].startswith("out of scope: no_claimed_shape declares shapes = "
                                             "'M == 12345 and N == 3 and K == 7'"), row
    assert re.search(r"^no_claimed_shape-float32-TILE8 +correct +not checked \(see below\) +0 +not_checked$",
                     text, re.M), text
    assert f"not checked: no_claimed_shape-float32-TILE8: {row['why_not_checked']}" in text.splitlines()
    assert "no_claimed_shape-float32-TILE8: none of the kill matrix's problems is among the shapes it claims" in text


# -- on the GPU ---------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("case", ["gbk_comment", "latin1_comment", "cstdint", "printf", "no_claimed_shape"])
def test_on_the_gpu_each_case_gets_the_same_verdicts_as_on_cpu_sim(tmp_path, case):
    """NVRTC's byte-exact copy, <cstdint>, printf and a claim nothing fits, through the probe,
    CuPy's launches and compute-sanitizer: what cpu-sim shows above."""
    from gemmcheck.backends import device

    found, why = device.cuda_device()
    if not found:
        pytest.skip(f"needs a CUDA device; {why}")
    out = run_suites(tmp_path, case, "suites/", backend="cupy")
    text = out.stdout + out.stderr
    assert out.returncode == 0 and "Traceback" not in text, text
    expected = {"no_claimed_shape": {"no_claimed_shape-float32-TILE8": "not_checked",
                                     "claims_any_shape-float32-TILE8": "as_expected"}}.get(
        case, {f"{case}-float32-TILE8": "as_expected"})
    assert {i: r["status"] for i, r in rows(tmp_path).items()} == expected
    if case == "printf":
        assert "it calls printf (vprintf takes its arguments through the stack)" in text


# -- the draft command ---------------------------------------------------------------------------

def draft(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "gemmcheck", "draft", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, env=child_env())


def test_draft_reads_a_source_in_another_encoding_and_refuses_a_binary_one_in_one_line():
    ok = draft(CASES / "gbk_comment" / "gemm.cu")
    assert ok.returncode == 0 and 'entry = "good"' in ok.stdout and not ok.stderr, ok.stderr
    binary = draft(CASES / "binary_source" / "gemm.cu")
    assert binary.returncode == 2 and not binary.stdout
    assert binary.stderr.splitlines() == [f"python -m gemmcheck draft: {CASES / 'binary_source' / 'gemm.cu'}: not "
                                          "a text file (a NUL byte at offset 3: a binary file, or UTF-16); give "
                                          "the CUDA C source, saved as UTF-8 or another 8-bit encoding"]


def test_draft_exits_non_zero_when_it_drafts_nothing():
    out = draft(CASES / "draft_no_kernels" / "host.cu")
    assert out.returncode == 1
    assert out.stderr.splitlines() == ["python -m gemmcheck draft: host.cu declares no __global__ function "
                                       "(after preprocessing): nothing drafted"]


def test_draft_names_a_header_it_cannot_open_and_takes_include_dirs(tmp_path):
    where = CASES / "draft_header_elsewhere"
    missing = draft(where / "src" / "main.cu")
    assert missing.returncode == 1 and 'could not open #include "kernels.cuh"' in missing.stderr.splitlines()[0]
    assert "give its directory with -I DIR" in missing.stderr
    found = draft(where / "src" / "main.cu", "-I", where / "include", "--catalog-dir", tmp_path)
    assert found.returncode == 0 and not found.stderr, found.stderr
    entry = tomllib.loads(found.stdout)["kernel"][0]
    assert entry["entry"] == "from_header" and entry["include_dirs"] == [os.path.relpath(where / "include", tmp_path)]
    # once its TODO is filled (the TILE values), the loader takes the draft as it is
    (tmp_path / "catalog.toml").write_text(found.stdout.replace("TILE = []", "TILE = [8]"))
    spec, = catalog.load(tmp_path / "catalog.toml")
    assert spec.include_dirs == ((where / "include").resolve(),)
    assert draft(where / "src" / "main.cu", "-I", tmp_path / "nowhere").stderr.strip().endswith("not a directory")


# -- where the run's durations go ----------------------------------------------------------------

def test_durations_follow_the_output_options(tmp_path):
    # (before: every run wrote reports/durations.json under the rootdir, whatever the options said)
    # (The default file is read beside this run's own reports, not the repository's: other
    # tests running the suites at the same time under xdist write the repository's.)
    beside = tmp_path / "reports" / "durations.json"
    mine = tmp_path / "mine.json"
    out = run_suites(tmp_path, "cstdint", "suites/compile")
    assert out.returncode == 0 and "suites/compile/test_resources.py" in "".join(json.loads(beside.read_text())["durations"])
    before = beside.stat().st_mtime_ns
    out = run_suites(tmp_path, "cstdint", "suites/compile", f"--gemm-durations={mine}")
    assert out.returncode == 0 and json.loads(mine.read_text())["durations"]
    assert beside.stat().st_mtime_ns == before
    bad = run_suites(tmp_path, "cstdint", "suites/compile", "--gemm-durations=/proc/nope/d.json")
    assert bad.returncode == 4 and said(bad)[0] == ("ERROR: --gemm-durations /proc/nope/d.json: cannot write "
                                                    "there (No such file or directory); give a writable path")
