"""HTML and CSV report: values, units, unmeasured shown as n/a (never 0), escaping, safe writing."""

from __future__ import annotations

import csv
import io
import math
import os
import shutil
import stat
import tempfile

import pytest

from slurm_energy.model import NodeSummary
from slurm_energy.reporting import report
from slurm_energy.reporting.plot import downsample, power_svg
from slurm_energy.reporting.report import class_rows, render_csv, render_html, write_reports
from tests.helpers.report_records import ELAPSED, T0, sample_record


def _csv_rows(text: str) -> dict[str, dict[str, str]]:
    return {r["device_class"]: r for r in csv.DictReader(io.StringIO(text))}


# ------------------------------------------------------------------------------------ CSV


def test_csv_header_has_units_in_names():
    header = render_csv(sample_record()).splitlines()[0].split(",")
    for col in ("energy_it_kWh", "device_energy_kWh", "mean_power_W", "facility_kWh", "kgCO2e",
                "method", "coverage", "ci_gCO2e_per_kWh"):
        assert col in header


def test_csv_values_per_class_and_total():
    rows = _csv_rows(render_csv(sample_record()))
    assert list(rows) == ["cpu", "gpu", "ram", "total"]

    cpu = rows["cpu"]
    # 720_000 J / 3.6e6 J/kWh = 0.2 kWh; full package 1_080_000 J = 0.3 kWh
    assert float(cpu["energy_it_kWh"]) == pytest.approx(0.2)
    assert float(cpu["device_energy_kWh"]) == pytest.approx(0.3)
    # mean power = 720_000 J / 3600 s = 200 W
    assert float(cpu["mean_power_W"]) == pytest.approx(200.0)
    # facility = 0.2 kWh x PUE 1.5 = 0.3 kWh; CO2e = 0.3 kWh x 200 g/kWh x 1.0 = 60 g = 0.06 kg
    assert float(cpu["facility_kWh"]) == pytest.approx(0.3)
    assert float(cpu["kgCO2e"]) == pytest.approx(0.06)
    assert cpu["method"] == "counter" and float(cpu["coverage"]) == 1.0

    ram = rows["ram"]
    # 64 x 0.5 x 0.3725 W x 3600 s = 42_912 J = 0.01192 kWh; x 1.5 = 0.01788 kWh; x 0.2 kg/kWh = 0.003576 kg
    assert float(ram["energy_it_kWh"]) == pytest.approx(0.01192)
    assert float(ram["facility_kWh"]) == pytest.approx(0.01788)
    assert float(ram["kgCO2e"]) == pytest.approx(0.003576)
    assert ram["method"] == "tdp_estimate" and float(ram["coverage"]) == 0.95
    assert ram["n_devices"] == "64"


def test_csv_unmeasured_gpu_is_empty_not_zero():
    gpu = _csv_rows(render_csv(sample_record()))["gpu"]
    assert gpu["method"] == "unavailable"
    for col in ("energy_it_kWh", "device_energy_kWh", "mean_power_W", "facility_kWh", "kgCO2e"):
        assert gpu[col] == "", col


def test_csv_total_row():
    total = _csv_rows(render_csv(sample_record()))["total"]
    # IT = 0.2 + 0.01192 = 0.21192 kWh (GPU unmeasured, excluded, flagged); x1.5 = 0.31788 kWh
    assert float(total["energy_it_kWh"]) == pytest.approx(0.21192)
    assert float(total["facility_kWh"]) == pytest.approx(0.31788)
    # 0.31788 kWh x 200 g/kWh = 63.576 g = 0.063576 kg
    assert float(total["kgCO2e"]) == pytest.approx(0.063576)
    # sum of class mean powers over their measured time: CPU 720_000 J / (1.0 x 3600 s) = 200 W,
    # RAM 42_912 J / (0.95 x 3600 s) = 12.5474 W -> 212.5474 W, over the lowest coverage 0.95
    assert float(total["mean_power_W"]) == pytest.approx(200.0 + 42_912.0 / (0.95 * 3600.0))
    assert float(total["mean_power_coverage"]) == 0.95
    # full-device total unknown because the GPU's is unknown
    assert total["device_energy_kWh"] == ""
    # worst method among the summed classes (counter, tdp_estimate); coverage 0 because of the GPU
    assert total["method"] == "tdp_estimate"
    assert float(total["coverage"]) == 0.0
    assert total["n_devices"] == str(1 + 1 + 64)


def test_class_co2_split_follows_hourly_total():
    # With hourly intensity the total is not facility x flat CI; per-class values must still add up.
    rec = sample_record()
    rec.carbon.hourly = True
    rec.co2e_kg = 0.1  # kg, as if the hourly-weighted intensity were 0.1 / 0.31788 x 1000 g/kWh
    rows = {r.device_class: r for r in class_rows(rec)}
    # cpu share = 720_000 / 762_912 of 0.1 kg = 0.094375... kg
    assert rows["cpu"].co2e_kg == pytest.approx(0.1 * 720_000 / 762_912)
    assert rows["cpu"].co2e_kg + rows["ram"].co2e_kg == pytest.approx(0.1)


def test_class_without_devices_has_no_row():
    rec = sample_record()
    rec.nodes[0].devices = [d for d in rec.nodes[0].devices if d.device_class != "gpu"]
    rec.energy_it_j.pop("gpu")
    rec.methods.pop("gpu")
    rows = {r.device_class: r for r in class_rows(rec)}
    assert list(rows) == ["cpu", "ram", "total"]  # no GPU on the job: no GPU row (not "unavailable")
    assert ",gpu," not in render_csv(rec)
    # total coverage is now min(1.0, 0.95) = 0.95
    assert rows["total"].coverage == 0.95


# ----------------------------------------------------------------------------------- HTML


def test_html_shows_facts_energy_formula_and_sources():
    html = render_html(sample_record())
    for text in ("4242", "alice", "physics", "gpu", "node001", "2023-11-14 22:13:20 UTC",
                 "01:00:00", "Intel(R) Xeon(R) Gold 6248", "NVIDIA A100-SXM4-40GB",
                 "Debian GNU/Linux 12", "3.11.2", "192.0 GiB",
                 "site config: measured 2024", "table: OWID GB", "lifecycle", "2024"):
        assert text in html, text
    # formula with the values used: 0.2 + 0.01192 = 0.2119 kWh; 0.21192 x 1.5 = 0.3179 kWh;
    # 0.31788 kWh x 200 g/kWh x 1 = 63.576 g = 0.06358 kg
    assert "E_IT = Σ E_i = E_cpu + E_ram = 0.2 + 0.01192 = 0.2119 kWh" in html
    assert "GPU not measured, not counted as 0" in html
    assert "E_facility = E_IT × PUE = 0.21192 kWh × 1.5 = 0.3179 kWh" in html
    assert "CO2e = E_facility × CI × α = 0.31788 kWh × 200 gCO2e/kWh × 1 = 63.576 gCO2e = 0.06358 kgCO2e" in html
    # the TDP-model class is expanded: 64 x 0.5 x 0.3725 W x 3600 s = 42_912 J = 0.01192 kWh
    assert "E_ram = n·u·P·t = 64 × 0.5 × 0.3725 W × 3600 s = 42912 J = 0.01192 kWh" in html
    # the counter class states its measured job share: 720_000 J / 3.6e6 = 0.2 kWh
    assert "E_cpu = 720000 J = 0.2 kWh (counter: RAPL energy_uj deltas, job share by CPU time)" in html
    # provenance
    assert "nvml_error:NVML_ERROR_GPU_IS_LOST" in html and "no_dram_zone" in html


def test_html_unmeasured_is_na_never_zero():
    html = render_html(sample_record())
    assert "n/a — not measured" in html
    # the GPU row of the class table: its energy cells are n/a, no "0 kWh"
    gpu_row = html.split("<td>GPU")[1].split("</tr>")[0]
    assert gpu_row.count("n/a — not measured") == 5  # job share, full, mean power, facility, kgCO2e
    assert ">0<" not in gpu_row


def test_html_escapes_user_controlled_text():
    rec = sample_record()
    rec.job_name = "<script>alert(1)</script>"
    html = render_html(rec)
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_html_embeds_svg_plot_inline():
    html = render_html(sample_record())
    assert "<svg" in html and "<?xml" not in html and "<!DOCTYPE svg" not in html
    assert "&lt;svg" not in html  # not escaped


def test_html_without_trace_says_so():
    rec = sample_record()
    rec.nodes[0].power_trace = []
    html = render_html(rec)
    assert "No power trace was recorded." in html and "<svg" not in html


def test_html_lists_missing_nodes():
    rec = sample_record()
    rec.expected_nodes = ["node001", "node002"]
    assert "Nodes that never reported: node002" in render_html(rec)


def test_html_array_task_label():
    rec = sample_record()
    rec.array_job_id, rec.array_task_id = "4240", "2"
    assert "job 4240_2 (job id 4242)" in render_html(rec)


# ----------------------------------------------------------------------------------- plot


def test_downsample_means_bins_and_keeps_gaps():
    ts = [0.0, 1.0, 2.0, 3.0]
    ys = [10.0, 20.0, None, None]
    t2, y2 = downsample(ts, ys, max_points=2)
    # bin 0: t=(0+1)/2=0.5, y=(10+20)/2=15 W; bin 1: all None -> NaN gap, not 0
    assert t2 == [0.5, 2.5]
    assert y2[0] == 15.0 and math.isnan(y2[1])


def test_downsample_rejects_mismatched_lengths():
    with pytest.raises(ValueError, match="ts has 2 values but ys has 1"):
        downsample([0.0, 1.0], [1.0])


def test_power_svg_skips_all_none_columns():
    node = NodeSummary(node="n1", job_id="1", start_time=0.0, end_time=10.0,
                       power_trace=[[0.0, None, None, None], [5.0, None, None, None]])
    assert power_svg([node], 0.0) is None


# ---------------------------------------------------------------------------------- files


def test_report_names_sanitise_job_id():
    rec = sample_record()
    rec.job_id = "12/../x"
    assert report.report_names(rec) == ("energy-12_.._x.html", "energy-12_.._x.csv")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to write as another user")
def test_write_reports_as_job_user():
    base = tempfile.mkdtemp(prefix="se-report-", dir="/tmp")
    try:
        os.chmod(base, 0o755)
        work = os.path.join(base, "work")
        os.mkdir(work)
        os.chown(work, 65534, 65534)
        html_path, csv_path = write_reports(sample_record(), work, 65534, 65534)
        assert html_path == os.path.join(work, "energy-4242.html")
        assert csv_path == os.path.join(work, "energy-4242.csv")
        for p in (html_path, csv_path):
            st = os.lstat(p)
            assert stat.S_ISREG(st.st_mode) and st.st_uid == 65534
        with open(csv_path, encoding="utf-8") as f:
            assert float(_csv_rows(f.read())["total"]["energy_it_kWh"]) == pytest.approx(0.21192)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_write_reports_rejects_empty_work_dir():
    with pytest.raises(ValueError, match="work_dir=''"):
        write_reports(sample_record(), "", 1000, 1000)


def test_multi_node_plot_labels_nodes():
    rec = sample_record()
    n2 = rec.nodes[0].model_copy(deep=True)
    n2.node = "node002"
    rec.nodes.append(n2)
    svg = power_svg(rec.nodes, T0)
    assert "CPU (node001)" in svg and "CPU (node002)" in svg
    assert ELAPSED == 3600.0


def test_html_static_devices_table_and_grouping():
    rec = sample_record()
    n2 = rec.nodes[0].model_copy(deep=True)
    n2.node = "node002"
    n2.static["host"], n2.static["pid"] = "node002", 999  # differ only in host/pid: same hardware group
    n2.static["devices"][0]["device_id"] = "GPU-1111"
    rec.nodes.append(n2)
    groups = report._static_groups(rec)
    assert len(groups) == 1 and groups[0]["nodes"] == ["node001", "node002"]
    html = render_html(rec)
    assert "NVML enforced limit" in html and "400 W" in html
    assert "memory: 40.0 GiB" in html  # extra.memory_bytes, 40 x 2**30 B
    assert ">4711<" not in html  # the sampler's pid is not a hardware fact


def test_html_shows_slurm_state_apart_from_measurement_status():
    rec = sample_record().model_copy(update={"job_state": "TIMEOUT"})
    html = render_html(rec)
    assert "<th>Slurm state</th><td>TIMEOUT</td>" in html
    assert "<th>Measurement</th><td>complete" in html
