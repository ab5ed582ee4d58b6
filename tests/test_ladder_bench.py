"""scripts/ladder_bench.py: one variant that crashes or hangs costs its own line; a fresh worker
measures the rest and the table holds every row timed (a stand-in worker, no GPU)."""

import io
import sys
import textwrap

import script_loader

# Stands in for `ladder_bench.py --worker`: items a to e, in order, skipping those of the skip
# file. b's launch kills its process (a fault), c never returns (a hang), e faults after saying
# it failed (the worker's own report of a launch that failed, then LOST_EXIT).
WORKER = textwrap.dedent("""\
    import json, os, signal, sys, time
    skip = {tuple(x) for x in json.load(open(sys.argv[sys.argv.index("--skip-file") + 1]))}
    print("@@ladder CEILING float32 2.5", flush=True)
    for phase, key in [("rungs", "a"), ("rungs", "b"), ("twins", "c"), ("time", "d"), ("twins", "e"), ("time", "f")]:
        if (phase, key) in skip:
            continue
        print("@@ladder BEGIN", phase, key, flush=True)
        print("checking", key, flush=True)
        if key == "b":
            os.kill(os.getpid(), signal.SIGSEGV)
        if key == "c":
            time.sleep(600)
        row = {"row": [key, "cfg", "float32", 3.0, 45.8, 83.3]} if phase == "time" else {}
        print("@@ladder END", phase, key, json.dumps({"bad": False, **row}), flush=True)
        if key == "e":
            sys.exit(3)
    """)


def test_a_variant_that_crashes_or_hangs_costs_its_line_and_a_fresh_worker_measures_the_rest(tmp_path):
    bench = script_loader.load("ladder_bench")
    worker = tmp_path / "worker.py"
    worker.write_text(WORKER)
    out = io.StringIO()
    results, ceilings = bench.supervise([sys.executable, str(worker)], item_timeout=2.0, out=out)
    text = out.getvalue()
    assert [(r["phase"], r["key"]) for r in results] == [
        ("rungs", "a"), ("rungs", "b"), ("twins", "c"), ("time", "d"), ("twins", "e"), ("time", "f")]
    crash, hang = results[1], results[2]
    assert crash["failure"] == "CRASH b (rungs): the worker died in it (killed by signal 11)" and crash["bad"]
    assert hang["failure"].startswith("HANG c (twins): no output for 2 s; killed") and not hang["bad"]
    assert crash["failure"] in text and hang["failure"] in text
    # every item once: a fresh worker after b, c and e, each skipping what was done
    assert [line for line in text.splitlines() if line.startswith("checking")] == [
        "checking a", "checking b", "checking c", "checking d", "checking e", "checking f"]
    assert "@@ladder" not in text and ceilings == {"float32": 2.5}
    table = io.StringIO()
    bench.print_table([r["row"] for r in results if "row" in r], ceilings, 4096, out=table)
    assert "| d | cfg | float32 | 3.000 | 45.8 | 83.3 |" in table.getvalue()
    assert "| f | cfg | float32 |" in table.getvalue()
