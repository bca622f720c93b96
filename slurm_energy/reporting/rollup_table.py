"""The month's rollup table: the month's bounds in the site's time zone and the store's rows as a
table (``slurm-energy rollup``; the SQL aggregate is :mod:`slurm_energy.store.rollup`; shown by
:mod:`slurm_energy.cli.store_cmds`; HTML by :mod:`slurm_energy.reporting.monthly`), and the rollup as CSV
or JSON text without pandas or pydantic (``rollup --format csv|json`` then starts as fast as the
table): a header of the column names, Python's ``repr`` of floats, an empty cell for None."""

from __future__ import annotations

import datetime as dt
import os
import sys
from typing import Any

#: the columns after the group name (as :data:`slurm_energy.store.rollup.COLUMNS`)
COLUMNS = ("jobs", "attempts", "unmeasured_jobs", "it_kwh", "facility_kwh", "co2e_kg", "measured_it_kwh", "estimated_it_kwh",
           "gpu_idle_kwh", "co2e_gross_kg", "embodied_kg", "cost", "cost_currency")
NOTE = ("jobs: distinct Slurm jobs; attempts: their runs (a requeued job has several); unmeasured_jobs: "
        "attempts with no energy; "
        "measured_it_kwh: energy counters or sampled power, and the rest of the node a node meter measured; "
        "estimated_it_kwh: TDP model, and the site's per-node estimate of the rest; unmeasured jobs are "
        "counted in unmeasured_jobs, never summed as 0; gpu_idle_kwh: GPU energy while allocated but idle "
        "(utilisation 0, power at idle draw), measured in an idle state (part of it_kwh); co2e_gross_kg: "
        "location-based operational CO2e (facility kWh x CI, offsets excluded); co2e_kg: net of the "
        "datacenters' offset factor alpha (the same where alpha is 1); embodied_kg: SCI's M = TE x TS/EL x RS "
        "of the hardware reserved; cost: facility kWh x the tariff's price, in cost_currency")


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


def month_header(month: str, tz: str, t0: float, t1: float) -> str:
    """The rollup's first line: the month, its time zone and its bounds in UTC."""
    def iso(t: float) -> str:
        return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%dT%H:%MZ")

    return (f"# rollup {month}, time zone {tz} ({iso(t0)} .. {iso(t1)}); jobs across the month's "
            "bounds are charged the energy and CO2e they used inside it")


def csv_text(rows: list[dict[str, Any]], by: str) -> str:
    """CSV of the rollup rows (``{by, jobs, unmeasured_jobs, it_kwh, ...}``; kWh, kgCO2e): the
    header, then one line per group; None is an empty cell."""
    import csv
    import io

    from slurm_energy.reporting.csvsafe import safe_cell

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow((by, *COLUMNS))
    for r in rows:
        w.writerow([safe_cell(r[by]) if isinstance(r[by], str) else r[by], *(r[k] for k in COLUMNS)])  # a name: never a formula
    return buf.getvalue()


def json_text(rows: list[dict[str, Any]], by: str, month: str, timezone: str,
              top_gpu_idle: list[dict[str, Any]] | None = None, idle: list[dict[str, Any]] | None = None) -> str:
    """JSON of the rollup: month, time zone, ``by``, the rows (counts as integers, energies as
    floats or null), the month's top jobs by GPU-idle energy (``top_gpu_idle``:
    :func:`slurm_energy.store.rollup.top_gpu_idle`'s rows), the nodes' metered, jobs' and idle (no job)
    kWh per partition (``idle_by_partition``: :func:`slurm_energy.store.nodehours.idle_by_partition`'s
    rows, [] where no node meter hours are stored) and the note on measured / estimated / unmeasured."""
    import json

    out = [{by: r[by], **{k: r[k] for k in COLUMNS}} for r in rows]  # month_rollup's ints and floats
    return json.dumps({"month": month, "timezone": timezone, "by": by, "rows": out,
                       "top_gpu_idle_jobs": list(top_gpu_idle or []),
                       "idle_by_partition": list(idle or []), "note": NOTE}, indent=2) + "\n"


def write_text(text: str, out: str | None) -> str:
    """``text`` to ``out`` (atomically: temp file + rename) or, for None, to stdout. Returns the
    path written ("" for stdout). Raises OSError."""
    if not out:
        sys.stdout.write(text)
        return ""
    tmp = f"{out}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, out)
    return out
