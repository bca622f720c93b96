"""A month's rollup computed by the database: one SQL aggregate over job_records and job_hours.

The rule of :mod:`slurm_energy.accounting.time_split` (``tests/helpers/rollup_oracle.py`` applies it to
whole records and checks the results): the final attempts that ran in [t0, t1) (``start < t1
AND end > t0``, a zero-length one where it started), each charged ``f`` x its totals, where ``f`` is
the share of its hourly IT energy used inside the window (an hour the window cuts is split by the
part of the job's time in it; an hour stamped outside the job's times counts whole), else by wall
time when it has no hourly energy; CO2e by the share of its hourly CO2e (job_hours.co2e_kg: the
hour's intensity when the record's CO2e was hourly), else by ``f``. The location-based CO2e
(``co2e_gross_kg``) is summed apart from the net one (``co2e_kg``, x alpha) by the same share;
embodied CO2e by wall time (SCI's M is proportional to the time reserved); cost by ``f``, and only
within one currency (a group whose jobs were charged in two currencies shows cost NULL, currency
``mixed``).

Most attempts lie wholly inside the window (``start >= t0 AND end < t1``, no hour outside their
times): ``f`` is exactly 1 and no hourly row is read. Only the attempts across a bound sum their
hours (a correlated subquery in that CASE branch: a few hundred index look-ups a month). Sums skip
unmeasured attempts (SQL SUM ignores NULL; a group with only NULLs gives NULL, as pandas'
``sum(min_count=1)``), counted in unmeasured_jobs.
"""

from __future__ import annotations

from typing import Any

from slurm_energy.store.db import Db
from slurm_energy.store.select import LONGEST_SQL

#: output columns after the group name
COLUMNS = ("jobs", "attempts", "unmeasured_jobs", "it_kwh", "facility_kwh", "co2e_kg", "measured_it_kwh", "estimated_it_kwh",
           "gpu_idle_kwh", "co2e_gross_kg", "embodied_kg", "cost", "cost_currency")
BY = ("user", "account", "partition")
#: the window's rows: final attempts that ran in [t0, t1) (a zero-length one where it started);
#: start_time bounded below by the longest stored attempt (an index range bounded at both ends)
IN_WINDOW = ("j.status <> 'running' AND j.start_time < :t1 AND j.start_time >= :t0 - :longest AND "
             "(j.end_time > :t0 OR (j.start_time = j.end_time AND j.start_time >= :t0))")


def _sql(dialect: str, by: str) -> str:
    g, le = ("greatest", "least") if dialect == "postgresql" else ("max", "min")
    inside = "(j.start_time >= :t0 AND j.end_time < :t1 AND NOT coalesce(j.hours_outside, FALSE))"
    # one hour's span [a, b]: the job's part of the hour, or the whole
    # hour when the energy is stamped outside the job's times; its fraction inside [t0, t1)
    out = "(h.hour_start + 3600 < j.start_time OR h.hour_start > j.end_time)"
    a = f"CASE WHEN {out} THEN h.hour_start ELSE {g}(h.hour_start, j.start_time) END"
    b = f"CASE WHEN {out} THEN h.hour_start + 3600 ELSE {le}(h.hour_start + 3600, j.end_time) END"
    frac = (f"CASE WHEN ({b}) <= ({a}) THEN (CASE WHEN ({a}) >= :t0 AND ({a}) < :t1 THEN 1.0 ELSE 0.0 END) "
            f"ELSE {g}(0.0, {le}({b}, :t1) - {g}({a}, :t0)) / (({b}) - ({a})) END")
    wall = (f"CASE WHEN j.end_time <= j.start_time THEN (CASE WHEN j.start_time >= :t0 AND j.start_time < :t1 "
            f"THEN 1.0 ELSE 0.0 END) ELSE {g}(0.0, {le}(j.end_time, :t1) - {g}(j.start_time, :t0)) "
            f"/ (j.end_time - j.start_time) END")
    # correlated subqueries: evaluated only in the CASE branch of an attempt across a bound (a few
    # hundred a month), each an index range on job_hours' key (job_row_id, hour_start)
    win = f"(SELECT sum(h.it_kwh * ({frac})) FROM job_hours h WHERE h.job_row_id = j.id)"
    winc = f"(SELECT sum(h.co2e_kg * ({frac})) FROM job_hours h WHERE h.job_row_id = j.id)"
    f = (f"CASE WHEN {inside} THEN 1.0 WHEN j.hourly_it_kwh > 0 THEN {le}(1.0, coalesce({win}, 0.0) / j.hourly_it_kwh) "
         f"ELSE {wall} END")
    fc = (f"CASE WHEN {inside} THEN 1.0 WHEN j.hourly_co2e_kg > 0 THEN {le}(1.0, coalesce({winc}, 0.0) / j.hourly_co2e_kg) "
          f"ELSE ({f}) END")
    col = f'j."{by}"'
    return f"""
WITH s AS (
  SELECT CASE WHEN {col} IS NULL OR {col} = '' THEN '(none)' ELSE {col} END AS grp,
         j.cluster || ':' || j.job_id AS job,
         j.it_kwh, j.facility_kwh, j.co2e_kg, j.measured_it_kwh, j.estimated_it_kwh, j.gpu_idle_kwh,
         j.co2e_gross_kg, j.embodied_kg, j.cost, nullif(j.cost_currency, '') AS cost_currency, {f} AS f, {fc} AS fc, {wall} AS fw
  FROM job_records j
  WHERE {IN_WINDOW}
)
SELECT grp, count(DISTINCT job), count(*), sum(CASE WHEN it_kwh IS NULL THEN 1 ELSE 0 END), sum(it_kwh * f),
       sum(facility_kwh * f),
       sum(co2e_kg * fc), sum(measured_it_kwh * f), sum(estimated_it_kwh * f), sum(gpu_idle_kwh * f),
       sum(co2e_gross_kg * fc), sum(embodied_kg * fw),
       CASE WHEN min(cost_currency) = max(cost_currency) THEN sum(cost * f) END,
       CASE WHEN min(cost_currency) = max(cost_currency) THEN min(cost_currency) WHEN max(cost_currency) IS NULL THEN NULL
            ELSE 'mixed' END
FROM s GROUP BY grp
"""


def month_rollup(db: Db, by: str, t0: float, t1: float) -> list[dict[str, Any]]:
    """Per ``by`` group (user, account or partition; ``(none)`` for an empty name), sorted by name:
    ``{by, jobs, attempts, unmeasured_jobs, it_kwh, facility_kwh, co2e_kg, measured_it_kwh, estimated_it_kwh,
    gpu_idle_kwh, co2e_gross_kg, embodied_kg, cost, cost_currency}`` (``jobs``: distinct Slurm jobs,
    cluster and job id; ``attempts``: their runs, a requeued job's each, as ``jobenergy`` lists them;
    ``unmeasured_jobs``: the unmeasured attempts; kWh, kgCO2e; None = no measured
    job in the group; gpu_idle_kwh: the jobs' GPU energy while allocated but idle, charged by the same
    fraction; co2e_kg net of alpha, co2e_gross_kg location-based) charged to [t0, t1) (epoch s).

    Raises ValueError for another ``by``; StoreDbError from the database."""
    if by not in BY:
        raise ValueError(f"--by={by!r}: use one of {', '.join(BY)}")
    longest = db.execute(LONGEST_SQL)[0][0] or 0.0
    rows = db.execute(_sql(db.dialect, by), {"t0": float(t0), "t1": float(t1), "longest": float(longest)})
    out = [{by: r[0], **{k: (int(v) if k in ("jobs", "attempts", "unmeasured_jobs") else
                             (v if k == "cost_currency" or v is None else float(v)))
                         for k, v in zip(COLUMNS, r[1:])}} for r in rows]
    return sorted(out, key=lambda d: d[by])


def month_ids(db: Db, t0: float, t1: float) -> list[int]:
    """job_records ids of the final attempts that ran in [t0, t1) (as :func:`month_rollup`), oldest first."""
    longest = db.execute(LONGEST_SQL)[0][0] or 0.0
    q = f"SELECT j.id FROM job_records j WHERE {IN_WINDOW} ORDER BY j.start_time, j.id"
    return [r[0] for r in db.execute(q, {"t0": float(t0), "t1": float(t1), "longest": float(longest)})]


#: rows of :func:`top_gpu_idle`
TOP_COLUMNS = ("job_id", "array_job_id", "array_task_id", "user", "account", "start_time", "gpu_idle_s",
               "gpu_idle_kwh", "gpu_idle_method", "it_kwh")


def top_gpu_idle(db: Db, t0: float, t1: float, limit: int = 10) -> list[dict[str, Any]]:
    """The month's top jobs by GPU energy while allocated but idle: the final attempts that ran in
    [t0, t1) (as :func:`month_rollup`) with a GPU-idle energy above 0, largest first, at most
    ``limit``; each ``TOP_COLUMNS`` (kWh; method counter/power_integration = measured in an idle state)."""
    longest = db.execute(LONGEST_SQL)[0][0] or 0.0
    cols = ", ".join(f'j."{c}"' for c in TOP_COLUMNS)
    q = (f"SELECT {cols} FROM job_records j WHERE {IN_WINDOW} AND j.gpu_idle_kwh > 0 "
         "ORDER BY j.gpu_idle_kwh DESC, j.start_time LIMIT :n")
    rows = db.execute(q, {"t0": float(t0), "t1": float(t1), "longest": float(longest), "n": int(limit)})
    return [dict(zip(TOP_COLUMNS, r)) for r in rows]
