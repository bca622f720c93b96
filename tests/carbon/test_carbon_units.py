"""Carbon-intensity unit conversion and rejection (property tests)."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurm_energy.carbon.units import MAX_G_PER_KWH, to_g_per_kwh


def test_known_conversions():
    assert to_g_per_kwh(233, "gCO2e/kWh") == 233.0
    assert to_g_per_kwh(0.233, "kgCO2e/kWh") == pytest.approx(233.0)  # 0.233 kg x 1000 g/kg
    assert to_g_per_kwh(233, "kgCO2e/MWh") == pytest.approx(233.0)  # 233 kg/1000 kWh x 1000 g/kg
    assert to_g_per_kwh(0.5, "tCO2e/MWh") == pytest.approx(500.0)  # 0.5e6 g / 1000 kWh
    assert to_g_per_kwh(233000, "gCO2e/MWh") == pytest.approx(233.0)  # 233000 g / 1000 kWh
    assert to_g_per_kwh(100, "gCO2/kWh") == 100.0  # "CO2" spelling accepted


@given(st.floats(min_value=0, max_value=2.0, allow_nan=False))
def test_kg_per_kwh_is_1000_g(v):
    assert to_g_per_kwh(v, "kgCO2e/kWh") == pytest.approx(v * 1000.0)


@given(st.floats(min_value=0, max_value=2000, allow_nan=False))
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
    except ValueError as e:
        assert "above the plausible maximum" in str(e)
    else:
        assert 0 <= g <= MAX_G_PER_KWH


def test_nan_inf_unknown_unit():
    for bad in (math.nan, math.inf):
        with pytest.raises(ValueError, match="finite"):
            to_g_per_kwh(bad)
    with pytest.raises(ValueError, match="unknown unit 'lb/MWh'"):
        to_g_per_kwh(1000, "lb/MWh")
    with pytest.raises(ValueError, match="not a number"):
        to_g_per_kwh("lots")
