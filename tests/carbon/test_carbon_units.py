"""Carbon-intensity unit conversion and rejection (property tests)."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurm_energy.carbon.units import MAX_G_PER_KWH, MIN_G_PER_KWH, ImplausibleIntensityError, plausibility_warning, to_g_per_kwh


def test_known_conversions():
    assert to_g_per_kwh(233, "gCO2e/kWh") == 233.0
    assert to_g_per_kwh(0.233, "kgCO2e/kWh") == pytest.approx(233.0)  # 0.233 kg x 1000 g/kg
    assert to_g_per_kwh(233, "kgCO2e/MWh") == pytest.approx(233.0)  # 233 kg/1000 kWh x 1000 g/kg
    assert to_g_per_kwh(0.5, "tCO2e/MWh") == pytest.approx(500.0)  # 0.5e6 g / 1000 kWh
    assert to_g_per_kwh(233000, "gCO2e/MWh") == pytest.approx(233.0)  # 233000 g / 1000 kWh
    assert to_g_per_kwh(100, "gCO2/kWh") == 100.0  # "CO2" spelling accepted


@given(st.floats(min_value=0.001, max_value=2.0, allow_nan=False))
def test_kg_per_kwh_is_1000_g(v):
    assert to_g_per_kwh(v, "kgCO2e/kWh") == pytest.approx(v * 1000.0)


@given(st.floats(min_value=1, max_value=2000, allow_nan=False))
def test_kg_per_mwh_equals_g_per_kwh(v):
    assert to_g_per_kwh(v, "kgCO2e/MWh") == pytest.approx(to_g_per_kwh(v, "gCO2e/kWh"))


@given(st.floats(min_value=2000.0001, max_value=1e12, allow_nan=False))
def test_above_2000_rejected(v):
    with pytest.raises(ValueError, match="above the plausible maximum"):
        to_g_per_kwh(v, "gCO2e/kWh")


@given(st.floats(max_value=-1e-9, allow_nan=False, allow_infinity=False))
def test_negative_rejected(v):
    with pytest.raises(ValueError, match=">= 0"):
        to_g_per_kwh(v)


@given(st.floats(min_value=0, max_value=1e9, allow_nan=False),
       st.sampled_from(["gCO2e/kWh", "kgCO2e/kWh", "kgCO2e/MWh", "tCO2e/MWh", "gCO2e/MWh"]))
def test_result_in_range_or_rejected(v, unit):
    try:
        g = to_g_per_kwh(v, unit)
    except ImplausibleIntensityError as e:
        assert v * {"gCO2e/kWh": 1, "kgCO2e/kWh": 1e3, "kgCO2e/MWh": 1, "tCO2e/MWh": 1e3, "gCO2e/MWh": 1e-3}[unit] < 1
        assert "below 1 gCO2e/kWh" in str(e) or "emits nothing" in str(e)
    except ValueError as e:
        assert "above the plausible maximum" in str(e)
    else:
        assert MIN_G_PER_KWH <= g <= MAX_G_PER_KWH


def test_nan_inf_unknown_unit():
    for bad in (math.nan, math.inf):
        with pytest.raises(ValueError, match="finite"):
            to_g_per_kwh(bad)
    with pytest.raises(ValueError, match="unknown unit 'lb/MWh'"):
        to_g_per_kwh(1000, "lb/MWh")
    with pytest.raises(ValueError, match="not a number"):
        to_g_per_kwh("lots")


def test_below_1_g_per_kwh_is_a_unit_slip_with_the_value_it_meant():
    # 0.056 kgCO2e/kWh (France's grid, ~56 g/kWh) typed with the unit gCO2e/kWh: 0.056 g/kWh is
    # below any grid (the cleanest are ~5-30 g/kWh), so it is refused with the value x1000 = 56
    with pytest.raises(ImplausibleIntensityError) as e:
        to_g_per_kwh(0.056, "gCO2e/kWh", field="datacenters.paris.carbon_intensity")
    assert str(e.value) == (
        "datacenters.paris.carbon_intensity: 0.056 gCO2e/kWh is below 1 gCO2e/kWh, lower than any real grid "
        "(the cleanest, hydro and nuclear, are about 5-30 gCO2e/kWh lifecycle); 0.056 looks like kgCO2e/kWh: "
        "did you mean 56 gCO2e/kWh?")
    assert e.value.fix == "write value: 56 (unit gCO2e/kWh), or keep 0.056 with unit: kgCO2e/kWh"
    assert e.value.guess == pytest.approx(56.0)
    # 0.3 kgCO2e/MWh = 0.3 g/kWh: meant tCO2e/MWh (0.3 t/MWh = 300 g/kWh)
    with pytest.raises(ImplausibleIntensityError, match="0.3 looks like tCO2e/MWh: did you mean 300 kgCO2e/MWh"):
        to_g_per_kwh(0.3, "kgCO2e/MWh")
    # 0.5 gCO2e/MWh = 0.0005 g/kWh: x1000 is still 0.5 g/kWh, so no single guess
    with pytest.raises(ImplausibleIntensityError, match="= 0.0005 gCO2e/kWh is below 1") as e:
        to_g_per_kwh(0.5, "gCO2e/MWh")
    assert e.value.guess is None and "did you mean" not in str(e.value)
    assert to_g_per_kwh(1, "gCO2e/kWh") == 1.0  # the bound itself is accepted


def test_zero_only_when_the_site_says_so():
    with pytest.raises(ImplausibleIntensityError, match="0 gCO2e/kWh means the electricity emits nothing") as e:
        to_g_per_kwh(0, zero_ok="allow_zero: true")
    assert "said explicitly with allow_zero: true" in e.value.fix and "alpha" in e.value.fix
    assert to_g_per_kwh(0, allow_zero=True) == 0.0
    with pytest.raises(ImplausibleIntensityError):  # allow_zero allows 0, not 0.5
        to_g_per_kwh(0.5, allow_zero=True)


def test_above_2000_names_the_plausible_readings():
    # 2200 written as g/kWh: as lb/MWh (US eGRID coal) it is 2200 x 0.45359237 = 997.9 g/kWh;
    # as g/MWh 2.2 g/kWh (plausible too, >= 1)
    with pytest.raises(ValueError) as e:
        to_g_per_kwh(2200, "gCO2e/kWh")
    assert str(e.value).endswith("kgCO2e/kWh is 1000x larger; 2200 gCO2e/MWh would be 2.2 gCO2e/kWh; "
                                 "2200 lbCO2e/MWh would be 997.9 gCO2e/kWh)")
    # 3 kgCO2e/kWh = 3000 g/kWh: no reading of the number in another unit is offered
    with pytest.raises(ValueError) as e:
        to_g_per_kwh(3, "kgCO2e/kWh")
    assert str(e.value).endswith("kgCO2e/kWh is 1000x larger)")


def test_one_to_five_g_per_kwh_warns_only():
    assert plausibility_warning(5.0) is None and plausibility_warning(56.0) is None
    assert plausibility_warning(0.0) is None  # 0 gets here only when allowed explicitly
    assert plausibility_warning(1.2, "datacenters.x.carbon_intensity") == (
        "datacenters.x.carbon_intensity: 1.2 gCO2e/kWh is below 5 gCO2e/kWh, lower than even hydro and nuclear "
        "lifecycle figures (about 5-30); check the value and its unit; if it was kgCO2e/kWh (or tCO2e/MWh) it "
        "is 1200 gCO2e/kWh")
    # 4 x 1000 = 4000 g/kWh would be implausible too: no such reading offered
    assert plausibility_warning(4.0).endswith("check the value and its unit")
