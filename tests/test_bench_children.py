"""scripts/bench_children.py: children of one row, side by side, timed (a dry run on cpu-sim)."""

import pytest

import script_loader


@pytest.fixture(scope="module")
def bench():
    return script_loader.load("bench_children")


def test_it_times_children_side_by_side_and_splits_their_start_up(bench, capsys):
    assert bench.main(["--tool", "plain", "--backend", "cpu-sim", "--children", "2", "--at-once", "1,2",
                       "--instance", "matmul_tiled-float32-TILE4"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [line.split(" | ") for line in lines if line.startswith("| plain")]
    assert [r[2] for r in rows] == ["1", "2"] and all(r[3] == "2" for r in rows)
    for r in rows:
        child, start_up, imports, backend, prepare = map(float, r[6:11])
        assert 0 < start_up <= child and imports + backend + prepare <= start_up + 0.01
        assert r[-1].rstrip(" |") == "0"            # none failed


def test_it_names_an_unknown_instance(bench):
    with pytest.raises(SystemExit):
        bench.main(["--instance", "no_such-float32-TILE4", "--tool", "plain"])
