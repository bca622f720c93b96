"""``jobenergy``: sacct-like energy and carbon of Slurm jobs, read from the store.

Options follow sacct's: positional job ids and ``-j/--jobs`` (any form: 715219, 715219_23,
715219_[1-3], 1234+0, X.batch -- a step shows its job, since energy is per job allocation),
``-u/--user``, ``-A/--account``, ``-r/--partition``, ``-s/--state``, ``-S/--starttime``,
``-E/--endtime``, ``-o/--format``, ``-p/--parsable``, ``-P/--parsable2``, ``-n/--noheader``,
``-l/--long`` (one row per node and device), ``--json``.

Visibility: root and users named in the site config's ``admins`` see every job; other users see only
their own (enforced here; for a confidentiality boundary see docs/STORE.md). Without ``-j`` the
window defaults to today from midnight, like sacct.

Requeued jobs: a job with several attempts prints one row with the sum (JobID ``103``) and one row
per attempt (JobID ``103#0``, ``103#1``...). A job id that Slurm reused selects the newest job, with
a warning on stderr; ``-S``/``-E`` select another.

Store location: ``--store URL``, else ``$SLURM_ENERGY_STORE``, else the site config's
``paths.store_url``.

Exit status: 0 ok; 1 a requested job id is not in the store (message on stderr); 2 bad usage/config.
"""

from __future__ import annotations

import argparse
import os
import pwd
import sys
import time
from collections import OrderedDict

from slurm_energy.cli import jobenergy_format as F
from slurm_energy.model import JobRecord, Status
from slurm_energy.slurm.jobid import display_id, matches, parse_jobids, split_reused
from slurm_energy.slurm.timespec import parse_time

STATES = [s.value for s in Status]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="jobenergy",
        description="Energy (kWh) and carbon (kgCO2e) of Slurm jobs, sacct-style. "
        "'n/a' = not measured; '-' = no device of that class.",
    )
    p.add_argument("jobids", nargs="*", metavar="JOBID", help="job ids (715219, 715219_23, 1234+0, 42.batch)")
    p.add_argument("-j", "--jobs", action="append", default=[], help="comma-separated job ids")
    p.add_argument("-u", "--user", action="append", default=[], help="comma-separated user names")
    p.add_argument("-A", "--account", "--accounts", action="append", default=[], help="comma-separated accounts")
    p.add_argument("-r", "--partition", action="append", default=[], help="comma-separated partitions")
    p.add_argument("-s", "--state", action="append", default=[], help=f"comma-separated: {','.join(STATES)}")
    p.add_argument("-S", "--starttime", help="jobs running at or after this time (sacct formats)")
    p.add_argument("-E", "--endtime", help="jobs running at or before this time (sacct formats)")
    p.add_argument("-o", "--format", help="comma-separated fields (default: %s)" % ",".join(F.DEFAULT_FIELDS))
    p.add_argument("-p", "--parsable", action="store_true", help="'|'-separated with a trailing '|'")
    p.add_argument("-P", "--parsable2", action="store_true", help="'|'-separated, no trailing '|'")
    p.add_argument("-n", "--noheader", action="store_true")
    p.add_argument("-l", "--long", action="store_true", help="one row per node and device: method, coverage, wraps")
    p.add_argument("--json", action="store_true", help="full records as JSON")
    p.add_argument("--store", help="store URL (default: $SLURM_ENERGY_STORE, else site config paths.store_url)")
    return p


def _split(values: list[str]) -> list[str]:
    return [x.strip() for v in values for x in v.split(",") if x.strip()]


def _whoami() -> tuple[int, str]:
    uid = os.getuid()
    try:
        return uid, pwd.getpwuid(uid).pw_name
    except KeyError:
        return uid, str(uid)


def _site():
    """(store_url, admins, timezone) from the site config; errors propagate as ConfigError."""
    from slurm_energy.config import load_site_config

    cfg = load_site_config()
    return cfg.paths.store_url, list(cfg.admins), cfg.timezone


def _err(msg: str) -> None:
    print(f"jobenergy: {msg}", file=sys.stderr)


def _select_generation(records: list[JobRecord], spec_text: str) -> list[JobRecord]:
    """Keep the newest job per reused (cluster, job_id); warn when an id was reused."""
    groups: "OrderedDict[tuple, list]" = OrderedDict()
    for r in records:
        groups.setdefault((r.cluster, r.job_id), []).append(r)
    out = []
    for (cluster, jid), recs in groups.items():
        jobs = split_reused(recs)
        if len(jobs) > 1:
            starts = ", ".join(F.fmt_time(j[0].start_time) for j in jobs)
            _err(
                f"warning: job id {jid} was used by {len(jobs)} jobs (started {starts}); showing the newest. "
                "Use -S/--starttime and -E/--endtime to select another."
            )
        out.extend(jobs[-1])
    return out


def main(argv: list[str] | None = None) -> int:
    """Run ``jobenergy``; returns the exit status (0 ok, 1 unknown job id, 2 bad usage/config)."""
    args = build_parser().parse_args(argv)
    try:
        specs = parse_jobids(list(args.jobids) + list(args.jobs))
        fields = F.parse_format(args.format) if args.format else [f.lower() for f in F.DEFAULT_FIELDS]
        states = [s.lower() for s in _split(args.state)]
        for s in states:
            if s not in STATES:
                raise ValueError(f"--state: unknown state {s!r}; use one of {', '.join(STATES)}")
    except ValueError as e:
        _err(str(e))
        return 2

    admins, tz, url = [], "UTC", args.store or os.environ.get("SLURM_ENERGY_STORE")
    try:
        site_url, admins, tz = _site()
        url = url or site_url
    except ImportError:
        pass
    except ValueError as e:  # ConfigError
        _err(f"site config: {e}")
        if not url:
            return 2
    if not url:
        _err("no store configured: pass --store URL, set $SLURM_ENERGY_STORE or paths.store_url in the site config")
        return 2

    now = time.time()
    try:
        start = parse_time(args.starttime, now=now, tz=tz, field="--starttime") if args.starttime else None
        end = parse_time(args.endtime, now=now, tz=tz, field="--endtime") if args.endtime else None
        if start is None and not specs:
            start = parse_time("midnight", now=now, tz=tz)  # sacct's default window
    except ValueError as e:
        _err(str(e))
        return 2

    uid, me = _whoami()
    privileged = uid == 0 or me in admins
    users = _split(args.user)
    if not privileged:
        others = [u for u in users if u != me]
        if others:
            _err(f"you can only see your own jobs ({me}); not showing {', '.join(others)}")
        users = [me]

    from slurm_energy.store import open_store

    try:
        store = open_store(url, readonly=uid != 0)
    except (ValueError, RuntimeError, OSError) as e:
        _err(f"cannot open the store: {e}")
        return 2
    try:
        records = store.query(
            jobs=specs or None,
            users=users or None,
            accounts=_split(args.account) or None,
            partitions=_split(args.partition) or None,
            states=states or None,
            start=start,
            end=end,
        )
    finally:
        store.close()

    rc = 0
    if specs:
        for spec in specs:
            if not any(matches(spec, r) for r in records):
                _err(f"job {spec.raw} not found in the store" + ("" if privileged else f" among {me}'s jobs"))
                rc = 1
        for spec in specs:
            if spec.step:
                _err(f"note: {spec.raw} is a job step; energy is measured per job allocation, showing the job")
                break
        records = _select_generation(records, ",".join(s.raw for s in specs))

    items = _rows(records)
    for _, _, opts in items:
        opts["tz"] = tz
    if args.json:  # attempts only; a requeued job's sum is for the table
        print(F.to_json([(jid, r) for jid, r, o in items if not o.get("is_sum")]))
        return rc
    parsable = "p" if args.parsable else ("P" if args.parsable2 else "")
    if args.long:
        rows = [row for jid, r, o in items if not o.get("is_sum") for row in F.long_rows(r, jid)]
        text = F.render(rows, F.LONG_FIELDS, parsable=parsable, noheader=args.noheader)
    else:
        rows = [[F.FIELDS[f](r, opts) for f in fields] for _, r, opts in items]
        text = F.render(rows, [F.header(f) for f in fields], parsable=parsable, noheader=args.noheader)
    if items or not args.noheader:
        print(text)
    return rc


def _rows(records: list[JobRecord]) -> list[tuple[str, JobRecord, dict]]:
    """(JobID text, record, field options) per output row; requeued jobs get a sum row first."""
    groups: "OrderedDict[tuple, list]" = OrderedDict()
    for r in records:
        groups.setdefault((r.cluster, r.job_id), []).append(r)
    out = []
    for (_, _), recs in groups.items():
        recs.sort(key=lambda r: (r.start_time, r.restart_count))
        if len(recs) == 1:
            out.append((display_id(recs[0]), recs[0], {}))
            continue
        total, elapsed = F.sum_attempts(recs)
        jid = display_id(recs[0])
        out.append((jid, total, {"elapsed_s": elapsed, "is_sum": True}))
        for r in recs:
            aid = f"{jid}#{r.restart_count}"
            out.append((aid, r, {"jobid_override": aid}))
    return out


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
