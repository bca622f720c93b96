"""The /proc view (slurm_energy.slurm.processes): a checked, public stop of a job attempt's sampler."""

from __future__ import annotations

import os
import sys
import time

from slurm_energy.slurm.attempt import Attempt, write_private
from slurm_energy.slurm.detach import DETACHED_MODULE, spawn_detached
from slurm_energy.slurm.processes import busy, is_running, stop_sampler

#: a stand-in sampler: handles TERM (as the real one does once started) and sleeps; its argv ends
#: as a real sampler's does (``-m <module> sampler <job dir> <node>``)
_SAMPLER = "import signal, sys, time; signal.signal(signal.SIGTERM, lambda *a: sys.exit(0)); time.sleep(60)"


def _start(spool: Attempt, module: str = DETACHED_MODULE) -> int:
    pid = spawn_detached([sys.executable, "-c", _SAMPLER, "-m", module, "sampler", spool.dir, spool.node],
                         os.devnull, env={})
    for _ in range(200):  # argv is the new one only after the exec; its handler once Python runs it
        with open(f"/proc/{pid}/status", "rb") as f:
            if any(ln.startswith(b"SigCgt:") and int(ln.split()[1], 16) >> 14 & 1 for ln in f):
                break
        time.sleep(0.02)
    return pid


def test_a_sampler_named_by_its_pidfile_is_stopped_and_the_stop_says_so(tmp_path):
    spool = Attempt(str(tmp_path / "spool"), "41", 0, "n1").ensure()
    pid = _start(spool)
    write_private(spool.pidfile, str(pid))
    got = stop_sampler(spool)
    assert (got.outcome, got.stopped, got.was_running) == ("terminated", True, True)
    assert not is_running(pid)


def test_a_sampler_without_a_spool_is_found_by_its_run_dir_on_its_node(tmp_path):
    spool = Attempt(str(tmp_path / "spool"), "42", 3, "n1").ensure()  # the spool-less Epilog names 42-r3
    pid = _start(spool)
    assert stop_sampler("42-r3", "n2").outcome == "no_pidfile" and is_running(pid)  # another node's: not it
    got = stop_sampler("42-r3", "n1")
    assert (got.outcome, got.stopped, got.was_running) == ("terminated", True, True) and not is_running(pid)


def test_no_sampler_running_is_a_stop_that_found_nothing(tmp_path):
    spool = Attempt(str(tmp_path / "spool"), "43", 0, "n1").ensure()
    got = stop_sampler(spool)  # no pidfile, none in /proc
    assert (got.outcome, got.stopped, got.was_running) == ("no_pidfile", True, False)


def test_busy_knows_samplers_started_under_the_modules_name_before_the_move(tmp_path):
    spool = Attempt(str(tmp_path / "spool"), "44", 0, "n1").ensure()
    pid = _start(spool, "slurm_energy.slurm.hooks")  # a sampler an older version started (an upgrade)
    try:
        assert spool.dir in busy([])[0]
    finally:
        stop_sampler(spool)
    assert not is_running(pid)
