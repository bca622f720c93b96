"""A real 2-node sbatch job on the test cluster gives ONE merged record holding both nodes.

Needs the cluster from ``scripts/testcluster.sh start`` (nodes n1, n2; store and site config under
/var/tmp/slurm-energy-cluster). This test never starts or stops the cluster: it skips when
``scripts/testcluster.sh status`` fails.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slurm

REPO = Path(__file__).resolve().parents[2]
TC = REPO / "scripts" / "testcluster.sh"


def _cluster_env() -> dict | None:
    if not TC.exists() or subprocess.run([str(TC), "status"], capture_output=True).returncode != 0:
        return None
    out = subprocess.run([str(TC), "env"], capture_output=True, text=True, check=True).stdout
    env = dict(os.environ)
    for m in re.finditer(r"export (\w+)=(\S+)", out):
        env[m.group(1)] = m.group(2).strip("'\"")
    return env


@pytest.fixture(scope="module")
def cluster_env():
    env = _cluster_env()
    if env is None:
        pytest.skip("test cluster not running: `scripts/testcluster.sh start` (this test never starts it)")
    return env


def _site_config(env) -> str:
    conf = Path(env["SLURM_CONF"]).parent / "site.yaml"
    assert conf.exists(), f"test cluster site config missing: {conf}"
    return str(conf)


def _wait_job_gone(job_id: str, env, timeout_s: float = 120.0) -> None:
    t0 = time.time()
    while time.time() - t0 < timeout_s:
        q = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True, env=env)
        if q.returncode != 0 or not q.stdout.strip():
            return
        time.sleep(0.5)
    raise AssertionError(f"job {job_id} still in squeue after {timeout_s} s")


def _wait_record(store_url: str, job_id: str, timeout_s: float = 60.0):
    from slurm_energy.model import Status
    from slurm_energy.store import open_store

    t0 = time.time()
    last = []
    while time.time() - t0 < timeout_s:
        st = open_store(store_url)
        try:
            last = st.get_job(job_id)
        finally:
            st.close()
        if last and all(r.status != Status.RUNNING for r in last):
            return last
        time.sleep(0.5)
    raise AssertionError(f"job {job_id}: no final record in {store_url} after {timeout_s} s (got {last})")


def test_two_node_job_gives_one_merged_record(cluster_env, capsys):
    from slurm_energy.cli.jobenergy import main as jobenergy
    from slurm_energy.config import load_site_config

    conf = _site_config(cluster_env)
    cfg = load_site_config(conf)
    sub = subprocess.run(
        ["sbatch", "--parsable", "-N2", "-o", "/dev/null", "--wrap", "srun sleep 4"],
        capture_output=True, text=True, env=cluster_env, cwd="/tmp",
    )  # fmt: skip
    assert sub.returncode == 0, sub.stderr
    job_id = sub.stdout.strip().split(";")[0]
    _wait_job_gone(job_id, cluster_env)
    [rec] = _wait_record(cfg.paths.store_url, job_id)
    # one record, both nodes, each node once
    assert sorted(n.node for n in rec.nodes) == ["n1", "n2"]
    assert sorted(rec.expected_nodes) == ["n1", "n2"]
    assert rec.status.value == "complete", rec.errors
    # the record's per-class energy is the sum of the two nodes' device entries (not 2 x one node)
    for cls, total in rec.energy_it_j.items():
        parts = [d.energy_j for n in rec.nodes for d in n.devices if d.device_class == cls]
        if total is not None:
            assert total == pytest.approx(sum(p for p in parts if p is not None))
    assert rec.elapsed_s >= 4.0  # the job slept 4 s
    # jobenergy shows it as one 2-node row
    os.environ["SLURM_ENERGY_CONFIG"] = conf
    try:
        rc = jobenergy(["-P", "-n", "-o", "JobID,NNodes,Status", job_id])
    finally:
        del os.environ["SLURM_ENERGY_CONFIG"]
    assert rc == 0
    shown = "complete" if rec.coverage_complete else "complete(partial-coverage)"
    assert capsys.readouterr().out.strip() == f"{job_id}|2|{shown}"
