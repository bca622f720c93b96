"""Carbon-intensity unit conversion (pure functions, no I/O).

All intensities inside slurm-energy are gCO2e/kWh. Admins may write them in any of
:data:`UNIT_FACTORS`' units; :func:`to_g_per_kwh` converts and rejects implausible values.
"""

from __future__ import annotations

import math

#: Multiply a value in the key's unit by the factor to get gCO2e/kWh.
#: 1 kgCO2e/kWh = 1000 g / 1 kWh = 1000 gCO2e/kWh;
#: 1 kgCO2e/MWh = 1000 g / 1000 kWh = 1 gCO2e/kWh;
#: 1 tCO2e/MWh = 1e6 g / 1000 kWh = 1000 gCO2e/kWh;  1 gCO2e/MWh = 0.001 gCO2e/kWh.
UNIT_FACTORS = {
    "gCO2e/kWh": 1.0,
    "kgCO2e/kWh": 1000.0,
    "kgCO2e/MWh": 1.0,
    "tCO2e/MWh": 1000.0,
    "gCO2e/MWh": 0.001,
}

#: Upper bound of a plausible grid intensity, gCO2e/kWh. The dirtiest national grids (lignite,
#: oil) are ~1000-1200 g/kWh lifecycle (OWID/Ember 2024 maximum is below 1200); 2000 leaves room for
#: local diesel generation while catching unit mistakes (e.g. g/MWh written as g/kWh).
MAX_G_PER_KWH = 2000.0


def to_g_per_kwh(value: float, unit: str = "gCO2e/kWh", field: str = "carbon_intensity") -> float:
    """Convert a carbon intensity ``value`` in ``unit`` to gCO2e/kWh.

    :param value: intensity in ``unit`` (finite, >= 0).
    :param unit: one of :data:`UNIT_FACTORS` (exact spelling; "CO2" is accepted for "CO2e").
    :param field: dotted config path used in error messages.
    :returns: intensity in gCO2e/kWh, in [0, :data:`MAX_G_PER_KWH`].
    :raises ValueError: unknown unit, negative or non-finite value, or result above 2000 g/kWh;
        the message names ``field``, the bad value and the fix.
    """
    u = str(unit).strip()
    if u not in UNIT_FACTORS:
        alt = u.replace("CO2/", "CO2e/").replace("CO2eq/", "CO2e/")
        if alt in UNIT_FACTORS:
            u = alt
        else:
            raise ValueError(
                f"{field}.unit: unknown unit {unit!r}; use one of {', '.join(UNIT_FACTORS)}"
            )
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{field}.value: {value!r} is not a number; write e.g. 'value: 233'") from None
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"{field}.value: {value!r} must be a finite number >= 0 {u}")
    g = v * UNIT_FACTORS[u]
    if g > MAX_G_PER_KWH:
        raise ValueError(
            f"{field}: {value} {u} = {g:g} gCO2e/kWh is above the plausible maximum "
            f"{MAX_G_PER_KWH:g} gCO2e/kWh; check the unit (kgCO2e/MWh and gCO2e/kWh are equal, "
            f"kgCO2e/kWh is 1000x larger)"
        )
    return g
