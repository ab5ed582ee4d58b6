"""scripts/bench_suite.py --read: the time table of earlier runs' --gemm-phases files (the
shards of a nightly on GPU runners), without running anything."""

import json

import pytest

import script_loader


@pytest.fixture(scope="module")
def bench():
    return script_loader.load("bench_suite")


def shard(tmp_path, name, wall, durations, tests, hypothesis=()):
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"collection_s": 1.0, "wall_s": wall, "durations": durations,
                                "tests": tests, "hypothesis_tests": list(hypothesis)}))
    return path


def test_read_sums_each_suite_over_the_shards_and_keeps_the_whole_walls(bench, tmp_path):
    one = shard(tmp_path, "s1", 10.0,
                {"suites/compile/test_a.py::t": 2.0, "suites/correctness/test_b.py::t[x]": 5.0},
                {"suites/compile/test_a.py::t": {"compile": 1.5},
                 "suites/correctness/test_b.py::t[x]": {"oracle": 3.0, "inputs": 1.0}},
                hypothesis=["suites/correctness/test_b.py::t[x]"])
    two = shard(tmp_path, "s2", 6.0, {"suites/correctness/test_b.py::t[y]": 4.0},
                {"suites/correctness/test_b.py::t[y]": {"oracle": 2.5}})
    rows, total = bench.read_rows([one, two])
    by = {r["suite"]: r for r in rows}
    assert set(by) == {"suites/compile", "suites/correctness"}      # no row for suites not run
    assert by["suites/correctness"]["tests"] == 2
    assert by["suites/correctness"]["wall"] == pytest.approx(9.0)    # its tests' summed time
    assert by["suites/correctness"]["oracle"] == pytest.approx(5.5)
    assert by["suites/correctness"]["hypothesis"] == pytest.approx(1.0)
    assert by["suites/correctness"]["other tests"] == pytest.approx(1.5)
    assert by["suites/compile"]["compile"] == pytest.approx(1.5)
    assert total["wall"] == pytest.approx(16.0) and total["collection"] == pytest.approx(2.0)
    assert total["pytest"] == pytest.approx(16.0 - 2.0 - 11.0) and total["tests"] == 3
    lines = bench.table(rows, total)
    assert lines[-1].startswith("| **all** | 3 | 16.0 |") and "2 runs" in lines[-1]


def test_read_names_a_missing_file(bench, tmp_path, capsys):
    with pytest.raises(SystemExit):
        bench.main(["--read", str(tmp_path / "nowhere.json")])
    assert "no such file" in capsys.readouterr().err


def test_timeline_counts_each_suites_worker_seconds_where_its_tests_ran_and_names_the_last(bench):
    doc = {"wall_s": 12.0, "tests": {"suites/hazards/test_k.py::row": {"sanitizer": 6.0}},
           "spans": {"suites/compile/test_a.py::t": ["gw0", 0.0, 4.0],
                     "suites/correctness/test_b.py::t": ["gw1", 1.0, 6.0],
                     "suites/hazards/test_k.py::row": ["gw0", 4.0, 11.0]}}
    lines = bench.timeline(doc, step=5.0, last=2)
    assert lines[0].startswith("3 tests on 2 workers, wall 12.0 s, last test ended at 11.0 s")
    rows = {line.split(" | ")[0]: line for line in lines if line.startswith("| ") and "-" in line.split(" | ")[0]}
    assert rows["| 0-5"] == "| 0-5 | 4.0 | 4.0 | 1.0 | 1.0 |"      # compile, correctness, hazards, idle
    assert rows["| 5-10"] == "| 5-10 | 0.0 | 1.0 | 5.0 | 4.0 |"
    assert rows["| 10-15"] == "| 10-15 | 0.0 | 0.0 | 1.0 | 9.0 |"
    assert "suites/hazards/test_k.py::row  sanitizer 6.0" in lines[-1] and "gw0" in lines[-1]
    assert "suites/correctness/test_b.py::t" in lines[-2]


def test_timeline_counts_tests_outside_the_suites_as_other(bench):
    doc = {"wall_s": 3.0, "tests": {}, "spans": {"tests/test_x.py::t": ["main", 0.0, 2.0],
                                                 "suites/compile/test_a.py::t": ["main", 2.0, 3.0]}}
    lines = bench.timeline(doc, step=5.0)
    assert lines[1] == "| seconds | suites/compile | other | idle |"
    assert lines[3] == "| 0-5 | 1.0 | 2.0 | 2.0 |"


def test_timeline_counts_the_children_running_and_names_the_longest_per_tool(bench):
    doc = {"wall_s": 10.0, "tests": {}, "spans": {"suites/hazards/test_k.py::row": ["gw0", 0.0, 10.0]},
           "children": [["gw0", "racecheck: a-float32-TILE8, b-float32-TILE8", 0.0, 2.0, 10.0,
                         {"main": 0.5, "backend": 1.25, "prepared": 1.75}],
                        ["gw1", "memcheck: a-float32-TILE8", 2.5, 3.0, 5.0, {}],
                        ["gw1", "plain: hang-float32-TILE8", 1.0, None, 4.0, {}]]}
    lines = bench.timeline(doc, step=5.0, last=2)
    assert any(line.startswith("a row under one tool in more than one child: 0 ") for line in lines)
    again = bench.timeline({**doc, "children": doc["children"] + [["gw2", "racecheck: b-float32-TILE8", 5.0, 6.0, 7.0, {}]]},
                           step=5.0, last=2)
    assert any(line.startswith("a row under one tool in more than one child: 1 ") for line in again)
    assert "  racecheck: b-float32-TILE8 (gw0, gw2)" in again
    assert lines[1].endswith("| idle | children |")
    assert "| 0-5 | 5.0 | 0.0 | 2.1 |" in lines          # (5 + 2.5 + 3) child-seconds / 5 s
    assert "| 5-10 | 5.0 | 0.0 | 1.0 |" in lines
    assert "| memcheck | 1 | 1 (2.5) | 2.5 | 0.5 | 0.0 | 0.0 | 0.0 | 2.5 | 5.0 |" in lines   # no marks sent
    assert "| plain | 1 | 1 (3.0) | 3.0 | 0.0 | 0.0 | 0.0 | 0.0 | 3.0 | 4.0 |" in lines      # never said READY
    assert "| racecheck | 1 | 0 (0.0) | 10.0 | 2.0 | 0.5 | 0.8 | 0.5 | 10.0 | 10.0 |" in lines
    assert lines[-1].endswith("10.0  racecheck: a-float32-TILE8, b-float32-TILE8")   # the longest


def test_timeline_says_how_much_of_the_performance_suites_tail_was_sampled(bench):
    doc = {"wall_s": 20.0,
           "tests": {"suites/performance/t.py::a": {"timing": 4.0, "turns": 1.0},
                     "suites/performance/t.py::b": {"timing": 6.0}},
           "spans": {"suites/hazards/test_k.py::row": ["gw0", 0.0, 8.0],
                     "suites/performance/t.py::a": ["gw1", 6.0, 14.0],     # half of it after 10 s
                     "suites/performance/t.py::b": ["gw0", 12.0, 20.0]},
           "children": [["gw0", "memcheck: a-float32-TILE8", 1.0, 2.0, 10.0, {}],
                        ["gw1", "perf-warm: float32", 0.0, None, 30.0, {}]]}   # not a row's: ignored
    lines = bench.timeline(doc, step=5.0)
    assert ("performance suite alone from 10.0 s to 20.0 s (10.0 s): sampling 8.0 s of it (80 % of one card's time; "
            "`timing` summed over all its tests 10.0 s)") in lines
    late = {**doc, "spans": {**doc["spans"], "suites/hazards/test_k.py::row": ["gw0", 0.0, 20.0]}}
    assert "performance suite: no tail of its own (other tests or children ran to its end)" in bench.timeline(late)
    untimed = {**doc, "tests": {}}
    assert not any(line.startswith("performance suite") for line in bench.timeline(untimed))


def test_timeline_says_where_the_first_seconds_went(bench):
    doc = {"wall_s": 12.0, "tests": {}, "process_s": 2.25, "workers_collected": {"gw0": 5.5, "gw1": 6.75},
           "spans": {"suites/compile/t.py::a": ["gw0", 6.9, 8.0], "suites/compile/t.py::b": ["gw1", 6.9, 12.0]}}
    assert ("start-up: the pytest process ran 2.2 s before its session began; 2 workers had collected between "
            "5.5 s and 6.8 s; the first test began at 6.9 s") in bench.timeline(doc)
    older = {k: v for k, v in doc.items() if k not in ("process_s", "workers_collected")}
    assert not any(line.startswith("start-up") for line in bench.timeline(older))


def test_timeline_of_a_file_without_spans_says_so(bench):
    with pytest.raises(SystemExit, match="no spans"):
        bench.timeline({"wall_s": 1.0, "tests": {}, "durations": {}})
