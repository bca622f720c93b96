"""A job during which nothing was measured is ``no_data``, never ``partial`` or ``complete``, and its
errors say why without contradicting each other.

The rule (accounting.merge.node_status / measured_nothing): a finished node measured nothing when no
device of it has an energy, neither the job's share nor the whole device's (every device
``unavailable``, or no sample row at all); a job is ``no_data`` when that holds for every node that
reported. A node whose CPU was only estimated by the TDP model did measure something (a labelled
estimate): it keeps ``complete``/``partial``.

How a full spool got there: the Prolog's row was written, then the sampler died on ENOSPC and the
finalizer's reading after the Epilog failed too -- one row on the node, shown ``partial`` (or
``complete`` when the sampler had ended cleanly) with "the last flushed sample and a reading taken
after the Epilog are used" beside the failed reading.
"""

from __future__ import annotations

import errno
import types

import pytest

from slurm_energy.accounting.merge import merge_records
from slurm_energy.config import SiteConfig
from slurm_energy.core import Method, Status
from slurm_energy.pipeline import finalise_job
from slurm_energy.slurm.attempt import Attempt
from slurm_energy.slurm.context import JobContext
from slurm_energy.slurm.jobend import finish
from slurm_energy.slurm.jobend import node_record as jobend_node
from slurm_energy.store import open_store
from tests.fakes.slurm_facts import no_slurm  # noqa: F401  (a fixture)
from tests.helpers.jobrecord_factory import device, job_record
from tests.helpers.samplefile_rows import spool_with_rows

T0 = 1_796_034_000.0
GIB = 1024 ** 3
STATIC = {"host": "n1", "logical_cpus": 4, "reader_notes": [],
          "devices": [{"device_class": "cpu", "device_id": "intel-rapl:0", "model": "package-0",
                       "rated_power_w": 100.0}]}


def rapl(energy_uj: int) -> dict:
    return {"device_class": "cpu", "device_id": "intel-rapl:0", "method": "counter", "energy_uj": energy_uj}


def tdp(mean_power_w) -> dict:
    return {"device_class": "cpu", "device_id": "cpu-tdp", "method": "tdp_estimate", "mean_power_w": mean_power_w}


def _row(t: float, kind: str, job_cpu: float, busy: float, reading: dict) -> dict:
    readings = [reading]
    return {"t": T0 + t, "kind": kind,
            "job": {"cpu_time_s": job_cpu, "mem_bytes": GIB, "pids": [1], "source": "cgroup-v1"},
            "node": {"cpu_busy_s": busy, "cpu_total_s": 4.0 * t, "ncpu": 4, "mem_used_bytes": 2 * GIB,
                     "mem_total_bytes": 16 * GIB},
            "readings": readings}


def _spool(tmp_path, rows: list[dict], job_id: str = "61", node: str = "n1") -> tuple[Attempt, JobContext]:
    spool = spool_with_rows(str(tmp_path / "spool"), job_id, node, STATIC, rows)
    ctx = JobContext(job_id=job_id, uid=0, gid=0, node=node, nodelist=node, prolog_time=T0, cpus_per_node="4")
    with open(spool.context, "w") as f:
        f.write(ctx.to_json())
    return spool, ctx


PROLOG_ROW_ONLY = [_row(0, "prolog", 0.0, 0.0, rapl(5_000_000))]  # RAPL 5 J, then nothing


@pytest.mark.parametrize("outcome", ["not_running", "terminated"])
def test_a_node_with_only_the_prologs_row_measured_nothing_and_is_no_data(tmp_path, outcome):
    # one reading of the package counter: an energy needs two, so the CPU is unavailable. Before,
    # "not_running" gave partial, "terminated" even complete(partial-coverage)
    spool, ctx = _spool(tmp_path, PROLOG_ROW_ONLY)
    cfg = SiteConfig()
    node = jobend_node.node_record(cfg, spool, ctx, T0 + 60, sampler_outcome=outcome)
    assert [(d.device_id, d.method, d.energy_j) for d in node.nodes[0].devices] == [
        ("intel-rapl:0", Method.UNAVAILABLE, None)]
    assert node.status == node.nodes[0].status == Status.NO_DATA
    job = finalise_job([node], cfg)
    assert job.status == Status.NO_DATA and job.status_text == "no_data"
    assert job.it_kwh is None and job.co2e_kg is None and job.energy_it_j == {"cpu": None}  # never 0
    assert job.errors == ["nothing measured on this node: 1 sample row, and a device's energy needs two readings "
                          "within the job"]


def test_a_node_estimated_by_the_tdp_model_is_an_estimate_not_no_data(tmp_path):
    # TDP model: 40 W over 10 s, the job every busy CPU-second (share 4/4 = 1): 40 x 10 x 1 = 400 J.
    # The sampler did not end cleanly: partial, but measured (estimated), so never no_data
    rows = [_row(0, "prolog", 0.0, 0.0, tdp(None)), _row(10, "sample", 4.0, 4.0, tdp(40.0))]
    spool, ctx = _spool(tmp_path, rows)
    cfg = SiteConfig()
    node = jobend_node.node_record(cfg, spool, ctx, T0 + 10, sampler_outcome="not_running")
    (cpu,) = node.nodes[0].devices
    assert cpu.method == Method.TDP_ESTIMATE and cpu.energy_j == pytest.approx(400.0)
    assert node.status == Status.PARTIAL
    assert not any("nothing measured" in e for e in node.errors)


def _node(name: str, energy_j, method: Method, status: Status):
    return job_record("70", [device("cpu", energy_j, method=method, node=name)], node=name, expected=("n1", "n2"),
                      status=status)


def test_job_is_no_data_only_when_no_node_measured_anything():
    # node records stored before the rule (partial, every device unavailable) merge to no_data too
    n1 = _node("n1", None, Method.UNAVAILABLE, Status.PARTIAL)
    n2 = _node("n2", None, Method.UNAVAILABLE, Status.NO_DATA)
    assert merge_records([n1, n2]).status == Status.NO_DATA
    # n2 estimated 400 J by the TDP model: the job measured something (n1 nothing): partial
    n2 = _node("n2", 400.0, Method.TDP_ESTIMATE, Status.COMPLETE)
    assert merge_records([n1, n2]).status == Status.PARTIAL
    # n2's package measured 1200 J over the job, the job's share unknown (never observed): measured
    n2 = _node("n2", None, Method.UNAVAILABLE, Status.COMPLETE)
    n2.nodes[0].devices[0].device_energy_j = 1200.0
    assert merge_records([n1, n2]).status == Status.PARTIAL


def test_full_spool_finalizer_says_the_reading_failed_and_stores_no_data(tmp_path, monkeypatch, no_slurm):
    """The finalizer's own reading after the Epilog fails (ENOSPC): the record says that, not that
    the reading was used, and the job is no_data."""
    site = tmp_path / "site.yaml"
    site.write_text(f"cluster_name: c1\npaths:\n  spool_dir: {tmp_path}/spool\n  results_dir: {tmp_path}/results\n"
                    f"  store_url: sqlite:///{tmp_path}/jobs.db\n  log_dir: {tmp_path}/log\n"
                    "outputs:\n  prometheus:\n    enabled: false\n")
    monkeypatch.setenv("SLURM_ENERGY_CONFIG", str(site))
    spool, _ctx = _spool(tmp_path, PROLOG_ROW_ONLY)

    def full(*_a):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(jobend_node, "reading_row", full)
    assert finish.finalize_main(spool.dir, "n1", T0 + 60, "0:0", "not_running") == 0
    (rec,) = open_store(f"sqlite:///{tmp_path}/jobs.db", readonly=True).get_job("61")
    assert rec.status == Status.NO_DATA and rec.it_kwh is None
    epilog = [e for e in rec.errors if "epilog: sampler not_running" in e]
    assert len(epilog) == 1 and epilog[0].endswith(
        "epilog: sampler not_running; no reading could be taken after the Epilog (OSError: [Errno 28] No space "
        "left on device): the rows written before it, if any, are used")
    assert not any("a reading taken after" in e for e in rec.errors)  # none was: nothing may say it was used
    assert "nothing measured on this node: 1 sample row, and a device's energy needs two readings within the job" \
        in rec.errors


def test_a_node_without_rows_on_a_full_spool_says_the_spool_is_full(tmp_path, monkeypatch):
    """Nothing could be written, not even the sampler's error: the finalizer says why from the
    spool's filesystem (no block free)."""
    spool, ctx = _spool(tmp_path, [])
    real = jobend_node.os.statvfs
    monkeypatch.setattr(jobend_node.os, "statvfs", lambda p: types.SimpleNamespace(f_bfree=0) if p == spool.dir else real(p))
    rec = finalise_job([jobend_node.node_record(SiteConfig(), spool, ctx, T0 + 60, sampler_outcome="not_running")],
                       SiteConfig())
    assert rec.status == Status.NO_DATA and rec.it_kwh is None
    assert rec.errors == [
        "no samples: no sample row was written on this node (by the Prolog, the sampler or the Epilog's finalizer); "
        f"spool {tmp_path}/spool is full (no space left on its filesystem): free space there, or set "
        "paths.spool_fallback_dir on another filesystem"]
