"""The rest of the node (node meter minus measured components) and the job's share of it, by hand."""

from __future__ import annotations

import pytest

from slurm_energy.accounting import rest_of_node as ron
from slurm_energy.accounting.integrate import power_series
from slurm_energy.config.schema import NodeMeter, SiteConfig
from slurm_energy.core import JobMeta, Reading
from slurm_energy.pipeline import NodeObservation, finalise_job, measure_node
from tests.helpers.store_backends import store_url  # noqa: F401  (fixture)


def _m(t, w, method="power_integration"):
    return (t, Reading("node", "acpi-power-meter-hwmon0", method, power_w=w))


def test_rest_per_interval_and_never_negative():
    import numpy as np

    meter, how = ron.meter_series([_m(0.0, 400.0), _m(10.0, 400.0), _m(20.0, 200.0)])
    assert how == "power_integration"
    # components: 300 W for 10 s, then 250 W for 10 s (one series, two intervals)
    comp = power_series(np.array([0.0, 10.0, 20.0]), [300.0, 300.0, 250.0])
    r = ron.node_rest(meter, [comp], 0.0, 20.0)
    # interval 1: meter 4000 J, components 3000 J -> rest 1000 J
    # interval 2: meter (400+200)/2 x 10 = 3000 J, components (300+250)/2 x 10 = 2750 J -> rest 250 J
    assert (r.metered_j, r.components_j, r.rest_j, r.metered_s) == (7000.0, 5750.0, 1250.0, 20.0)
    assert r.flags == []


def test_components_above_meter_are_not_charged_and_flagged():
    import numpy as np

    meter, _ = ron.meter_series([_m(0.0, 200.0), _m(10.0, 200.0), _m(20.0, 200.0)])
    comp = power_series(np.array([0.0, 10.0, 20.0]), [190.0, 190.0, 300.0])
    r = ron.node_rest(meter, [comp], 0.0, 20.0)
    # interval 1: 2000 J metered, 1900 J components -> 100 J; interval 2: 2450 J > 2000 x 1.05 -> not believed
    assert (r.rest_j, r.metered_s) == (100.0, 10.0)
    assert r.flags == ["components_above_meter", "rest_partly_metered"]


def test_a_lying_meter_row_leaves_its_intervals_unmetered():
    import numpy as np

    rows = [_m(0.0, 400.0), (10.0, Reading("node", "m", "unavailable", power_w=65535.0, flags=["meter_implausible"])),
            _m(20.0, 400.0), _m(30.0, 400.0)]
    meter, _ = ron.meter_series(rows)
    comp = power_series(np.array([0.0, 30.0]), [100.0, 100.0])
    r = ron.node_rest(meter, [comp], 0.0, 30.0)
    assert (r.rest_j, r.metered_s) == (3000.0, 10.0)  # only 20-30 s: (400 - 100) W x 10 s
    assert "meter_unavailable" in r.flags


def test_counter_meter_pm_counters():
    # pm_counters energy 5 405 478 J then 5 409 478 J (x 1e6 uJ): 4000 J in 10 s (400 W)
    rows = [(0.0, Reading("node", "pm_counters", "counter", energy_uj=5_405_478_000_000)),
            (10.0, Reading("node", "pm_counters", "counter", energy_uj=5_409_478_000_000))]
    meter, how = ron.meter_series(rows)
    assert how == "counter" and meter.energy.tolist() == [4000.0]


def test_allocation_share_rule():
    share, basis = ron.allocation_share(4, 16, 1, 4, 32 * 2**30, 128 * 2**30)
    assert share == pytest.approx(0.25) and basis == "mean of CPUs 4/16, GPUs 1/4, memory 32.0/128.0 GiB"
    share, basis = ron.allocation_share(8, 16, None, None, 16 * 2**30, 128 * 2**30)
    assert share == pytest.approx((0.5 + 0.125) / 2)  # no GPU on the node: CPUs and memory only
    assert ron.allocation_share(None, 16)[0] is None


def _rows(watts_cpu):
    """Sample rows of one RAPL package zone (counter, uJ) and the node's 16 CPUs, 64 GiB, every 10 s."""
    out = []
    e = 0
    for i, w in enumerate(watts_cpu):
        if i:
            e += int(w * 10 * 1e6)
        out.append({"t": 1000.0 + 10 * i, "kind": "sample", "job": {"cpu_s": 10.0 * i, "mem_bytes": 2**30},
                    "node": {"cpu_busy_s": 40.0 * i, "cpu_total_s": 160.0 * i, "ncpu": 16,
                             "mem_used_bytes": 8 * 2**30, "mem_total_bytes": 64 * 2**30},
                    "readings": [{"device_class": "cpu", "device_id": "intel-rapl:0", "method": "counter",
                                  "energy_uj": e, "max_energy_range_uj": 2**40}]})
    return out


def _record(meter_rows, node_meter=None, **obs):
    site = SiteConfig(node_meter=node_meter or {})
    o = NodeObservation("n1", _rows([0.0, 100.0, 100.0, 100.0]), {"devices": []}, 1000.0, 1030.0, cpus_alloc=4,
                        meter_rows=meter_rows, meter_source="acpi_power_meter", mem_alloc_bytes=16 * 2**30, **obs)
    return finalise_job([measure_node(o, JobMeta(job_id="9", cluster="c", user="u"), site)], site)


def test_job_record_carries_the_rest_by_allocation():
    meter = [_m(995.0 + 10 * k, 250.0) for k in range(5)]  # 250 W the whole time, rows every 10 s
    rec = _record(meter)
    r = rec.nodes[0].rest_of_node
    # node: 30 s x 250 W = 7500 J metered; RAPL package 30 s x 100 W = 3000 J; rest 4500 J
    assert r.method == "node_meter:acpi_power_meter" and r.node_metered_j == pytest.approx(7500.0)
    assert r.node_components_j == pytest.approx(3000.0) and r.node_rest_j == pytest.approx(4500.0)
    # share: mean of CPUs 4/16 and memory 16/64 GiB = 0.25 -> 1125 J
    assert r.share == pytest.approx(0.25) and r.energy_j == pytest.approx(1125.0)
    assert rec.rest_of_node_j == pytest.approx(1125.0) and rec.rest_of_node_method == "node_meter:acpi_power_meter"
    cpu_j = rec.energy_it_j["cpu"]
    assert rec.it_kwh == pytest.approx((cpu_j + 1125.0) / 3.6e6)  # IT energy includes the rest of the node


def test_component_energy_rule():
    meter = [_m(995.0 + 10 * k, 250.0) for k in range(5)]
    rec = _record(meter, node_meter={"rest_of_node": "component_energy"})
    r = rec.nodes[0].rest_of_node
    d = rec.nodes[0].devices[0]
    assert r.share == pytest.approx(d.energy_j / d.device_energy_j)
    assert r.energy_j == pytest.approx(4500.0 * d.energy_j / d.device_energy_j)


def test_not_metered_is_never_zero_and_the_estimate_is_labelled():
    rec = _record(None)
    r = rec.nodes[0].rest_of_node
    assert r.method == "not_metered" and r.energy_j is None and r.covers == "rest of node: not metered"
    assert rec.rest_of_node_j is None and rec.it_kwh == pytest.approx(rec.energy_it_j["cpu"] / 3.6e6)
    said = _record(None, meter_note="node meter: auto: no hwmon power meter, no DCMI").nodes[0].rest_of_node
    assert said.energy_j is None  # a reason, never a number
    assert said.covers == "rest of node: not metered (node meter: auto: no hwmon power meter, no DCMI)"
    est = _record(None, node_meter={"estimate_w": 120.0})
    e = est.nodes[0].rest_of_node
    # 120 W x 30 s = 3600 J for the node; share 0.25 -> 900 J, labelled an estimate
    assert e.method == "estimate:site_w" and e.energy_j == pytest.approx(900.0) and "ESTIMATE" in e.covers


def test_node_meter_config_rule_names():
    assert NodeMeter().rest_of_node == "allocation" and ron.RULES == ("allocation", "component_energy")


def test_shown_in_jobenergy_long_json_prometheus_and_report():
    import json

    from slurm_energy.cli.jobenergy_format import long_rows, to_json
    from slurm_energy.outputs.prometheus import entry_from_record
    from slurm_energy.reporting.report import render_html

    rec = _record([_m(995.0 + 10 * k, 250.0) for k in range(5)])
    row = next(r for r in long_rows(rec, "9") if r[2] == "rest_of_node")
    # job share 1125 J = 0.0003125 kWh; the node's rest 4500 J = 0.00125 kWh
    assert row[3] == "node_meter:acpi_power_meter" and row[6] == "power_integration"
    assert float(row[7]) == pytest.approx(1125 / 3.6e6, rel=1e-3) and float(row[8]) == pytest.approx(4500 / 3.6e6, rel=1e-3)
    rec_json = json.loads(to_json([("9", rec)]))["jobs"][0]["record"]
    assert rec_json["rest_of_node_j"] == pytest.approx(1125.0) and rec_json["nodes"][0]["rest_of_node"]["share"] == 0.25
    assert entry_from_record(rec, 0.0)["classes"]["rest_of_node"] == [pytest.approx(1125.0), "node_meter:acpi_power_meter"]
    assert "Rest of node" in render_html(rec) and "node_meter:acpi_power_meter" in render_html(rec)
    none = _record(None)
    assert "rest_of_node" not in entry_from_record(none, 0.0)["classes"]  # not metered: no series, never 0
    assert next(r for r in long_rows(none, "9") if r[2] == "rest_of_node")[7] in ("", "n/a", "-")


def test_reconcile_conserves_the_meter():
    from slurm_energy.accounting.reconcile import reconcile_node

    meter = [_m(995.0 + 10 * k, 250.0) for k in range(5)]  # 995..1035 s at 250 W: 40 s x 250 W = 10 000 J
    rec = _record(meter)
    assert rec.energy_it_j["cpu"] == pytest.approx(750.0)  # job CPU 10 of the node's 40 busy CPU-s: 25 % of 3000 J
    ns = rec.nodes[0]
    [p] = reconcile_node("n1", meter, [(ns.start_time, ns.end_time, ns.hourly_energy_j)], "hour")
    # idle: 995-1000 and 1030-1035 s with no job: 10 s x 250 W = 2500 J; job: 750 + 1125 = 1875 J
    assert p.metered_j == pytest.approx(10_000.0) and p.idle_j == pytest.approx(2500.0)
    assert p.jobs_j == pytest.approx(1875.0) and p.jobs == 1
    # residual: 10 000 - 2500 - 1875 = 5625 J = the package's other 75 % (2250 J) + the rest's 75 % (3375 J)
    # charged to no job (the job holds 4 of 16 CPUs, 16 of 64 GiB)
    assert p.residual_j == pytest.approx(5625.0) and p.residual_pct == pytest.approx(56.25)
    assert p.period == "1970-01-01T00"


def test_reconcile_command_outputs(tmp_path, capsys, monkeypatch):
    import json

    from slurm_energy.cli import reconcile_cmd
    from slurm_energy.cli.main import build_parser
    from slurm_energy.sampling import meterspool
    from slurm_energy.store import open_store

    mf = str(tmp_path / "node-meter-n1.jsonl")
    meter = [_m(995.0 + 10 * k, 250.0) for k in range(5)]
    for t, r in meter:
        meterspool.append(mf, meterspool.MeterRow(t, "acpi_power_meter", r))
    url = f"sqlite:///{tmp_path}/jobs.db"
    st = open_store(url)
    st.put(_record(meter))
    st.close()
    site = tmp_path / "site.yaml"
    site.write_text(f"paths: {{spool_dir: {tmp_path}, store_url: '{url}'}}\n")
    monkeypatch.setenv("SLURM_ENERGY_CONFIG", str(site))
    prom = tmp_path / "r.prom"
    args = build_parser().parse_args(["reconcile", "--node", "n1", "--format", "json", "--prometheus", str(prom)])
    assert reconcile_cmd.cmd_reconcile(args) == 0
    [p] = json.loads(capsys.readouterr().out)["periods"]
    assert p["metered_kwh"] == pytest.approx(10_000 / 3.6e6) and p["residual_pct"] == pytest.approx(56.25)
    text = prom.read_text()
    assert 'slurm_energy_node_residual_joules{by="hour",node="n1",period="1970-01-01T00"} 5625.0' in text
    args = build_parser().parse_args(["reconcile", "--node", "n1", "--format", "csv"])
    assert reconcile_cmd.cmd_reconcile(args) == 0
    assert capsys.readouterr().out.splitlines()[1].startswith("n1,1970-01-01T00,0.00277778,")


def test_other_jobs_gpus_in_the_meter_make_the_rest_not_metered():
    meter = [_m(995.0 + 10 * k, 250.0) for k in range(5)]
    rec = _record(meter, gpus_node=2)  # the node has 2 GPUs; this job's samples measure none
    r = rec.nodes[0].rest_of_node
    assert r.energy_j is None and r.flags == ["other_gpus_unmeasured"] and "has 2 GPUs" in r.covers
    assert rec.rest_of_node_j is None and rec.it_kwh == pytest.approx(rec.energy_it_j["cpu"] / 3.6e6)


def test_node_nvidia_gpu_count(tmp_path):
    from slurm_energy.devices.gpu.nvidia import node_nvidia_gpu_count

    for f in ("nvidia0", "nvidia3", "nvidiactl", "nvidia-uvm", "nvidia-modeset"):
        (tmp_path / f).write_text("")
    assert node_nvidia_gpu_count(str(tmp_path)) == 2
    assert node_nvidia_gpu_count(str(tmp_path / "none")) is None


def test_power_readings_far_apart_measure_nothing_between():
    from slurm_energy.accounting.reconcile import reconcile_node

    # the meter process ran 0-20 s, left (no job), came back at 3600 s: the hour between is a gap
    rows = [_m(0.0, 300.0), _m(10.0, 300.0), _m(20.0, 300.0), _m(3600.0, 300.0), _m(3610.0, 300.0)]
    meter, _ = ron.meter_series(rows, max_gap_s=30.0)
    assert meter.flags == ["meter_gap"] and meter.total_j == pytest.approx(9000.0)  # 3 intervals x 10 s x 300 W
    ps = reconcile_node("n1", rows, [], "hour", max_gap_s=30.0)
    assert [(p.period, p.metered_j, p.metered_s, p.idle_j) for p in ps] == [
        ("1970-01-01T00", 6000.0, 20.0, 6000.0), ("1970-01-01T01", 3000.0, 10.0, 3000.0)]


def test_seff_shows_the_rest_of_node():
    from slurm_energy.reporting.seff import seff_block

    text = seff_block(_record([_m(995.0 + 10 * k, 250.0) for k in range(5)]), {})
    assert "  rest of node: 0.0003125 kWh  node_meter:acpi_power_meter" in text  # 1125 J
    assert "  rest of node: not metered" in seff_block(_record(None), {})


def test_the_stores_measured_and_estimated_split_adds_up_to_it_with_the_rest_of_the_node(store_url):
    """IT energy = components + the job's share of its nodes' rest; the store's measured/estimated
    split counts the rest too (a tester's month: IT 0.06212 kWh, measured 0.05139 + estimated 0.00579
    -- the metered rest in neither), for new rows and, by the v8 migration, rows stored before; the
    status is not ``estimated`` where a meter measured part of the job, and Method names it."""
    from slurm_energy.cli.jobenergy_format import FIELDS
    from slurm_energy.store import open_store, schema
    from slurm_energy.store.db import connect

    metered = _record([_m(995.0 + 10 * k, 250.0) for k in range(5)])
    metered.job_id = "91"
    est = _record(None, node_meter={"estimate_w": 120.0})
    est.job_id = "92"
    cpu_kwh = metered.energy_it_j["cpu"] / 3.6e6  # RAPL counter: measured
    st = open_store(store_url)
    st.put(metered)
    st.put(est)
    st.close()

    def split(st, job):
        [row] = st.rows(jobs=[job])
        return row, row.measured_it_kwh, row.estimated_it_kwh

    st = open_store(store_url)
    row, meas, none = split(st, "91")
    # metered: 1125 J of the rest (share 0.25 of 4500 J) is measured, with the RAPL package's energy
    assert meas == pytest.approx(cpu_kwh + 1125.0 / 3.6e6) and none is None
    assert row.it_kwh == pytest.approx(meas) and row.rest_of_node_method == "node_meter:acpi_power_meter"
    assert FIELDS["method"](row, {}) == "cpu=counter,rest_of_node=node_meter:acpi_power_meter"
    row, meas, e = split(st, "92")
    # the site's estimate: 900 J (120 W x 30 s x 0.25) estimated, the counter's CPU measured
    assert e == pytest.approx(900.0 / 3.6e6) and meas == pytest.approx(est.energy_it_j["cpu"] / 3.6e6)
    assert row.it_kwh == pytest.approx(meas + e)
    st.close()
    db = connect(store_url)
    with db.transaction():  # rows as v7 stored them: the rest in no column
        db.execute("UPDATE job_records SET measured_it_kwh = :c WHERE job_id = '91'", {"c": cpu_kwh})
        db.execute("UPDATE job_records SET estimated_it_kwh = NULL WHERE job_id = '92'")
        db.execute("UPDATE job_records SET rest_of_node_kwh = NULL, rest_of_node_method = NULL")
        db.execute("DELETE FROM schema_version WHERE version >= 8")
    db.close()
    st = open_store(store_url)  # migrates v7 -> v8 from each record's JSON
    assert schema.current_version(st.db) == 8
    row, meas, none = split(st, "91")
    assert meas == pytest.approx(cpu_kwh + 1125.0 / 3.6e6) and row.rest_of_node_kwh == pytest.approx(1125.0 / 3.6e6)
    row, _meas, e = split(st, "92")
    assert e == pytest.approx(900.0 / 3.6e6) and row.rest_of_node_method == "estimate:site_w"
    st.close()


def test_a_metered_rest_is_not_called_estimated():
    from slurm_energy.core import Method, status_text

    tdp = {"cpu": Method.TDP_ESTIMATE, "ram": Method.TDP_ESTIMATE}
    energy = {"cpu": 2.3e-08 * 3.6e6, "ram": 1.0}
    assert status_text("complete", True, tdp, energy) == "complete(estimated)"
    # 99.99 % of the job's IT energy a meter's power integration: not "every class estimated"
    assert status_text("complete", True, tdp, energy, metered_rest=True) == "complete"
