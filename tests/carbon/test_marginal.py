"""Average and marginal hourly intensity side by side (SCI, ISO/IEC 21031:2024, allows either;
Green-Software-Foundation/sci#370): both imported, each labelled with source and age; the job's CO2e
uses the average unless attribution.intensity says marginal."""

import json

import pytest

from slurm_energy.carbon.hourly import hour_key, import_hourly_csv
from slurm_energy.model import Method
from slurm_energy.pipeline import finalise_job
from slurm_energy.reporting.footprint import json_block, text_lines
from tests.helpers.jobrecord_factory import device, job_record

T = 1_796_036_400.0  # 2026-11-30T11:00:00Z
H = 3600.0
IMPORTED = 1_796_100_000.0  # 2026-12-01T04:40:00Z


@pytest.fixture
def site(site_config, tmp_path):
    """France at PUE 1, attribution by ``intensity``, with an average (50, 70 g/kWh) and a marginal
    (400, 600 g/kWh) hourly series for 2026-11-30 11:00Z and 12:00Z imported into tmp_path/ci."""
    def make(intensity="average"):
        return _with_series(site_config(bare=True, location={"country": "FR"}, pue=1.0,
                                        attribution={"intensity": intensity},
                                        paths={"spool_dir": str(tmp_path), "hourly_ci_dir": str(tmp_path / "ci")}),
                            tmp_path)
    return make


def _with_series(s, tmp_path):
    avg = tmp_path / "avg.csv"
    avg.write_text("timestamp,gco2e_per_kwh\n2026-11-30T11:00:00Z,50\n2026-11-30T12:00:00Z,70\n")
    moer = tmp_path / "moer.csv"
    moer.write_text("timestamp,gco2e_per_kwh\n2026-11-30T11:00:00Z,400\n2026-11-30T12:00:00Z,600\n")
    import_hourly_csv(avg, "FR", s.paths.hourly_ci_dir, source="RTE eCO2mix", now=IMPORTED)
    import_hourly_csv(moer, "FR", s.paths.hourly_ci_dir, kind="marginal", source="WattTime MOER", now=IMPORTED)
    return s


def job():
    # 2 h, 1 kWh IT in each hour, PUE 1
    r = job_record(job_id="3", devices=[device("cpu", 7.2e6, method=Method.COUNTER)], start=T, end=T + 2 * H)
    r.nodes[0].hourly_energy_j = {hour_key(T): 3.6e6, hour_key(T + H): 3.6e6}
    return r


def test_average_attributed_marginal_beside_it(tmp_path, site):
    r = finalise_job([job()], site())
    # average: 1 kWh x 50 + 1 kWh x 70 = 120 g; marginal: 1 x 400 + 1 x 600 = 1000 g
    assert r.co2e_gross_kg == pytest.approx(0.12) and r.co2e_average_kg == pytest.approx(0.12)
    assert r.co2e_marginal_kg == pytest.approx(1.0) and r.carbon.intensity_kind == "average"
    # both labelled with zone, kind, source and age (hours covered, import time)
    assert "zone FR hourly average" in r.carbon.hourly_source and "RTE eCO2mix" in r.carbon.hourly_source
    assert "imported 2026-12-01T04:40Z" in r.carbon.marginal_source and "WattTime MOER" in r.carbon.marginal_source
    lines = text_lines(r)
    assert any(ln.startswith("CO2e by average intensity (attributed): 0.12 kg") for ln in lines)
    assert any(ln.startswith("CO2e by marginal intensity: 1 kg (zone FR hourly marginal") for ln in lines)
    fp = json.loads(json.dumps(json_block(r)))
    assert fp["operational_marginal_kg"] == pytest.approx(1.0) and fp["intensity_kind"] == "average"


def test_marginal_attribution_when_the_site_says_so(tmp_path, site):
    r = finalise_job([job()], site("marginal"))
    assert r.carbon.intensity_kind == "marginal" and r.co2e_gross_kg == pytest.approx(1.0)
    assert r.co2e_average_kg == pytest.approx(0.12)  # still shown beside it


def test_marginal_series_not_covering_the_job_is_absent_not_zero(tmp_path, site):
    s = site("marginal")
    r = job()
    r.nodes[0].hourly_energy_j = {hour_key(T): 3.6e6, hour_key(T + 5 * H): 3.6e6}  # an hour without MOER
    f = finalise_job([r], s)
    assert f.co2e_marginal_kg is None and f.carbon.intensity_kind == "average"  # falls back to average, labelled
