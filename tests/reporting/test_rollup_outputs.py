"""slurm-energy rollup --format csv|json|html, --by partition: the rollup's numbers, measured vs estimated."""

from __future__ import annotations

import csv
import json
import re

import pytest

from slurm_energy.cli.main import main as se_main
from slurm_energy.model import Method
from slurm_energy.reporting.rollup_table import month_bounds
from tests.helpers.jobrecord_factory import finished, node_record, own_site_config, store_with
from tests.helpers.rollup_oracle import rollup

T0, T1 = month_bounds("2024-02")


def _recs():
    # job 1 (gpu partition): cpu 3.6e6 J TDP model (1 kWh estimated) + gpu 7.2e6 J NVML counter (2 kWh measured)
    #   + ram 3.6e5 J TDP (0.1 kWh) -> IT 3.1 kWh, measured 2, estimated 1.1; x PUE 1.5 = 4.65; x 400 = 1.86 kg
    # job 2 (cpu partition): cpu 3.6e6 + ram 3.6e5 J, both TDP -> IT 1.1 kWh, all estimated; 0.66 kg
    # job 3 (cpu partition): nothing measured -> counted as unmeasured, never summed as 0
    return [finished(node_record(job_id="1", partition="gpu", gpu_j=7.2e6, start=T0 + 10, end=T0 + 3610)),
            finished(node_record(job_id="2", partition="cpu", start=T0 + 10, end=T0 + 3610)),
            finished(node_record(job_id="3", partition="cpu", cpu_j=None, ram_j=None, start=T0, end=T0 + 9))]


def test_rollup_splits_measured_and_estimated():
    rows = {r["partition"]: r for r in rollup(_recs(), "partition", T0, T1).to_dict("records")}
    assert rows["gpu"]["it_kwh"] == pytest.approx(3.1)
    assert rows["gpu"]["measured_it_kwh"] == pytest.approx(2.0)
    assert rows["gpu"]["estimated_it_kwh"] == pytest.approx(1.1)
    assert rows["cpu"]["measured_it_kwh"] is None and rows["cpu"]["estimated_it_kwh"] == pytest.approx(1.1)
    assert rows["cpu"]["jobs"] == 2 and rows["cpu"]["unmeasured_jobs"] == 1


@pytest.fixture
def url(tmp_path, monkeypatch):
    own_site_config(tmp_path, monkeypatch, "cluster_name: c1\noffline: true\n")
    return store_with(tmp_path, *_recs())


def test_csv_and_json(url, tmp_path, capsys):
    assert se_main(["rollup", "--month", "2024-02", "--by", "partition", "--format", "csv", "--store", url]) == 0
    rows = {r["partition"]: r for r in csv.DictReader(capsys.readouterr().out.splitlines())}
    assert float(rows["gpu"]["measured_it_kwh"]) == pytest.approx(2.0)
    assert rows["cpu"]["measured_it_kwh"] == ""  # unmeasured part: empty, not 0
    out = tmp_path / "r.json"
    assert se_main(["rollup", "--month", "2024-02", "--by", "partition", "--format", "json", "--out", str(out),
                    "--store", url]) == 0
    doc = json.loads(out.read_text())
    gpu = next(r for r in doc["rows"] if r["partition"] == "gpu")
    assert gpu["co2e_kg"] == pytest.approx(1.86) and gpu["estimated_it_kwh"] == pytest.approx(1.1)
    assert "estimated_it_kwh: TDP model" in doc["note"]


def test_html_report(url, tmp_path):
    out = tmp_path / "m.html"
    assert se_main(["rollup", "--month", "2024-02", "--by", "partition", "--format", "html", "--out", str(out),
                    "--store", url]) == 0
    html = out.read_text()
    assert html.count("<svg") == 1 and "measured (counter / sampled power)" in html  # the bar charts
    # totals: 3 jobs, 1 unmeasured, IT 3.1 + 1.1 = 4.2 kWh (measured 2, estimated 2.2), facility 6.3,
    # 2.52 kg location-based = net (alpha 1), no embodied factor for the factory's devices: n/a (never 0)
    m = re.search(r"<h2>Totals</h2>.*?<tr><td>(.*?)</tr>", html, re.S)
    cells = re.findall(r"<td>(.*?)</td>", m.group(0).split("</tr>", 1)[1])
    assert cells == ["3", "3", "1", "4.2", "2", "2.2", "6.3", "2.52", "2.52", '<span class="na">n/a</span>']  # 3 jobs, 3 attempts
    # top jobs: job 1 first; method coverage; the PUE/CI used (factory: PUE 1.5, 400 g/kWh)
    top = html.split("<h2>Top jobs by IT energy</h2>")[1]
    assert top.index("<td>1</td>") < top.index("<td>2</td>")
    assert '<td>gpu</td><td><span class="method counter">counter</span></td><td>1</td>' in html
    assert "<td>3</td><td>1.5</td>" in html and "<td>400</td>" in html


def test_unwritable_out_is_exit_2_with_the_path(url, tmp_path, capsys):
    bad = tmp_path / "no-dir" / "m.html"
    assert se_main(["rollup", "--month", "2024-02", "--format", "html", "--out", str(bad), "--store", url]) == 2
    assert str(bad) in capsys.readouterr().err


def test_method_enum_equality_used_by_rollup():
    assert Method.COUNTER == "counter"  # rollup compares stored methods to their values
