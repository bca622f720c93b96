"""The nodes' metered energy per UTC hour (table ``node_hours``, schema v6): what each node's meter
measured, the jobs' attributed part and the part with no job running, charged to a partition.

Written by ``slurm-energy reconcile --save`` (one node's whole hours, replacing what was stored for
those hours: running it again over the same window stores the same rows); read by the monthly
rollup (:func:`idle_by_partition`) so that, per partition, the jobs' energy plus the idle energy
adds up to the nodes' meters (docs/NODE_METER.md).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from slurm_energy.store.db import Db

#: one row's keys (kWh; ``hour_start`` epoch s at a UTC hour; ``metered_s`` seconds of the hour the
#: meter covered with a believed reading)
FIELDS = ("cluster", "node", "hour_start", "partition", "partition_from", "source", "metered_kwh", "jobs_kwh",
          "idle_kwh", "metered_s")

_DELETE = "DELETE FROM node_hours WHERE cluster = :cluster AND node = :node AND hour_start = :hour_start"
_INSERT = ('INSERT INTO node_hours (cluster, node, hour_start, "partition", partition_from, source, metered_kwh, '
           "jobs_kwh, idle_kwh, metered_s, updated_at) VALUES (:cluster, :node, :hour_start, :partition, "
           ":partition_from, :source, :metered_kwh, :jobs_kwh, :idle_kwh, :metered_s, :updated_at)")


def put_node_hours(db: Db, rows: Sequence[dict[str, Any]]) -> int:
    """Store ``rows`` (each :data:`FIELDS`), replacing a stored row of the same cluster, node and
    hour, in one transaction. Returns the rows written. Raises ValueError for an hour_start that is
    not a whole UTC hour."""
    for r in rows:
        if int(r["hour_start"]) % 3600:
            raise ValueError(f"node_hours: hour_start {r['hour_start']} is not at a whole UTC hour")
    now = time.time()
    params = [{**{k: r[k] for k in FIELDS}, "hour_start": int(r["hour_start"]), "updated_at": now} for r in rows]
    with db.transaction():
        db.executemany(_DELETE, params)
        db.executemany(_INSERT, params)
    return len(params)


#: rows of :func:`idle_by_partition`
IDLE_COLUMNS = ("partition", "nodes", "node_hours", "metered_kwh", "jobs_kwh", "idle_kwh", "residual_kwh")


def idle_by_partition(db: Db, t0: float, t1: float) -> list[dict[str, Any]]:
    """Per partition, sorted by name: ``IDLE_COLUMNS`` over [t0, t1) (epoch s) from the stored node
    hours; an hour the window cuts (a month in a time zone off UTC by a half hour) counts by the
    part of it inside (its energy taken as uniform in the hour). ``residual_kwh`` = metered - jobs -
    idle: the node's energy charged to no job while jobs ran (unallocated CPUs' share of the rest of
    the node). ``[]`` where none is stored (no ``reconcile --save`` ran: not metered, never 0)."""
    g, le = ("greatest", "least") if db.dialect == "postgresql" else ("max", "min")
    frac = f"({g}(0.0, {le}(hour_start + 3600, :t1) - {g}(hour_start, :t0)) / 3600.0)"
    q = (f'SELECT "partition", count(DISTINCT node), count(*), sum(metered_kwh * {frac}), sum(jobs_kwh * {frac}), '
         f"sum(idle_kwh * {frac}) FROM node_hours WHERE hour_start < :t1 AND hour_start > :t0 - 3600 "
         'GROUP BY "partition" ORDER BY "partition"')
    out = []
    for p, nodes, n, m, j, i in db.execute(q, {"t0": float(t0), "t1": float(t1)}):
        m, j, i = float(m), float(j), float(i)
        out.append(dict(zip(IDLE_COLUMNS, (p, int(nodes), int(n), m, j, i, m - j - i))))
    return out
