"""A job's share of a time window (a rollup's month): energy and CO2e used inside it.

A job across a month boundary is charged to each month by the energy it used in that month, from
the record's hourly IT energy (:attr:`slurm_energy.model.NodeSummary.hourly_energy_j`, UTC hours,
summed over nodes). An hour the window cuts (a zone with a :30 offset) is split in proportion to the
part of the job's time in that hour that lies inside the window (power taken as constant within the
hour). A record without hourly energy (no samples) is split by wall time, the same assumption over
the whole job.

CO2e: with hourly carbon intensity (``record.carbon.hourly``) the window's share is the CO2e of its
hours (facility kWh x that hour's CI) over the CO2e of all the job's hours; otherwise (one CI for the
job) it is the energy share. Either way the shares of consecutive windows covering the job sum to
the record's own totals, so months add up to the stored job.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from slurm_energy.carbon.hourly import co2e_kg_hourly, facility_kwh_by_hour
from slurm_energy.model import JobRecord, Method
from slurm_energy.units import J_PER_KWH

_H = 3600.0


def hourly_it_j(rec: JobRecord) -> dict[str, float]:
    """The job's IT energy per UTC hour, J, summed over its nodes (``{"2026-11-01T00:00:00Z": J}``)."""
    out: dict[str, float] = {}
    for node in rec.nodes:
        for h, e in node.hourly_energy_j.items():
            out[h] = out.get(h, 0.0) + e
    return out


def _hour_start(key: str) -> float:
    return datetime.strptime(key, "%Y-%m-%dT%H:00:00Z").replace(tzinfo=timezone.utc).timestamp()


def _in_window(a: float, b: float, t0: float, t1: float) -> float:
    """Fraction of the span [a, b] inside [t0, t1); a point span counts whole or not at all."""
    if b <= a:
        return 1.0 if t0 <= a < t1 else 0.0
    return max(0.0, min(b, t1) - max(a, t0)) / (b - a)


def window_hourly_j(rec: JobRecord, t0: float, t1: float) -> dict[str, float]:
    """The part of each hour's IT energy (J) the job used inside [t0, t1) (epoch s); hours with
    nothing inside are left out. Within an hour the job's power is taken as constant over the part of
    the hour the job ran (``[max(hour, start), min(hour + 1 h, end)]``)."""
    out: dict[str, float] = {}
    for h, e in hourly_it_j(rec).items():
        hs = _hour_start(h)
        a, b = max(hs, rec.start_time), min(hs + _H, rec.end_time)
        if b < a:  # energy stamped outside the job's times (clock skew): the whole hour
            a, b = hs, hs + _H
        f = _in_window(a, b, t0, t1)
        if f > 0.0:
            out[h] = e * f
    return out


def energy_fraction(rec: JobRecord, t0: float, t1: float) -> float:
    """Share (0..1) of the job's IT energy used in [t0, t1): by hourly energy, else by wall time."""
    hourly = hourly_it_j(rec)
    total = sum(hourly.values())
    if hourly and total > 0.0:
        return min(1.0, sum(window_hourly_j(rec, t0, t1).values()) / total)
    return _in_window(rec.start_time, rec.end_time, t0, t1)


def co2e_fraction(rec: JobRecord, t0: float, t1: float, hourly_ci: dict[str, float] | None = None) -> float:
    """Share (0..1) of the job's CO2e in [t0, t1): by hourly CO2e when the record's CO2e was computed
    from hourly intensity and ``hourly_ci`` ({UTC hour: gCO2e/kWh}) is given, else the energy share.
    Hours missing from ``hourly_ci`` use the record's annual CI, as :func:`finalise_record` did."""
    c = rec.carbon
    if not (c.hourly and hourly_ci):
        return energy_fraction(rec, t0, t1)
    hourly = hourly_it_j(rec)

    def kg(h: dict[str, float]) -> float:
        return co2e_kg_hourly(facility_kwh_by_hour(h, c.pue), hourly_ci, c.alpha, fallback_g_per_kwh=c.ci_g_per_kwh)

    total = kg(hourly)
    if total <= 0.0:
        return energy_fraction(rec, t0, t1)
    return min(1.0, kg(window_hourly_j(rec, t0, t1)) / total)


def window_share(rec: JobRecord, t0: float, t1: float, hourly_ci: dict[str, float] | None = None) -> dict[str, Any]:
    """The job's totals charged to [t0, t1) (epoch s).

    Returns ``{"it_kwh", "facility_kwh", "co2e_kg", "measured_it_kwh", "estimated_it_kwh", "gpu_idle_kwh"}`` (kWh,
    kgCO2e): the record's totals times :func:`energy_fraction` (CO2e: :func:`co2e_fraction`).
    measured = classes read from a counter or integrated sampled power, estimated = TDP model. None
    stays None (unmeasured is never 0).
    """
    f = energy_fraction(rec, t0, t1)
    fc = co2e_fraction(rec, t0, t1, hourly_ci) if rec.co2e_kg is not None else 0.0
    measured = [j for c, j in rec.energy_it_j.items() if j is not None
                and rec.methods.get(c) in (Method.COUNTER, Method.POWER_INTEGRATION)]
    estimated = [j for c, j in rec.energy_it_j.items() if j is not None and rec.methods.get(c) == Method.TDP_ESTIMATE]

    def scaled(v: float | None, k: float = f) -> float | None:
        return None if v is None else v * k

    return {"it_kwh": scaled(rec.it_kwh), "facility_kwh": scaled(rec.facility_kwh),
            "co2e_kg": scaled(rec.co2e_kg, fc),
            "measured_it_kwh": sum(measured) / J_PER_KWH * f if measured else None,
            "estimated_it_kwh": sum(estimated) / J_PER_KWH * f if estimated else None,
            "gpu_idle_kwh": None if rec.gpu_idle_energy_j is None else rec.gpu_idle_energy_j / J_PER_KWH * f}
