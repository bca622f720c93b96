"""The one finisher (slurm_energy.slurm.jobend.finish.finish) on the journal's trees: every trigger
runs the same sequence and ends in FINALIZED; what differs is what the record says."""

from __future__ import annotations

from pathlib import Path

from slurm_energy.config import Paths, SiteConfig
from slurm_energy.model import Status
from slurm_energy.slurm.attempt import AttemptState, SamplerEnd
from slurm_energy.slurm.context import JobContext
from slurm_energy.slurm.jobend.finish import AfterSlot, Trigger, finish
from slurm_energy.store import open_store


def _cfg(tmp: Path) -> SiteConfig:
    return SiteConfig(paths=Paths(spool_dir=str(tmp / "spool"), spool_fallback_dir=str(tmp / "spool2"),
                                  store_url=f"sqlite:///{tmp}/jobs.db", results_dir=str(tmp / "results"),
                                  log_dir=str(tmp / "log")))


def _ctx(a) -> JobContext:
    return JobContext.from_json(a.context_json())


def test_a_recovery_of_an_attempt_with_epilog_facts_records_who_finished_it(journal_trees, tmp_path):
    cfg = _cfg(tmp_path)
    a = journal_trees[AttemptState.EPILOG_DONE]
    ep = a.epilog()
    after = AfterSlot()
    rec = finish(cfg, a, _ctx(a), Trigger.COLLECT, end_time=ep.t, exit_code=ep.exit_code, sampler=ep.sampler,
                 facts={"job_state": "COMPLETED"}, ask_slurm=False, after=after)
    assert a.state() == AttemptState.FINALIZED and after.markers == []
    assert rec is not None and rec.job_id == "701" and rec.end_time - rec.start_time == 60.0  # T_END - T_PROLOG
    (got,) = open_store(cfg.paths.store_url).get_job("701")
    assert "finalizer did not finish (killed or never started); finished by slurm-energy collect" in " ".join(got.errors)
    assert "no Epilog ran" not in " ".join(got.errors)  # it did: its facts are in the tree


def test_the_sweep_of_an_attempt_whose_epilog_never_ran_says_both(journal_trees, tmp_path):
    cfg = _cfg(tmp_path)
    a = journal_trees[AttemptState.STARTED]
    finish(cfg, a, _ctx(a), Trigger.SWEEP, end_time=1_796_034_030.0, exit_code="", sampler=SamplerEnd.NO_EPILOG,
           facts=None, ask_slurm=False)
    assert a.state() == AttemptState.FINALIZED
    (got,) = open_store(cfg.paths.store_url).get_job("700")
    errors = " ".join(got.errors)
    assert "no Epilog ran for this attempt on this node" in errors and "finished by the node finalizer's sweep" in errors
    assert got.status != Status.COMPLETE  # nothing was sampled: never a complete record


def test_no_spool_stores_a_no_data_record_and_writes_nothing(tmp_path):
    cfg = _cfg(tmp_path)
    from slurm_energy.slurm.attempt import Attempt

    ctx = JobContext(job_id="730", uid=0, gid=0, node="n1", nodelist="n1", prolog_time=1_796_034_000.0)
    rec = finish(cfg, Attempt.without_spool(ctx), ctx, Trigger.NO_SPOOL, end_time=1_796_034_090.0, exit_code="0:0",
                 sampler=SamplerEnd.NO_PIDFILE, facts={"end_time": 1_796_034_100.0}, ask_slurm=False,
                 errors=["no usable spool on this node: spool full"])
    assert rec is not None and rec.status == Status.NO_DATA
    assert rec.end_time == 1_796_034_100.0  # Slurm's end, 10 s after the Epilog's
    assert rec.errors[0] == "no usable spool on this node: spool full"
    assert not (tmp_path / "spool" / "jobs").exists()  # no attempt's file (the Prometheus sink keeps its own)


def test_a_configured_meter_without_readings_puts_its_reason_on_the_record(journal_trees, tmp_path):
    """node_meter.source auto, no meter row in the job's span, and the meter process's note in the
    spool: the stored record's rest of the node says why, in its words (not only "not metered")."""
    from slurm_energy.config.schema import NodeMeter

    cfg = _cfg(tmp_path).model_copy(update={"node_meter": NodeMeter(source="auto")})
    a = journal_trees[AttemptState.EPILOG_DONE]
    Path(a.spool_dir, f"node-meter-{a.node}.none").write_text("auto: no hwmon power meter, no ipmitool dcmi\n")
    ep = a.epilog()
    finish(cfg, a, _ctx(a), Trigger.COLLECT, end_time=ep.t, exit_code=ep.exit_code, sampler=ep.sampler,
           facts={"job_state": "COMPLETED"}, ask_slurm=False)
    (got,) = open_store(cfg.paths.store_url).get_job("701")
    r = got.nodes[0].rest_of_node
    assert r is not None and r.energy_j is None and got.rest_of_node_j is None
    assert r.covers == "rest of node: not metered (node meter: auto: no hwmon power meter, no ipmitool dcmi)"
