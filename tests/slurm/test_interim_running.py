"""The sampler's interim flush (slurm.jobend.publish.publish_running): a running record of this node's energy so
far, stored every time, each flush summing only the rows added since the previous one; the
Epilog's record of the same file has the same energy."""

import pytest

from slurm_energy.config import SiteConfig
from slurm_energy.core import Status
from slurm_energy.sampling.samplefile import SampleWriter
from slurm_energy.slurm.attempt import Attempt
from slurm_energy.slurm.context import JobContext
from slurm_energy.slurm.jobend import node_record as jobend_node
from slurm_energy.slurm.jobend import publish
from slurm_energy.store import open_store
from tests.helpers.samplefile_rows import node_rows, static_inventory


def test_interim_flushes_add_the_new_rows_and_agree_with_the_final_record(tmp_path, monkeypatch):
    import json

    # only the store (node_exporter's textfile is tested apart)
    cfg = SiteConfig(paths={"store_url": f"sqlite:///{tmp_path}/jobs.db"}, outputs={"prometheus": {"enabled": False}})
    rows, static = node_rows(3 * 12 + 1)
    spool = Attempt(str(tmp_path / "spool"), "51", 0, "n1").ensure()
    with open(spool.static, "w") as f:
        json.dump(static, f)
    ctx = JobContext(job_id="51", uid=0, gid=0, node="n1", nodelist="n1", prolog_time=rows[0]["t"], cpus_per_node="64")
    monkeypatch.setattr(publish, "_RUNNING", {})
    w = SampleWriter(spool.samples, fsync=False)
    for k in range(0, len(rows), 12):
        for r in rows[k:k + 12]:
            w.write(r)
        monkeypatch.setattr(publish.time, "time", lambda k=k: rows[min(k + 11, len(rows) - 1)]["t"])
        publish.publish_running(cfg, spool, ctx)
    w.close()
    (running,) = publish._RUNNING.values()
    assert running.n_rows == len(rows)  # one summary kept across the flushes, every row read once
    (rec,) = open_store(cfg.paths.store_url, readonly=True).get_job("51")
    assert rec.status == Status.RUNNING and rec.nodes[0].power_trace == []
    final = jobend_node.node_record(cfg, spool, ctx, rows[-1]["t"])
    got = {d.device_id: (d.energy_j, d.method, d.coverage) for d in rec.nodes[0].devices}
    want = {d.device_id: (d.energy_j, d.method, d.coverage) for d in final.nodes[0].devices}
    assert got.keys() == want.keys() == {d["device_id"] for d in static_inventory()["devices"]}
    for k, (e, m, c) in want.items():
        assert got[k][0] == pytest.approx(e, rel=1e-12) and got[k][1] == m and got[k][2] == pytest.approx(c)
    # GPU 0: its counter's whole delta (uJ -> J), all the job's (share 1)
    g0 = rows[0]["readings"][2]
    assert got[g0["device_id"]][0] == pytest.approx((rows[-1]["readings"][2]["energy_uj"] - g0["energy_uj"]) / 1e6)
