"""Carbon-intensity unit conversion (pure functions, no I/O).

All intensities inside slurm-energy are gCO2e/kWh. Admins may write them in any of
:data:`UNIT_FACTORS`' units; :func:`to_g_per_kwh` converts and rejects implausible values (above 2000 or below 1 gCO2e/kWh;
0 only where the site allows it explicitly); :func:`plausibility_warning` flags 1-5 gCO2e/kWh.
"""

from __future__ import annotations

import math

from slurm_energy.errors import ImplausibleIntensityError

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

#: Lower bound of a plausible grid intensity, gCO2e/kWh. The cleanest grids (Iceland, Norway,
#: Quebec hydro) are ~10-30 gCO2e/kWh lifecycle, nuclear/hydro supply contracts ~5-12; below 1 the
#: value was almost surely written in a unit 1000x larger (0.056 kgCO2e/kWh typed as gCO2e/kWh).
MIN_G_PER_KWH = 1.0
#: Below this (and >= :data:`MIN_G_PER_KWH`) an intensity is kept but worth a warning
#: (:func:`plausibility_warning`): lower than even nuclear/hydro lifecycle figures.
WARN_BELOW_G_PER_KWH = 5.0
#: The unit 1000x larger than each unit (a value 1000x too small was probably written in it).
_THOUSAND_X = {"gCO2e/kWh": "kgCO2e/kWh", "kgCO2e/MWh": "tCO2e/MWh", "gCO2e/MWh": "kgCO2e/MWh"}
#: 1 lbCO2e/MWh = 453.59237 g / 1000 kWh = 0.45359237 gCO2e/kWh (US eGRID figures are in lb/MWh).
G_PER_KWH_PER_LB_PER_MWH = 0.45359237

#: Upper bound of a plausible grid intensity, gCO2e/kWh. The dirtiest national grids (lignite,
#: oil) are ~1000-1200 g/kWh lifecycle (OWID/Ember 2024 maximum is below 1200); 2000 leaves room for
#: local diesel generation while catching unit mistakes (e.g. g/MWh written as g/kWh).
MAX_G_PER_KWH = 2000.0


def _unit_of(unit: str, field: str) -> str:
    u = str(unit).strip()
    if u in UNIT_FACTORS:
        return u
    alt = u.replace("CO2/", "CO2e/").replace("CO2eq/", "CO2e/")
    if alt in UNIT_FACTORS:
        return alt
    raise ValueError(f"{field}.unit: unknown unit {unit!r}; use one of {', '.join(UNIT_FACTORS)}")


def _shown(value: float, u: str, g: float) -> str:
    """``"0.056 gCO2e/kWh"``, or ``"0.5 kgCO2e/kWh = 500 gCO2e/kWh"`` in another unit."""
    return f"{value:g} {u}" + ("" if u == "gCO2e/kWh" else f" = {g:g} gCO2e/kWh")


def _plausible(g: float) -> bool:
    return MIN_G_PER_KWH <= g <= MAX_G_PER_KWH


def _too_low(value: float, u: str, g: float, field: str, zero_ok: str) -> ImplausibleIntensityError:
    """The error for ``0 <= g < MIN_G_PER_KWH`` (``value`` in unit ``u``)."""
    cleanest = ("lower than any real grid (the cleanest, hydro and nuclear, are about 5-30 gCO2e/kWh "
                "lifecycle)")
    if g == 0:
        return ImplausibleIntensityError(
            f"{field}: 0 {u} means the electricity emits nothing at all, {cleanest}",
            "write your grid's or supplier's intensity",
            note=f"0 only if the site really counts this supply as emitting nothing, said explicitly with "
                 f"{zero_ok} (an offset is counted with the datacenter's alpha, the fraction of emissions "
                 f"counted, not with a 0 intensity)")
    msg = f"{field}: {_shown(value, u, g)} is below {MIN_G_PER_KWH:g} gCO2e/kWh, {cleanest}"
    big = _THOUSAND_X.get(u)
    if big is None or not _plausible(g * 1000):  # no single "did you mean"
        return ImplausibleIntensityError(
            msg, "check the value and its unit (1 kgCO2e/kWh = 1 tCO2e/MWh = 1000 gCO2e/kWh)")
    return ImplausibleIntensityError(
        f"{msg}; {value:g} looks like {big}: did you mean {value * 1000:g} {u}?",
        f"write value: {value * 1000:g} (unit {u}), or keep {value:g} with unit: {big}", value * 1000)


def _too_high(value: float, u: str, g: float, field: str) -> ValueError:
    """The error for ``g > MAX_G_PER_KWH``, with the readings that would be plausible."""
    alts = []
    if UNIT_FACTORS[u] == 1.0:  # the number may be g/MWh or lb/MWh (US eGRID) written as g/kWh
        alts = [f"{value:g} {name} would be {g * f:.4g} gCO2e/kWh" for name, f in
                (("gCO2e/MWh", UNIT_FACTORS["gCO2e/MWh"]), ("lbCO2e/MWh", G_PER_KWH_PER_LB_PER_MWH))
                if _plausible(g * f)]
    return ValueError(
        f"{field}: {_shown(value, u, g)} is above the plausible maximum {MAX_G_PER_KWH:g} gCO2e/kWh "
        f"(the dirtiest coal grids are about 1100-1200); check the unit (kgCO2e/MWh and gCO2e/kWh are "
        f"equal, kgCO2e/kWh is 1000x larger" + "".join(f"; {a}" for a in alts) + ")")


def to_g_per_kwh(value: float, unit: str = "gCO2e/kWh", field: str = "carbon_intensity", *,
                 allow_zero: bool = False, zero_ok: str = "allow_zero: true next to the value") -> float:
    """Convert a carbon intensity ``value`` in ``unit`` to gCO2e/kWh.

    :param value: intensity in ``unit`` (finite, >= 0).
    :param unit: one of :data:`UNIT_FACTORS` (exact spelling; "CO2" is accepted for "CO2e").
    :param field: dotted config path used in error messages.
    :param allow_zero: the site said explicitly that 0 is meant (else 0 is rejected).
    :param zero_ok: how the site says so, for the message rejecting 0.
    :returns: intensity in gCO2e/kWh: 0 (only with ``allow_zero``) or in
        [:data:`MIN_G_PER_KWH`, :data:`MAX_G_PER_KWH`].
    :raises ValueError: unknown unit, negative or non-finite value, or result above 2000 g/kWh;
        :class:`ImplausibleIntensityError` (a ValueError with ``fix``) below 1 g/kWh or 0 without
        ``allow_zero``. The message names ``field``, the bad value and the fix.
    """
    u = _unit_of(unit, field)
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{field}.value: {value!r} is not a number; write e.g. 'value: 233'") from None
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"{field}.value: {value!r} must be a finite number >= 0 {u}")
    g = v * UNIT_FACTORS[u]
    if g > MAX_G_PER_KWH:
        raise _too_high(v, u, g, field)
    if g < MIN_G_PER_KWH and not (g == 0 and allow_zero):
        raise _too_low(v, u, g, field, zero_ok)
    return g


def plausibility_warning(g_per_kwh: float, field: str = "carbon_intensity") -> str | None:
    """A warning for an accepted but suspicious intensity (``MIN_G_PER_KWH <= g < 5`` gCO2e/kWh:
    lower than even nuclear/hydro lifecycle figures), else None. 0 (explicitly allowed) is None."""
    if not (MIN_G_PER_KWH <= g_per_kwh < WARN_BELOW_G_PER_KWH):
        return None
    kg = (f"; if it was kgCO2e/kWh (or tCO2e/MWh) it is {g_per_kwh * 1000:g} gCO2e/kWh"
          if _plausible(g_per_kwh * 1000) else "")
    return (f"{field}: {g_per_kwh:g} gCO2e/kWh is below {WARN_BELOW_G_PER_KWH:g} gCO2e/kWh, lower than even "
            f"hydro and nuclear lifecycle figures (about 5-30); check the value and its unit{kg}")
