"""The one flow: node record -> job record (merge, carbon) -> sinks, without Slurm or hardware."""

from __future__ import annotations

import pytest

from slurm_energy.core import JobMeta, Sample, Status
from slurm_energy.jobmeta import IDENTITY
from slurm_energy.pipeline import NodeObservation, finalise_job, measure_node, publish
from tests.helpers.jobrecord_factory import node_record


class _Recorder:
    """A sink that remembers what it was given (copies of the record's errors)."""

    def __init__(self, name: str, ok: bool = True, keeps_errors: bool = False):
        self.name, self.ok, self.keeps_errors = name, ok, keeps_errors
        self.seen: list[list[str]] = []

    def publish(self, record):
        self.seen.append(list(record.errors))
        return [] if self.ok else [f"{self.name} not written: disk full"]


@pytest.fixture
def site(site_config):
    """PUE 1.5 in France (the carbon intensity from the country's table)."""
    return site_config(pue=1.5, location={"country": "FR"})


def test_finalise_job_merges_two_nodes_and_applies_pue_once(site):
    a = node_record(job_id="7", node="n1", expected=("n1", "n2"), cpu_j=3.6e6, ram_j=None)
    b = node_record(job_id="7", node="n2", expected=("n1", "n2"), cpu_j=7.2e6, ram_j=None)
    job = finalise_job([a, b], site)
    # IT = 3.6e6 J + 7.2e6 J = 1.08e7 J = 3 kWh; facility = 3 kWh x PUE 1.5 = 4.5 kWh
    assert [n.node for n in job.nodes] == ["n1", "n2"]
    assert job.it_kwh == pytest.approx(3.0) and job.facility_kwh == pytest.approx(4.5)
    assert job.carbon.pue == 1.5 and job.status == Status.COMPLETE


def test_a_node_that_never_reported_makes_the_job_partial_but_an_interim_view_does_not(site):
    rec = node_record(job_id="8", node="n1", expected=("n1", "n2"), status=Status.RUNNING)
    job = finalise_job([rec], site)
    # 3.6e6 J cpu + 3.6e5 J ram = 3.96e6 J = 1.1 kWh measured on n1; n2 missing
    assert job.it_kwh == pytest.approx(1.1) and job.status == Status.PARTIAL
    assert "node n2 never reported" in job.errors and not job.coverage_complete
    interim = finalise_job([rec], site, merge=False)
    assert interim.status == Status.RUNNING and interim.errors == [] and interim.it_kwh == pytest.approx(1.1)


def test_finalise_job_needs_a_record(site):
    with pytest.raises(ValueError, match="no node records"):
        finalise_job([], site)


def test_publish_records_a_failed_sink_and_republishes_to_the_store():
    rec = node_record(job_id="9")
    store, report = _Recorder("store", keeps_errors=True), _Recorder("report", ok=False)
    results = publish(rec, [store, report])
    assert results == {"store": [], "report": ["report not written: disk full"]}
    assert rec.errors == ["report not written: disk full"]
    # stored first without the error, then again with it: the stored record says what is missing
    assert store.seen == [[], ["report not written: disk full"]]


def test_publish_does_not_republish_to_sinks_that_do_not_keep_errors():
    rec = node_record(job_id="10")
    a, b = _Recorder("a"), _Recorder("b", ok=False)
    publish(rec, [a, b])
    assert len(a.seen) == 1


def test_measure_node_from_rows_gives_one_node_record_with_the_jobs_meta(site):
    # two rows 10 s apart: RAPL package counter 1_000_000 uJ -> 51_000_000 uJ = 50 J over 10 s;
    # the job used 4 of the node's 8 busy CPU-seconds -> share 0.5 -> 25 J
    rows = [
        {"t": 100.0, "kind": "prolog", "job": {"cpu_time_s": 1.0, "source": "cgroup-v2"},
         "node": {"cpu_busy_s": 10.0, "cpu_total_s": 100.0, "ncpu": 4},
         "readings": [{"device_class": "cpu", "device_id": "intel-rapl:0", "method": "counter", "energy_uj": 1_000_000}]},
        {"t": 110.0, "kind": "final", "job": {"cpu_time_s": 5.0, "source": "cgroup-v2"},
         "node": {"cpu_busy_s": 18.0, "cpu_total_s": 140.0, "ncpu": 4},
         "readings": [{"device_class": "cpu", "device_id": "intel-rapl:0", "method": "counter", "energy_uj": 51_000_000}]},
    ]
    meta = JobMeta(job_id="11", cluster="c", user="alice", uid=1000, gid=1000, partition="p", restart_count=2)
    obs = NodeObservation("n1", [Sample.from_dict(r) for r in rows], {"devices": [], "host": "n1"}, 100.0, 110.0,
                          cpus_alloc=4)
    rec = measure_node(obs, meta, site, exit_code="0:0", job_state="COMPLETED")
    (ns,) = rec.nodes
    (cpu,) = ns.devices
    assert cpu.device_energy_j == pytest.approx(50.0) and cpu.energy_j == pytest.approx(25.0)
    assert JobMeta(**{k: getattr(rec, k) for k in IDENTITY}) == meta
    assert rec.expected_nodes == ["n1"] and rec.job_state == "COMPLETED"
    assert ns.static == {"host": "n1", "devices": []}


def test_grace_cpu_meter_rows_give_a_measured_cpu_labelled_with_what_it_covers(site):
    # a Grace socket meter (hwmon power_integration) 150 W -> 170 W over 10 s: (150 + 170) / 2 x 10 =
    # 1600 J for the socket; the job used 4 of the node's 8 busy CPU-seconds -> share 0.5 -> 800 J
    def row(t, kind, w, cpu_s, busy):
        return {"t": t, "kind": kind, "job": {"cpu_time_s": cpu_s, "source": "cgroup-v2"},
                "node": {"cpu_busy_s": busy, "cpu_total_s": t, "ncpu": 72},
                "readings": [{"device_class": "cpu", "device_id": "grace-socket-0", "method": "power_integration",
                              "power_w": w}]}

    rows = [row(100.0, "prolog", 150.0, 1.0, 10.0), row(110.0, "final", 170.0, 5.0, 18.0)]
    static = {"host": "gh1", "devices": [{"device_class": "cpu", "device_id": "grace-socket-0",
                                          "model": "Grace Power Socket 0", "extra": {
                                              "covers": "Grace socket: CPU and SoC rails, LPDDR5X memory, regulator loss"}}]}
    meta = JobMeta(job_id="12", cluster="c", user="alice", uid=1000, gid=1000, partition="p")
    obs = NodeObservation("gh1", [Sample.from_dict(r) for r in rows], static, 100.0, 110.0, cpus_alloc=4)
    (ns,) = measure_node(obs, meta, site).nodes
    (cpu,) = ns.devices
    assert cpu.method == "power_integration"
    assert cpu.device_energy_j == pytest.approx(1600.0) and cpu.energy_j == pytest.approx(800.0)
