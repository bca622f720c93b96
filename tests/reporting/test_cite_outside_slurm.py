"""A citation states only what the record holds, in words that fit where it ran: a laptop run is
not "the Slurm cluster's nodes"; every class estimated reads "estimated"; no training_type unless
asked or named; the location is a place, not a source sentence; a default PUE/CI is said.

The laptop run by hand: CPU 7.2e4 J = 0.02 kWh and RAM 3.6e3 J = 0.001 kWh, both tdp_estimate;
IT 0.021 kWh x default PUE 1.58 = 0.03318 kWh facility x default CI 475 g/kWh = 15.76 gCO2e."""

import pytest

from slurm_energy.accounting.formulas import finalise_record
from slurm_energy.config.overrides import GIVEN_DATACENTER
from slurm_energy.model import CarbonFacts, Method
from slurm_energy.reporting.cite import citation, model_card_data, render
from tests.helpers.jobrecord_factory import device, job_record

T0 = 1_796_034_000.0  # 2026-11-30


def laptop(carbon=None):
    rec = job_record(job_id="bert-20261130T102000-4242", node="laptop", start=T0, end=T0 + 600,
                     expected=("laptop",), account="", partition="", cluster="local",
                     devices=[device("cpu", 7.2e4, node="laptop", device_id="cpu-tdp"),
                              device("ram", 3.6e3, node="laptop", device_id="ram-model")],
                     node_fields={"cpu_time_source": "procfs"})
    return finalise_record(rec, carbon or CarbonFacts(defaults_used=["pue", "ci"]))


def test_laptop_run_is_not_cited_as_a_slurm_cluster():
    c = citation([laptop()])
    assert c.it_kwh == pytest.approx(0.021) and c.facility_kwh == pytest.approx(0.03318)
    assert c.co2e_kg * 1000 == pytest.approx(15.7605)
    text = render(c, "text")
    assert "Slurm" not in text.replace("outside Slurm", "")
    assert "were estimated (no energy reading existed: rated power x utilisation x time) with slurm-energy" in text
    assert "on host laptop (a process tree measured outside Slurm)" in text
    assert "Energy and emissions of run bert-20261130T102000-4242 (" in text and " job" not in text


def test_model_card_all_estimated_no_unasked_training_type_no_source_as_location():
    co2 = model_card_data(citation([laptop()]))["co2_eq_emissions"]
    assert co2["emissions"] == pytest.approx(15.7605, abs=1e-6)
    assert co2["source"].startswith("slurm-energy 0.1.0 (estimated: cpu=tdp_estimate, ram=tdp_estimate; "
                                    "default PUE 1.58, CI 475 gCO2e/kWh; runs bert-20261130T102000-4242)")
    assert "partly" not in co2["source"]
    assert "training_type" not in co2  # nothing asked, the label names no training type
    assert "geographical_location" not in co2  # the world-average default names no place
    asked = model_card_data(citation([laptop()], training_type="fine-tuning"))["co2_eq_emissions"]
    assert asked["training_type"] == "fine-tuning"


def test_location_is_the_country_given_not_the_word_given():
    fr = CarbonFacts(pue=1.0, pue_source="track() pue=1", ci_g_per_kwh=56.0, datacenter=GIVEN_DATACENTER,
                     ci_source="datacenter given location country FR: Ember 2023 FR lifecycle 56 gCO2e/kWh")
    co2 = model_card_data(citation([laptop(fr)]))["co2_eq_emissions"]
    assert co2["geographical_location"] == "FR"
    assert "default" not in co2["source"]


def test_one_line_citation_says_pue_and_ci_were_defaults():
    line = render(citation([laptop()]), "line")
    assert line == ("slurm-energy 0.1.0: run bert-20261130T102000-4242, 0.021 kWh IT / 0.03318 kWh facility, "
                    "15.76 gCO2e with default PUE 1.58 and CI 475 gCO2e/kWh, estimated 2026-11-30 "
                    "(runs bert-20261130T102000-4242).")


def test_a_slurm_job_still_says_the_cluster():
    rec = laptop()
    rec.nodes[0].cpu_time_source = "cgroup-v2"
    assert "on the Slurm cluster's nodes" in render(citation([rec]), "text")
    assert citation([rec]).defaults == ["PUE 1.58", "CI 475 gCO2e/kWh"]
    assert Method.TDP_ESTIMATE in rec.methods.values()
