"""gemmcheck.judge.once: work done once per run by the first process that claims it."""

import subprocess
import sys
import threading
import time

import pytest

from gemmcheck.judge.once import Once, Stopped


def test_the_first_claim_wins_and_its_result_reaches_the_others(tmp_path):
    first, second = Once(tmp_path), Once(tmp_path)
    assert first.claim("racecheck row-1") and not second.claim("racecheck row-1")
    assert second.claim("racecheck row-2")            # another key is another claim
    threading.Timer(0.2, first.publish, args=("racecheck row-1", {"found": [1, 2]})).start()
    assert second.wait("racecheck row-1") == (True, {"found": [1, 2]})


def test_a_claim_given_up_or_left_by_a_dead_process_passes_to_a_waiter(tmp_path):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    (tmp_path / "probe.claim").write_text(gone.stdout.strip())   # its claimant has exited
    waiter = Once(tmp_path)
    assert waiter.wait("probe") == (False, None)                  # claimed in its place
    assert not Once(tmp_path).claim("probe")
    waiter.publish("probe", "done")
    assert Once(tmp_path).wait("probe") == (True, "done")

    owner, other = Once(tmp_path), Once(tmp_path)
    assert owner.claim("memcheck row") and owner.claim("initcheck row")
    threading.Timer(0.2, owner.abandon).start()       # a session that ends with runs queued
    assert other.wait("memcheck row") == (False, None)
    assert other.wait("initcheck row") == (False, None)


def test_a_wait_stops_when_told(tmp_path):
    owner, other = Once(tmp_path), Once(tmp_path)
    assert owner.claim("row")
    stop = threading.Event()
    threading.Timer(0.2, stop.set).start()
    started = time.monotonic()
    with pytest.raises(Stopped):
        other.wait("row", stop=stop)
    assert time.monotonic() - started < 5


def test_another_process_claims_and_publishes(tmp_path):
    code = ("import sys, time; from gemmcheck.judge.once import Once; o = Once(sys.argv[1]); "
            "assert o.claim('row'); print('claimed', flush=True); time.sleep(0.3); o.publish('row', [3, 4])")
    proc = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "claimed"
    assert not Once(tmp_path).claim("row")
    assert Once(tmp_path).wait("row") == (True, [3, 4])
    assert proc.wait() == 0


def test_do_runs_the_work_where_it_is_claimed_and_hands_its_result_to_the_others(tmp_path):
    first, second = Once(tmp_path), Once(tmp_path)
    ran = []
    assert first.do("probe", lambda: ran.append("first") or {"lost": 1}) == {"lost": 1}
    assert second.do("probe", lambda: ran.append("second")) == {"lost": 1}
    assert ran == ["first"]
    with pytest.raises(ZeroDivisionError):
        first.do("row", lambda: 1 / 0)                 # the claim is given up ...
    assert second.do("row", lambda: "done here") == "done here"   # ... and done by the next
