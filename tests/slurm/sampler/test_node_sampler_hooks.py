"""The Prolog's and Epilog's calls into the node sampler protocol: who starts it, who only wakes
it, the Epilog's stop of a node sampler's job (slurm/processes.py ``stop_sampler``) and the Epilog
restarting one that died while other jobs are joined."""

from __future__ import annotations

import os

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
