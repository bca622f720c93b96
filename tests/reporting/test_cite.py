"""--cite / result().cite(): the methods paragraph, the citation line and the Hugging Face
model-card block, for one job, several, the jobs of one track(label=...) and one phase of them;
the block parsed back by huggingface_hub. Values by hand:

job 7 (label 'bert'): GPU 3.6e6 J = 1 kWh (power_integration), CPU 3.6e5 J = 0.1 kWh (counter);
IT 1.1 kWh, x PUE 1.5 = 1.65 kWh facility, x 400 gCO2e/kWh = 660 g. Its phase 'fine-tuning':
GPU 1.8e6 J = 0.5 kWh; facility 0.75 kWh; CO2e 660 g x 0.5 / 1.1 = 300 g.
job 8 (label 'bert'): the same job again: the two together 2.2 kWh IT, 1320 g; fine-tuning 600 g.
"""

import pytest

from slurm_energy.accounting.formulas import finalise_record
from slurm_energy.api import Result
from slurm_energy.cli.jobenergy import main
from slurm_energy.config.overrides import GIVEN_DATACENTER
from slurm_energy.model import CarbonFacts, Method, WindowEnergy
from slurm_energy.reporting.cite import CiteError, citation, methods_latex, model_card_data, model_card_yaml, render
from slurm_energy.store import open_store
from tests.helpers.jobrecord_factory import device, job_record

T0 = 1_796_034_000.0  # 2026-11-30


def job(job_id="7", label="bert"):
    devs = [device("cpu", 3.6e5, method=Method.COUNTER, device_id="intel-rapl:0"),
            device("gpu", 3.6e6, method=Method.POWER_INTEGRATION, device_id="GPU-0", model="NVIDIA A100-SXM4-80GB")]
    rec = job_record(job_id=job_id, devices=devs, start=T0, end=T0 + 3600)
    rec = finalise_record(rec, CarbonFacts(pue=1.5, pue_source="site.yaml pue", ci_g_per_kwh=400.0,
                                           ci_source="site.yaml carbon_intensity", datacenter="dc-paris"))
    rec.phases = [WindowEnergy(kind="phase", name=label, start_time=T0, end_time=T0 + 3600,
                               energy_it_j={"cpu": 3.6e5, "gpu": 3.6e6}, methods={"cpu": Method.COUNTER,
                               "gpu": Method.POWER_INTEGRATION}, it_j=3.96e6, coverage=1.0, co2e_kg=0.66),
                  WindowEnergy(kind="phase", name="fine-tuning", start_time=T0 + 1800, end_time=T0 + 3600, depth=1,
                               energy_it_j={"gpu": 1.8e6}, methods={"gpu": Method.POWER_INTEGRATION}, it_j=1.8e6,
                               coverage=1.0, co2e_kg=0.3)]
    return rec


def test_one_job_texts():
    c = citation([job()])
    assert c.it_kwh == pytest.approx(1.1) and c.facility_kwh == pytest.approx(1.65) and c.co2e_kg == pytest.approx(0.66)
    text = render(c, "text")
    assert "IT energy 1.1 kWh" in text and "GPU 1 kWh (integrated from sampled power, 100 % of the time measured)" in text
    assert "CPU 0.1 kWh (read from the hardware's energy counter" in text
    assert "PUE 1.5 (site.yaml pue)" in text and "400 gCO2e/kWh (site.yaml carbon_intensity)" in text
    assert "1 x NVIDIA A100-SXM4-80GB" in text and "2026-11-30" in text and "slurm-energy 0.1.0" in text
    latex = methods_latex(c)
    assert r"g\,CO$_2$e/kWh" in latex and r"100 \%" in latex and r"carbon\_intensity" in latex
    line = render(c, "line")
    assert line.startswith("slurm-energy 0.1.0: job 7, 1.1 kWh IT / 1.65 kWh facility, 660 gCO2e")


def test_model_card_block_parses_back_with_huggingface_hub(tmp_path):
    from huggingface_hub import ModelCard, ModelCardData, metadata_load

    c = citation([job("7"), job("8")], phase="fine-tuning", label="bert")
    card = tmp_path / "README.md"
    card.write_text(model_card_yaml(c) + "\n# bert\n")
    meta = metadata_load(card)
    co2 = ModelCardData(**meta).co2_eq_emissions
    assert co2["emissions"] == pytest.approx(600.0)  # 2 x 300 g
    assert co2["training_type"] == "fine-tuning"
    assert co2["geographical_location"] == "dc-paris"
    assert co2["hardware_used"] == "1 x NVIDIA A100-SXM4-80GB"  # both jobs ran on n1's GPU-0: one GPU used
    assert co2["source"].startswith("slurm-energy 0.1.0 (measured: gpu=power_integration; jobs 7, 8)")
    assert ModelCard.load(card).data.co2_eq_emissions["emissions"] == pytest.approx(600.0)


def test_unknown_phase_is_named():
    with pytest.raises(CiteError, match="'pretrain'.*they have: bert, fine-tuning"):
        citation([job()], phase="pretrain")
    with pytest.raises(CiteError, match="no job selected"):
        citation([])


def test_result_cite():
    r = Result.from_record(job(), True, "local sampler")
    assert "300 gCO2e" in r.cite(phase="fine-tuning", fmt="line")
    assert "co2_eq_emissions:" in r.cite(fmt="modelcard")
    with pytest.raises(CiteError, match="nothing to cite"):
        Result(final=False, source="unavailable", note="see jobenergy 9").cite()


def test_jobenergy_cite_jobs_label_and_phase(tmp_path, site_config, monkeypatch, capsys):
    site_config.write(bare=True, cluster_name="c1")
    url = f"sqlite:///{tmp_path}/jobs.db"
    s = open_store(url)
    for k in ("7", "8"):
        s.put(job(k))
    s.put(job("9", label="other"))
    s.close()
    assert main(["--cite", "7", "--store", url, "--cite-format", "line"]) == 0
    assert "job 7, 1.1 kWh IT / 1.65 kWh facility, 660 gCO2e" in capsys.readouterr().out
    # root (an admin) cites the users' run: -a (a label alone is the admin's own runs)
    assert main(["--cite", "--label", "bert", "-a", "--store", url, "--cite-format", "line"]) == 0
    out = capsys.readouterr().out
    assert "2 jobs of the run set track(label='bert'), 2.2 kWh IT / 3.3 kWh facility, 1320 gCO2e" in out
    assert "(jobs 7, 8)" in out
    assert main(["--cite", "--label", "bert", "-a", "--phase", "fine-tuning", "--store", url]) == 0
    out = capsys.readouterr().out
    assert "== methods (LaTeX) ==" in out and "emissions: 600.0" in out and "training_type: fine-tuning" in out
    assert main(["--cite", "--label", "nothing", "--store", url]) == 1
    assert "no job selected" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------------
# A citation states only what the record holds, in words that fit where it ran: a laptop run is
# not "the Slurm cluster's nodes"; every class estimated reads "estimated"; no training_type unless
# asked or named; the location is a place, not a source sentence; a default PUE/CI is said.
#
# The laptop run by hand: CPU 7.2e4 J = 0.02 kWh and RAM 3.6e3 J = 0.001 kWh, both tdp_estimate;
# IT 0.021 kWh x default PUE 1.58 = 0.03318 kWh facility x default CI 475 g/kWh = 15.76 gCO2e.

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


def test_hardware_used_counts_each_node_and_gpu_once():
    """Two jobs on one node used one node's hardware (a tester's card said "2 nodes" for two jobs on
    n1); a third on another node adds that node and its GPU."""
    from slurm_energy.reporting.cite import _hardware

    a, b, c = job("7"), job("8"), job("9")
    c.nodes[0].node = "n2"
    for r in (a, b, c):
        r.nodes[0].static = {**(r.nodes[0].static or {}), "cpu_model": "AMD EPYC 7742"}
    assert _hardware([a, b]) == ["1 x NVIDIA A100-SXM4-80GB", "1 node with AMD EPYC 7742"]
    assert _hardware([a, b, c]) == ["2 x NVIDIA A100-SXM4-80GB", "2 nodes with AMD EPYC 7742"]
