"""``slurm-energy reconcile``: a node's meter against its jobs' attributed energy plus its idle energy.

``reconcile --node N [--meter-file F] [--by hour|day|month] [--since T] [--until T]
[--format table|csv|json|html] [--out F] [--prometheus F]``: per period, the metered kWh (the node
meter's file, written by the node's meter process), the jobs' kWh on that node (the store), the
node's kWh with no job, the residual kWh and % (:mod:`slurm_energy.accounting.reconcile`).
``--prometheus F`` writes the last period's residual as a node_exporter textfile
(``slurm_energy_node_residual_joules``, ``slurm_energy_node_residual_ratio``). ``--save`` stores the
node's whole UTC hours in the window (metered, jobs', idle kWh) in the store's ``node_hours``, charged
to the partition its jobs ran in (or ``--partition``): the monthly rollup's idle energy per partition
(:mod:`slurm_energy.store.nodehours`).
"""

from __future__ import annotations

import argparse
import csv
import html
import io
import json
import sys
import time
from typing import TYPE_CHECKING, Any

from slurm_energy.cli.site import site_config, store_url
from slurm_energy.store.urls import STORE_HELP

if TYPE_CHECKING:
    from slurm_energy.accounting.reconcile import Period
    from slurm_energy.cli.main import Subparsers
    from slurm_energy.model import JobRecord

HEAD = ("node", "period", "metered_kwh", "jobs_kwh", "idle_kwh", "residual_kwh", "residual_pct", "jobs", "metered_s")


def register(sub: Subparsers) -> None:
    p = sub.add_parser("reconcile", help="node meter vs the jobs' attributed energy plus idle energy, per period",
                       description="Per node and hour/day/month: metered kWh (node meter) against the sum of the "
                       "jobs' attributed kWh on the node plus the node's kWh with no job; the residual in kWh and %. "
                       "See docs/NODE_METER.md.")
    p.add_argument("--node", required=True, help="node name (as Slurm names it)")
    p.add_argument("--meter-file", help="the node's meter file (default <spool_dir>/node-meter-<node>.jsonl)")
    p.add_argument("--by", choices=("hour", "day", "month"), default="hour")
    p.add_argument("--since", help="window start (e.g. 2026-12-01, now-1day; default: the meter file's first row)")
    p.add_argument("--until", help="window end (default: the meter file's last row)")
    p.add_argument("--format", choices=("table", "csv", "json", "html"), default="table")
    p.add_argument("--out", help="write here instead of stdout")
    p.add_argument("--prometheus", metavar="FILE", help="also write the last period's residual as a textfile (.prom)")
    p.add_argument("--save", action="store_true",
                   help="store the node's whole UTC hours in the window (metered, jobs' and idle kWh) for the monthly "
                   "rollup's idle energy per partition (replaces those hours if stored before)")
    p.add_argument("--partition", help="with --save: the partition the node's idle energy is charged to (default: "
                   "the one partition its jobs in the window ran in)")
    p.add_argument("--store", help=STORE_HELP)
    p.set_defaults(func=cmd_reconcile)


def render(periods: list[dict[str, Any]], fmt: str) -> str:
    if fmt == "json":
        return json.dumps({"periods": periods}, indent=1)
    rows = [[p["node"], p["period"], *(f"{p[k]:.6g}" for k in HEAD[2:6]),
             "n/a" if p["residual_pct"] is None else f"{p['residual_pct']:.2f}", str(p["jobs"]),
             f"{p['metered_s']:.0f}"] for p in periods]
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(HEAD)
        w.writerows(rows)
        return buf.getvalue()
    if fmt == "html":
        th = "".join(f"<th>{h}</th>" for h in HEAD)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
        return (f"<!doctype html><meta charset=utf-8><title>slurm-energy reconcile</title><table>"
                f"<tr>{th}</tr>{body}</table>\n")
    from slurm_energy.cli.table import render as render_table

    return render_table(rows, list(HEAD))


def prometheus_text(periods: list[dict[str, Any]], by: str) -> str:
    from prometheus_client import CollectorRegistry, Gauge, generate_latest

    reg = CollectorRegistry()
    rj = Gauge("slurm_energy_node_residual_joules", "Node meter minus the jobs' attributed energy and the idle "
               "energy, last period, J", ["node", "by", "period"], registry=reg)
    rr = Gauge("slurm_energy_node_residual_ratio", "Residual / metered energy, last period", ["node", "by", "period"],
               registry=reg)
    if periods:
        p = periods[-1]
        rj.labels(p["node"], by, p["period"]).set(p["residual_kwh"] * 3.6e6)
        if p["residual_pct"] is not None:
            rr.labels(p["node"], by, p["period"]).set(p["residual_pct"] / 100.0)
    return generate_latest(reg).decode()


def node_partition(node: str, given: str | None, records: list[JobRecord]) -> tuple[str, str]:
    """(partition, how): ``given`` (``--partition``), else the one partition the node's jobs in the
    window ran in. Raises ValueError naming the fix where they ran in none or several (a node in
    two partitions: which one pays for its idle hours is the site's call, not a guess)."""
    if given:
        return given, "given"
    parts = sorted({r.partition for r in records if r.partition})
    if len(parts) == 1:
        return parts[0], "jobs"
    found = f"ran in partitions {', '.join(parts)}" if parts else "name no partition (or no job ran)"
    raise ValueError(f"--save: the jobs on {node} in this window {found}; give --partition P to say which "
                     "partition its idle energy is charged to")


def _save(url: str, cluster: str, node: str, given: str | None, records: list[JobRecord], hours: list[Period],
          lo: float, hi: float,
          source: str) -> int:
    """Store the node's whole UTC hours inside [lo, hi] (an hour the window cuts is left out: it
    would replace a whole stored hour by a part). Opens the store writable (migrating it)."""
    from datetime import datetime, timezone

    from slurm_energy.store import open_store
    from slurm_energy.store.nodehours import put_node_hours

    partition, how = node_partition(node, given, records)
    kwh = 3.6e6
    out: list[dict[str, Any]] = []
    for p in hours:
        h = datetime.strptime(p.period, "%Y-%m-%dT%H").replace(tzinfo=timezone.utc).timestamp()
        if h >= lo and h + 3600 <= hi:
            out.append(dict(cluster=cluster, node=node, hour_start=int(h), partition=partition, partition_from=how,
                            source=source, metered_kwh=p.metered_j / kwh, jobs_kwh=p.jobs_j / kwh,
                            idle_kwh=p.idle_j / kwh, metered_s=p.metered_s))
    store = open_store(url)
    try:
        return put_node_hours(store.db, out)
    finally:
        store.close()


def cmd_reconcile(args: argparse.Namespace) -> int:
    from slurm_energy.accounting.reconcile import reconcile_node
    from slurm_energy.fileio import atomic_write
    from slurm_energy.sampling import meterspool
    from slurm_energy.slurm.clients.timespec import parse_time
    from slurm_energy.store import open_store

    try:
        cfg = site_config()
        now = time.time()
        t0 = parse_time(args.since, now=now, tz=cfg.timezone, field="--since") if args.since else None
        t1 = parse_time(args.until, now=now, tz=cfg.timezone, field="--until") if args.until else None
        path = args.meter_file or meterspool.meter_path(cfg.paths.spool_dir, args.node)
        rows = meterspool.read_span(path, t0 if t0 is not None else 0.0, t1 if t1 is not None else 4e9, margin_s=0.0)
        if not rows:
            print(f"slurm-energy: no node meter rows in {path} for that window; is node_meter set in site.yaml "
                  "and a job run on the node since?", file=sys.stderr)
            return 2
        lo, hi = rows[0].t if t0 is None else t0, rows[-1].t if t1 is None else t1
        url = store_url(args.store, cfg.paths.store_url).url
        store = open_store(url, readonly=True)
        try:
            recs = store.query(start=lo, end=hi)
        finally:
            store.close()
        on_node = [r for r in recs if any(n.node == args.node for n in r.nodes)]
        jobs = [(n.start_time, n.end_time, n.hourly_energy_j) for r in on_node for n in r.nodes if n.node == args.node]
        meter = [(r.t, r.reading) for r in rows]
        gap = 3 * float(cfg.node_meter.interval_s)
        periods = [p.as_dict() for p in reconcile_node(args.node, meter, jobs, args.by, lo, hi, max_gap_s=gap)]
        if args.save:
            hours = reconcile_node(args.node, meter, jobs, "hour", lo, hi, max_gap_s=gap)
            n = _save(url, cfg.cluster_name, args.node, args.partition, on_node, hours, lo, hi,
                      ",".join(sorted({r.source for r in rows})))
            print(f"reconcile: {n} node hour{'' if n == 1 else 's'} of {args.node} stored", file=sys.stderr)
    except (ValueError, OSError, RuntimeError) as e:
        print(f"slurm-energy: reconcile: {e}", file=sys.stderr)
        return 2
    text = render(periods, args.format)
    if args.out:
        atomic_write(args.out, text, mode=0o644)
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    if args.prometheus:
        atomic_write(args.prometheus, prometheus_text(periods, args.by), mode=0o644)
    return 0
