"""Embodied emissions per job by SCI (ISO/IEC 21031:2024): M = TE x (TS / EL) x RS, with the bundled
BoaviztAPI factors (slurm_energy/carbon/data/embodied.csv) and a site's overrides."""

import pytest

from slurm_energy.accounting.formulas import finalise_record
from slurm_energy.carbon.embodied import bundled_factors, embodied_kg, find_factor
from slurm_energy.config.schema import SiteConfig
from slurm_energy.model import CarbonFacts, Method
from tests.helpers.jobrecord_factory import device, job_record

T = 1_796_036_400.0
H = 3600.0
Y = 8760.0  # hours a year


def test_issue_example_2h_on_one_gpu_150kg_over_5_years():
    # M = 150 kgCO2e x (2 h / (5 x 8760 h)) x 1 = 0.0068493 kg
    assert embodied_kg(150.0, 2 * H, 5.0) == pytest.approx(150 * 2 / (5 * Y))
    site = SiteConfig(embodied={"gpu": {"TestGPU": {"kgco2e": 150, "lifetime_years": 5, "source": "vendor PCF"}}})
    rec = job_record(job_id="1", devices=[device("gpu", 3.6e6, method=Method.COUNTER, model="TestGPU 80GB")],
                     start=T, end=T + 2 * H)
    f = finalise_record(rec, CarbonFacts(), embodied=site.embodied.factors())
    [line] = f.embodied
    assert (line.component, line.te_kg, line.lifetime_years, line.share, line.units) == ("gpu", 150.0, 5.0, 1.0, 1.0)
    assert f.embodied_kg == pytest.approx(150 * 2 / (5 * Y))
    assert "vendor PCF" in line.source and "lifetime 5 years" in line.source


def test_bundled_boavizta_gpu_rows_match_nvml_names():
    fs = bundled_factors()
    # BoaviztAPI's bottom-up GPU method on its gpu_specs.csv (scripts/build_embodied.py): A100 SXM4 40GB
    # 273.4 kgCO2eq; its default archetype 575.1 kgCO2eq (its own test_empty_gpu value)
    assert find_factor(fs, "gpu", "NVIDIA A100-SXM4-40GB").kg_per_unit == 273.4
    assert find_factor(fs, "gpu", "NVIDIA H100 80GB HBM3").kg_per_unit == 575.2  # the H100 row
    assert find_factor(fs, "gpu", "AMD Instinct MI250X").kg_per_unit == 575.1  # the default archetype (*)
    assert all("BoaviztAPI" in f.source for f in fs)


def test_cpu_ram_chassis_shares_on_a_node():
    # one node, 1 h; 2 sockets, the job attributed 1e6 of the packages' 4e6 J: RS 0.25; 64 GB requested;
    # 1 of the node's 8 GPUs (an A100 SXM4 40GB)
    static = {"sockets": 2, "cpu_model": "Xeon", "devices": [{"device_class": "gpu"}] * 8}
    devs = [device("cpu", 1e6, method=Method.COUNTER, device_energy_j=4e6),
            device("gpu", 3.6e6, method=Method.COUNTER, model="NVIDIA A100-SXM4-40GB")]
    rec = job_record(job_id="2", devices=devs, start=T, end=T + H,
                     node_fields={"static": static, "req_mem_bytes": 64_000_000_000})
    f = finalise_record(rec, CarbonFacts(), embodied=bundled_factors())
    by = {e.component: e for e in f.embodied}
    life = 3 * Y  # default 3 years
    assert by["gpu"].kg == pytest.approx(273.4 * 1 / life)
    # CPU: 2 sockets x 14.0 kg x 1 h / 26280 h x 0.25
    assert by["cpu"].kg == pytest.approx(2 * 14.0 * 0.25 / life) and by["cpu"].share == 0.25
    # DRAM: 64 GB x 1.392 kg/GB x 1 h / 26280 h
    assert by["ram"].kg == pytest.approx(64 * 1.392 / life)
    # chassis: RS = max(CPU share 0.25, GPU share 1/8) = 0.25 of 295.4 kg
    assert by["chassis"].kg == pytest.approx(295.4 * 0.25 / life)
    assert f.embodied_kg == pytest.approx((273.4 + 2 * 14.0 * 0.25 + 64 * 1.392 + 295.4 * 0.25) / life)


def test_site_factor_and_lifetime_override_bundled():
    site = SiteConfig(embodied={"gpu": {"NVIDIA A100": {"kgco2e": 318, "source": "HotCarbon'23"}},
                                "lifetime_years": {"gpu": 6}})
    rec = job_record(job_id="3", devices=[device("gpu", 1.0, method=Method.COUNTER, model="NVIDIA A100-SXM4-40GB")],
                     start=T, end=T + H)
    f = finalise_record(rec, CarbonFacts(), embodied=site.embodied.factors(),
                        lifetimes=dict(site.embodied.lifetime_years))
    [g] = f.embodied
    # the bundled "NVIDIA A100 SXM4 40GB" row has more words, so it still wins over a site's "NVIDIA A100"...
    assert g.te_kg == 273.4
    site2 = SiteConfig(embodied={"gpu": {"NVIDIA A100 SXM4 40GB": {"kgco2e": 318}}, "lifetime_years": {"gpu": 6}})
    f2 = finalise_record(rec, CarbonFacts(), embodied=site2.embodied.factors(),
                         lifetimes=dict(site2.embodied.lifetime_years))
    # ...and a site row of the same words replaces it: 318 kg x 1 h / (6 x 8760 h)
    assert f2.embodied[0].te_kg == 318 and f2.embodied_kg == pytest.approx(318 / (6 * Y))
    assert "site.yaml" in f2.embodied[0].source and "from site.yaml" in f2.embodied[0].source


def test_no_factor_is_absent_not_zero():
    rec = job_record(job_id="4", devices=[device("cpu", 1.0, method=Method.COUNTER)], start=T, end=T + H)
    f = finalise_record(rec, CarbonFacts(), embodied=())
    assert f.embodied == [] and f.embodied_kg is None and "no factor for cpu" in f.embodied_note  # share unknown: not counted
    assert finalise_record(rec, CarbonFacts()).embodied_kg is None  # not computed at all


def test_bad_lifetime_names_the_field():
    with pytest.raises(ValueError, match="lifetime_years"):
        SiteConfig(embodied={"lifetime_years": {"gpu": 0}})
