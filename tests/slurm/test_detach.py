"""Detaching from the Prolog and stopping again, with real processes."""

import os
import signal
import subprocess
import sys
import time

import pytest

from slurm_energy.slurm.detach import spawn_detached
from slurm_energy.slurm.processes import is_running, stop_process


def test_child_leads_own_session_with_stdio_detached(tmp_path):
    log = str(tmp_path / "child.log")
    pid = spawn_detached([sys.executable, "-c", "import time; print('hello', flush=True); time.sleep(30)"], log)
    try:
        assert os.getpgid(pid) == pid  # already leads its process group when spawn_detached returns
        assert os.getpgid(pid) != os.getpgid(0)  # out of our process group: slurmd's group kill misses it
        if sys.version_info >= (3, 11):  # in our session: one scheduling autogroup with slurmd's hooks
            assert os.getsid(pid) == os.getsid(0)
        assert os.readlink(f"/proc/{pid}/fd/0") == "/dev/null"
        assert os.readlink(f"/proc/{pid}/fd/1") == log and os.readlink(f"/proc/{pid}/fd/2") == log
        for _ in range(100):
            if "hello" in open(log).read():
                break
            time.sleep(0.05)
        assert "hello" in open(log).read()
        assert sorted(os.listdir(f"/proc/{pid}/fd")) == ["0", "1", "2"]  # no inherited pipe to slurmd
    finally:
        assert stop_process(pid) == "terminated"


def test_term_ignored_gets_killed(tmp_path):
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"
    pid = spawn_detached([sys.executable, "-c", code], str(tmp_path / "l"))
    for _ in range(100):
        if "ready" in open(tmp_path / "l").read():
            break
        time.sleep(0.05)
    t = time.monotonic()
    assert stop_process(pid, term_wait_s=0.3) == "killed"
    assert time.monotonic() - t < 1.0


def test_zombie_counts_as_stopped():
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    for _ in range(100):  # exits but is not reaped: a zombie
        if not is_running(p.pid):
            break
        time.sleep(0.02)
    assert os.path.exists(f"/proc/{p.pid}")  # still there, as a zombie
    assert stop_process(p.pid) == "not_running"
    p.wait()


def test_nice_child_runs_at_the_hooks_niceness_plus_nice(tmp_path):
    own = os.getpriority(os.PRIO_PROCESS, 0)
    pid = spawn_detached([sys.executable, "-c", "import time; time.sleep(30)"], str(tmp_path / "l"), nice=7)
    try:
        assert os.getpriority(os.PRIO_PROCESS, pid) == min(19, own + 7)  # e.g. 0 + 7 = 7
        if os.path.exists(f"/proc/{pid}/autogroup"):  # the autogroup it shares with us is left alone
            assert open(f"/proc/{pid}/autogroup").read() == open("/proc/self/autogroup").read()
    finally:
        assert stop_process(pid) == "terminated"


def test_a_zombie_leaving_during_the_wait_is_seen_stopped(tmp_path):
    # the child exits 0.3 s after TERM (its handler sleeps): the wait wakes at its exit, "terminated"
    code = ("import signal, sys, time\n"
            "signal.signal(signal.SIGTERM, lambda *_: (time.sleep(0.3), sys.exit(0)))\n"
            "print('ready', flush=True)\ntime.sleep(60)")
    pid = spawn_detached([sys.executable, "-c", code], str(tmp_path / "l"))
    for _ in range(100):
        if "ready" in open(tmp_path / "l").read():
            break
        time.sleep(0.05)
    assert stop_process(pid, term_wait_s=5.0) == "terminated"
    assert not is_running(pid)


def test_unnice_brings_the_child_back_to_the_callers_priority(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("lowering a niceness needs root (CAP_SYS_NICE), as the Epilog has")
    from slurm_energy.slurm.detach import unnice

    own = os.getpriority(os.PRIO_PROCESS, 0)
    pid = spawn_detached([sys.executable, "-c", "import time; time.sleep(30)"], str(tmp_path / "l"), nice=10)
    try:
        assert os.getpriority(os.PRIO_PROCESS, pid) == min(19, own + 10)
        unnice(pid)
        assert os.getpriority(os.PRIO_PROCESS, pid) == own
    finally:
        assert stop_process(pid) == "terminated"


def test_term_waits_for_a_starting_process_to_handle_it(tmp_path):
    # the child installs its TERM handler 0.3 s after it starts (a sampler still importing); the
    # handler writes its last line: sent at once, TERM's default action would end it with nothing
    from slurm_energy.slurm.processes import catches

    marker = tmp_path / "last-sample"
    code = ("import signal, sys, time\ntime.sleep(0.3)\n"
            f"signal.signal(signal.SIGTERM, lambda *_: (open({str(marker)!r}, 'w').write('final'), sys.exit(0)))\n"
            "time.sleep(60)")
    pid = spawn_detached([sys.executable, "-c", code], str(tmp_path / "l"))
    assert not catches(pid, signal.SIGTERM)
    assert stop_process(pid, term_wait_s=5.0, handler_wait=True) == "terminated"
    assert marker.read_text() == "final"


def test_slots_let_n_holders_in_and_queue_the_next(tmp_path):
    import threading

    from slurm_energy.slurm.detach import slot

    got = threading.Event()

    def third():
        with slot(str(tmp_path), "finalize", 2) as k:
            assert k in (0, 1)
            got.set()

    with slot(str(tmp_path), "finalize", 2) as a:
        with slot(str(tmp_path), "finalize", 2) as b:
            assert {a, b} == {0, 1}  # two holders at once
            t = threading.Thread(target=third)
            t.start()
            assert not got.wait(0.5)  # the third waits while both are held
        assert got.wait(10)  # one released: the third gets in
    t.join(10)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".finalize-slot-0", ".finalize-slot-1"]


def test_no_slot_dir_runs_unlimited(tmp_path):
    from slurm_energy.slurm.detach import slot

    with slot(str(tmp_path / "missing"), "finalize", 2) as k:
        assert k is None
