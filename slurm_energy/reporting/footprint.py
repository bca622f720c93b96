"""A job's carbon figures as every output shows them, each with its method and source
(docs/CARBON.md): location-based operational CO2e (E x CI, offsets excluded), net CO2e (x alpha,
only where alpha is not 1), embodied CO2e (SCI's M), the SCI-style total O + M, the energy cost
and the SCI-for-AI scores. Formatting only: every number is the record's (or
:mod:`slurm_energy.accounting.sci`'s from it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from slurm_energy.accounting.sci import record_scores
from slurm_energy.model import JobRecord
from slurm_energy.units import sum_known

if TYPE_CHECKING:
    from slurm_energy.accounting.whatif import WhatIf

GROSS_METHOD = "location-based: facility kWh x grid CI, offsets excluded (SCI O = E x I; GHG Protocol Scope 2 location-based)"
NET_METHOD = "net: location-based x alpha, the datacenter's offset factor"
EMBODIED_METHOD = "SCI M = TE x (TS / EL) x RS per unit of hardware reserved"


def sci_total_kg(rec: JobRecord) -> float | None:
    """SCI-style total O + M, kg: location-based operational + embodied; None unless both are known."""
    if rec.co2e_gross_kg is None or rec.embodied_kg is None:
        return None
    return rec.co2e_gross_kg + rec.embodied_kg


def json_block(rec: JobRecord) -> dict[str, Any]:
    """``--json``'s ``footprint``: each figure with its method and source (None = not computed)."""
    c = rec.carbon
    out: dict[str, Any] = {
        "operational_location_based_kg": rec.co2e_gross_kg,
        "operational_location_based_method": GROSS_METHOD,
        "ci_g_per_kwh": c.ci_g_per_kwh, "ci_source": c.ci_source, "ci_hourly": c.hourly,
        "alpha": c.alpha, "alpha_source": c.alpha_source,
    }
    if c.alpha != 1:
        out.update(operational_net_kg=rec.co2e_kg, operational_net_method=NET_METHOD)
    if c.marginal_source or c.intensity_kind != "average":  # both kinds side by side, each with source and age
        out.update(intensity_kind=c.intensity_kind, operational_average_kg=rec.co2e_average_kg,
                   average_source=c.hourly_source if c.hourly else c.ci_source,
                   operational_marginal_kg=rec.co2e_marginal_kg, marginal_source=c.marginal_source)
    out.update(embodied_kg=rec.embodied_kg, embodied_method=EMBODIED_METHOD,
               embodied=[e.model_dump() for e in rec.embodied], embodied_note=rec.embodied_note,
               sci_total_kg=sci_total_kg(rec),
               sci_total_method="operational location-based + embodied (offsets excluded)")
    if rec.cost is not None or rec.cost_source:
        out.update(cost=rec.cost, cost_currency=rec.cost_currency, cost_method=rec.cost_source)
    scores = record_scores(rec)
    if scores:  # absent without FLOPs, tokens or parameters (never 0)
        out["sci_ai"] = [{"per": s.unit, "r": s.r, "r_source": s.r_source, "operational_g": s.operational_g,
                          "embodied_g": s.embodied_g, "total_g": s.total_g} for s in scores]
    return out


def _kg(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.4g} kg"


def text_lines(rec: JobRecord, brief: bool = False) -> list[str]:
    """Lines for ``--seff`` and ``-l``: the figures with their method and source. ``brief`` (``-l``,
    whose table already shows kgCO2e): only what adds to it -- the location-based and net lines when
    alpha is not 1, embodied and the SCI total when computed, cost, SCI for AI."""
    c = rec.carbon
    out = [f"CO2e (location-based): {_kg(rec.co2e_gross_kg)} = facility kWh x {c.ci_g_per_kwh:g} gCO2e/kWh "
           f"({c.ci_source}{', hourly' if c.hourly else ''}), offsets excluded"]
    if c.alpha != 1:
        out.append(f"CO2e net of offsets: {_kg(rec.co2e_kg)} = location-based x alpha {c.alpha:g} ({c.alpha_source})")
    out += intensity_lines(rec)
    emb = f"Embodied CO2e: {_kg(rec.embodied_kg)} ({EMBODIED_METHOD}"
    emb += f"; {len(rec.embodied)} unit line(s))" if rec.embodied else ")"
    if rec.embodied_note:
        emb += f"; {rec.embodied_note}"
    out.append(emb)
    out.append(f"SCI total (O + M): {_kg(sci_total_kg(rec))}")
    if brief:
        out = (out[:2] if c.alpha != 1 else []) + intensity_lines(rec)
        if rec.embodied_kg is not None:
            out += [emb, f"SCI total (O + M): {_kg(sci_total_kg(rec))}"]
    if rec.cost is not None:
        out.append(f"Energy cost: {rec.cost:.4g} {rec.cost_currency} ({rec.cost_source})")
    for s in record_scores(rec):
        out.append(f"SCI for AI per {s.unit}: {_g(s.total_g)} gCO2e (operational {_g(s.operational_g)}, "
                   f"embodied {_g(s.embodied_g)}; R = {s.r:.4g} from {s.r_source})")
    return out


def intensity_lines(rec: JobRecord) -> list[str]:
    """The average and the marginal intensity's CO2e side by side, each with its source and age;
    [] when no marginal series was imported (one kind only: the lines above say it)."""
    c = rec.carbon
    if not c.marginal_source and c.intensity_kind == "average":
        return []
    avg_src = c.hourly_source if c.hourly else f"annual {c.ci_g_per_kwh:g} gCO2e/kWh: {c.ci_source}"
    used = {"average": " (attributed)" if c.intensity_kind == "average" else "",
            "marginal": " (attributed)" if c.intensity_kind == "marginal" else ""}
    marg = _kg(rec.co2e_marginal_kg) if rec.co2e_marginal_kg is not None else "n/a (the series does not cover the job's hours)"
    return [f"CO2e by average intensity{used['average']}: {_kg(rec.co2e_average_kg)} ({avg_src})",
            f"CO2e by marginal intensity{used['marginal']}: {marg} ({c.marginal_source or 'none imported'})"]


def _g(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.4g}"


def sum_embodied(recs: list[JobRecord]) -> float | None:
    return sum_known([r.embodied_kg for r in recs])


def formula_lines(rec: JobRecord) -> list[str]:
    """The report's "How it was computed" lines after the CO2e formula: the location-based figure
    (and which of the two the formula above is), embodied per unit, the SCI total, the cost, SCI
    for AI. Each multiplies out from the numbers it prints."""
    c = rec.carbon
    out = []
    if rec.co2e_gross_kg is not None and rec.facility_kwh is not None:
        if c.alpha == 1:
            out.append("Location-based CO2e (offsets excluded) = the CO2e above: α = 1, no offset counted")
        else:
            out.append(f"Location-based CO2e (offsets excluded) = E_facility × CI = {rec.co2e_gross_kg:.4g} kgCO2e; "
                       f"the CO2e above is net of offsets: × α {c.alpha:g} = {_kg(rec.co2e_kg)} ({c.alpha_source})")
    for e in rec.embodied:
        out.append(f"M_{e.component} ({e.node}, {e.model}) = TE × TS/EL × RS = {e.te_kg:g} kgCO2e × {e.time_s:.0f} s / "
                   f"({e.lifetime_years:g} y × 8760 h × 3600 s) × {e.share:.4g} × {e.units:g} unit(s) = "
                   f"{e.kg * 1000:.4g} gCO2e  [{e.source}]")
    out.append(f"Embodied M = Σ M_unit = {_kg(rec.embodied_kg)}" + (f" ({rec.embodied_note})" if rec.embodied_note else ""))
    out.append(f"SCI-style total = location-based CO2e + M = {_kg(sci_total_kg(rec))}")
    if rec.cost is not None:
        out.append(f"Energy cost = {rec.cost:.4g} {rec.cost_currency}: {rec.cost_source}")
    out += intensity_lines(rec)
    out += [line for line in text_lines(rec) if line.startswith("SCI for AI")]
    return out


def whatif_lines(w: WhatIf, fmt_time: Callable[[float], str]) -> list[str]:
    """The what-if (:class:`slurm_energy.accounting.whatif.WhatIf`) as lines: the actual and best
    start with their location-based CO2e, the saving, the window and how the profile was obtained."""
    def kg(v: float | None) -> str:
        return "n/a (an hour it ran has no imported intensity)" if v is None else f"{v:.4g} kgCO2e"

    out = [f"ran at {fmt_time(w.actual_start)}: {kg(w.actual_kg)}",
           f"best start {fmt_time(w.best_start)}: {kg(w.best_kg)}"
           + (f" ({w.forecast_hours} h of it from a forecast)" if w.forecast_hours else "")]
    if w.saving_kg is not None:
        pct = f", {100 * w.saving_kg / w.actual_kg:.0f} %" if w.actual_kg else ""
        out.append(f"saving: {w.saving_kg:.4g} kgCO2e{pct} (worst start in the window: {w.worst_kg:.4g} kgCO2e)")
    out.append(f"window: {w.candidates} hourly starts {fmt_time(w.window[0])} .. {fmt_time(w.window[1])} "
               f"(the job's start +/- the window, clipped to the imported hourly intensity)")
    out.append(f"method: the job's facility energy (profile from its {w.profile_source}) shifted by whole hours, "
               "x each hour's CI; location-based, offsets excluded")
    return out
