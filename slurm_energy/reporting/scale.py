"""Human units that scale to the value, for the HTML report: J / Wh / kWh / MWh and g / kg / t CO2e.

A 40 s job used 0.0001 kWh: the report says ``368 J`` (and ``0.102 Wh``), not ``0.0001021 kWh`` or
``1.021e-04``. Plain decimal notation always, 3 significant figures. The CSV and ``jobenergy`` keep
fixed units (kWh, kgCO2e) in their headers so columns stay comparable and machine-readable.
"""

from __future__ import annotations

import math

from slurm_energy.units import J_PER_KWH

J_PER_WH = 3600.0  # 1 Wh = 3600 J


def plain(v: float, sig: int = 3) -> str:
    """``v`` to ``sig`` significant figures in plain notation (no exponent), trailing zeros dropped."""
    if v == 0 or not math.isfinite(v):
        return "0" if v == 0 else str(v)
    decimals = max(0, sig - 1 - math.floor(math.log10(abs(v))))
    text = f"{round(v, decimals):.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def energy_text(joules: float | None, sig: int = 3) -> str:
    """``368 J``, ``12.5 Wh``, ``3.4 kWh``, ``1.2 MWh``; ``n/a`` for None (unmeasured, never 0)."""
    if joules is None:
        return "n/a"
    if abs(joules) < J_PER_WH:
        return f"{plain(joules, sig)} J"
    wh = joules / J_PER_WH
    unit, scale = next(((u, s) for u, s in (("Wh", 1.0), ("kWh", 1e3)) if abs(wh) < s * 1000), ("MWh", 1e6))
    return f"{plain(wh / scale, sig)} {unit}"


def co2e_text(kg: float | None, sig: int = 3) -> str:
    """``10.2 g``, ``3.4 kg``, ``1.2 t`` CO2e (the caller adds "CO2e"); ``n/a`` for None."""
    if kg is None:
        return "n/a"
    if abs(kg) < 1.0:
        return f"{plain(kg * 1000, sig)} g"
    if abs(kg) < 1000.0:
        return f"{plain(kg, sig)} kg"
    return f"{plain(kg / 1000, sig)} t"


def kwh_energy_text(kwh: float | None, sig: int = 3) -> str:
    """:func:`energy_text` for a value in kWh."""
    return "n/a" if kwh is None else energy_text(kwh * J_PER_KWH, sig)


def format_duration(seconds: float | None, millis: bool = False) -> str:
    """A duration as sacct prints it: Elapsed as ``secs2time_str`` does (src/common/parse_time.c:
    ``[D-]HH:MM:SS`` of whole seconds, the fraction dropped: Slurm's times are whole seconds);
    ``millis``: TotalCPU as sacct's ``_elapsed_time(secs, usecs)`` does (src/sacct/print.c:
    ``MM:SS.mmm`` below an hour, the milliseconds ``usecs / 1000`` truncated, else ``[D-]HH:MM:SS``).
    ``None`` -> ``""`` (Slurm prints unknown as empty); ``inf`` -> ``UNLIMITED``."""
    if seconds is None:
        return ""
    if math.isinf(seconds):
        return "UNLIMITED"
    us_total = round(max(0.0, seconds) * 1_000_000)  # Slurm's (secs, usecs): whole microseconds
    s_total, us = divmod(us_total, 1_000_000)
    ms = us // 1000  # truncated, as sacct's subsec = usecs / 1000
    d, s = divmod(s_total, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    if millis and not d and not h:
        return f"{m:02d}:{s:02d}.{ms:03d}"
    return (f"{d}-" if d else "") + f"{h:02d}:{m:02d}:{s:02d}"
