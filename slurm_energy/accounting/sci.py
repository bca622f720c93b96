"""SCI for AI: a training run's carbon per functional unit (gCO2e per 10^18 FLOP, per training
token, per model parameter), operational and embodied, from what the record already holds.

The Green Software Foundation's Software Carbon Intensity (SCI v1.1, ISO/IEC 21031:2024) is

    SCI = (O + M) per R,    O = E x I (operational, location-based),    M = TE x (TS / EL) x RS

and its AI extension (SCI for AI, ratified 2025-11) names the provider's functional units of a
training run: FLOPs, training tokens and model parameters. Offsets and certificates do not lower
the score: O here is the record's location-based CO2e (``co2e_gross_kg``: facility kWh x CI, no
alpha), never the net figure. R comes from the job's tags (``track().tag(flops=..., tokens=...,
model_params=...)``); without a tag the score is absent (None), never 0 or made up. FLOPs
fall back to 6 x model_params x tokens (:func:`slurm_energy.accounting.calibration.declared_flops`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from slurm_energy.model import JobRecord, WindowEnergy
from slurm_energy.units import G_PER_KG

#: FLOPs per functional unit of the per-FLOP score (10^18 FLOP = 1 exaFLOP)
FLOP_UNIT = 1e18


@dataclass(frozen=True)
class SciScore:
    """One SCI-for-AI score: gCO2e per ``unit`` (``R`` units in the run, from ``r_source``).
    ``operational_g``: location-based O / R; ``embodied_g``: M / R (None: embodied not computed);
    ``total_g``: (O + M) / R, None unless both are known."""

    unit: str  # "1e18 FLOP", "token", "parameter"
    r: float
    r_source: str
    operational_g: float | None
    embodied_g: float | None
    total_g: float | None


def _tag(tags: dict[str, float | str], key: str) -> float | None:
    try:
        v = float(tags[key])
    except (KeyError, TypeError, ValueError):
        return None
    return v if math.isfinite(v) and v > 0 else None


def functional_units(record: JobRecord) -> list[tuple[str, float, str]]:
    """``[(unit, R, source)]`` the record's tags give: ``("1e18 FLOP", flops / 1e18, ...)``,
    ``("token", tokens, ...)``, ``("parameter", model_params, ...)``; a unit without its tag is left out."""
    from slurm_energy.accounting.calibration import declared_flops

    t = record.tags or {}
    out = []
    flops = declared_flops(record)
    if flops is not None:
        src = "tag flops" if _tag(t, "flops") is not None else "6 x tags model_params x tokens"
        out.append(("1e18 FLOP", flops / FLOP_UNIT, src))
    for unit, key in (("token", "tokens"), ("parameter", "model_params")):
        v = _tag(t, key)
        if v is not None:
            out.append((unit, v, f"tag {key}"))
    return out


def scores(operational_kg: float | None, embodied_kg: float | None,
           units: list[tuple[str, float, str]]) -> list[SciScore]:
    """SCI = (O + M) / R per unit of ``units`` (:func:`functional_units`), in gCO2e; O the
    location-based operational kg, M the embodied kg (each None = unknown: its score None)."""
    out = []
    for unit, r, src in units:
        o = None if operational_kg is None else operational_kg * G_PER_KG / r
        m = None if embodied_kg is None else embodied_kg * G_PER_KG / r
        out.append(SciScore(unit, r, src, o, m, None if o is None or m is None else o + m))
    return out


def window_embodied_kg(record: JobRecord, w: WindowEnergy) -> float | None:
    """A phase's or stage's embodied CO2e: the job's M x the window's seconds / the job's (M is
    proportional to TS, the time the hardware is reserved)."""
    if record.embodied_kg is None or record.elapsed_s <= 0:
        return None
    return record.embodied_kg * min(1.0, w.duration_s / record.elapsed_s)


def record_scores(record: JobRecord) -> list[SciScore]:
    """The SCI-for-AI scores of a whole job; [] when it declared neither FLOPs, tokens nor parameters."""
    return scores(record.co2e_gross_kg, record.embodied_kg, functional_units(record))
