"""HTML and CSV report: values, units, unmeasured shown as n/a (never 0), escaping, safe writing."""

from __future__ import annotations

import csv
import html
import html as htmllib
import io
import math
import os
import re
import shutil
import stat
import tempfile

import pytest

from slurm_energy.devices.info import collect_static
from slurm_energy.model import DeviceEnergy, Method, NodeSummary
from slurm_energy.reporting import explain, report
from slurm_energy.reporting.plot import downsample, power_svg
from slurm_energy.reporting.report import ReportWriteError, class_rows, render_csv, render_html, write_reports
from slurm_energy.reporting.safe_write import SafeWriteError
from slurm_energy.sampling.readers.tdp import CpuTdpReader, RamModelReader
from tests.helpers.jobrecord_factory import device, finished, job_record
from tests.helpers.report_records import ELAPSED, T0, sample_record, tdp_cpu_record


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


# --------------------------------------------------------------------------------------------------
# Report problems a new user found: formula lines that do not multiply out, unflagged defaults,
# mean power diluted by unmeasured time, one failed file costing the other, a misleading caption,
# raw dicts in the Hardware section.

J_PER_KWH = 3.6e6


def _class_lines(html: str) -> dict[str, str]:
    """The per-class 'How it was computed' lines, unescaped: {"cpu": "E_cpu = ...", ...}."""
    return {m.group(2): htmllib.unescape(m.group(1))
            for m in re.finditer(r"<div>(E_(cpu|gpu|ram) = [^<]*)</div>", html)}


def _check_identity(line: str) -> tuple[float, float]:
    """Parse the numbers back out of a line and check it multiplies out; return (J, kWh).

    Forms: ``E = <symbolic> = f1 × f2 W × ... = <J> J = <kWh> kWh (...)`` (product of the factors
    = J) or ``E = <J> J = <kWh> kWh (...)``; in both J / 3.6e6 = kWh, all within 0.1 %.
    """
    parts = line.split(" = ")
    kwh = float(parts[-1].split(" kWh")[0])
    j = float(parts[-2].removesuffix(" J"))
    assert j / J_PER_KWH == pytest.approx(kwh, rel=1e-3), line
    if len(parts) == 5:
        factors = [float(f.split()[0]) for f in parts[2].split(" × ")]
        assert math.prod(factors) == pytest.approx(j, rel=1e-3), line
        assert math.prod(factors) / J_PER_KWH == pytest.approx(kwh, rel=1e-3), line
    else:
        assert len(parts) == 3, line
    return j, kwh


# ------------------------------------------------------------ 1. formula lines multiply out


def test_user_cpu_line_is_measured_form_when_nothing_multiplies_out():
    # The user's job: 2 cores, 24 W for both, u=0.984, 42 s, job share 492.84 J. No CPU time known.
    # n·u·P·t = 2 x 0.984 x 24 x 42 = 1983.7 J; n·u·(P/n)·t = 991.87 J: neither is 492.84 J.
    line = _class_lines(render_html(tdp_cpu_record()))["cpu"]
    assert line == ("E_cpu = 492.84 J = 0.0001369 kWh "
                    "(tdp_estimate: TDP × node CPU utilisation × time, job share by CPU time)")
    j, kwh = _check_identity(line)
    assert j == 492.84 and kwh == 0.0001369  # 492.84 J / 3.6e6 J/kWh = 1.369e-4 kWh


def test_cpu_line_uses_per_core_tdp_and_cpu_time_when_they_multiply_out():
    # P_core = 24 W / 2 cores = 12 W; job CPU time 41.07 s; 12 W x 41.07 s = 492.84 J = 1.369e-4 kWh
    line = _class_lines(render_html(tdp_cpu_record(cpu_time_s=41.07)))["cpu"]
    assert line.startswith("E_cpu = P_core·CPU time = 12 W × 41.07 s = 492.84 J = 0.0001369 kWh")
    assert "P_core: 24 W for 2 cores / 2" in line and "cgroup-v1" in line
    _check_identity(line)


def test_cpu_line_expands_n_u_pcore_t_when_it_is_the_energy():
    # n=2 cores x u=0.5 x P_core (24 W / 2 = 12 W) x 42 s = 504 J = 504 / 3.6e6 = 0.00014 kWh
    rec = tdp_cpu_record(util=0.5, energy_j=504.0)
    line = _class_lines(render_html(rec))["cpu"]
    assert line.startswith("E_cpu = n·u·P_core·t = 2 × 0.5 × 12 W × 42 s = 504 J = 0.00014 kWh")
    assert "n: 2 cores, P_core: 24 W for all 2 / 2" in line
    _check_identity(line)


def test_ram_and_gpu_model_lines_multiply_out():
    # RAM model (RamModelReader shape): n=1, P = 0.3725 W/GB x 16 GB = 5.96 W for the node, u = job
    # memory / node memory = 0.25, t = 42 s: 1 x 0.25 x 5.96 W x 42 s = 62.58 J.
    # GPU model: n=1, P=300 W, u=0.5, t=42 s: 1 x 0.5 x 300 x 42 = 6300 J.
    rec = tdp_cpu_record()
    rec.nodes[0].devices += [
        DeviceEnergy(device_class="ram", device_id="ram-model", count=1, method=Method.TDP_ESTIMATE,
                     energy_j=62.58, rated_power_w=5.96, mean_util=0.25, duration_s=42.0, coverage=1.0),
        DeviceEnergy(device_class="gpu", device_id="GPU-1", count=1, method=Method.TDP_ESTIMATE,
                     energy_j=6300.0, rated_power_w=300.0, mean_util=0.5, duration_s=42.0, coverage=1.0),
    ]
    rec.energy_it_j.update(ram=62.58, gpu=6300.0)
    rec.methods.update(ram=Method.TDP_ESTIMATE, gpu=Method.TDP_ESTIMATE)
    lines = _class_lines(render_html(rec))
    # plain decimals, no e-notation
    assert lines["ram"].startswith("E_ram = n·u·P·t = 1 × 0.25 × 5.96 W × 42 s = 62.58 J = 0.00001738 kWh")
    assert lines["gpu"].startswith("E_gpu = n·u·P·t = 1 × 0.5 × 300 W × 42 s = 6300 J = 0.00175 kWh")
    for line in lines.values():
        _check_identity(line)


def test_ram_line_falls_back_when_fields_do_not_give_the_energy():
    # 1 x 0.25 x 5.96 W x 42 s = 62.58 J, but the job share is 40 J (e.g. share by job memory over
    # intervals): print the measured 40 J = 1.111e-05 kWh, not an expansion that does not hold.
    rec = tdp_cpu_record()
    rec.nodes[0].devices.append(DeviceEnergy(
        device_class="ram", device_id="ram-model", count=1, method=Method.TDP_ESTIMATE, energy_j=40.0,
        rated_power_w=5.96, mean_util=0.25, duration_s=42.0, coverage=1.0))
    rec.energy_it_j["ram"] = 40.0
    line = _class_lines(render_html(rec))["ram"]
    assert line == ("E_ram = 40 J = 0.00001111 kWh "
                    "(tdp_estimate: W/GB × memory in use on the node × time, job share by job memory)")


def test_multi_device_class_states_sum():
    # two GPUs by NVML counter, 1000 J + 2600 J = 3600 J = 0.001 kWh
    rec = sample_record()
    gpus = [DeviceEnergy(device_class="gpu", device_id=f"GPU-{k}", count=1, method=Method.COUNTER,
                         energy_j=e, coverage=1.0, duration_s=3600.0) for k, e in ((0, 1000.0), (1, 2600.0))]
    rec.nodes[0].devices = [d for d in rec.nodes[0].devices if d.device_class != "gpu"] + gpus
    rec.energy_it_j["gpu"] = 3600.0
    rec.methods["gpu"] = Method.COUNTER
    line = _class_lines(render_html(rec))["gpu"]
    assert line == "E_gpu = 3600 J = 0.001 kWh (counter: NVML total energy deltas of the job's GPUs; sum over 2 devices)"


def test_every_line_of_sample_record_checks_out():
    h = render_html(sample_record())
    lines = _class_lines(h)
    assert set(lines) == {"cpu", "gpu", "ram"}
    assert "not measured" in lines["gpu"] and "0 J" not in lines["gpu"]
    for cls in ("cpu", "ram"):
        _check_identity(lines[cls])
    text = htmllib.unescape(h)
    # E_IT: 0.2 + 0.01192 = 0.21192 -> printed 0.2119 kWh (within 0.1 %)
    it = re.search(r"E_IT = Σ E_i = [^=]+ = ([\d.e+ -]+) = ([\d.e-]+) kWh", text)
    parts = [float(x) for x in it.group(1).split(" + ")]
    assert sum(parts) == pytest.approx(float(it.group(2)), rel=1e-3)
    # facility: 0.21192 kWh x 1.5 = 0.31788 -> printed 0.3179 kWh
    fac = re.search(r"E_facility = E_IT × PUE = ([\d.e-]+) kWh × ([\d.]+) = ([\d.e-]+) kWh", text)
    assert float(fac.group(1)) * float(fac.group(2)) == pytest.approx(float(fac.group(3)), rel=1e-3)
    # CO2e: 0.31788 kWh x 200 g/kWh x 1 = 63.576 g = 0.06358 kg (g / 1000 = kg)
    co2 = re.search(r"= ([\d.e-]+) kWh × ([\d.]+) gCO2e/kWh × ([\d.]+) = ([\d.e-]+) gCO2e = ([\d.e-]+) kgCO2e", text)
    f, ci, a, g, kg = (float(co2.group(k)) for k in range(1, 6))
    assert f * ci * a == pytest.approx(g, rel=1e-3) and g / 1000 == pytest.approx(kg, rel=1e-3)


def test_hourly_co2e_line_shows_effective_ci_that_multiplies_out():
    # hourly-weighted total 0.05 kg = 50 g over facility 0.31788 kWh, alpha 1:
    # effective CI = 50 / 0.31788 = 157.29 gCO2e/kWh (not the flat 200)
    rec = sample_record()
    rec.carbon.hourly = True
    rec.co2e_kg = 0.05
    text = htmllib.unescape(render_html(rec))
    assert "CO2e = Σ_h E_facility,h × CI_h × α = 0.31788 kWh × 157.29 gCO2e/kWh (effective hourly-weighted CI)" in text
    assert "= 50 gCO2e = 0.05 kgCO2e" in text


def test_identity_line_refuses_numbers_that_do_not_multiply_out():
    # 2 x 0.984 x 24 W x 42 s = 1983.7 J != 492.84 J
    fs = [explain.Factor(2), explain.Factor(0.984), explain.Factor(24, "W"), explain.Factor(42, "s")]
    assert explain.identity_line("E_cpu", "n·u·P·t", fs, 492.84, "x") is None
    assert explain.identity_line("E_cpu", "n·u·P·t", fs, 1983.744, "x") == (
        "E_cpu = n·u·P·t = 2 × 0.984 × 24 W × 42 s = 1983.7 J = 0.000551 kWh (x)")


# ---------------------------------------------------------------- 2. defaults on the cards


def test_cards_flag_default_pue_and_ci():
    h = render_html(tdp_cpu_record(defaults=True))
    assert "IT × PUE 1.58 (default)" in h
    assert "CI 475 gCO2e/kWh (default)" in h
    assert "Defaults (no site value configured): pue, alpha, ci" in h


def test_cards_do_not_flag_site_values():
    h = render_html(tdp_cpu_record())
    assert "IT × PUE 1.2<" in h and "CI 100 gCO2e/kWh, offsets excluded<" in h
    assert "(default)" not in h


# --------------------------------------------------------- 3. mean power over measured time


def test_mean_power_of_partly_covered_class_is_over_measured_time():
    # sampler died after 16 % of 100 s: 186 J measured in 16 s -> 186 / (0.16 x 100 s) = 11.625 W
    # (not 186 J / 100 s = 1.86 W, which would count the unmeasured 84 s as 0 W)
    rec = tdp_cpu_record(elapsed=100.0, energy_j=186.0, coverage=0.16)
    cpu = {r["device_class"]: r for r in csv.DictReader(io.StringIO(render_csv(rec)))}["cpu"]
    assert float(cpu["mean_power_W"]) == pytest.approx(11.625)
    assert float(cpu["mean_power_coverage"]) == pytest.approx(0.16)
    h = render_html(rec)
    assert "over the measured 16 % of the job" in h
    assert ">11.6 W<" in h  # card: 3 significant digits


def test_mean_power_fully_covered_has_no_note():
    # 492.84 J / (1.0 x 42 s) = 11.734 W
    rec = tdp_cpu_record()
    assert class_rows(rec)[0].mean_power_w == pytest.approx(492.84 / 42.0)
    assert "over the measured" not in render_html(rec)


def test_total_mean_power_sums_class_powers_over_their_measured_time():
    # CPU 186 J / (0.16 x 100 s) = 11.625 W; RAM 50 J / (1.0 x 100 s) = 0.5 W; total 12.125 W over >= 16 %
    rec = tdp_cpu_record(elapsed=100.0, energy_j=186.0, coverage=0.16)
    rec.nodes[0].devices.append(DeviceEnergy(device_class="ram", device_id="ram-model", method=Method.TDP_ESTIMATE,
                                             energy_j=50.0, duration_s=100.0, coverage=1.0))
    rec.energy_it_j["ram"] = 50.0
    total = class_rows(rec)[-1]
    assert total.mean_power_w == pytest.approx(12.125)
    assert total.mean_power_coverage == pytest.approx(0.16)


# ----------------------------------------------------------- 4. files written independently


def test_html_blocked_by_directory_still_writes_csv(tmp_path):
    os.mkdir(tmp_path / "energy-77.html")  # the user made a directory with the report's name
    rec = tdp_cpu_record()
    with pytest.raises(ReportWriteError) as ei:
        write_reports(rec, str(tmp_path), os.getuid(), os.getgid())
    err = ei.value
    assert isinstance(err, SafeWriteError)
    assert [p for p, _ in err.failures] == [str(tmp_path / "energy-77.html")]
    assert err.written == [str(tmp_path / "energy-77.csv")]
    assert "energy-77.html" in str(err) and "written:" in str(err)
    with open(tmp_path / "energy-77.csv", encoding="utf-8") as f:
        rows = {r["device_class"]: r for r in csv.DictReader(f)}
    # 492.84 J / 3.6e6 = 1.369e-4 kWh
    assert float(rows["total"]["energy_it_kWh"]) == pytest.approx(1.369e-4)


def test_csv_blocked_by_directory_still_writes_html(tmp_path):
    os.mkdir(tmp_path / "energy-77.csv")
    with pytest.raises(ReportWriteError) as ei:
        write_reports(tdp_cpu_record(), str(tmp_path), os.getuid(), os.getgid())
    assert [p for p, _ in ei.value.failures] == [str(tmp_path / "energy-77.csv")]
    with open(tmp_path / "energy-77.html", encoding="utf-8") as f:
        assert "Energy and carbon report — job 77" in f.read()


def test_both_blocked_lists_both(tmp_path):
    os.mkdir(tmp_path / "energy-77.html")
    os.mkdir(tmp_path / "energy-77.csv")
    with pytest.raises(ReportWriteError) as ei:
        write_reports(tdp_cpu_record(), str(tmp_path), os.getuid(), os.getgid())
    assert len(ei.value.failures) == 2 and ei.value.written == []
    assert "nothing written" in str(ei.value)


# --------------------------------------------------------------- 5. Full devices captions


def test_full_device_caption_per_class_and_method():
    h = htmllib.unescape(render_html(sample_record()))
    assert "RAM (tdp_estimate): RAM model: all memory in use on the node × W/GB × time" in h
    assert "CPU (counter): the whole CPU package(s) (RAPL zones) over the job's time, idle and other jobs included" in h
    assert "GPU (unavailable): not measured" in h
    assert "Full devices: the whole physical devices over the job's time" not in h


# ----------------------------------------------------------------------- 6. Hardware section


def test_hardware_from_real_node_static_has_no_raw_dicts():
    cpu = CpuTdpReader(24.0, "AMD EPYC", 2, "fallback: 12 W/core (Green Algorithms)")
    ram = RamModelReader(0.3725, "0.3725 W/GB (site config hardware.ram_w_per_gb)")
    statics = cpu.devices() + ram.devices()
    static = collect_static(statics)
    static["reader_notes"] = ["rapl: /sys/class/powercap absent"]
    static["devices"].append({"device_class": "gpu", "device_id": "GPU-9", "model": "NVIDIA H100", "count": 1,
                              "rated_power_w": 700.0, "rated_power_source": "NVML enforced limit",
                              "extra": {"mig": {"profile": "1g.10gb", "fraction": 0.125}, "minor": [0, 1]}})
    rec = sample_record()
    rec.nodes[0].static = static
    h = render_html(rec)
    hw = h[h.index("<h2>Hardware</h2>"):h.index("<h2>Per-device provenance</h2>")]
    for raw in ("{", "}", "[", "]", "&#39;", "'"):
        assert raw not in hw, raw
    assert static["cpu_model"] and static["cpu_model"] in htmllib.unescape(hw)
    assert "24 W" in hw  # CPU TDP of both cores
    # RAM rated power: 0.3725 W/GB x node GiB, printed %g
    assert f"{statics[1].rated_power_w:g} W" in hw
    assert "rapl: /sys/class/powercap absent" in hw
    assert "mig: profile: 1g.10gb, fraction: 0.125" in hw and "minor: 0, 1" in hw
    assert f">{static['pid']}<" not in hw and "ram total" in hw


# --------------------------------------------------------------------------------------------------
# A share filled by a fallback rule (the job never read on a node, or its last stretch unobserved)
# is said in the report's headline, beside the totals, not only in the per-device flags.

def _headline(page):
    return page[:page.index("<h2>Job</h2>")]


def test_never_observed_job_says_so_in_the_headline():
    rec = finished(job_record(devices=[device("cpu", 360.0, flags=["job_never_observed", "tail_estimated"]),
                                       device("ram", None, flags=["job_never_observed"])]))
    head = re.sub(r"\s+", " ", html.unescape(_headline(render_html(rec))))
    assert "Share not measured:" in head
    assert "the job's processes were never read on n1; its CPU share is a fallback" in head
    assert "its RAM share is a fallback" in head
    assert "the job's last stretch on n1 was not observed; its CPU share there is estimated" in head


def test_a_measured_share_has_no_such_line():
    rec = finished(job_record(devices=[device("cpu", 0.0), device("ram", 1.0)]))
    assert "Share not measured" not in render_html(rec)
