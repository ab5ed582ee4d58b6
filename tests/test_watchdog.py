"""A wait on another process that lasts too long leaves a report (gemmcheck.watchdog): the
waiting thread's stack and who holds the watched lock, once, while the wait goes on."""

import fcntl
import os
import subprocess
import sys
import time

from gemmcheck import watchdog


def test_a_long_wait_leaves_the_stacks_and_the_lock_holder_and_a_short_one_nothing(tmp_path, monkeypatch):
    lock = tmp_path / "gpu-0.lock"
    lock.touch()
    holder = subprocess.Popen([sys.executable, "-c",
                               "import fcntl, os, sys, time\n"
                               f"fd = os.open({str(lock)!r}, os.O_RDWR)\n"
                               "fcntl.flock(fd, fcntl.LOCK_EX)\n"
                               "print('held', flush=True)\n"
                               "time.sleep(30)\n"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        folder = tmp_path / "stalls"
        monkeypatch.setattr(watchdog, "_folder", folder)
        monkeypatch.setattr(watchdog, "_locks", {str(lock)})
        with watchdog.reporting("nothing much", after=5):
            pass
        fd = os.open(lock, os.O_RDWR)
        with watchdog.reporting("its turn to time alone on the GPU", after=0.3):
            got = False
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline and not got:   # the wait under watch (LOCK_NB polls:
                try:                                          # the holder never lets go in time)
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    got = True
                except BlockingIOError:
                    time.sleep(0.05)
            assert not got
        os.close(fd)
        time.sleep(0.3)
        (report,) = folder.iterdir()
        text = report.read_text()
        assert report.name == f"{os.getpid()}.txt" and text.count("has waited") == 1   # once
        assert "has waited 0 s for its turn to time alone on the GPU" in text
        assert f"pid {holder.pid} holds WRITE on {lock}" in text and "-c import fcntl" in text
        assert "threads:" in text and "test_a_long_wait_leaves" in text   # this thread's stack
    finally:
        holder.kill()
        holder.wait()


def test_without_a_folder_or_with_zero_nothing_is_watched(tmp_path, monkeypatch):
    monkeypatch.setattr(watchdog, "_folder", None)
    with watchdog.reporting("x", after=0.01):
        time.sleep(0.05)
    monkeypatch.setattr(watchdog, "_folder", tmp_path / "stalls")
    with watchdog.reporting("x", after=0):
        time.sleep(0.05)
    assert not (tmp_path / "stalls").exists()
