"""A sampler the Epilog had to SIGKILL (its TERM not answered within 1 s) after it had seen the job
end: its rows hold the job's last usage and the node's counters at the end, so the node's record
is complete with the job's whole energy; killed before it saw the end, the node stays partial."""


import pytest

from slurm_energy.config import SiteConfig
from slurm_energy.core import Reading, Status
from slurm_energy.slurm.context import JobContext
from slurm_energy.slurm.jobend import node_record as jobend_node
from tests.helpers.samplefile_rows import RAPL_RANGE_UJ, spool_with_rows

T0 = 1_796_210_633.0
STATIC = {"host": "n2", "logical_cpus": 4, "devices": [
    {"device_class": "cpu", "device_id": "intel-rapl:0", "model": "package-0", "rated_power_w": 100.0,
     "rated_power_source": "RAPL constraint_0_max_power_uw"}], "reader_notes": []}


def _row(t, kind, job_cpu_s, busy_s, rapl_uj):
    job = None if job_cpu_s is None else {"cpu_time_s": job_cpu_s, "mem_bytes": 2**20, "max_mem_bytes": 2**20,
                                          "pids": [7916] if kind != "cgroup_gone" else [], "source": "cgroup-v1"}
    return {"t": t, "kind": kind, "job": job,
            "node": {"cpu_busy_s": busy_s, "cpu_total_s": 4 * (t - T0) + 1000.0, "ncpu": 4, "mem_used_bytes": 2**30,
                     "mem_total_bytes": 2**34},
            "readings": [Reading("cpu", "intel-rapl:0", "counter", energy_uj=rapl_uj, max_energy_range_uj=RAPL_RANGE_UJ,
                                 max_power_w=100.0).to_dict()]}


def _record(tmp_path, rows):
    cfg = SiteConfig()
    spool = spool_with_rows(str(tmp_path / "spool"), "50", "n2", STATIC, rows)
    ctx = JobContext(job_id="50", uid=0, gid=0, node="n2", nodelist="n2", prolog_time=T0, cpus_per_node="4")
    return jobend_node.node_record(cfg, spool, ctx, T0 + 6.0, "0:0", sampler_outcome="killed")


def test_killed_after_the_job_end_was_seen_is_complete_with_the_whole_energy(tmp_path):
    # the job is all the node's busy CPU time while it runs (share 1); it ends at T0 + 5 s (the
    # sampler's cgroup_gone row); the Epilog at T0 + 5.03 s kills the sampler; the finalizer's
    # reading at T0 + 6 s has no job usage. RAPL: 120 J to T0 + 2 s, +200 J to the end, +30 J after.
    rows = [_row(T0, "start", 0.0, 500.0, 1_000_000),
            _row(T0 + 2.0, "sample", 3.0, 503.0, 121_000_000),
            _row(T0 + 5.0, "cgroup_gone", 7.5, 507.5, 321_000_000),
            _row(T0 + 6.0, "epilog", None, 508.0, 351_000_000)]
    rec = _record(tmp_path, rows)
    (dev,) = rec.nodes[0].devices
    assert rec.nodes[0].status == Status.COMPLETE
    assert any("nothing of the job was lost" in e for e in rec.errors)
    # 120 J + 200 J = 320 J while the job ran (all of it the job's), none of the 30 J after its end
    assert dev.energy_j == pytest.approx(320.0)


def test_killed_before_the_job_end_was_seen_is_partial(tmp_path):
    rows = [_row(T0, "start", 0.0, 500.0, 1_000_000),
            _row(T0 + 2.0, "sample", 3.0, 503.0, 121_000_000),
            _row(T0 + 6.0, "epilog", None, 508.0, 351_000_000)]
    rec = _record(tmp_path, rows)
    assert rec.nodes[0].status == Status.PARTIAL
    assert not any("nothing of the job was lost" in e for e in rec.errors)
