"""The method's formulas, with the method's own worked example."""

import pytest

from slurm_energy.accounting.formulas import J_PER_KWH, class_energy_j, co2e_kg, facility_kwh, finalise_record
from slurm_energy.model import CarbonFacts, DeviceEnergy, JobRecord, Method, NodeSummary, Status

H = 3600.0  # s per hour


def test_method_example_it_energy_is_55_56_kwh():
    # CPU: 8 devices x 100 W x 0.45 x 120 h = 43 200 Wh
    # GPU: 2 devices x  60 W x 0.95 x 100 h = 11 400 Wh
    # RAM: 1 device  x  40 W x 0.20 x 120 h =    960 Wh
    # sum = 55 560 Wh = 55.56 kWh
    terms = [(8, 0.45, 100.0, 120 * H), (2, 0.95, 60.0, 100 * H), (1, 0.20, 40.0, 120 * H)]
    e_j = sum(class_energy_j(*t) for t in terms)  # E_IT = sum over classes
    assert e_j / J_PER_KWH == pytest.approx(55.56, abs=1e-9)
    assert class_energy_j(8, 0.45, 100.0, 120 * H) / J_PER_KWH == pytest.approx(43.2)


def test_method_example_facility_and_co2e():
    it = 55.56  # kWh
    # PUE 1.2: 55.56 x 1.2 = 66.672 kWh
    fac = facility_kwh(it, 1.2)
    assert fac == pytest.approx(66.672)
    # CI 300 gCO2e/kWh, alpha 0.5: 66.672 x 300 x 0.5 / 1000 = 10.0008 kgCO2e
    assert co2e_kg(fac, 300.0, 0.5) == pytest.approx(10.0008)
    # no offset (alpha 1): 66.672 x 300 / 1000 = 20.0016 kg
    assert co2e_kg(fac, 300.0) == pytest.approx(20.0016)


@pytest.mark.parametrize("bad", [(-1, 0.5, 10, 1), (1, 1.5, 10, 1), (1, 0.5, -10, 1), (1, 0.5, 10, -1)])
def test_class_energy_rejects_bad_inputs(bad):
    with pytest.raises(ValueError, match="0 <= u <= 1"):
        class_energy_j(*bad)


def test_pue_below_one_rejected_naming_the_field():
    with pytest.raises(ValueError, match="pue"):
        facility_kwh(1.0, 0.9)


def _rec(devs, **kw):
    node = NodeSummary(node="n1", job_id="7", start_time=0.0, end_time=100.0, devices=devs)
    return JobRecord(job_id="7", start_time=0.0, end_time=100.0, nodes=[node], **kw)


def test_finalise_sums_classes_and_applies_pue_ci_alpha_once():
    devs = [DeviceEnergy(device_class="cpu", device_id="a", method=Method.COUNTER, energy_j=3.6e6, coverage=1.0),
            DeviceEnergy(device_class="cpu", device_id="b", method=Method.TDP_ESTIMATE, energy_j=1.8e6, coverage=1.0),
            DeviceEnergy(device_class="ram", device_id="r", method=Method.TDP_ESTIMATE, energy_j=0.36e6, coverage=1.0)]
    facts = CarbonFacts(pue=1.5, ci_g_per_kwh=200.0, alpha=0.8)
    rec = finalise_record(_rec(devs), facts)
    # cpu = (3.6e6 + 1.8e6) J = 1.5 kWh; ram = 0.1 kWh; IT = 1.6 kWh
    assert rec.energy_it_j["cpu"] == pytest.approx(5.4e6)
    assert rec.it_kwh == pytest.approx(1.6)
    assert rec.facility_kwh == pytest.approx(2.4)  # 1.6 x 1.5
    assert rec.co2e_kg == pytest.approx(0.384)  # 2.4 kWh x 200 g/kWh x 0.8 / 1000
    assert rec.methods == {"cpu": Method.TDP_ESTIMATE, "ram": Method.TDP_ESTIMATE}  # worst method wins
    assert "gpu" not in rec.energy_it_j  # no GPU on the job: absent, not 0
    # finalising twice does not apply PUE twice
    again = finalise_record(rec, facts)
    assert again.facility_kwh == pytest.approx(2.4)


def test_unmeasured_stays_none_and_marks_partial_coverage():
    devs = [DeviceEnergy(device_class="cpu", device_id="a", method=Method.COUNTER, energy_j=3.6e6, coverage=1.0),
            DeviceEnergy(device_class="gpu", device_id="GPU-x", method=Method.UNAVAILABLE, energy_j=None)]
    rec = finalise_record(_rec(devs), CarbonFacts(pue=1.0, ci_g_per_kwh=100.0))
    assert rec.energy_it_j["gpu"] is None
    assert rec.methods["gpu"] == Method.UNAVAILABLE
    assert rec.it_kwh == pytest.approx(1.0)  # the measured CPU only
    assert rec.coverage_complete is False


def test_nothing_measured_gives_none_totals():
    devs = [DeviceEnergy(device_class="gpu", device_id="GPU-x", method=Method.UNAVAILABLE, energy_j=None)]
    rec = finalise_record(_rec(devs), CarbonFacts())
    assert rec.it_kwh is None and rec.facility_kwh is None and rec.co2e_kg is None


def test_hourly_intensity_weights_each_hour():
    node = NodeSummary(node="n1", job_id="7", start_time=0.0, end_time=7200.0,
                       devices=[DeviceEnergy(device_class="cpu", device_id="a", method=Method.COUNTER,
                                             energy_j=7.2e6, coverage=1.0)],
                       hourly_energy_j={"2026-11-30T10:00:00Z": 3.6e6, "2026-11-30T11:00:00Z": 3.6e6})
    rec = JobRecord(job_id="7", start_time=0.0, end_time=7200.0, nodes=[node])
    facts = CarbonFacts(pue=1.5, ci_g_per_kwh=400.0, alpha=1.0)
    out = finalise_record(rec, facts, {"2026-11-30T10:00:00Z": 100.0, "2026-11-30T11:00:00Z": 300.0})
    # hour 10: 1 kWh x 1.5 x 100 g = 150 g; hour 11: 1 kWh x 1.5 x 300 g = 450 g; total 0.6 kg
    assert out.co2e_kg == pytest.approx(0.6)
    assert out.carbon.hourly is True
    assert out.status == Status.COMPLETE


def test_node_that_never_reported_makes_coverage_incomplete():
    devs = [DeviceEnergy(device_class="cpu", device_id="a", method=Method.COUNTER, energy_j=3.6e6, coverage=1.0)]
    rec = finalise_record(_rec(devs, expected_nodes=["n1", "n2"]), CarbonFacts(pue=1.0))
    assert rec.it_kwh == pytest.approx(1.0)  # n1's energy only: n2's is unknown, never assumed 0
    assert rec.coverage_complete is False
