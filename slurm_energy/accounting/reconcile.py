"""Reconciliation: does the jobs' energy on a node add up to what its meter measured? (pure)

Per node and period (UTC hour, day or month):

* metered_j -- the node meter's energy in the period (its rows, :func:`rest_of_node.meter_series`;
  an interval that crosses a period boundary is split by its seconds);
* jobs_j -- the sum of the jobs' attributed energy on that node in the period (each job's
  ``hourly_energy_j`` of that node: components' shares plus its rest-of-node share);
* idle_j -- the meter's energy in the seconds no job ran on the node (the union of the jobs' spans
  left out);
* residual_j = metered_j - jobs_j - idle_j, and residual_pct = residual_j / metered_j x 100.

With every job metered and attributed by the rules of docs/NODE_METER.md, the residual is the part
of the node's rest that went to no job (the shares of a shared node's jobs sum to less than 1: CPUs
left unallocated) plus what was not metered.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from slurm_energy.accounting.rest_of_node import meter_series

BY = ("hour", "day", "month")


@dataclass
class Period:
    node: str
    period: str  # "2026-12-06T08", "2026-12-06", "2026-12" (UTC)
    metered_j: float = 0.0
    jobs_j: float = 0.0
    idle_j: float = 0.0
    metered_s: float = 0.0
    jobs: int = 0

    @property
    def residual_j(self) -> float:
        return self.metered_j - self.jobs_j - self.idle_j

    @property
    def residual_pct(self) -> float | None:
        return None if self.metered_j <= 0 else 100.0 * self.residual_j / self.metered_j

    def as_dict(self) -> dict[str, Any]:
        kwh = 3.6e6
        return {"node": self.node, "period": self.period, "metered_kwh": self.metered_j / kwh,
                "jobs_kwh": self.jobs_j / kwh, "idle_kwh": self.idle_j / kwh, "residual_kwh": self.residual_j / kwh,
                "residual_pct": self.residual_pct, "metered_s": self.metered_s, "jobs": self.jobs}


def period_key(t: float, by: str) -> str:
    d = datetime.fromtimestamp(t, tz=timezone.utc)
    return d.strftime({"hour": "%Y-%m-%dT%H", "day": "%Y-%m-%d", "month": "%Y-%m"}[by])


def _bounds(a: float, b: float, by: str) -> list[tuple[float, float]]:
    """[a, b] cut at period boundaries (UTC)."""
    out = []
    t = a
    while t < b:
        d = datetime.fromtimestamp(t, tz=timezone.utc)
        if by == "hour":
            nxt = d.replace(minute=0, second=0, microsecond=0).timestamp() + 3600
        elif by == "day":
            nxt = d.replace(hour=0, minute=0, second=0, microsecond=0).timestamp() + 86400
        else:
            y, m = (d.year + 1, 1) if d.month == 12 else (d.year, d.month + 1)
            nxt = datetime(y, m, 1, tzinfo=timezone.utc).timestamp()
        out.append((t, min(b, nxt)))
        t = min(b, nxt)
    return out


def _union(spans: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _covered(a: float, b: float, union: Sequence[tuple[float, float]]) -> float:
    return sum(max(0.0, min(b, y) - max(a, x)) for x, y in union)


def reconcile_node(node: str, meter_rows: Sequence[tuple[float, Any]], jobs: Sequence[tuple[float, float, dict[str, float]]],
                   by: str = "hour", t0: float | None = None, t1: float | None = None,
                   max_gap_s: float | None = None) -> list[Period]:
    """The node's periods (module docstring). ``meter_rows``: ``(t, Reading)`` in time order;
    ``jobs``: ``(start, end, hourly_energy_j)`` of each job's view of this node; ``t0``/``t1``: the
    window (default: the meter's); ``max_gap_s``: power readings further apart measure nothing
    between them (:func:`~slurm_energy.accounting.rest_of_node.meter_series`): ``metered_s`` says
    how much of each period was metered."""
    if by not in BY:
        raise ValueError(f"--by {by!r}: use one of {', '.join(BY)}")
    meter, _ = meter_series(list(meter_rows), max_gap_s)
    union = _union([(a, b) for a, b, _ in jobs])
    lo = meter.t0[0] if t0 is None and len(meter.t0) else (t0 or 0.0)
    hi = meter.t1[-1] if t1 is None and len(meter.t1) else (t1 or 0.0)
    out: dict[str, Period] = {}
    for a0, b0, e in zip(meter.t0.tolist(), meter.t1.tolist(), meter.energy.tolist(), strict=True):
        if e != e or b0 <= a0:
            continue
        for a, b in _bounds(max(a0, lo), min(b0, hi), by):
            p = out.setdefault(period_key(a, by), Period(node, period_key(a, by)))
            part = e * (b - a) / (b0 - a0)
            p.metered_j += part
            p.metered_s += b - a
            p.idle_j += part * (1.0 - _covered(a, b, union) / (b - a))
    for _start, _end, hourly in jobs:
        seen = set()
        for hk, j in hourly.items():
            t = datetime.strptime(hk, "%Y-%m-%dT%H:00:00Z").replace(tzinfo=timezone.utc).timestamp()
            if not (lo - 3600 < t < hi):
                continue
            key = period_key(t, by)
            if key in out:
                out[key].jobs_j += j
                seen.add(key)
        for k in seen:
            out[k].jobs += 1
    return [out[k] for k in sorted(out)]
