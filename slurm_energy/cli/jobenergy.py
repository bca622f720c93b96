"""``jobenergy``: sacct-like energy and carbon of Slurm jobs, read from the store.

Options follow sacct's (``--help``): job ids in any form sacct prints, or a SLUID (:mod:`slurm_energy.jobid`;
a step shows its job, since energy is per job allocation), ``-u -A -r -s -S -E -o -p -P -n``; and ``-l``
(one row per node and device), ``--json``, ``--seff`` (:mod:`slurm_energy.reporting.seff`), ``--cite``.

Visibility: root and users named in the site config's ``admins`` see every job; other users see only
their own (enforced here; for a confidentiality boundary see docs/STORE.md). Run through sudo, the
caller (``SUDO_UID``/``SUDO_USER``) is who counts, and the admins are the system site config's
(:mod:`slurm_energy.cli.sudo_caller`). Without ``-j`` the window defaults to today from midnight, like sacct.

Requeued jobs: a job with several attempts prints one row with the sum (JobID ``103``) and one row
per attempt (JobID ``103#0``, ``103#1``...). A job id that Slurm reused selects the newest job, with
a warning on stderr naming each job's start; ``-S`` selects the first job started at or after it
(``-E`` alone: the newest started by then).

State filter (``-s``) and row order: :mod:`slurm_energy.cli.jobenergy_select`. Store location:
:func:`_store_url`; the site config, read leniently: :mod:`slurm_energy.cli.site`. Exit
status: :func:`main`. Notes on stderr (never on stdout, and never by asking Slurm: one store query)
explain a job id with no record, a query that found no job, and stale ``running`` records, judged
only by their own last update (``end_time``, the sampler's last interim flush).

Stale rule: a record still ``running`` whose last update is older than :data:`STALE_INTERIMS` x
``sampling.interim_s`` (default 10 x 60 s = 10 min) belongs to a job whose sampler stopped writing:
the job has almost certainly ended (or its node died) and the finalizer's record never replaced the
interim one. ``slurm-energy collect`` (run by the installed timer every 5 min) finalises it; the
note says so. The same bound (10 interim periods) is what the Prometheus exporter drops a running
entry after (:mod:`slurm_energy.outputs.prometheus`).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, cast

from slurm_energy.cli import jobenergy_format as F
from slurm_energy.cli import jobenergy_select as S
from slurm_energy.cli.pipe import quiet_on_broken_pipe
from slurm_energy.cli.site import Site, load_site, store_url
from slurm_energy.cli.sudo_caller import caller_named_store, ignore_callers_config, reader_identity
from slurm_energy.cli.table import render
from slurm_energy.core import Status
from slurm_energy.jobid import display_id, matches, parse_jobids, split_reused
from slurm_energy.store.urls import STORE_HELP, shown_url

if TYPE_CHECKING:  # records or, for the summary table, the store's rows (store.select.JobRow)
    from slurm_energy.jobid import JobSpec
    from slurm_energy.model import JobRecord


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="jobenergy",
        description="Energy (kWh) and carbon (kgCO2e) of Slurm jobs, sacct-style. "
        "'n/a' = not measured; '-' = no device of that class.",
        epilog="Columns: State is Slurm's job state (COMPLETED, FAILED, CANCELLED from the job's exit code; "
        "RUNNING; UNKNOWN if no exit code was recorded). Status is the measurement's: complete (every node "
        "reported), complete(partial-coverage) (every node reported, but some device was unmeasured (n/a) "
        "or measured for under 95% of the job's time, so the totals are a lower bound; see -l, Coverage), "
        "complete(estimated) (every class with energy was estimated from rated power x utilisation x time, "
        "method tdp_estimate: no counter or power reading; both: complete(partial-coverage,estimated)), "
        "partial (a node never reported or a sampler died), failed (the energy hooks failed), running "
        "(energy so far), no_data (the job ran but nothing was measured; see --json errors). "
        "Rows are in sacct's order: by job id. Exit status: 0 ok; 1 a requested job is "
        "not in the store, or -u names only other users; 2 bad usage or unreadable store.",
    )
    p.add_argument("jobids", nargs="*", metavar="JOBID",
                   help="job ids as sacct prints them (715219, 715219_23, 715219_[1-3], 1234+0, 42.batch, "
                   "1234.0+1) or a SLUID (sBR1JB8J1YM400, Slurm >= 25.11: one run of a job)")
    p.add_argument("-j", "--jobs", action="append", default=[], help="comma-separated job ids")
    p.add_argument("-u", "--user", action="append", default=[], help="comma-separated user names")
    p.add_argument("-a", "--allusers", action="store_true",
                   help="every user's jobs, as sacct -a: what root and the site's admins see by default; "
                   "an ordinary user still sees only their own (docs/PRIVACY.md)")
    p.add_argument("-A", "--account", "--accounts", action="append", default=[], help="comma-separated accounts")
    p.add_argument("-r", "--partition", action="append", default=[], help="comma-separated partitions")
    p.add_argument("-s", "--state", action="append", default=[], help=S.STATE_HELP)
    p.add_argument("-S", "--starttime", help="jobs running at or after this time (sacct formats)")
    p.add_argument("-E", "--endtime", help="jobs running at or before this time (sacct formats)")
    p.add_argument("-o", "--format", help=f"comma-separated fields (default: {','.join(F.DEFAULT_FIELDS)}, with "
                   "Net_kgCO2e, Embodied_kgCO2e and Cost added after kgCO2e when a record shown has them; "
                   "kgCO2e is the operational, location-based figure); "
                   "Field%%N sets a column's width as in sacct (%%-N left-justified; a longer value is cut, '+' "
                   f"last); Errors and ReportError are cut to {F.TEXT_CAP} characters ('…' last) unless given a "
                   "width; -p/-P/--json show the full text")
    p.add_argument("-p", "--parsable", action="store_true", help="'|'-separated with a trailing '|'")
    p.add_argument("-P", "--parsable2", action="store_true", help="'|'-separated, no trailing '|'")
    p.add_argument("-n", "--noheader", action="store_true")
    p.add_argument("-l", "--long", action="store_true", help="one row per node and device (per node and device "
                   "class for a job of more than 8 nodes; --devices: each device): method, kWh, coverage, "
                   "memory; under each row a note with the device, what it covers and counter "
                   "wraps/resets. With -o, the fields chosen from: " + ",".join(F.LONG_FIELDS))
    p.add_argument("--devices", action="store_true", help="with -l: one row per device also for a job of more "
                   "than 8 nodes (shown per node and device class by default)")
    p.add_argument("--json", action="store_true", help="full records as JSON")
    p.add_argument("--seff", action="store_true", help="seff-like block per job: CPU and memory efficiency "
                   "against the allocation (from sacct), energy by class with its method, CO2e, coverage")
    c = p.add_argument_group("citing (a methods paragraph, a citation line, a model-card block)")
    c.add_argument("--cite", action="store_true", help="print a methods paragraph (text and LaTeX), a citation line "
                   "and a Hugging Face model-card co2_eq_emissions block for the selected jobs together")
    c.add_argument("--label", help="select the jobs that ran track(label=LABEL) (a project's set of runs); with "
                   "--cite and no -S: over the whole store")
    c.add_argument("--what-if", action="store_true", dest="what_if",
                   help="carbon-aware what-if: the job's own power profile started at each hour of a window over "
                        "the imported hourly carbon intensity (slurm-energy ci-import; a forecast too, if imported): "
                        "the best start, its kgCO2e and the saving (location-based; docs/CARBON.md)")
    c.add_argument("--window-days", type=float, default=7.0,
                   help="--what-if: starts up to this many days before and after the job's (default 7), "
                        "clipped to the hours with an intensity")
    c.add_argument("--phase", default="", help="--cite only this phase or stage of the jobs, e.g. fine-tuning")
    c.add_argument("--cite-format", choices=("all", "text", "latex", "line", "modelcard"), default="all",
                   help="--cite: which part to print (default all)")
    c.add_argument("--training-type", default="", help="--cite: the model card's training_type (default from the "
                   "phase or label name: fine-tuning, pre-training)")
    p.add_argument("--store", help=STORE_HELP)
    return p


def _split(values: list[str]) -> list[str]:
    return [x.strip() for v in values for x in v.split(",") if x.strip()]


def _err(msg: str) -> None:
    """One line on stderr; every character a user may have put in it (a phase or job name: C0/C1
    controls, bidi overrides, undecodable bytes) escaped (:func:`~slurm_energy.textsafe.one_line`)."""
    from slurm_energy.textsafe import one_line

    print(f"jobenergy: {one_line(msg)}", file=sys.stderr)


def _select_generation(records: list[JobRecord], start: float | None = None,
                       end: float | None = None) -> list[JobRecord]:
    """One job per reused (cluster, job_id): the newest, with a warning naming every run's start;
    with ``-S`` (``start``, epoch s) the first job that started at or after it, with only ``-E``
    the newest that started at or before ``end`` -- so ``-S`` selects an older run."""
    groups: OrderedDict[tuple[str, str], list[JobRecord]] = OrderedDict()
    for r in records:
        groups.setdefault((r.cluster, r.job_id), []).append(r)
    out: list[JobRecord] = []
    for (_cluster, jid), recs in groups.items():
        jobs = split_reused(recs)
        if len(jobs) > 1 and start is not None:
            after = [j for j in jobs if j[0].start_time >= start]
            out.extend(after[0] if after else jobs[-1])
            continue
        if len(jobs) > 1 and end is not None:
            before = [j for j in jobs if j[0].start_time <= end]
            out.extend(before[-1] if before else jobs[-1])
            continue
        if len(jobs) > 1:
            starts = ", ".join(F.fmt_time(j[0].start_time) for j in jobs)
            _err(
                f"warning: job id {jid} was used by {len(jobs)} jobs (started {starts}); showing the newest. "
                "Use -S/--starttime with another job's start to select it."
            )
        out.extend(jobs[-1])
    return out


def _parse_args(argv: list[str] | None,
                ) -> tuple[argparse.Namespace, list[JobSpec], list[str], list[int | None] | None, S.StateFilter]:
    """(args, specs, fields, their -o widths or None, state filter); raises ValueError naming the option."""
    args = build_parser().parse_args(argv)
    id_texts = list(args.jobids) + list(args.jobs)
    specs = parse_jobids(id_texts)
    if id_texts and not specs:
        raise ValueError(f"-j/--jobs: no job id in {','.join(id_texts)!r}; give e.g. -j 715219,715220")
    if args.seff and not specs:
        raise ValueError("--seff needs a job id, e.g. jobenergy --seff 715219")
    if args.what_if and not specs:
        raise ValueError("--what-if needs a job id, e.g. jobenergy --what-if 715219")
    fields = [f.lower() for f in F.DEFAULT_FIELDS]
    widths: list[int | None] | None = None
    if args.format is not None:
        fields, widths = F.parse_format(args.format, long=args.long)
        if not fields:
            eg = "-l -o JobID,Node,DeviceID,Covers" if args.long else "-o JobID,CPU_kWh,State"
            raise ValueError(f"-o/--format: no field in {args.format!r}; give e.g. {eg}")
    return args, specs, fields, widths, S.parse_states(_split(args.state))


def _window(args: argparse.Namespace, specs: list[JobSpec], tz: str, now: float) -> tuple[float | None, float | None]:
    """(start, end) epoch s from -S/-E (sacct's default -S midnight without -j); ValueError if bad."""
    if args.starttime is None and args.endtime is None and (specs or args.label):
        return None, None  # -j (or --label) alone: no window (sacct's rule), and no time-zone module to import
    from slurm_energy.slurm.clients.timespec import parse_time

    start = parse_time(args.starttime, now=now, tz=tz, field="--starttime") if args.starttime else None
    end = parse_time(args.endtime, now=now, tz=tz, field="--endtime") if args.endtime else None
    start_text = repr(args.starttime)
    if start is None and not specs:
        start, start_text = parse_time("midnight", now=now, tz=tz), "'midnight' (the default without -j)"
    S.check_window(start, end, start_text, repr(args.endtime), lambda t: F.fmt_time(t, tz))
    return start, end


def _allowed_users(requested: list[str], me: str) -> list[str]:
    """An ordinary user's -u list cut to their own name (sacct: others' jobs are not shown).

    Returns ``[me]`` when ``requested`` is empty or names ``me``; raises PermissionError (message
    for the user) when it names only other users -- then nothing is shown.
    """
    others = [u for u in requested if u != me]
    if requested and len(others) == len(requested):
        raise PermissionError(
            f"-u/--user {','.join(requested)}: you ({me}) can only see your own jobs; nothing shown. "
            "Ask an admin (root or 'admins' in the site config) for other users' jobs"
        )
    if others:
        _err(f"warning: you ({me}) can only see your own jobs; not showing {', '.join(others)}")
    return [me]


def main(argv: list[str] | None = None) -> int:
    """Run ``jobenergy``; returns the exit status (0 ok; 1 a requested job is not in the store, or
    -u names only other users; 2 bad usage, or the store cannot be read; 141 stdout was closed by its
    reader, e.g. ``| head -1``: stopped quietly, no traceback, like other Unix tools)."""
    return quiet_on_broken_pipe(lambda: _main(argv))


def _main(argv: list[str] | None) -> int:
    """Parse, read the store, select and print; returns the exit status (sacct's: 0, 1 not found, 2 usage)."""
    try:
        args, specs, fields, widths, states = _parse_args(argv)
    except ValueError as e:
        _err(str(e))
        return 2
    ignore_callers_config("jobenergy")  # under sudo: the system config's admins, not the caller's file
    refused = caller_named_store(args.store)  # under sudo: no root open of a store the caller names
    if refused:
        _err(refused)
        return 2
    site = load_site()
    for w in site.warnings:
        _err(f"warning: {w}")
    now = time.time()
    try:
        url, where = _store_url(args, site)
        start, end = _window(args, specs, site.timezone, now)
    except ValueError as e:
        _err(str(e))
        return 2
    uid, me, privileged = reader_identity(site.admins)  # under sudo: the caller, not root
    users = _split(args.user)
    if args.allusers and not privileged and not users:
        print(f"jobenergy: -a: showing {me}'s jobs only: other users' records are for root and the admins "
              "in site.yaml (docs/PRIVACY.md)", file=sys.stderr)
    if not privileged:
        try:
            users = _allowed_users(users, me)
        except PermissionError as e:
            _err(str(e))
            return 1
    # a SLUID is matched on the full record (the summary row has no SLUID); --cite/--label read phases
    full = bool(args.json or args.long or args.seff or args.cite or args.label or args.what_if
                or (not args.long and F.FULL_FIELDS.intersection(fields)) or any(s.sluid for s in specs))
    records = _read_store(url, where, uid, args, specs, users, start, end, full)
    if records is None:
        return 2
    records = [r for r in records if S.state_matches(r, states)]
    if args.label:
        records = _with_label(records, args, me, own_only=privileged and not users and not args.allusers
                              and not specs)
    rc = 0
    if specs:
        rc = _report_missing(specs, records, bool(args.starttime or args.endtime or states),
                             "" if privileged else f" among {me}'s jobs", where, privileged, site.interim_s)
        records = _select_generation(records, start if args.starttime else None, end if args.endtime else None)
    elif not records:
        _err(_nothing_found(args, users, start, end, where, privileged, site.timezone))
    for note in stale_running(records, now, site.interim_s, lambda t: F.fmt_time(t, site.timezone),
                                F.format_duration):
        _err(note)
    if args.cite:
        return _print_citation(records, args) or rc
    if args.what_if:
        return _print_what_if(records, args, site.timezone) or rc
    _print_records(records, args, fields, widths, site.timezone)
    return rc


def _with_label(records: list[JobRecord], args: argparse.Namespace, me: str, own_only: bool) -> list[JobRecord]:
    """``--label``: track(label=...) names a phase inside a Slurm job and the job's name outside one. A
    label is its user's name for a run: an admin sees their own unless -u/-a/job ids ask for more."""
    records = [r for r in records if r.job_name == args.label or any(w.name == args.label for w in r.phases)]
    return [r for r in records if r.user == me] if own_only else records


def _print_citation(records: list[JobRecord], args: argparse.Namespace) -> int:
    """``--cite``: the selected attempts (the newest of a requeued job's) cited together; 1 when none."""
    from slurm_energy.reporting.cite import CiteError, citation, render

    finals = [r for _, r, o in _rows(records) if not o.get("is_sum")]
    try:
        c = citation(finals, phase=args.phase, label=args.label or "", training_type=args.training_type)
    except CiteError as e:
        _err(str(e))
        return 1
    print(render(c, args.cite_format))
    return 0


def _print_what_if(records: list[JobRecord], args: argparse.Namespace, tz: str) -> int:
    """``--what-if``: per selected attempt, the best start of its own profile over the hourly
    intensity imported for its zone (:mod:`slurm_energy.accounting.whatif`); 1 when none could be computed."""
    from slurm_energy import config as C
    from slurm_energy.accounting.whatif import what_if
    from slurm_energy.config.carbon import hourly_intensity_for, hourly_zones_for
    from slurm_energy.reporting.footprint import whatif_lines

    cfg, _ = C.load_site_config_for_hooks(save=False)
    rc = 0
    for jid, r, o in _rows(records):
        if o.get("is_sum"):
            continue
        try:
            ci = hourly_intensity_for(cfg, r.carbon)
        except ValueError as e:
            _err(f"{jid}: --what-if: the hourly intensity cannot be read: {e}")
            rc = 1
            continue
        w = what_if(r, ci or {}, window_days=args.window_days) if ci else None
        if w is None:
            zones = " or ".join(hourly_zones_for(cfg, r.carbon)) or "none: set the site's or partition's location"
            why = (f"no hourly intensity imported for its zone ({zones}): run slurm-energy ci-import FILE --zone "
                   "ZONE" if not ci else
                   "no start in the window has an intensity for every hour the job ran, or no energy measured")
            _err(f"{jid}: --what-if: {why}")
            rc = 1
            continue
        print(f"job {jid}:")
        print("\n".join("  " + line for line in whatif_lines(w, lambda t: F.fmt_time(t, tz) + f" {tz}")))
    return rc


def _store_url(args: argparse.Namespace, site: Site) -> tuple[str, str]:
    """The store URL (:func:`slurm_energy.cli.site.store_url`: ``--store`` >
    ``$SLURM_ENERGY_STORE`` > ``paths.store_url``) and how to name it. Raises ValueError: empty --store."""
    url, url_from = store_url(args.store, site.store_url)
    return url, f"{shown_url(url)} (from {url_from}; {site.origin})"


def _read_store(url: str, where: str, uid: int, args: argparse.Namespace, specs: list[JobSpec], users: list[str],
                start: float | None, end: float | None, full: bool = False) -> list[JobRecord] | None:
    """The matching attempts, or None after printing why the store cannot be read: summary rows
    (:class:`slurm_energy.store.select.JobRow`), or with ``full`` JobRecords (``-l``, ``--json``,
    ``--seff``, fields of the nodes; pydantic only then)."""
    filters: dict[str, Any] = dict(jobs=specs or None, users=users or None, accounts=_split(args.account) or None,
                   partitions=_split(args.partition) or None, start=start, end=end)
    try:
        from slurm_energy.store import open_store

        store = open_store(url, readonly=True)  # a reader never creates or migrates the store, even as root
        try:
            if full:
                return store.query(**filters)
            # a summary row (store.select.JobRow) has the JobRecord attribute names the table reads
            return cast("list[JobRecord]", store.rows(**filters))
        finally:
            store.close()
    except (ValueError, RuntimeError, OSError) as e:
        text = str(e).splitlines()[0] if str(e) else type(e).__name__
        _err(f"cannot read the store {where}: {text}")
        return None


def _report_missing(specs: list[JobSpec], records: list[JobRecord], filtered: bool, among: str, where: str,
                    privileged: bool, interim_s: float) -> int:
    """Say which asked-for jobs are not in the store and why that may be (:func:`missing_ids`; 1 if
    any) and that a job step shows its job."""
    lines = missing_ids(specs, records, filtered, among, where, privileged, interim_s)
    for line in lines:
        _err(line)
    step = next((spec for spec in specs if spec.step), None)
    if step is not None:
        _err(f"note: {step.raw} is a job step; energy is measured per job allocation, showing the job")
    return 1 if lines else 0


def _print_records(records: list[JobRecord], args: argparse.Namespace, fields: list[str],
                   widths: list[int | None] | None, tz: str) -> None:
    """Print the rows: JSON (attempts only; a requeued job's sum is for the table), long or table."""
    items = _rows(records)
    for _, _, opts in items:
        opts["tz"] = tz
    if args.seff:
        from slurm_energy.reporting.seff import seff_block
        from slurm_energy.slurm.clients.sacct import allocation

        blocks = [seff_block(r, *allocation(r.job_id, warn=_err)) for _, r, o in items if not o.get("is_sum")]
        if blocks:
            print("\n\n".join(blocks))
        return
    if args.json:  # attempts only; a requeued job's sum is for the table
        print(F.to_json([(jid, r) for jid, r, o in items if not o.get("is_sum")]))
        return
    parsable = "p" if args.parsable else ("P" if args.parsable2 else "")
    if args.long:
        text = _long_text(items, args, fields, widths, parsable)
    else:
        if args.format is None:  # the default columns: net CO2e and cost only where they say something
            fields = F.default_fields([r for _, r, _ in items])
        rows = [[F.FIELDS[f](r, opts) for f in fields] for _, r, opts in items]
        caps = [F.TEXT_CAP if f in F.TEXT_FIELDS else None for f in fields]
        text = render(rows, [F.header(f) for f in fields], parsable=parsable, noheader=args.noheader,
                        widths=widths, caps=caps)
    if items or not (args.noheader or not parsable):  # nothing found: stderr says so, no empty table
        print(text)


def _long_text(items: list[tuple[str, JobRecord, F.RowOptions]], args: argparse.Namespace, fields: list[str],
               widths: list[int | None] | None,
               parsable: str) -> str:
    """``-l``: one row per node and device (:func:`jobenergy_format.long_rows`). ``-p``/``-P``: every
    field, full text. Aligned without ``-o``: :data:`jobenergy_format.LONG_TABLE_FIELDS`, the long
    texts in a note under each row, wrapped to the terminal -- 120 columns fit realistic records.
    ``-o``: the fields chosen (sacct's ``%N`` widths; a last Covers column is wrapped). Line width:
    ``$COLUMNS``, else the terminal's, else 120 (:func:`shutil.get_terminal_size`; a pipe has no terminal)."""
    import shutil

    from slurm_energy.cli.table import render_with_notes

    line_width = shutil.get_terminal_size(fallback=(120, 24)).columns
    short = not parsable and args.format is None  # the note names the device: Covers without it
    rows = [row for jid, r, o in items if not o.get("is_sum")
            for row in F.long_rows(r, jid, short=short, every_device=args.devices)]
    chosen = F.LONG_FIELDS if args.format is None else fields
    if parsable or args.format is not None:
        idx = [F.LONG_FIELDS.index(f) for f in chosen]
        picked = [[row[i] for i in idx] for row in rows]
        wrap = None if (parsable or chosen[-1] != "Covers" or (widths and widths[-1] is not None)) else line_width
        return render(picked, list(chosen), parsable=parsable, noheader=args.noheader, wrap_to=wrap,
                      widths=None if wrap else widths)
    idx = [F.LONG_FIELDS.index(f) for f in F.LONG_TABLE_FIELDS]
    return render_with_notes([[row[i] for i in idx] for row in rows], F.LONG_TABLE_FIELDS,
                             [F.long_note(row) for row in rows], line_width=line_width,
                             noheader=args.noheader)


def _rows(records: list[JobRecord]) -> list[tuple[str, JobRecord, F.RowOptions]]:
    """(JobID text, record, field options) per output row, in sacct's order
    (:func:`slurm_energy.cli.jobenergy_select.ordered_jobs`); requeued jobs get a sum row first."""
    out: list[tuple[str, JobRecord, F.RowOptions]] = []
    for recs in S.ordered_jobs(records):
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


# ---------------------------------------------------------------- notes on stderr
#: A running record not updated for this many interim periods is reported as probably ended.
STALE_INTERIMS = 10

#: At most this many job ids are named in one note; the rest are counted.
MAX_NAMED = 5


def missing_ids(specs: list[JobSpec], records: list[JobRecord], filtered: bool, among: str, where: str, privileged: bool,
                interim_s: float) -> list[str]:
    """One message per requested job id (``specs``, :func:`slurm_energy.jobid.parse_jobids`) that no
    record matches. Root and admins: ``job ID: not in the store[ in the given -S/-E window or -s
    states]: WHERE. <why>``; an ordinary user (``among``: `` among U's jobs``): ``job ID: no record
    among U's jobs[...]: WHERE. It may be another user's job, which you cannot see, or ...`` -- never
    "not in the store", which would tell them that another user's job does not exist (the store query
    only returns their own jobs). ``filtered``: -S/-E/-s were given (then the advice is to drop them)."""
    pending = (f"pending, started under {interim_s:g} s ago, or ended and was not collected (admins: "
               "slurm-energy collect); a job cancelled before it started never ran on a node and has none "
               "(sacct -X -j {id} -o State,Start shows which)")
    out = []
    for spec in specs:
        if any(matches(spec, r) for r in records):
            continue
        cond = " in the given -S/-E window or -s states" if filtered else ""
        if filtered:
            why = "Try it without -S/-E/-s" + ("" if privileged else "; it may also be another user's job, "
                                                                     "which you cannot see")
        elif privileged:
            why = f"No record yet if it is {pending.format(id=spec.raw)}"
        else:
            why = f"It may be another user's job, which you cannot see, or one not recorded yet: {pending.format(id=spec.raw)}"
        head = "not in the store" if privileged or not among else f"no record{among}"
        out.append(f"job {spec.raw}: {head}{cond}: {where}. {why}")
    return out


def _nothing_found(args: argparse.Namespace, users: list[str], start: float | None, end: float | None,
                   where: str, privileged: bool, tz: str) -> str:
    """The stderr line for a query without job ids that selected no job: what was asked (``running
    between A and B``, the users -- when asked for, or an ordinary user's own --, accounts, partitions,
    states), the store, and what to try (``-S`` with the day before the default window)."""

    def fmt(t: float) -> str:
        return F.fmt_time(t, tz)

    parts = [f"that ran between {fmt(start) if start is not None else 'the first job'} and "
             f"{fmt(end) if end is not None else 'now'}"]
    if users and (args.user or not privileged):
        parts.append(f"of user {','.join(users)}" + ("" if privileged else " (you see only your own jobs)"))
    for what, values in (("account", args.account), ("partition", args.partition), ("state", args.state)):
        parts += [f"in {what} {','.join(_split(values))}"] if _split(values) else []
    if args.label:
        parts.append(f"with a track(label={args.label!r}) block (a phase of that name; outside Slurm, the job's name)")
    hint = (". Without -j the window is today from midnight (as sacct): give -S for older jobs, e.g. -S "
            f"{fmt(start - 86400)[:10]}" if not args.starttime and start is not None else "")
    return f"no jobs {' '.join(parts)} in the store: {where}{hint}"


def stale_running(records: Iterable[JobRecord], now: float, interim_s: float, fmt_time: Callable[[float], str],
                  fmt_elapsed: Callable[[float], str]) -> list[str]:
    """A note for records still ``running`` whose last update (``end_time``, epoch s) is more than
    :data:`STALE_INTERIMS` x ``interim_s`` before ``now`` (empty list when none); one line for all."""
    stale = [r for r in records if Status(r.status) == Status.RUNNING
             and now - r.end_time > STALE_INTERIMS * interim_s]
    if not stale:
        return []
    ids = list(dict.fromkeys(display_id(r) for r in stale))
    oldest = min(r.end_time for r in stale)
    limit = f"{STALE_INTERIMS} x {interim_s:g} s, sampling.interim_s"
    if len(ids) == 1:
        head = (f"note: job {ids[0]}: its record says running but was last updated {fmt_time(oldest)}, "
                f"{fmt_elapsed(now - oldest)} ago (a running job's is updated every {interim_s:g} s; stale after "
                f"{limit}): ended per Slurm? (sacct -j {ids[0]}) Its energy is shown up to then")
    else:
        named = ", ".join(ids[:MAX_NAMED]) + (f" and {len(ids) - MAX_NAMED} more" if len(ids) > MAX_NAMED else "")
        head = (f"note: jobs {named}: their records say running but were last updated over "
                f"{fmt_elapsed(STALE_INTERIMS * interim_s)} ago (oldest {fmt_time(oldest)}; stale after {limit}): "
                f"ended per Slurm? (sacct -j {','.join(ids[:MAX_NAMED])}) Their energy is shown up to then")
    return [head + f"; admins: run slurm-energy collect to finalise {'it' if len(ids) == 1 else 'them'}"]


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
