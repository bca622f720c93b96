"""The monthly rollup computed from whole records with pandas: the reference the store's SQL
aggregate (:func:`slurm_energy.store.rollup.month_rollup`) is checked against. A test oracle, not a
second path in the package."""

from __future__ import annotations


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
    what it used inside [t0, t1) (:func:`slurm_energy.accounting.time_split.window_share`; its
    hourly energy, CO2e by the hourly intensity ``hourly_ci(record)`` returns, {UTC hour: gCO2e/kWh}
    or None). Sums skip unmeasured jobs (counted in unmeasured_jobs); a group with only unmeasured
    jobs has None sums.
    """
    import pandas as pd

    from slurm_energy.accounting.time_split import window_share

    rows = [{by: getattr(r, by) or "(none)",
             **window_share(r, t0, t1, hourly_ci(r) if hourly_ci and r.carbon.hourly else None)}
            for r in month_records(records, t0, t1)]
    cols = [by, "jobs", "unmeasured_jobs", "it_kwh", "facility_kwh", "co2e_kg", "measured_it_kwh", "estimated_it_kwh",
            "gpu_idle_kwh"]
    if not rows:
        return pd.DataFrame(columns=cols)
    df = pd.DataFrame(rows)
    g = df.groupby(by, sort=True)
    out = pd.DataFrame({
        "jobs": g.size(),
        "unmeasured_jobs": g["it_kwh"].apply(lambda s: int(s.isna().sum())),
        "it_kwh": g["it_kwh"].sum(min_count=1),
        "facility_kwh": g["facility_kwh"].sum(min_count=1),
        "co2e_kg": g["co2e_kg"].sum(min_count=1),
        "measured_it_kwh": g["measured_it_kwh"].sum(min_count=1),
        "estimated_it_kwh": g["estimated_it_kwh"].sum(min_count=1),
        "gpu_idle_kwh": g["gpu_idle_kwh"].sum(min_count=1),
    }).reset_index()  # fmt: skip
    return out[cols].astype(object).where(out[cols].notna(), None)
