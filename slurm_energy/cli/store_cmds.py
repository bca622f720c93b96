"""``slurm-energy collect`` and ``slurm-energy rollup`` (admin commands over the results dir and store).

* ``collect``, ``prune``: the arguments; the work is :mod:`slurm_energy.slurm.jobend.recover`.
* ``rollup --month YYYY-MM [--by user|account|partition] [--format table|csv|json|html] [--out F]``:
  per group for jobs that ran in that month (the site config's ``timezone``, default UTC, named in
  the header): jobs, IT kWh (measured and estimated parts), facility kWh, kgCO2e, and how many jobs
  were unmeasured (not summed as 0). A job across the month's boundary is charged the energy and
  CO2e it used inside the month (:mod:`slurm_energy.accounting.time_split`); html adds bar charts,
  the month's top jobs, method coverage and the PUE/CI used (:mod:`slurm_energy.reporting.monthly`).
  Root and site-config admins only.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import TYPE_CHECKING, Any, NamedTuple

from slurm_energy.cli.site import Site, load_site, site_config, store_url
from slurm_energy.core import one_line
from slurm_energy.reporting.rollup_table import month_bounds, month_header
from slurm_energy.store.urls import STORE_HELP, shown_url

if TYPE_CHECKING:
    from slurm_energy.cli.main import Subparsers
    from slurm_energy.model import JobRecord
    from slurm_energy.store import Store


def register(sub: Subparsers) -> None:
    """Add ``collect``, ``prune`` and ``rollup`` to the ``slurm-energy`` sub-parsers."""
    c = sub.add_parser(
        "collect", help="store queued records, finish records left by faults, add no_data records (root, every node)",
        description="Run as root on every node (and the controller), e.g. every 5 min from a systemd timer or "
        "cron (`slurm-energy install` prints both). It stores the records the hooks queued in the node's spool; "
        "finishes jobs whose detached finalizer died; finalises records still 'running' of jobs that have "
        "ended (status partial when a node never reported); and, from sacct, gives jobs that ended in the "
        "last --since hours without any record a no_data one.")
    c.add_argument("--since", type=float, default=24.0, metavar="HOURS",
                   help="jobs sacct says ended in the last HOURS without any record get a no_data one (default 24)")
    c.add_argument("--older-than", type=float, default=60.0, metavar="MIN",
                   help="only attempts whose newest node record is at least MIN minutes old (default 60)")
    c.add_argument("--results-dir", help="default: site config paths.results_dir")
    c.add_argument("--store", help=STORE_HELP)
    c.add_argument("--dry-run", action="store_true", help="list what would be stored, store nothing")
    c.set_defaults(func=cmd_collect)

    p = sub.add_parser(
        "prune", help="remove spool and results files of jobs already stored (retention)",
        description="Run as root on every node, e.g. weekly from a systemd timer (the package's "
        "slurm-energy-prune.timer; `slurm-energy install --units /etc/systemd/system` writes it on a pip install) or cron "
        "(`slurm-energy install --print` prints the line). It removes the "
        "spool's job attempts and the results directory's node records older than --older-than days whose job "
        "attempt is in the store as a final record; never one not yet stored, never a queued record.")
    p.add_argument("--older-than", type=float, default=14.0, metavar="DAYS",
                   help="only attempts whose newest file is at least DAYS days old (default 14)")
    p.add_argument("--store", help=STORE_HELP)
    p.add_argument("--dry-run", action="store_true", help="list what would be removed, remove nothing")
    p.set_defaults(func=cmd_prune)

    r = sub.add_parser("rollup", help="monthly kWh and kgCO2e per user or account (admins)")
    r.add_argument("--month", required=True, help="YYYY-MM in the site config's timezone (default UTC), e.g. 2024-03")
    r.add_argument("--by", choices=["user", "account", "partition"], default="user")
    r.add_argument("--format", choices=["table", "csv", "json", "html"], default="table",
                   help="table (default), csv, json, or html (bar charts per group, the month's top jobs, method "
                   "coverage, the PUE and carbon intensity used)")
    r.add_argument("--out", help="write to this file (default: stdout; html: rollup-<month>-<by>.html here)")
    r.add_argument("--store", help=STORE_HELP)
    r.add_argument("-P", "--parsable2", action="store_true", help="'|'-separated output")
    r.set_defaults(func=cmd_rollup)


def _err(msg: str) -> None:
    print(f"slurm-energy: {msg}", file=sys.stderr)


def _open(args: argparse.Namespace, config_url: str, readonly: bool = False) -> Store:
    """Open the store (:func:`slurm_energy.cli.site.store_url`: ``--store``, else
    ``$SLURM_ENERGY_STORE``, else ``config_url``, the site's ``paths.store_url``).

    Raises ValueError/RuntimeError (StoreError: names the URL, password hidden) from ``open_store``.
    """
    from slurm_energy.store import open_store

    return open_store(store_url(args.store, config_url).url, readonly=readonly)


def not_root_message(results_dir: str, url: str, euid: int) -> str | None:
    """Why ``collect`` cannot run as user id ``euid`` (None for root, 0).

    The node records under ``results_dir`` are root's (directories 0700, files 0600: docs/STORE.md)
    and the store is written only by root, so an ordinary user would see nothing to collect (or a
    PermissionError). Returns one line naming both paths, the user, and the fix.
    """
    if euid == 0:
        return None
    from slurm_energy.cli.sudo_caller import user_name

    name = user_name(euid)
    who = f"uid {euid}" if name == str(euid) else f"{name} (uid {euid})"
    return (f"collect must run as root: it reads the node records under {results_dir} (root's, mode 0700) "
            f"and writes the store {shown_url(url)}; you are {who}. Run it as root, e.g. from root's "
            "crontab on the controller")


def cmd_collect(args: argparse.Namespace) -> int:
    """Entry for ``slurm-energy collect``; exit 0 ok, 2 bad config/arguments, not root, or a path or
    store that cannot be read or written (the message names it)."""
    if args.older_than < 0:
        _err(f"--older-than={args.older_than} must be >= 0 minutes")
        return 2
    try:
        cfg = site_config()
        url = store_url(args.store, cfg.paths.store_url).url
    except (ValueError, OSError) as e:
        _err(str(e))
        return 2
    if not cfg.source_path:  # an operator must not take "nothing to do" for a clean cluster
        from slurm_energy.config.schema import DEFAULT_PATH, ENV_VAR

        _err(f"collect: warning: no site config ({ENV_VAR} unset, no {DEFAULT_PATH}): the documented defaults' "
             f"spool, results dir and store are looked at; set {ENV_VAR} to the site.yaml the hooks use")
    results_dir = args.results_dir or cfg.paths.results_dir
    msg = not_root_message(results_dir, url, os.geteuid())
    if msg:
        _err(msg)
        return 2
    from slurm_energy.store import open_store

    try:
        store = open_store(url)
    except PermissionError as e:
        _err(f"collect: cannot create or write {e.filename or url}: {e.strerror}; collect must run as root")
        return 2
    except (ValueError, RuntimeError, OSError) as e:
        _err(str(e))
        return 2
    from slurm_energy.errors import StoreDbError
    from slurm_energy.slurm.jobend.recover import collect_all, with_paths

    try:
        lines, done = collect_all(with_paths(cfg, url, results_dir), store, time.time(), args.older_than * 60.0,
                                  args.since * 3600.0, args.dry_run)
    except PermissionError as e:
        _err(f"collect: cannot read {e.filename or results_dir}: {e.strerror}; collect must run as root")
        return 2
    except StoreDbError as e:
        _err(f"collect: cannot write the store {shown_url(url)}: {str(e).splitlines()[0]}")
        return 2
    finally:
        store.close()
    for line in lines:
        print(one_line(line))  # a job's text (its name, a path) must neither stop collect nor forge a line
    for r in done:
        missing = [n for n in r.expected_nodes if n not in {x.node for x in r.nodes}]
        print(f"{'would store' if args.dry_run else 'stored'} {r.cluster}/{r.job_id} attempt {r.restart_count}: "
              f"status {r.status.value}, {len(r.nodes)} node(s)" + (f", missing {','.join(missing)}" if missing else ""))
    print(f"collect: {len(done)} attempt(s) {'to finalise' if args.dry_run else 'finalised'} from {results_dir}")
    return 0


def cmd_prune(args: argparse.Namespace) -> int:
    """Entry for ``slurm-energy prune``: spool retention (never a job not yet stored); exit 0 ok,
    2 bad arguments/config, not root, or a store that cannot be read."""
    if args.older_than < 0:
        _err(f"--older-than={args.older_than} must be >= 0 days")
        return 2
    try:
        cfg = site_config()
    except (ValueError, OSError) as e:
        _err(str(e))
        return 2
    if os.geteuid() != 0:
        _err("prune must run as root: the spool and results are root's (mode 0700)")
        return 2
    try:
        store = _open(args, cfg.paths.store_url, readonly=True)
    except (ValueError, RuntimeError, OSError) as e:
        _err(str(e))
        return 2
    from slurm_energy.slurm.attempt import spool_dirs
    from slurm_energy.slurm.jobend.prune import prune
    from slurm_energy.slurm.jobend.publish import results_dirs

    try:
        lines = prune(store, spool_dirs(cfg), results_dirs(cfg), args.older_than * 86400.0, time.time(),
                      args.dry_run)
    finally:
        store.close()
    for line in lines:
        print(one_line(line))  # a job's text (its name, a path) must neither stop collect nor forge a line
    print(f"prune: {len(lines)} attempt director{'y' if len(lines) == 1 else 'ies'} "
          f"{'to remove' if args.dry_run else 'removed'} (older than {args.older_than:g} days, stored)")
    return 0


def _month_data(args: argparse.Namespace, site: Site, t0: float, t1: float) -> MonthData | None:
    """(rollup rows, the month's full records: only for html, the month's top 10 jobs by GPU-idle energy:
    [] when unreadable, the nodes' metered and idle energy per partition: [] where none is stored)
    or None after printing why the store cannot be read (:mod:`slurm_energy.store.rollup`:
    month_rollup, top_gpu_idle; :func:`slurm_energy.store.nodehours.idle_by_partition`). Read-only:
    never migrates."""
    from slurm_energy.store.nodehours import idle_by_partition
    from slurm_energy.store.rollup import month_ids, month_rollup, top_gpu_idle
    from slurm_energy.store.schema import has_table

    try:
        store = _open(args, site.store_url, readonly=True)  # a reader: never creates or migrates the store
        try:
            rows = month_rollup(store.db, args.by, t0, t1)  # a SQL aggregate: no record is parsed
            # the HTML report lists the month's top jobs, methods and carbon facts: full records
            ids = month_ids(store.db, t0, t1) if args.format == "html" else []
            records = store.records_by_id(ids, progress_what=f"rollup {args.month}: reading job records")
            try:
                top = top_gpu_idle(store.db, t0, t1, 10)
            except Exception:
                top = []
            idle = idle_by_partition(store.db, t0, t1) if has_table(store.db, "node_hours") else []
        finally:
            store.close()
    except (ValueError, RuntimeError, OSError) as e:
        _err(str(e).splitlines()[0])
        return None
    return MonthData(rows, records, top, idle)


class MonthData(NamedTuple):
    """What ``rollup`` reads from the store for one month (:func:`_month_data`)."""

    rows: list[dict[str, Any]]  # per group (store.rollup.month_rollup): kWh, kgCO2e, None where unmeasured
    records: list[JobRecord]  # the month's full records: html only, else []
    top: list[dict[str, Any]]  # the top 10 jobs by GPU-idle energy (store.rollup.top_gpu_idle); [] when unreadable
    idle: list[dict[str, Any]]  # nodes' metered and idle energy per partition (store.nodehours); [] where none


def _write_rollup(args: argparse.Namespace, rows: list[dict[str, Any]], records: list[JobRecord], tz: str,
                  top: list[dict[str, Any]] | None = None, idle: list[dict[str, Any]] | None = None) -> str:
    """csv/json from the rows (:mod:`slurm_energy.reporting.rollup_table`: no pandas, no pydantic),
    html by :func:`slurm_energy.reporting.monthly.render_html` (default file rollup-<month>-<by>.html);
    returns the path written ("": stdout)."""
    from slurm_energy.reporting import rollup_table as R

    if args.format == "csv":
        return R.write_text(R.csv_text(rows, args.by), args.out)
    if args.format == "json":
        return R.write_text(R.json_text(rows, args.by, args.month, tz, top_gpu_idle=top, idle=idle), args.out)
    from slurm_energy.reporting.monthly import render_html

    return R.write_text(render_html(rows, records, args.by, args.month, tz), args.out or f"rollup-{args.month}-{args.by}.html")


def cmd_rollup(args: argparse.Namespace) -> int:
    """Entry for ``slurm-energy rollup``; exit 0 ok, 1 not an admin, 2 bad arguments/config."""
    from slurm_energy.cli.sudo_caller import as_caller, caller_named_store, ignore_callers_config, reader_identity

    ignore_callers_config("slurm-energy")  # under sudo: the system config's admins, not the caller's file
    refused = caller_named_store(args.store)  # under sudo: no root open of a store the caller names
    if refused:
        _err(refused)
        return 2
    try:
        site = load_site(strict=True)
        t0, t1 = month_bounds(args.month, site.timezone)
    except ValueError as e:
        _err(str(e))
        return 2
    _, me, privileged = reader_identity(site.admins)  # under sudo: the caller, not root
    if not privileged:
        _err(f"rollup shows every user's energy: only root and site-config admins may run it (you are {me})")
        return 1
    got = _month_data(args, site, t0, t1)
    if got is None:
        return 2
    rows, records, top, idle = got  # read as root (the store), written as the caller
    if args.format != "table":
        try:
            with as_caller():  # under sudo: --out (or the html's default file) opened as the caller, never root
                where = _write_rollup(args, rows, records, site.timezone, top, idle)
        except OSError as e:
            _err(f"rollup not written to {args.out or e.filename}: {e.strerror or e}; give a writable --out")
            return 2
        if where:
            print(f"rollup: {where}", file=sys.stderr)
        return 0

    def f(v: object) -> str:
        return "n/a" if v is None else (f"{v:.4g}" if isinstance(v, float) else str(v))

    # location-based kgCO2e always; net (x alpha) only where some group's differs; embodied and cost
    # only where some group has them (a site without factors or a tariff sees the columns it had)
    cols = ["jobs", "attempts", "unmeasured_jobs", "it_kwh", "facility_kwh", "co2e_gross_kg", "co2e_kg", "measured_it_kwh",
            "estimated_it_kwh", "gpu_idle_kwh", "embodied_kg", "cost", "cost_currency"]
    names = dict(jobs="Jobs", attempts="Attempts", unmeasured_jobs="Unmeasured", it_kwh="IT_kWh", facility_kwh="Facility_kWh",
                 co2e_gross_kg="kgCO2e", co2e_kg="Net_kgCO2e", measured_it_kwh="Measured_IT_kWh",
                 estimated_it_kwh="Estimated_IT_kWh", gpu_idle_kwh="GPU_idle_kWh", embodied_kg="Embodied_kgCO2e",
                 cost="Cost", cost_currency="Currency")
    drop = {"co2e_kg"} if all(r["co2e_kg"] == r["co2e_gross_kg"] for r in rows) else set()
    drop |= {"embodied_kg"} if all(r["embodied_kg"] is None for r in rows) else set()
    drop |= {"cost", "cost_currency"} if all(r["cost_currency"] is None for r in rows) else set()
    cols = [k for k in cols if k not in drop]
    head = [args.by, *(names[k] for k in cols)]
    table = [[f(r[k]) for k in (args.by, *cols)] for r in rows]
    from slurm_energy.cli.table import render

    print(month_header(args.month, site.timezone, t0, t1), file=sys.stderr if args.parsable2 else sys.stdout)
    print(render(table, head, parsable="P" if args.parsable2 else ""))
    if top and not args.parsable2:
        print("\ntop jobs by GPU energy while allocated but idle (measured in an idle state unless the method says "
              "tdp_estimate):")
        print(render([[_top_id(r), r["user"], r["account"], f(r["gpu_idle_s"]), f(r["gpu_idle_kwh"]),
                       r["gpu_idle_method"] or "", f(r["it_kwh"])] for r in top],
                     ["JobID", "User", "Account", "GPU_idle_s", "GPU_idle_kWh", "Method", "IT_kWh"]))
    if idle and not args.parsable2:
        print("\nnodes' meters per partition (reconcile --save): the jobs' kWh + idle (no job) kWh + residual "
              "(charged to no job while jobs ran) = metered kWh")
        print(render([[r["partition"], str(r["nodes"]), str(r["node_hours"]), f(r["jobs_kwh"]), f(r["idle_kwh"]),
                       f(r["residual_kwh"]), f(r["metered_kwh"])] for r in idle],
                     ["Partition", "Nodes", "Node_hours", "Jobs_kWh", "Idle_kWh", "Residual_kWh", "Metered_kWh"]))
    return 0


def _top_id(r: dict[str, Any]) -> str:
    return f"{r['array_job_id']}_{r['array_task_id']}" if r.get("array_job_id") else str(r["job_id"])
