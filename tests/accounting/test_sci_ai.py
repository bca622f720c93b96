"""SCI for AI scores of a training run: SCI = (O + M) / R (ISO/IEC 21031:2024), O location-based
(offsets excluded), R = 10^18 FLOP, a training token, a model parameter, from the job's tags."""

import pytest

from slurm_energy.accounting.formulas import finalise_record
from slurm_energy.accounting.sci import record_scores
from slurm_energy.config.schema import SiteConfig
from slurm_energy.model import CarbonFacts, Method
from slurm_energy.reporting.cite import citation, methods_text
from slurm_energy.reporting.footprint import json_block
from slurm_energy.reporting.report import render_html
from tests.helpers.jobrecord_factory import device, job_record

T = 1_796_036_400.0
H = 3600.0


def run(tags, alpha=0.5):
    # 1 h, GPU 3.6e6 J = 1 kWh IT; PUE 1.5 -> 1.5 kWh; CI 400 -> location-based 600 g (net 300 g at alpha 0.5);
    # embodied: one GPU of 262.8 kg over 3 years (26280 h): 262.8 / 26280 = 0.01 kg = 10 g
    site = SiteConfig(embodied={"gpu": {"Test GPU": {"kgco2e": 262.8}}})
    rec = job_record(job_id="5", devices=[device("gpu", 3.6e6, method=Method.COUNTER, model="Test GPU")],
                     start=T, end=T + H, tags=tags)
    return finalise_record(rec, CarbonFacts(pue=1.5, ci_g_per_kwh=400.0, alpha=alpha), embodied=site.embodied.factors())


def test_scores_per_exaflop_token_parameter():
    r = run({"flops": 3e18, "tokens": 2e6, "model_params": 1e8})
    assert r.co2e_gross_kg == pytest.approx(0.6) and r.embodied_kg == pytest.approx(0.01)
    by = {s.unit: s for s in record_scores(r)}
    # per 1e18 FLOP: O 600 g / 3 = 200 g, M 10 g / 3 = 3.333 g, total 203.33 g (location-based: alpha ignored)
    s = by["1e18 FLOP"]
    assert (s.operational_g, s.embodied_g, s.total_g) == pytest.approx((200.0, 10 / 3, 610 / 3))
    assert by["token"].total_g == pytest.approx(610 / 2e6)  # 3.05e-4 gCO2e per token
    assert by["parameter"].total_g == pytest.approx(610 / 1e8)
    assert by["token"].r_source == "tag tokens"


def test_flops_from_6_n_d_and_absent_without_tags():
    r = run({"tokens": 1e9, "model_params": 1e9})  # 6 x 1e9 x 1e9 = 6e18 FLOP
    by = {s.unit: s for s in record_scores(r)}
    assert by["1e18 FLOP"].r == pytest.approx(6.0) and "6 x" in by["1e18 FLOP"].r_source
    assert by["1e18 FLOP"].total_g == pytest.approx(610 / 6)
    none = run({})
    assert record_scores(none) == [] and "sci_ai" not in json_block(none)  # absent, never 0
    assert "SCI for AI" not in methods_text(citation([none]))


def test_cite_json_and_report_carry_the_scores():
    r = run({"flops": 3e18})
    text = methods_text(citation([r]))
    # location-based 0.6 kg, net 0.3 kg (alpha 0.5), embodied 0.01 kg, 203.3 gCO2e per 1e18 FLOP
    assert "location-based (offsets excluded)" in text and "0.3 kgCO2e" in text
    assert "0.01 kgCO2e" in text and "203.3 gCO2e per 1e18 FLOP" in text
    [ai] = json_block(r)["sci_ai"]
    assert ai["per"] == "1e18 FLOP" and ai["total_g"] == pytest.approx(610 / 3)
    html = render_html(r)
    assert "SCI for AI per 1e18 FLOP: 203.3 gCO2e" in html
    assert "M_gpu" in html and "262.8 kgCO2e × 3600 s / (3 y × 8760 h × 3600 s)" in html
