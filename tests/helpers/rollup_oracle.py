"""The monthly rollup computed from whole records with pandas: the reference the store's SQL
aggregate (:func:`slurm_energy.store.rollup.month_rollup`) is checked against. A test oracle, not a
second path in the package: the rule of :mod:`slurm_energy.accounting.time_split` on whole records."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from slurm_energy.accounting.time_split import hourly_it_j
from slurm_energy.carbon.hourly import co2e_kg_hourly, facility_kwh_by_hour
from slurm_energy.model import JobRecord, Method
from slurm_energy.units import J_PER_KWH

_H = 3600.0


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


def month_records(records, t0: float, t1: float) -> list:
    """The final (not running) records whose run overlaps [t0, t1): start < t1 and end > t0 (a job
    of zero length counts where it started)."""
    return [r for r in records if r.status.value != "running"
            and ((r.start_time < t1 and r.end_time > t0) or (r.start_time == r.end_time and t0 <= r.start_time < t1))]


def rollup(records, by: str, t0: float, t1: float, hourly_ci=None):
    """Monthly table (pandas DataFrame) of the jobs that ran in [t0, t1) (epoch s), grouped by ``by``.

    Columns: ``by``, jobs, unmeasured_jobs, it_kwh, facility_kwh, co2e_kg, measured_it_kwh (device
    classes read from an energy counter or integrated sampled power), estimated_it_kwh (classes from
    the TDP model: rated power x utilisation x time); measured + estimated = it_kwh. A job is charged
    what it used inside [t0, t1) (:func:`window_share`; its
    hourly energy, CO2e by the hourly intensity ``hourly_ci(record)`` returns, {UTC hour: gCO2e/kWh}
    or None). Sums skip unmeasured jobs (counted in unmeasured_jobs); a group with only unmeasured
    jobs has None sums.
    """
    import pandas as pd

    rows = [{by: getattr(r, by) or "(none)", "job": f"{r.cluster}:{r.job_id}",
             **window_share(r, t0, t1, hourly_ci(r) if hourly_ci and r.carbon.hourly else None)}
            for r in month_records(records, t0, t1)]
    cols = [by, "jobs", "attempts", "unmeasured_jobs", "it_kwh", "facility_kwh", "co2e_kg", "measured_it_kwh", "estimated_it_kwh",
            "gpu_idle_kwh"]
    if not rows:
        return pd.DataFrame(columns=cols)
    df = pd.DataFrame(rows)
    g = df.groupby(by, sort=True)
    out = pd.DataFrame({
        "jobs": g["job"].nunique(),
        "attempts": g.size(),
        "unmeasured_jobs": g["it_kwh"].apply(lambda s: int(s.isna().sum())),
        "it_kwh": g["it_kwh"].sum(min_count=1),
        "facility_kwh": g["facility_kwh"].sum(min_count=1),
        "co2e_kg": g["co2e_kg"].sum(min_count=1),
        "measured_it_kwh": g["measured_it_kwh"].sum(min_count=1),
        "estimated_it_kwh": g["estimated_it_kwh"].sum(min_count=1),
        "gpu_idle_kwh": g["gpu_idle_kwh"].sum(min_count=1),
    }).reset_index()  # fmt: skip
    return out[cols].astype(object).where(out[cols].notna(), None)
