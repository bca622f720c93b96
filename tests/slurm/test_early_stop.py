"""A sampler stopped mid-job by someone else's TERM (kill/pkill, an admin, a node agent) writes a
``final`` row: the finalizer must not take it for the job's end (tester 2, job 134: 61 J with
coverage 1 and no flag, against 234 J, flagged, for the same job with its sampler SIGKILLed).

The spool is written by hand (the Prolog's context, the sample file, the signal file the sampler
leaves) and read by the finalizer's own :func:`slurm_energy.slurm.jobend.node_record.node_record`.
"""

import signal

import pytest

from slurm_energy.config import SiteConfig
from slurm_energy.core import Status
from slurm_energy.slurm import sampler_end as early_stop
from slurm_energy.slurm.attempt import Attempt
from slurm_energy.slurm.clients.facts import use
from slurm_energy.slurm.context import JobContext
from slurm_energy.slurm.jobend import node_record as jobend_node
from tests.fakes.slurm_facts import FakeSlurmFacts
from tests.helpers.samplefile_rows import spool_with_rows

GIB = 1024 ** 3
T0 = 1_796_211_299.0  # the Prolog
EPILOG_T = T0 + 20.0  # the Epilog starts (its t_end, taken before it signals the sampler)


def _row(t, kind, job_cpu, busy, total, job_mem=None):
    return {"t": T0 + t, "kind": kind,
            "job": None if job_cpu is None else {"cpu_time_s": job_cpu, "mem_bytes": job_mem, "pids": [7],
                                                 "source": "cgroup-v1"},
            "node": {"cpu_busy_s": busy, "cpu_total_s": total, "ncpu": 2, "mem_used_bytes": 4 * GIB,
                     "mem_total_bytes": 16 * GIB},
            "readings": [{"device_class": "cpu", "device_id": "cpu-tdp", "method": "tdp_estimate", "mean_power_w": 10.0},
                         {"device_class": "ram", "device_id": "ram-model", "method": "tdp_estimate",
                          "mean_power_w": 1.0}]}


def _rows(kind_at_10s):
    # Prolog row; the sampler's last row at 10 s (job 2 CPU-s, node busy 5 CPU-s, job 1 GiB of the
    # node's 4 GiB used); the finalizer's late reading 0.5 s after the Epilog began (no job usage)
    return [_row(0, "prolog", None, 0.0, 0.0), _row(10, kind_at_10s, 2.0, 5.0, 20.0, job_mem=GIB),
            _row(20.5, "epilog", None, 15.0, 41.0)]


def _record(tmp_path, monkeypatch, rows, outcome="not_running", stop_signal=None):
    spool = spool_with_rows(str(tmp_path / "spool"), "134", "n1", {"devices": []}, rows)
    if stop_signal is not None:
        early_stop.record_stop(spool, stop_signal)
    ctx = JobContext(job_id="134", uid=0, gid=0, node="n1", nodelist="n1", prolog_time=T0, cpus_per_node="1")
    with use(FakeSlurmFacts(cpu_s={"134": 6.0})):  # sacct TotalCPU: 6 CPU-s in all
        rec = jobend_node.node_record(SiteConfig(), spool, ctx, EPILOG_T, "0:0", sampler_outcome=outcome)
    return rec, {d.device_class: d for d in rec.nodes[0].devices}


def test_someones_term_mid_job_charges_the_tail_like_a_killed_sampler(tmp_path, monkeypatch):
    rec, dev = _record(tmp_path, monkeypatch, _rows("final"), stop_signal=signal.SIGTERM)
    cpu, ram = dev["cpu"], dev["ram"]
    # observed 0-10 s: 10 W x 10 s = 100 J, job 2 of 5 busy CPU-s -> 40 J;
    # tail 10-20.5 s: 10 W x 10.5 s = 105 J, node busy 15 - 5 = 10 CPU-s, TotalCPU 6 - 2 = 4 CPU-s
    # the job's -> 105 J x 4 / 10 = 42 J; in all 82 J (read as the job's end: 40 J, coverage 1, no flag)
    assert cpu.energy_j == pytest.approx(40.0 + 42.0)
    assert "tail_from_slurm_totalcpu" in cpu.flags
    # memory: 1 GiB of 4 GiB used x 1 W x 10 s = 2.5 J seen; after 10 s unknown: 10 s of 20.5 s
    assert ram.energy_j == pytest.approx(2.5) and ram.coverage == pytest.approx(10.0 / 20.5)
    assert "share_unknown" in ram.flags
    assert rec.status == Status.PARTIAL
    assert any("sampler stopped early by SIGTERM, 10.0 s before the Epilog" in e for e in rec.errors)


def test_the_killed_twin_gives_the_same_energy(tmp_path, monkeypatch):
    # the same job, its sampler SIGKILLed at 10 s: no final row, the same 82 J and RAM coverage
    rec, dev = _record(tmp_path, monkeypatch, _rows("sample"))
    assert dev["cpu"].energy_j == pytest.approx(82.0) and dev["ram"].coverage == pytest.approx(10.0 / 20.5)
    # and the record says the sampler vanished, and when: last row at 10 s, the Epilog at 20 s
    assert rec.status == Status.PARTIAL
    assert any("sampler gone without a final sample" in e and "its last row 10.0 s before the Epilog" in e
               for e in rec.errors), rec.errors


def test_early_stop_found_without_the_signal_file_and_whatever_the_epilog_saw(tmp_path, monkeypatch):
    # no signal file (an older sampler), and an Epilog that still saw a sampler to stop: the row's
    # time alone tells (10 s < the Epilog's start); the record says it, without a signal name
    rec, dev = _record(tmp_path, monkeypatch, _rows("final"), outcome="terminated")
    assert dev["cpu"].energy_j == pytest.approx(82.0)
    assert rec.status == Status.PARTIAL
    assert any(e.startswith("sampler stopped early, 10.0 s before the Epilog") for e in rec.errors)


def test_the_epilogs_term_still_ends_the_job(tmp_path, monkeypatch):
    # the job ran 0-10 s and ended; the Epilog (20 s) TERMs the sampler, whose final row (20.2 s)
    # closes the series: CPU time flat after 10 s, no tail. 10 W x 20.2 s = 202 J on the device;
    # 0-10 s: 2 of 5 busy CPU-s -> 40 J; 10-20.2 s: job CPU time unchanged -> 0 J
    rows = [_row(0, "prolog", None, 0.0, 0.0), _row(10, "sample", 2.0, 5.0, 20.0, job_mem=GIB),
            _row(20.2, "final", 2.0, 15.0, 40.4, job_mem=0)]
    rec, dev = _record(tmp_path, monkeypatch, rows, outcome="terminated", stop_signal=signal.SIGTERM)
    cpu = dev["cpu"]
    assert cpu.energy_j == pytest.approx(40.0) and cpu.device_energy_j == pytest.approx(202.0)
    assert not {"tail_from_slurm_totalcpu", "tail_estimated"} & set(cpu.flags)
    assert cpu.coverage == 1.0 and rec.status == Status.COMPLETE
    assert not any("stopped early" in e for e in rec.errors)


def test_a_final_row_after_the_job_was_seen_gone_is_the_end(tmp_path, monkeypatch):
    # the sampler saw the job end (cgroup_gone at 10 s), then someone TERMed it (12 s) before the
    # Epilog: nothing of the job is after 10 s, no tail, no early-stop error
    rows = [_row(0, "prolog", None, 0.0, 0.0), _row(10, "cgroup_gone", 2.0, 5.0, 20.0, job_mem=GIB),
            _row(12, "final", 2.0, 6.0, 24.0), _row(20.5, "epilog", None, 15.0, 41.0)]
    rec, dev = _record(tmp_path, monkeypatch, rows, stop_signal=signal.SIGTERM)
    assert dev["cpu"].energy_j == pytest.approx(40.0)  # 0-10 s as above; after it the job's CPU time is flat
    assert not any("stopped early" in e for e in rec.errors)


def test_signal_name_unknown_is_empty(tmp_path):
    spool = Attempt(str(tmp_path / "spool"), "1", 0, "n1").ensure()
    assert early_stop.signal_name(spool) == ""
    early_stop.record_stop(spool, None)
    assert early_stop.signal_name(spool) == ""
    early_stop.record_stop(spool, signal.SIGHUP)
    assert early_stop.signal_name(spool) == "SIGHUP"
