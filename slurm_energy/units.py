"""Units and documented default constants, each defined once (stdlib only: safe on the hook path).

Conversions: energy in J inside the package; kWh only at the edge (records' ``*_kwh`` totals,
reports). Carbon in gCO2e/kWh (intensity) and kgCO2e (totals).
"""

from __future__ import annotations

#: 1 kWh = 1000 W x 3600 s = 3.6e6 J.
J_PER_KWH = 3.6e6
#: 1 kg = 1000 g (gCO2e -> kgCO2e).
G_PER_KG = 1000.0

#: Default PUE when the site gives none: industry average 1.58.
DEFAULT_PUE = 1.58
DEFAULT_PUE_TEXT = "industry average PUE 1.58 (Uptime Institute Global Data Center Survey 2023)"
DEFAULT_PUE_SOURCE = f"DEFAULT: {DEFAULT_PUE_TEXT}"

#: Default carbon intensity, gCO2e/kWh: the world average (IEA 2019).
DEFAULT_CI_G_PER_KWH = 475.0
DEFAULT_CI_TEXT = "world average 475 gCO2e/kWh (IEA Global Energy & CO2 Status Report 2019)"
DEFAULT_CI_SOURCE = f"DEFAULT: {DEFAULT_CI_TEXT}"

#: Default offset factor alpha (1.0 = no offset, renewable share or REC).
DEFAULT_ALPHA = 1.0
DEFAULT_ALPHA_SOURCE = "DEFAULT: no offset (alpha 1.0)"

#: Memory power model: 0.3725 W per GB of RAM (Green Algorithms, Lannelongue et al. 2021,
#: Adv. Sci. 8:2100707, from Micron DDR4 power calculations).
RAM_W_PER_GB = 0.3725
RAM_W_PER_GB_SOURCE = "Green Algorithms 0.3725 W/GB"

#: CPU power for an unknown model: 12.0 W per core (Green Algorithms ``TDP_cpu.csv`` "Any" row).
CPU_W_PER_CORE = 12.0
CPU_W_PER_CORE_SOURCE = "Green Algorithms TDP_cpu.csv 'Any' 12 W/core"


def co2e_kg(facility_kwh: float, ci_g_per_kwh: float, alpha: float = 1.0) -> float:
    """CO2e = E_facility (kWh) x CI (gCO2e/kWh) x alpha / 1000 (g per kg), in kgCO2e: the method's
    carbon formula (Lannelongue et al. 2021, Adv. Sci. 8:2100707), written once.

    Raises:
        ValueError: a negative carbon intensity or alpha (names both).
    """
    if ci_g_per_kwh < 0 or alpha < 0:
        raise ValueError(f"carbon intensity and alpha must be >= 0, got CI={ci_g_per_kwh}, alpha={alpha}")
    return facility_kwh * ci_g_per_kwh * alpha / G_PER_KG


def sum_known(values: list[float | None]) -> float | None:
    """The sum of the known values, None when none is known (unmeasured is not 0)."""
    known = [v for v in values if v is not None]
    return sum(known) if known else None
