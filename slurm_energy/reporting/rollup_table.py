"""The month's rollup table: the month's bounds in the site's time zone and the store's rows as a
table (``slurm-energy rollup``; the SQL aggregate is :mod:`slurm_energy.store.rollup`; shown by
:mod:`slurm_energy.cli.store_cmds`, written as CSV/JSON/HTML by :mod:`slurm_energy.reporting.monthly`)."""

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


def rows_frame(rows: list[dict], by: str):
    """The rows of :func:`slurm_energy.store.rollup.month_rollup` as a DataFrame (columns ``by``,
    jobs, unmeasured_jobs, it_kwh, facility_kwh, co2e_kg, measured_it_kwh, estimated_it_kwh,
    gpu_idle_kwh, in that order; None where nothing was measured)."""
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
