"""Which job_records rows a query selects, as SQL text with ``:name`` parameters.

:class:`slurm_energy.store.sqlstore.Store` runs it (``:name`` parameters; SQLite or PostgreSQL).

Time windows (sacct's rule: attempts running at some moment in [start, end]): ``end_time >= start
AND start_time <= end``. The first bound alone is what an index on start_time cannot use, so the
longest stored attempt (``max(elapsed_s)``, read through its index) adds ``start_time >= start -
longest``: the index range on start_time is then bounded at both ends, and a one-day window reads
the same few rows late in the store as early (tests/store/test_store_v2.py checks the plan).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from slurm_energy.store.schema import COLUMNS
from slurm_energy.units import J_PER_KWH

#: the summary columns a :class:`JobRow` carries: job_records' columns but the bookkeeping ones
ROW_COLUMNS = tuple(c for c in COLUMNS if c not in ("updated_at", "hourly_it_kwh", "hourly_co2e_kg", "hours_outside"))


class _Carbon:
    __slots__ = ("ci_g_per_kwh", "pue")

    def __init__(self, pue: float | None, ci: float | None):
        self.pue, self.ci_g_per_kwh = pue, ci


class JobRow:
    """One attempt's summary row, with the JobRecord attribute names jobenergy's table reads
    (:data:`ROW_COLUMNS`: ``job_id``, ``status``, ``job_state``, ``elapsed_s``...; ``energy_it_j``
    {class: J or None}, ``methods`` {class: method}, ``method_summary``, ``carbon.pue``), without
    parsing the record JSON. Energies: J in ``energy_it_j`` (as JobRecord), kWh in ``it_kwh`` /
    ``facility_kwh``; None = unmeasured."""

    __slots__ = (*ROW_COLUMNS, "energy_it_j", "carbon", "method_summary", "rest_of_node_j")
    if TYPE_CHECKING:
        def __getattr__(self, name: str) -> Any: ...

    def __init__(self, values: Iterable[Any]):
        v: dict[str, Any] = dict(zip(ROW_COLUMNS, values))
        cov = v["coverage_complete"]
        v.update(restart_count=v["restart_count"] or 0, coverage_complete=True if cov is None else bool(cov),
                 report_error=v["report_error"] or "", exit_code=v["exit_code"] or "", job_name=v["job_name"] or "",
                 job_state=v["job_state"] or "UNKNOWN")  # stored: Slurm's, else from the exit code, else ""
        methods = dict(p.split("=", 1) for p in (v["methods"] or "").split(",") if "=" in p)
        for k, x in v.items():
            setattr(self, k, x)
        self.methods = methods
        self.carbon = _Carbon(v["pue"], v["ci_g_per_kwh"])
        self.energy_it_j = {c: None if v.get(f"{c}_kwh") is None else v[f"{c}_kwh"] * J_PER_KWH
                            for c in (v["classes"] or "").split(",") if c}
        self.method_summary = ",".join(f"{k}={m}" for k, m in sorted(methods.items()))
        rest = v.get("rest_of_node_kwh")
        self.rest_of_node_j = None if rest is None else rest * J_PER_KWH  # as JobRecord's
        self.rest_of_node_method = v.get("rest_of_node_method") or ""

    def __repr__(self) -> str:
        return f"JobRow({self.cluster}/{self.job_id} #{self.restart_count} {self.status})"


class Where:
    """A conjunction of conditions with numbered parameters."""

    def __init__(self) -> None:
        self.conds: list[str] = []
        self.params: dict[str, Any] = {}

    def p(self, v: Any) -> str:
        name = f"p{len(self.params)}"
        self.params[name] = v
        return f":{name}"

    def isin(self, col: str, vals: Iterable[Any]) -> str:
        return f"{col} IN ({', '.join(self.p(v) for v in vals)})"

    def sql(self) -> str:
        return (" WHERE " + " AND ".join(self.conds)) if self.conds else ""


def spec_sql(w: Where, spec: Any) -> str:
    """One job id form (:class:`slurm_energy.jobid.JobSpec`), as :func:`slurm_energy.jobid.matches`."""
    if getattr(spec, "sluid", ""):
        return f"(sluid = {w.p(spec.sluid)})"
    if spec.array_tasks is not None:
        return f"(array_job_id = {w.p(spec.job_id)} AND {w.isin('array_task_id', spec.array_tasks)})"
    if spec.het_offset is not None:
        return f"(het_job_id = {w.p(spec.job_id)} AND het_job_offset = {w.p(spec.het_offset)})"
    j = w.p(spec.job_id)
    return f"(job_id = {j} OR array_job_id = {j} OR het_job_id = {j})"


def where(*, specs=None, users=None, accounts=None, partitions=None, clusters=None, uids=None, states=None,
          start: float | None = None, end: float | None = None, longest: float | None = None) -> Where:
    """The WHERE of a query (every argument a filter; None = none). ``specs``: parsed job ids;
    ``states``: record statuses; ``start``/``end``: epoch s (see the module docstring); ``longest``:
    the longest stored attempt, s (``max(elapsed_s)``), bounding the start_time index range."""
    w = Where()
    if specs:
        w.conds.append("(" + " OR ".join(spec_sql(w, s) for s in specs) + ")")
    for col, vals in (('"user"', users), ("account", accounts), ('"partition"', partitions), ("cluster", clusters),
                      ("uid", uids), ("status", states)):  # fmt: skip
        if vals:
            w.conds.append(w.isin(col, list(vals)))
    if start is not None:
        w.conds.append(f"end_time >= {w.p(float(start))}")
        if longest is not None:
            w.conds.append(f"start_time >= {w.p(float(start) - float(longest))}")
    if end is not None:
        w.conds.append(f"start_time <= {w.p(float(end))}")
    return w


LONGEST_SQL = "SELECT max(elapsed_s) FROM job_records"


def rows_sql(w: Where, limit: int | None = None) -> str:
    """SELECT of the summary columns, oldest first (``limit``: the newest that many)."""
    cols = ", ".join(f'"{c}"' for c in ROW_COLUMNS)
    if limit is not None:
        return f"SELECT {cols} FROM job_records{w.sql()} ORDER BY start_time DESC, id DESC LIMIT {int(limit)}"
    return f"SELECT {cols} FROM job_records{w.sql()} ORDER BY start_time, id"
