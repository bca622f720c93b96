"""outputs/prometheus.py: the node_exporter textfile, parsed back with prometheus_client's own parser."""

from __future__ import annotations

import os
import stat

import pytest
from prometheus_client.parser import text_string_to_metric_families

from slurm_energy.model import Status
from slurm_energy.outputs.prometheus import FILE_NAME, PrometheusTextfile
from tests.helpers.jobrecord_factory import finished, node_record


def _samples(path) -> dict:
    out = {}
    for fam in text_string_to_metric_families(open(path).read()):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _by_name(samples: dict, name: str) -> list:
    return [(dict(lbl), v) for (n, lbl), v in samples.items() if n == name]


class Clock:
    def __init__(self, t: float):
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_finished_job_series_values_and_labels(tmp_path):
    # cpu 3.6e6 J + ram 3.6e5 J = 3.96e6 J = 1.1 kWh IT; x PUE 1.5 = 1.65 kWh = 5.94e6 J facility;
    # x 400 gCO2e/kWh = 660 gCO2e. GPU unmeasured (None): no series, never 0.
    rec = finished(node_record(job_id="77", gpu_j=None, array_job_id="70", array_task_id="7"))
    clock = Clock(rec.end_time + 10)
    sink = PrometheusTextfile(str(tmp_path / "tf"), str(tmp_path / "state"), clock=clock)
    (tmp_path / "tf").mkdir()
    assert sink.publish(rec) == []
    s = _samples(tmp_path / "tf" / FILE_NAME)
    joules = {d["device_class"]: (v, d["method"]) for d, v in _by_name(s, "slurm_energy_job_joules_total")}
    assert joules == {"cpu": (3.6e6, "tdp_estimate"), "ram": (3.6e5, "tdp_estimate")}
    (lbl, fac), = _by_name(s, "slurm_energy_job_facility_joules_total")
    assert fac == pytest.approx(5.94e6)
    (lbl, g), = _by_name(s, "slurm_energy_job_co2e_grams_total")
    assert g == pytest.approx(660.0)
    assert lbl == {"cluster": "c1", "job_id": "77", "restart_count": "0", "user": "alice", "account": "physics",
                   "partition": "batch"}
    (info, one), = _by_name(s, "slurm_energy_job_info")
    assert one == 1.0 and info["array_job_id"] == "70" and info["array_task_id"] == "7"
    assert info["status"] == "complete" and info["coverage"] == "complete"
    mode = stat.S_IMODE(os.stat(tmp_path / "tf" / FILE_NAME).st_mode)
    assert mode == 0o644  # node_exporter runs as its own user
    assert not [p for p in os.listdir(tmp_path / "tf") if p != FILE_NAME]  # temp file renamed away


def test_finished_jobs_leave_after_keep_time_running_ones_stay(tmp_path):
    (tmp_path / "tf").mkdir()
    clock = Clock(10_000.0)
    sink = PrometheusTextfile(str(tmp_path / "tf"), str(tmp_path / "state"), keep_finished_s=600, clock=clock)
    old = finished(node_record(job_id="1", start=1000.0, end=9000.0))
    sink.publish(old)  # ended 1000 s ago > 600 s: dropped at once
    run = finished(node_record(job_id="2", start=9000.0, end=10_000.0, status=Status.RUNNING))
    sink.publish(run)
    jobs = {d["job_id"] for d, _ in _by_name(_samples(tmp_path / "tf" / FILE_NAME), "slurm_energy_job_info")}
    assert jobs == {"2"}
    # the running job finishes at 10_000 and is exported until 10_600
    sink.publish(run.model_copy(update={"status": Status.COMPLETE}))
    clock.t = 10_599.0
    sink.forget("c1", "nothing", 0)  # any write prunes
    assert {d["job_id"] for d, _ in _by_name(_samples(tmp_path / "tf" / FILE_NAME), "slurm_energy_job_info")} == {"2"}
    clock.t = 10_601.0
    sink.forget("c1", "nothing", 0)
    assert _by_name(_samples(tmp_path / "tf" / FILE_NAME), "slurm_energy_job_info") == []


def test_cardinality_cap_keeps_newest(tmp_path):
    (tmp_path / "tf").mkdir()
    clock = Clock(5000.0)
    sink = PrometheusTextfile(str(tmp_path / "tf"), str(tmp_path / "state"), max_jobs=3, clock=clock)
    for i in range(5):
        clock.t = 5000.0 + i
        sink.publish(finished(node_record(job_id=str(i), end=4999.0)))
    jobs = {d["job_id"] for d, _ in _by_name(_samples(tmp_path / "tf" / FILE_NAME), "slurm_energy_job_info")}
    assert jobs == {"2", "3", "4"}


def test_forget_drops_this_nodes_running_entry(tmp_path):
    (tmp_path / "tf").mkdir()
    sink = PrometheusTextfile(str(tmp_path / "tf"), str(tmp_path / "state"), clock=Clock(4600.0))
    sink.publish(finished(node_record(job_id="9", status=Status.RUNNING)))
    sink.forget("c1", "9", 0)
    assert _by_name(_samples(tmp_path / "tf" / FILE_NAME), "slurm_energy_job_joules_total") == []


def test_unreachable_textfile_dir_is_a_note_and_the_entry_is_kept(tmp_path):
    # the directory does not exist (node_exporter not installed on this node): a note, no raise;
    # the entry stays in the state dir and is exported once the directory exists
    sink = PrometheusTextfile(str(tmp_path / "missing"), str(tmp_path / "state"), clock=Clock(4700.0))
    notes = sink.publish(finished(node_record(job_id="5")))
    assert len(notes) == 1 and str(tmp_path / "missing") in notes[0] and "textfile_dir" in notes[0]
    (tmp_path / "missing").mkdir()
    assert sink.forget("c1", "other", 0) == []
    jobs = {d["job_id"] for d, _ in _by_name(_samples(tmp_path / "missing" / FILE_NAME), "slurm_energy_job_info")}
    assert jobs == {"5"}


def test_textfile_dir_is_a_file_is_a_note(tmp_path):
    f = tmp_path / "afile"
    f.write_text("x")
    sink = PrometheusTextfile(str(f), str(tmp_path / "state"), clock=Clock(4700.0))
    notes = sink.publish(finished(node_record(job_id="6")))
    assert notes and "not writable" in notes[0]


def test_finalizer_records_an_output_failure_on_the_stored_record(tmp_path):
    # node_exporter's directory missing on this node: the record is still stored, with the note
    from slurm_energy.config import SiteConfig
    from slurm_energy.slurm.jobend.publish import store_and_report
    from slurm_energy.store import open_store

    cfg = SiteConfig(paths={"spool_dir": str(tmp_path / "spool"), "store_url": f"sqlite:///{tmp_path}/j.db",
                            "log_dir": str(tmp_path / "log")},
                     outputs={"prometheus": {"textfile_dir": str(tmp_path / "nope")},
                              "slurm": {"admin_comment": False}})
    rec = finished(node_record(job_id="88", work_dir=""))
    store_and_report(cfg, rec)
    st = open_store(cfg.paths.store_url)
    try:
        (got,) = st.get_job("88")
    finally:
        st.close()
    assert got.energy_it_j == {"cpu": 3.6e6, "ram": 3.6e5}  # data kept
    assert any(e.startswith("prometheus: textfile dir") and str(tmp_path / "nope") in e for e in got.errors)


def test_one_rewrite_writes_each_entry_and_the_textfile_once(tmp_path, monkeypatch):
    """The node sampler's interim flush of N jobs: N entries, one textfile rewrite (not N)."""
    from slurm_energy.outputs import prometheus

    recs = [finished(node_record(job_id=str(80 + k), gpu_j=None)) for k in range(5)]
    clock = Clock(max(r.end_time for r in recs) + 10)
    (tmp_path / "tf").mkdir()
    writes: list[int] = []
    real = prometheus.PrometheusTextfile._write_textfile

    def counted(self, entries):
        writes.append(len(entries))
        return real(self, entries)

    monkeypatch.setattr(prometheus.PrometheusTextfile, "_write_textfile", counted)
    with prometheus.one_rewrite():
        for r in recs:  # a sink per publish, as site_sinks() makes them
            assert PrometheusTextfile(str(tmp_path / "tf"), str(tmp_path / "state"), clock=clock).publish(r) == []
        assert writes == [] and not (tmp_path / "tf" / FILE_NAME).exists()  # entries only, so far
    assert writes == [5]  # one rewrite with the 5 jobs' entries
    jobs = {d["job_id"] for d, _ in _by_name(_samples(tmp_path / "tf" / FILE_NAME), "slurm_energy_job_info")}
    assert jobs == {"80", "81", "82", "83", "84"}
    PrometheusTextfile(str(tmp_path / "tf"), str(tmp_path / "state"), clock=clock).publish(recs[0])
    assert writes == [5, 5]  # outside it: a rewrite per publish, as before
