"""A real 2-node sbatch job on the test cluster gives ONE merged record holding both nodes.

Needs the cluster from ``scripts/testcluster.sh start`` (nodes n1, n2), through the ``cluster``
fixture of tests/e2e/conftest.py (never starts or stops it; fails instead of skipping in CI).
"""

from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.slurm


def test_two_node_job_gives_one_merged_record(cluster, capsys):
    from slurm_energy.cli.jobenergy import main as jobenergy

    conf = str(cluster.site)
    sub = cluster.run(["sbatch", "--parsable", "-N2", "-o", "/dev/null", "--wrap", "srun sleep 4"], cwd="/tmp")
    assert sub.returncode == 0, sub.stderr
    job_id = sub.stdout.strip().split(";")[0]
    [rec] = cluster.wait_record(job_id)
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
    # the summary row jobenergy reads gives the record's own status text; no RAPL (this machine's
    # VMs) leaves every class estimated: complete(estimated)
    shown = rec.status_text
    assert shown in ("complete", "complete(partial-coverage)", "complete(estimated)",
                     "complete(partial-coverage,estimated)")
    # root's job (sbatch as root, in /tmp): root writes no report as root, and the row says why
    from slurm_energy.cli.jobenergy_format import report_code

    assert rec.report_error == "" or report_code(rec.report_error) == "user_is_root", rec.report_error
    note = f" (no report: {report_code(rec.report_error)})" if rec.report_error else ""
    assert capsys.readouterr().out.strip() == f"{job_id}|2|{shown}{note}"
