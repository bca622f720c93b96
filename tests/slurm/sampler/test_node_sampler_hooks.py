"""The Prolog's and Epilog's calls into the node sampler protocol: who starts it, who only wakes
it, the Epilog's stop of a node sampler's job (slurm/processes.py ``stop_sampler``) and the Epilog
restarting one that died while other jobs are joined."""

from __future__ import annotations

import os

import pytest

from slurm_energy.slurm import sampler_join as sj
from slurm_energy.slurm.attempt import Attempt
from slurm_energy.slurm.processes import stop_sampler


def _starter() -> tuple[list[tuple[list[str], str]], object]:
    calls: list[tuple[list[str], str]] = []

    def start(argv: list[str], logf: str) -> int:
        calls.append((argv, logf))
        return 4321

    return calls, start


def test_first_prolog_starts_the_node_sampler_a_burst_starts_one(tmp_path):
    calls, start = _starter()
    spool_dir = str(tmp_path / "spool")
    a = Attempt(spool_dir, "1", 0, "n1").ensure()
    b = Attempt(spool_dir, "2", 0, "n1").ensure()
    assert sj.join_or_start(a.dir, spool_dir, "n1", start) == 4321
    assert calls == [(["-m", "slurm_energy.slurm.sampler.node", spool_dir, "n1"], f"{spool_dir}/node-sampler.log")]
    # the second Prolog while the first one's node sampler is still starting (no lock held yet):
    # joined, and no second start (the start claim is fresh)
    assert sj.join_or_start(b.dir, spool_dir, "n1", start) is None
    assert len(calls) == 1 and sj.joined(a.dir, "n1") and sj.joined(b.dir, "n1")
    assert not os.path.exists(a.pidfile)  # no per-job sampler PID: nothing the Epilog would TERM


def test_epilog_of_a_dead_node_sampler_restarts_it_for_the_others(tmp_path):
    calls, start = _starter()
    spool_dir = str(tmp_path / "spool")
    a = Attempt(spool_dir, "1", 0, "n1").ensure()
    b = Attempt(spool_dir, "2", 0, "n1").ensure()
    for sp in (a, b):
        sj.join(sp.dir, spool_dir, "n1")  # no sampler runs (it died)
    # a's Epilog: stop_sampler sees a node sampler's job, finds none running
    assert stop_sampler(a, term_wait_s=0.2).outcome == "not_running"
    assert not sj.joined(a.dir, "n1") and sj.joined(b.dir, "n1")
    assert sj.restart_for_others(a.dir, spool_dir, "n1", start) == 4321  # for b
    assert len(calls) == 1
    # b's Epilog: nobody else is joined, no restart
    os.unlink(sj.node_path(spool_dir, sj.STARTING, "n1"))
    assert stop_sampler(b, term_wait_s=0.2).outcome == "not_running"
    assert sj.restart_for_others(b.dir, spool_dir, "n1", start) is None and len(calls) == 1


def test_the_wake_up_is_sigusr1():
    import signal

    assert sj.WAKE == signal.SIGUSR1 == 10  # a number in the hooks (no signal module): this machine's SIGUSR1


def test_a_node_sampler_that_cannot_be_started_is_tried_again_by_the_next_hook(tmp_path):
    spool_dir = str(tmp_path / "spool")
    a = Attempt(spool_dir, "1", 0, "n1").ensure()
    b = Attempt(spool_dir, "2", 0, "n1").ensure()

    def broken(argv: list[str], logf: str) -> int:
        raise OSError(24, "Too many open files")

    with pytest.raises(OSError):
        sj.join_or_start(a.dir, spool_dir, "n1", broken)
    assert sj.joined(a.dir, "n1") and not sj.starting(spool_dir, "n1")  # the claim is dropped with the failure
    calls, start = _starter()
    assert sj.join_or_start(b.dir, spool_dir, "n1", start) == 4321  # the next Prolog starts it, not 30 s later
    assert len(calls) == 1


def test_a_prolog_that_cannot_start_the_node_sampler_still_hands_the_job_to_its_finalizer(tmp_path, monkeypatch):
    """The Prolog's start of the node sampler fails (fork refused): the Prolog exits 0 and records
    it on the job; the job's Epilog finds no node sampler at once (the start claim was dropped, so
    it does not wait for one), says not_running and queues the job: its finalizer takes its own
    reading after the Epilog, between the Prolog's row and it."""
    from slurm_energy.slurm import detach
    from slurm_energy.slurm.hooks.epilog import epilog
    from slurm_energy.slurm.hooks.prolog import prolog
    from tests.helpers.jobrecord_factory import hook_env, site_yaml

    site_yaml(tmp_path, f"sampling:\n  sampler: node\nhardware:\n  rapl_root: {tmp_path}/none\n", monkeypatch=monkeypatch)
    spawned: list[list[str]] = []

    def spawn(args, logf, log_dir=None, nice=0):
        if "slurm_energy.slurm.sampler.node" in args:
            raise OSError(12, "Cannot allocate memory")  # fork refused (ENOMEM)
        spawned.append(args)
        return 4_000_000

    monkeypatch.setattr(detach, "spawn", spawn)
    env = hook_env("778", SLURM_JOB_WORK_DIR=str(tmp_path), SLURM_JOB_START_TIME="1700000000")
    assert prolog(dict(env, SLURM_SCRIPT_CONTEXT="prolog_slurmd")) == 0
    (job_dir,) = (tmp_path / "spool" / "jobs").iterdir()
    errors = (job_dir / "errors-n1.jsonl").read_text()
    assert "prolog: OSError: [Errno 12] Cannot allocate memory" in errors
    assert not sj.starting(str(tmp_path / "spool"), "n1")
    import time

    t = time.monotonic()
    assert epilog(dict(env, SLURM_SCRIPT_CONTEXT="epilog_slurmd", SLURM_JOB_EXIT_CODE2="0:0")) == 0
    assert time.monotonic() - t < 0.5  # no wait for a node sampler nobody is starting
    assert '"sampler": "not_running"' in (job_dir / "epilog-n1.done").read_text()
    assert [a[2] for a in spawned] == ["finalize-queue"]  # the job is handed to its finalizer
    assert not sj.joined(str(job_dir), "n1")  # a node sampler started later leaves its file alone
