"""reporting/rollup_table.py through ``slurm-energy rollup``: the month's bounds in the site's time zone,
the split of a job across months; --format csv|json|html, --by partition: the rollup's numbers, measured vs estimated."""

from __future__ import annotations

import csv
import getpass
import json
import re
from datetime import datetime, timezone

import pytest

from slurm_energy.accounting.summary import summarise_node
from slurm_energy.carbon.hourly import write_zone
from slurm_energy.cli.main import main as se_main
from slurm_energy.model import JobRecord, Method
from slurm_energy.pipeline import finalise_job
from slurm_energy.reporting.rollup_table import month_bounds
from slurm_energy.store import open_store
from tests.helpers.jobrecord_factory import finished, node_record, store_with
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
def url(tmp_path, site_config, monkeypatch):
    site_config.write(bare=True, cluster_name="c1", offline=True)
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


# --------------------------------------------------------------------------------------------------
# Issue 9 item 2: rollups split by time. A job across a month's boundary is charged to each month
# the energy (and CO2e) it used in that month; the months' bounds are in the site's time zone.
#
# Real path: RAPL counter samples -> accounting.summary.summarise_node (hourly energy) ->
# pipeline.finalise_job (site carbon facts) -> store -> ``slurm-energy rollup`` CLI.

HEAD = "user|Jobs|Attempts|Unmeasured|IT_kWh|Facility_kWh|kgCO2e|Measured_IT_kWh|Estimated_IT_kWh|GPU_idle_kWh"


def _t(s: str) -> float:
    return datetime.fromisoformat(s).replace(tzinfo=timezone.utc).timestamp()


def _site(site_config, tz: str, **more):
    """Cluster c1, PUE 1.2, offline, months in time zone ``tz``, this user an admin (rollups are theirs)."""
    return site_config(cluster_name="c1", pue=1.2, offline=True, timezone=tz, admins=[getpass.getuser()], **more)


def _stored_job(tmp_path, site, start: float, end: float, watts: float = 100.0, job_id: str = "1") -> str:
    """A one-node job at constant ``watts`` on one RAPL zone (job holds all the node's CPU time),
    sampled every 600 s, finalised and stored. Returns the store URL."""
    rows = [{"t": start + t, "kind": "sample", "job": {"cpu_time_s": float(t), "pids": [1], "source": "cgroup-v1"},
             "node": {"cpu_busy_s": float(t), "cpu_total_s": 2.0 * t, "ncpu": 2},
             "readings": [{"device_class": "cpu", "device_id": "intel-rapl:0", "method": "counter",
                           "energy_uj": int(watts * t * 1e6)}]}
            for t in range(0, int(end - start) + 1, 600)]
    ns = summarise_node(rows, job_id=job_id, node="n1", start_time=start, end_time=end)
    rec = JobRecord(cluster="c1", job_id=job_id, user="alice", account="phys", partition="batch",
                    start_time=start, end_time=end, expected_nodes=["n1"], nodes=[ns])
    final = finalise_job([rec], site)
    url = f"sqlite:///{tmp_path}/store.db"
    s = open_store(url)
    s.put(final)
    s.close()
    return url


def _rollup(url: str, month: str, capsys) -> list[list[str]]:
    rc = se_main(["rollup", "--month", month, "--by", "user", "-P", "--store", url])
    out = capsys.readouterr()
    assert rc == 0, out.err
    lines = out.out.strip().splitlines()
    # Embodied_kgCO2e follows where a job had embodied CO2e (the bundled CPU and chassis factors): not checked here
    assert lines[0].removesuffix("|Embodied_kgCO2e") == HEAD
    rows = [ln.split("|")[:len(HEAD.split("|"))] for ln in lines[1:]]
    assert all(r[2] == r[1] for r in rows)  # Attempts = Jobs: one attempt per job in these stores
    return [r[:2] + r[3:] for r in rows]  # without Attempts: the columns below as before


def test_job_across_month_end_utc_is_charged_half_to_each_month(tmp_path, site_config, capsys):
    site = _site(site_config, "UTC")
    # 2026-10-31 23:00Z .. 2026-11-01 01:00Z at 100 W: 100 W x 7200 s = 720000 J = 0.2 kWh IT;
    # 1 h in October (0.1 kWh), 1 h in November (0.1 kWh)
    url = _stored_job(tmp_path, site, _t("2026-10-31T23:00:00"), _t("2026-11-01T01:00:00"))
    [rec] = open_store(url).get_job("1")
    assert rec.it_kwh == pytest.approx(0.2)
    ci = rec.carbon.ci_g_per_kwh
    for month in ("2026-10", "2026-11"):
        [row] = _rollup(url, month, capsys)
        # per month: 0.1 kWh IT, x PUE 1.2 = 0.12 kWh facility, x CI g/kWh / 1000 kg
        assert row[:3] == ["alice", "1", "0"]
        assert float(row[3]) == pytest.approx(0.1, rel=1e-3)
        assert float(row[4]) == pytest.approx(0.12, rel=1e-3)
        assert float(row[5]) == pytest.approx(0.12 * ci / 1000, rel=1e-3)
        assert float(row[6]) == pytest.approx(0.1, rel=1e-3)  # RAPL counter: measured
    assert ci == pytest.approx(475.0)  # the world default (no location): 0.12 x 475 / 1000 = 0.057 kg
    assert _rollup(url, "2026-09", capsys) == []  # not counted in a month it never ran in


def test_site_time_zone_moves_the_month_boundary(tmp_path, site_config, capsys):
    site = _site(site_config, "Europe/Berlin")
    # Berlin (CET, UTC+1) starts November at 2026-10-31 23:00Z: the whole job is November's
    assert month_bounds("2026-11", "Europe/Berlin")[0] == _t("2026-10-31T23:00:00")
    url = _stored_job(tmp_path, site, _t("2026-10-31T23:00:00"), _t("2026-11-01T01:00:00"))
    [row] = _rollup(url, "2026-11", capsys)
    assert float(row[3]) == pytest.approx(0.2, rel=1e-3) and float(row[4]) == pytest.approx(0.24, rel=1e-3)
    assert float(row[5]) == pytest.approx(0.24 * 475 / 1000, rel=1e-3)  # 0.114 kg
    assert _rollup(url, "2026-10", capsys) == []  # ended exactly at October's end: nothing charged
    # the header names the zone and the bounds in UTC (stdout without -P)
    assert se_main(["rollup", "--month", "2026-11", "--store", url]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith(
        "# rollup 2026-11, time zone Europe/Berlin (2026-10-31T23:00Z .. 2026-11-30T23:00Z)")


def test_job_across_dst_change_counts_its_real_hours(tmp_path, site_config, capsys):
    site = _site(site_config, "Europe/Berlin")
    # Berlin October 2026: 2026-09-30 22:00Z (CEST) .. 2026-10-31 23:00Z (CET): 31 days + 1 h
    t0, t1 = month_bounds("2026-10", "Europe/Berlin")
    assert (t0, t1 - t0) == (_t("2026-09-30T22:00:00"), 31 * 86400 + 3600)
    # 2026-10-25 00:00Z .. 02:00Z = 02:00 CEST .. 03:00 CET local (clocks go back at 01:00Z): one
    # local hour on the clock, two real hours: 100 W x 7200 s = 0.2 kWh, all October's
    url = _stored_job(tmp_path, site, _t("2026-10-25T00:00:00"), _t("2026-10-25T02:00:00"))
    [row] = _rollup(url, "2026-10", capsys)
    assert float(row[3]) == pytest.approx(0.2, rel=1e-3)
    assert _rollup(url, "2026-11", capsys) == []


def test_hourly_intensity_splits_co2e_by_each_months_hours(tmp_path, site_config, capsys):
    ci_dir = tmp_path / "ci"
    # October's last hour 100 g/kWh, November's first hour 300 g/kWh (imported for zone FR)
    write_zone(str(ci_dir), "FR", {"2026-10-31T23:00:00Z": 100.0, "2026-11-01T00:00:00Z": 300.0})
    site = _site(site_config, "UTC", location={"country": "FR"}, paths={"hourly_ci_dir": str(ci_dir)})
    url = _stored_job(tmp_path, site, _t("2026-10-31T23:00:00"), _t("2026-11-01T01:00:00"))
    [rec] = open_store(url).get_job("1")
    assert rec.carbon.hourly is True
    # each hour 0.1 kWh IT x 1.2 = 0.12 kWh facility: Oct 0.12 x 100 / 1000 = 0.012 kg,
    # Nov 0.12 x 300 / 1000 = 0.036 kg (the job's 0.048 kg; alpha 1)
    assert rec.co2e_kg == pytest.approx(0.048)
    [oct_row] = _rollup(url, "2026-10", capsys)
    [nov_row] = _rollup(url, "2026-11", capsys)
    assert float(oct_row[5]) == pytest.approx(0.012, rel=1e-3)
    assert float(nov_row[5]) == pytest.approx(0.036, rel=1e-3)
    assert float(oct_row[3]) == pytest.approx(0.1, rel=1e-3) and float(nov_row[3]) == pytest.approx(0.1, rel=1e-3)
