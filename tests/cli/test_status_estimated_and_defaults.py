"""A job whose every device class was only estimated says so (complete(estimated)) in jobenergy, -l,
the HTML/CSV report and the rollup, read from the store's summary row and from the full record alike;
PUE and CI left at their documented defaults are shown with their values in -l and the CSV report."""

import csv
import io

import pytest

from slurm_energy.cli.jobenergy import main
from slurm_energy.cli.jobenergy_format import caveat_rows
from slurm_energy.core import status_text
from slurm_energy.model import Method, Status
from slurm_energy.reporting.monthly import top_jobs
from slurm_energy.reporting.report import render_csv, render_html
from tests.helpers.jobrecord_factory import device, finished, job_record, node_record, store_with

T0 = 1_700_000_000.0
C, T, U, P = Method.COUNTER, Method.TDP_ESTIMATE, Method.UNAVAILABLE, Method.POWER_INTEGRATION


@pytest.mark.parametrize("status, covered, methods, energy, expect", [
    (Status.COMPLETE, True, {"cpu": C, "ram": T}, {"cpu": 1.0, "ram": 1.0}, "complete"),  # one class measured
    (Status.COMPLETE, True, {"cpu": T, "ram": T}, {"cpu": 1.0, "ram": 1.0}, "complete(estimated)"),
    (Status.COMPLETE, True, {"gpu": P}, {"gpu": 1.0}, "complete"),
    (Status.COMPLETE, False, {"cpu": T, "gpu": U}, {"cpu": 1.0, "gpu": None}, "complete(partial-coverage,estimated)"),
    (Status.COMPLETE, False, {"cpu": U}, {"cpu": None}, "complete(partial-coverage)"),  # nothing estimated
    (Status.COMPLETE, False, {"cpu": C, "gpu": U}, {"cpu": 1.0, "gpu": None}, "complete(partial-coverage)"),
    (Status.PARTIAL, True, {"cpu": T}, {"cpu": 1.0}, "partial"),  # only complete gets qualifiers
    (Status.RUNNING, True, {"cpu": T}, {"cpu": 1.0}, "running"),
    ("complete", True, {"cpu": "tdp_estimate"}, {"cpu": 1.0}, "complete(estimated)"),  # a summary row's strings
])
def test_status_text(status, covered, methods, energy, expect):
    assert status_text(status, covered, methods, energy) == expect


def _measured_cpu(job_id: str):
    """cpu by RAPL counter 3.6e6 J (1 kWh), ram by the TDP model 3.6e5 J (0.1 kWh)."""
    return finished(job_record(job_id, [device("cpu", 3.6e6, method=C), device("ram", 3.6e5)],
                               start=T0, end=T0 + 3600))


def _defaults(rec):
    """rec with the documented default PUE 1.58 and CI 475 gCO2e/kWh, as resolve_carbon leaves them
    when site.yaml sets neither: IT 1 kWh -> facility 1.58 kWh -> 1.58 x 475 g = 0.7505 kg."""
    out = finished(rec, pue=1.58, ci=475.0)
    out.carbon.defaults_used = ["pue", "ci", "alpha"]
    return out


@pytest.fixture
def url(tmp_path, site_config, monkeypatch):
    site_config.write(bare=True, cluster_name="c1")
    return store_with(tmp_path,
                      finished(node_record(job_id="1", start=T0, end=T0 + 3600)),  # cpu + ram: TDP model only
                      _measured_cpu("2"),
                      _defaults(node_record(job_id="3", start=T0, end=T0 + 3600, cpu_j=3.6e6, ram_j=0.0)))


@pytest.mark.parametrize("extra", [[], ["-o", "JobID,Status,Errors"]])  # summary row / full record (Errors)
def test_table_status_from_the_store_row_and_the_full_record(url, capsys, extra):
    argv = ["--store", url, "-P", "-n", "-o", "JobID,Status", "-S", "2023-11-14"] + extra
    assert main(argv) == 0
    rows = [ln.split("|")[:2] for ln in capsys.readouterr().out.split()]
    assert rows == [["1", "complete(estimated)"], ["2", "complete"], ["3", "complete(estimated)"]]


def test_state_filter_complete_still_selects_estimated_jobs(url, capsys):
    assert main(["--store", url, "-P", "-n", "-o", "JobID", "-S", "2023-11-14", "-s", "complete"]) == 0
    assert capsys.readouterr().out.split() == ["1", "2", "3"]


@pytest.mark.parametrize("state, expect", [("estimated", ["1", "3"]), ("partial-coverage", []),
                                           ("estimated,CD", ["1", "3"]), ("partial-coverage,complete", ["1", "2", "3"])])
def test_state_filter_by_qualifier(url, capsys, state, expect):
    assert main(["--store", url, "-P", "-n", "-o", "JobID", "-S", "2023-11-14", "-s", state]) == 0
    assert capsys.readouterr().out.split() == expect


def test_qualifier_filter_matches_a_combined_status():
    from slurm_energy.cli.jobenergy_select import parse_states, state_matches

    r = finished(node_record(ram_j=None))  # cpu TDP model, ram unmeasured
    r.coverage_complete = False  # -> complete(partial-coverage,estimated)
    assert state_matches(r, parse_states(["estimated"])) and state_matches(r, parse_states(["partial-coverage"]))
    assert not state_matches(_measured_cpu("2"), parse_states(["estimated"]))


def test_long_rows_for_estimated_status_and_default_pue_ci(url, capsys):
    assert main(["--store", url, "-P", "-n", "-l", "3"]) == 0
    rows = [ln.split("|") for ln in capsys.readouterr().out.splitlines()]
    assert [r[2] for r in rows] == ["cpu", "ram", "status", "pue", "ci"]
    assert rows[2] == ["3", "-", "status", "complete(estimated)", "", "", "tdp_estimate", "1", "", "", "", "", "",
                       "", "", "every class with energy estimated: rated power x utilisation x time, no counter "
                       "or power reading"]
    # Energy_kWh is IT energy in every row (1 kWh above): the facility 1 x 1.58 = 1.58 kWh is in the text
    assert rows[3] == ["3", "-", "pue", "1.58", "default", "", "", "", "", "", "", "", "", "", "",
                       "facility kWh 1.58 = IT x PUE 1.58; industry average PUE 1.58 (Uptime Institute "
                       "Global Data Center Survey 2023); set pue in site.yaml"]
    assert rows[4] == ["3", "-", "ci", "475 gCO2e/kWh", "default", "", "", "", "", "", "", "", "", "", "",
                       "kgCO2e 0.7505 = facility kWh x CI; world average 475 gCO2e/kWh (IEA Global Energy & CO2 "
                       "Status Report 2019); set location.country or carbon_intensity in site.yaml"]


def test_no_caveat_rows_for_a_measured_job_with_site_values():
    assert caveat_rows(_measured_cpu("2"), "2") == []  # site PUE 1.5 / CI 400 (finished), cpu counter


def test_csv_report_status_and_default_columns():
    rows = list(csv.DictReader(io.StringIO(render_csv(_defaults(node_record(cpu_j=3.6e6, ram_j=0.0))))))
    assert [(r["device_class"], r["status"], r["pue_default"], r["ci_default"]) for r in rows] == [
        ("cpu", "complete(estimated)", "true", "true"), ("ram", "complete(estimated)", "true", "true"),
        ("total", "complete(estimated)", "true", "true")]
    assert float(rows[-1]["facility_kWh"]) == pytest.approx(1.58) and float(rows[-1]["pue"]) == 1.58
    measured = list(csv.DictReader(io.StringIO(render_csv(_measured_cpu("2")))))
    assert {(r["status"], r["pue_default"], r["ci_default"]) for r in measured} == {("complete", "false", "false")}


def test_html_report_says_estimated():
    html = render_html(finished(node_record()))
    assert "<tr><th>Measurement</th><td>complete(estimated)" in html
    assert "<strong>Estimated:</strong> no energy counter or power reading was available" in html
    html = render_html(_measured_cpu("2"))
    assert "<tr><th>Measurement</th><td>complete" in html and "<strong>Estimated:</strong>" not in html


def test_rollup_top_jobs_status():
    tops = top_jobs([finished(node_record(job_id="1")), _measured_cpu("2")])
    assert {t["job_id"]: t["status"] for t in tops} == {"1": "complete(estimated)", "2": "complete"}


def test_default_ci_row_gives_the_site_yaml_hint_once():
    """config/carbon.py's default CI source already ends with where to set it: the -l ci row
    showed it, then "; set location.country or carbon_intensity in site.yaml" again."""
    from slurm_energy.config import SiteConfig
    from slurm_energy.config.carbon import _ci_for

    rec = _defaults(node_record(cpu_j=3.6e6, ram_j=0.0))  # IT 1 kWh -> facility 1.58 kWh -> 0.7505 kg
    rec.carbon.ci_source = _ci_for(SiteConfig(), "", None, "n1", True)["ci_source"]  # what a job gets
    [ci] = [r for r in caveat_rows(rec, "7") if r[2] == "ci"]
    assert ci[-1] == ("kgCO2e 0.7505 = facility kWh x CI; world average 475 gCO2e/kWh (IEA Global Energy & CO2 Status "
                      "Report 2019); no datacenter, site location or geolocation configured -- set location.country "
                      "or datacenters.<name>.carbon_intensity in site.yaml")
    assert ci[-1].count("in site.yaml") == 1
