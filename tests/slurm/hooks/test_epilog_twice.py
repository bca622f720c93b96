"""Slurm before 26.05 can run the Epilog more than once for one run of a job: the second run must
neither start a second finalizer (a second node record, a second reading appended to the samples)
nor fail (a failing Epilog drains the node). In-process: the detached processes are stubbed."""

from __future__ import annotations

from slurm_energy.slurm import detach
from slurm_energy.slurm.hooks.epilog import epilog
from slurm_energy.slurm.hooks.prolog import prolog
from slurm_energy.slurm.processes import SamplerStop
from tests.helpers.jobrecord_factory import hook_env, site_yaml


def _env(tmp_path, context: str) -> dict:
    return hook_env("777", context=context, SLURM_JOB_WORK_DIR=str(tmp_path), SLURM_JOB_START_TIME="1700000000")


def test_second_epilog_of_a_run_is_a_no_op(tmp_path, monkeypatch):
    # a sampler process per job (its spawn args are asserted); the node sampler's: the test below
    site_yaml(tmp_path, f"sampling:\n  sampler: job\nhardware:\n  rapl_root: {tmp_path}/none\n", monkeypatch=monkeypatch)
    spawned: list[list[str]] = []
    nices: list[int] = []
    monkeypatch.setattr(detach, "spawn", lambda args, logf, log_dir=None, nice=0:
                        spawned.append(args) or nices.append(nice) or 4_000_000)  # no such PID
    monkeypatch.setattr("slurm_energy.slurm.hooks.epilog.stop_sampler", lambda run, node="": SamplerStop("terminated"))
    assert prolog(_env(tmp_path, "prolog_slurmd")) == 0
    assert [a[2] for a in spawned] == ["sampler"]
    (job_dir,) = (tmp_path / "spool" / "jobs").iterdir()
    samples = job_dir / "samples-n1.jsonl"
    assert epilog(_env(tmp_path, "epilog_slurmd")) == 0
    assert [a[2] for a in spawned] == ["sampler", "finalize-queue"]  # the node's finalizer: none ran
    queue = tmp_path / "spool" / "finalize-queue" / "n1"
    assert [p.name for p in queue.iterdir() if not p.name.startswith(".")] == [job_dir.name]  # queued once
    # the sampler and the finalizer yield the CPU to the hooks and the jobs, the finalizer the most
    assert nices == [detach.SAMPLER_NICE, detach.FINALIZER_NICE] == [10, 19]
    done = (job_dir / "epilog-n1.done").read_text()
    rows = samples.read_text()
    # the same run's Epilog again: exit 0, no second finalizer, nothing appended or rewritten
    assert epilog(_env(tmp_path, "epilog_slurmd")) == 0
    assert [a[2] for a in spawned] == ["sampler", "finalize-queue"]
    assert [p.name for p in queue.iterdir() if not p.name.startswith(".")] == [job_dir.name]
    assert (job_dir / "epilog-n1.done").read_text() == done
    assert samples.read_text() == rows
    assert list((tmp_path / "spool" / "jobs").iterdir()) == [job_dir]  # no spool for a phantom run
    assert "repeated Epilog ignored" in (tmp_path / "log" / "hooks.log").read_text()


def test_second_epilog_of_a_run_is_a_no_op_with_the_node_sampler(tmp_path, monkeypatch):
    # the node sampler (the default): the Prolog starts the node's one sampler (none runs: the lock is free), the
    # Epilog asks it for the job's last row; a repeated Epilog neither asks again nor queues twice
    site_yaml(tmp_path, f"sampling:\n  sampler: node\nhardware:\n  rapl_root: {tmp_path}/none\n", monkeypatch=monkeypatch)
    spawned: list[list[str]] = []
    nices: list[int] = []
    monkeypatch.setattr(detach, "spawn", lambda args, logf, log_dir=None, nice=0:
                        spawned.append(args) or nices.append(nice) or 4_000_000)  # no such PID
    monkeypatch.setattr("slurm_energy.slurm.hooks.epilog.stop_sampler", lambda run, node="": SamplerStop("terminated"))
    assert prolog(_env(tmp_path, "prolog_slurmd")) == 0
    spool_dir = str(tmp_path / "spool")
    assert spawned == [["-m", "slurm_energy.slurm.sampler.node", spool_dir, "n1"]]
    (job_dir,) = (tmp_path / "spool" / "jobs").iterdir()
    assert (job_dir / "nodesampler-n1.join").exists() and not (job_dir / "sampler-n1.pid").exists()
    assert epilog(_env(tmp_path, "epilog_slurmd")) == 0
    assert [a[2] for a in spawned[1:]] == ["finalize-queue"]
    queue = tmp_path / "spool" / "finalize-queue" / "n1"
    assert [p.name for p in queue.iterdir() if not p.name.startswith(".")] == [job_dir.name]
    assert nices == [detach.SAMPLER_NICE, detach.FINALIZER_NICE] == [10, 19]
    done = (job_dir / "epilog-n1.done").read_text()
    assert epilog(_env(tmp_path, "epilog_slurmd")) == 0
    assert [a[2] for a in spawned[1:]] == ["finalize-queue"]  # no second finalizer, no second node sampler
    assert [p.name for p in queue.iterdir() if not p.name.startswith(".")] == [job_dir.name]
    assert (job_dir / "epilog-n1.done").read_text() == done
    assert "repeated Epilog ignored" in (tmp_path / "log" / "hooks.log").read_text()


def test_a_finalizer_that_waited_for_a_slot_skips_a_run_collect_finished(tmp_path, monkeypatch):
    # collect finishes a run whose spool files went untouched for 5 min, which a finalizer queued for
    # a slot does; once it gets one it must not finalize the run a second time
    job_dir = tmp_path / "spool" / "jobs" / "778-r0"
    job_dir.mkdir(parents=True)
    (job_dir / "finalized-n1.done").write_text("")
    from slurm_energy.slurm.jobend import __main__ as finalizer
    from slurm_energy.slurm.jobend import finish as fin

    calls: list[tuple] = []
    monkeypatch.setattr(fin, "finalize_main", lambda *a, **kw: calls.append(a) or 0)
    assert finalizer.main(["finalize", str(job_dir), "n1", "1700000000.0", "0:0", "terminated"]) == 0
    assert calls == []  # not finalized a second time
    (job_dir / "finalized-n1.done").unlink()  # not finished yet: this finalizer does it
    assert finalizer.main(["finalize", str(job_dir), "n1", "1700000000.0", "0:0", "terminated"]) == 0
    assert calls == [(str(job_dir), "n1", 1700000000.0, "0:0", "terminated")]
    slots = [f".finalize-slot-{i}" for i in range(finalizer.FINALIZER_SLOTS)]  # 2 on a 2-CPU node
    assert sorted(p.name for p in (tmp_path / "spool").iterdir()) == sorted(slots) + ["jobs"]
