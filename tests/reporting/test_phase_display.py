"""Phases and stages wherever a job is shown: report HTML (table + plot bands), phases CSV,
``jobenergy -l`` and ``--json``. One record with windows computed by hand."""

import csv
import io
import json

import pytest

from slurm_energy.cli.jobenergy import main
from slurm_energy.model import JobRecord, Method, WindowEnergy
from slurm_energy.reporting.phases import PHASE_CSV_COLUMNS, render_phases_csv
from slurm_energy.reporting.report import render_csv, render_html, write_reports
from tests.helpers.jobrecord_factory import job_record, store_with

T0 = 1_700_000_000.0
KWH = 3.6e6


def W(kind, name, a, b, cpu_j, **kw):
    return WindowEnergy(kind=kind, name=name, start_time=T0 + a, end_time=T0 + b, energy_it_j={"cpu": cpu_j},
                        methods={"cpu": Method.COUNTER}, it_j=cpu_j, coverage=1.0, **kw)


def record() -> JobRecord:
    # 1 h job, 3.6e6 J (1 kWh) of CPU at a flat 1000 W; phases epoch 0 (0-1200 s), epoch 1 (1200-3000 s)
    # with a nested "eval" (2400-3000 s); outside: 3000-3600 s. CO2e: 1 kWh x PUE 1.5 x 400 g = 0.6 kg
    trace = [[T0 + t, 1000.0, None, None] for t in range(60, 3601, 60)]
    phases = [W("phase", "epoch 0", 0, 1200, 1.2e6, co2e_kg=0.2), W("phase", "epoch 1", 1200, 3000, 1.8e6, co2e_kg=0.3),
              W("phase", "eval", 2400, 3000, 0.6e6, depth=1, co2e_kg=0.1)]
    totals = [W("in_phases", "all phases (nested counted once)", 0, 3600, 3.0e6, co2e_kg=0.5),
              W("outside", "outside any phase", 0, 3600, 0.6e6, co2e_kg=0.1)]
    stages = [W("stage", "50%", 0, 1800, 1.8e6, fraction=0.5, co2e_kg=0.3),
              W("stage", "100%", 0, 3000, 3.0e6, fraction=1.0, co2e_kg=0.5)]
    return job_record("900", [], start=T0, end=T0 + 3600, node_fields={"power_trace": trace}, account="", partition="",
                      energy_it_j={"cpu": 3.6e6}, methods={"cpu": Method.COUNTER},
                     it_kwh=1.0, facility_kwh=1.5, co2e_kg=0.6, phases=phases, stages=stages, phase_totals=totals,
                     tags={"flops": 1.5e18, "tokens": 2e9})


def test_phases_csv_rows_in_kwh_and_seconds():
    rows = list(csv.DictReader(io.StringIO(render_phases_csv(record()))))
    assert tuple(rows[0]) == PHASE_CSV_COLUMNS
    assert [(r["kind"], r["name"]) for r in rows] == [
        ("phase", "epoch 0"), ("phase", "epoch 1"), ("phase", "eval"), ("in_phases", "all phases (nested counted once)"),
        ("outside", "outside any phase"), ("stage", "50%"), ("stage", "100%")]
    e1 = rows[1]
    assert float(e1["start_s"]) == 1200 and float(e1["end_s"]) == 3000 and float(e1["duration_s"]) == 1800
    assert float(e1["cpu_kWh"]) == pytest.approx(0.5) and e1["gpu_kWh"] == "" and e1["method"] == "counter"
    assert rows[2]["depth"] == "1" and float(rows[2]["kgCO2e"]) == pytest.approx(0.1)
    assert float(rows[3]["energy_it_kWh"]) + float(rows[4]["energy_it_kWh"]) == pytest.approx(1.0)
    # all phases: 0-3000 s (epoch 0 starts at 0, epoch 1 ends at 3000), 3000 s inside a phase;
    # outside any phase: the job's 0-3600 s, 3600 - 3000 = 600 s of it
    assert [(float(r["start_s"]), float(r["end_s"]), float(r["duration_s"])) for r in rows[3:5]] == [
        (0, 3000, 3000), (0, 3600, 600)]
    assert rows[5]["fraction"] == "0.5" and float(rows[5]["energy_it_kWh"]) == pytest.approx(0.5)
    assert "phase" not in render_csv(record())  # the main CSV keeps its shape
    assert render_phases_csv(record().model_copy(update={"phases": [], "stages": [], "phase_totals": []})) == ""


def test_phases_csv_of_an_array_task_is_keyed_like_its_file_name():
    rec = record().model_copy(update={"array_job_id": "897", "array_task_id": "3"})  # job 900 = task 897_3
    rows = list(csv.DictReader(io.StringIO(render_phases_csv(rec))))
    assert len(rows) == 7 and {r["job_id"] for r in rows} == {"897_3"}


def test_windows_shown_within_the_job_and_the_union_is_the_phases():
    from slurm_energy.reporting.phases import phase_rows

    # a record stored with the old bounds: union over the whole job, "outside" 10 s past its end
    # (the sampler's last sample), a phase from 600 to 1800 s and one from 2400 s past the end
    rec = record().model_copy(update={
        "phases": [W("phase", "a", 600, 1800, 1.2e6), W("phase", "b", 2400, 3700, 1.2e6)],
        "phase_totals": [W("in_phases", "all phases (nested counted once)", 0, 3600, 2.4e6),
                         W("outside", "outside any phase", 0, 3610, 1.2e6)], "stages": []})
    got = [(r.kind, r.start_s, r.end_s, r.duration_s) for r in phase_rows(rec)]
    # b clipped to the job's 3600 s; union 600-3600 s, inside 1200 + 1200 = 2400 s; outside 3600 - 2400 = 1200 s
    assert got == [("phase", 600, 1800, 1200), ("phase", 2400, 3600, 1200), ("in_phases", 600, 3600, 2400),
                   ("outside", 0, 3600, 1200)]


def test_html_has_the_phase_table_and_plot_bands():
    html = render_html(record())
    assert "<h2>Phases and stages</h2>" in html
    table = html.split("<h2>Phases and stages</h2>")[1].split("</table>")[0]
    assert table.count("<tr class=\"phase\">") == 3 and table.count("<tr class=\"stage\">") == 2
    assert "outside any phase" in table and "stage 50% (start → here)" in table
    assert "333 Wh" in table  # epoch 0: 1.2e6 J = 0.3333 kWh = 333 Wh (units scale to the value)
    assert "flops = 1.5e+18" in html
    plot = html.split("<h2>Power over time</h2>")[1].split("</svg>")[0]
    for label in ("epoch 0", "epoch 1", "50%", "100%"):  # outermost phases and stages labelled
        assert f">{label}<" in plot
    assert ">eval<" not in plot  # nested phases are in the table, not as bands


def test_report_files_include_phases_csv(tmp_path):
    import os

    _html, _csv_path = write_reports(record(), str(tmp_path), os.getuid(), os.getgid())
    # the record declares its FLOPs (tags): predicted vs measured is its own CSV, not a second table
    assert sorted(p.name for p in tmp_path.iterdir()) == ["energy-900.csv", "energy-900.html", "energy-900.phases.csv",
                                                          "energy-900.prediction.csv"]


@pytest.fixture
def url(tmp_path, site_config, monkeypatch):
    site_config.write(bare=True, cluster_name="c1")
    return store_with(tmp_path, record())


def test_jobenergy_long_and_json_show_phases(url, capsys):
    assert main(["--store", url, "-l", "-P", "900"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    head = lines[0].split("|")
    rows = [dict(zip(head, x.split("|"))) for x in lines[1:]]
    ph = [r for r in rows if r["Class"] in ("phase", "stage", "in_phases", "outside")]
    assert [(r["Class"], r["DeviceID"], r["Energy_kWh"]) for r in ph] == [
        ("phase", "epoch 0", "0.3333"), ("phase", "epoch 1", "0.5"), ("phase", "eval", "0.1667"),
        ("in_phases", "all phases (nested counted once)", "0.8333"), ("outside", "outside any phase", "0.1667"),
        ("stage", "50%", "0.5"), ("stage", "100%", "0.8333")]
    assert ph[2]["Covers"] == "2400.0-3000.0 s since start, nested (depth 1)"
    assert main(["--store", url, "--json", "900"]) == 0
    rec = json.loads(capsys.readouterr().out)["jobs"][0]["record"]
    assert [p["name"] for p in rec["phases"]] == ["epoch 0", "epoch 1", "eval"]
    assert rec["stages"][0]["fraction"] == 0.5 and rec["tags"] == {"flops": 1.5e18, "tokens": 2e9}
