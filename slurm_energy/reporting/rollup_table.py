"""The month's rollup table: the month's bounds in the site's time zone, the jobs that ran in it and
what each is charged (``slurm-energy rollup``; shown by :mod:`slurm_energy.cli.store_cmds`, written
as CSV/JSON/HTML by :mod:`slurm_energy.reporting.monthly`)."""

from __future__ import annotations

import datetime as dt


def month_bounds(month: str, tz: str = "UTC") -> tuple[float, float]:
    """``"2024-03"`` -> (epoch s of 2024-03-01T00:00, epoch s of 2024-04-01T00:00) in the IANA time
    zone ``tz`` (the site config's ``timezone``; e.g. Europe/Berlin: 2024-02-29T23:00Z, 2024-03-31T22:00Z).

    Raises ValueError naming --month, the value and the expected form (``tz`` is validated by the config).
    """
    from zoneinfo import ZoneInfo

    try:
        y, m = (int(x) for x in month.split("-"))
        if not 1 <= m <= 12 or len(month) != 7:
            raise ValueError
    except ValueError:
        raise ValueError(f"--month={month!r} is not a month; write YYYY-MM, e.g. 2024-03") from None
    z = ZoneInfo(tz)
    start = dt.datetime(y, m, 1, tzinfo=z)
    end = dt.datetime(y + m // 12, m % 12 + 1, 1, tzinfo=z)
    return start.timestamp(), end.timestamp()


def month_records(records, t0: float, t1: float) -> list:
    """The final (not running) records whose run overlaps [t0, t1): start < t1 and end > t0 (a job
    of zero length counts where it started)."""
    return [r for r in records if r.status.value != "running"
            and (r.start_time < t1 and r.end_time > t0 or r.start_time == r.end_time and t0 <= r.start_time < t1)]


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


def rows_frame(rows: list[dict], by: str):
    """The rows of :func:`slurm_energy.store.rollup.month_rollup` as :func:`rollup`'s DataFrame
    (same columns and order; None where nothing was measured)."""
    import pandas as pd

    cols = [by, "jobs", "unmeasured_jobs", "it_kwh", "facility_kwh", "co2e_kg", "measured_it_kwh", "estimated_it_kwh",
            "gpu_idle_kwh"]
    df = pd.DataFrame(rows, columns=cols)
    return df.astype(object).where(df.notna(), None)


def month_header(month: str, tz: str, t0: float, t1: float) -> str:
    """The rollup's first line: the month, its time zone and its bounds in UTC."""
    def iso(t: float) -> str:
        return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%dT%H:%MZ")

    return (f"# rollup {month}, time zone {tz} ({iso(t0)} .. {iso(t1)}); jobs across the month's "
            "bounds are charged the energy and CO2e they used inside it")
