"""Recovery in one place: what faults left behind, one loop per source of leftovers.

Every job Slurm ran gets a record. The finisher (:func:`~slurm_energy.slurm.jobend.finish.finish`)
finishes an attempt when the Epilog's finalizer runs; what it missed (a finalizer killed or never
started, a store that was down, a node that never reported) is found here, by one loop per place a
leftover can be, each the only reader of its source:

=====================  =========================================  ======================================
source                 loop                                       each item goes to
=====================  =========================================  ======================================
the spool queue        :func:`store_queued`                       the store (the rest was published)
the journal            :func:`finish_leftovers` (spool attempts),  ``finish(attempt, trigger)``, or the
                       :func:`finish_no_spool` (spool-less ones)  spool-less finalizer
the results directory  :func:`collect` (node records never         merge, :func:`publish_final`
                       merged: stale)
the store's running    :func:`finish_running`                     :func:`publish_final` (``partial``)
rows
Slurm's ended jobs     :func:`finish_unrecorded`                  a ``no_data`` record, :func:`publish_final`
=====================  =========================================  ======================================

Two callers run the same loops and differ only in their :class:`Trigger` (written on the record)
and their reach: the node finalizer's sweep (:func:`sweep_node`, every 30 s while the queue runner
runs: its own node's queue and journal, the last hour) and ``slurm-energy collect``
(:func:`collect_all`, from the timer or cron line ``slurm-energy install`` prints, as root on every
node and the controller: every loop, in the table's order). A journal attempt is finished only once
Slurm says its job ended (:meth:`SlurmFacts.ended`); an attempt, results directory or running row
a process may still be at work on is left alone. Idempotent: a second run finds nothing to do, and
after a burst, faults included, ``collect`` finds nothing left.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from slurm_energy.core import one_line
from slurm_energy.jobmeta import RunKey, same_run
from slurm_energy.model import JobRecord, Status
from slurm_energy.outputs.sinks import publish_final, site_sinks
from slurm_energy.pipeline import finalise_job, publish
from slurm_energy.slurm.attempt import (
    Attempt,
    EpilogFacts,
    Journal,
    SamplerEnd,
    no_spool_entries,
    remove_stale_tmp,
    spool_dirs,
)
from slurm_energy.slurm.clients.facts import SlurmFacts, UserText
from slurm_energy.slurm.clients.facts import current as slurm_facts
from slurm_energy.slurm.clients.scontrol import Facts
from slurm_energy.slurm.context import JobContext
from slurm_energy.slurm.jobend.finish import Trigger, finish
from slurm_energy.slurm.processes import busy
from slurm_energy.store.queue import drain

if TYPE_CHECKING:
    from slurm_energy.config import SiteConfig

log = logging.getLogger("slurm_energy.collect")


class StoredRow(Protocol):
    """A store's summary row (:class:`slurm_energy.store.select.JobRow`): its job id, and what
    :meth:`RunKey.of_record` reads."""

    @property
    def job_id(self) -> str: ...


class RecoverStore(Protocol):
    """The store queries recovery asks (:class:`slurm_energy.store.Store` has them): the one run
    rule's "final record of this run", the records in a state, and the summary rows of some jobs."""

    def final_record(self, key: RunKey, *, measured: bool = False) -> JobRecord | None: ...

    def query(self, *, states: list[str]) -> list[JobRecord]: ...

    def rows(self, *, jobs: list[str]) -> Sequence[StoredRow]: ...


#: a job attempt: (job id, restart count)
JobAttempt = tuple[str, int]

#: a job Slurm no longer knows (no accounting, purged) is taken as ended after this long, s
UNKNOWN_JOB_S = 86400.0


def publish_collected(cfg: SiteConfig, rec: JobRecord) -> None:
    """A record recovery finished, through the finisher's door (:func:`publish_final`: the store
    first, a store that is down queueing it in the spools for the next run; the report; the other
    outputs). Raises what the store raises when it cannot even be queued."""
    publish_final(cfg, rec, queue_in=spool_dirs(cfg))


def collect_all(cfg: SiteConfig, store: RecoverStore, now: float, older_than_s: float, since_s: float,
                dry_run: bool = False) -> tuple[list[str], list[JobRecord]]:
    """``slurm-energy collect``: every loop of the module doc, in its order (trigger ``COLLECT``),
    with ``cfg`` (its ``paths.store_url`` and ``results_dir`` those in force: :func:`with_paths`)
    and ``store`` open on that URL (for the queries). Returns (one line per thing done or that
    would be, the records the results directory's loop finalised). Raises PermissionError (not
    root) and what the store raises for a store that cannot be read."""
    trigger = Trigger.COLLECT
    lines: list[str] = []
    if not dry_run:
        lines += store_queued(cfg, spool_dirs(cfg))
    leftover_lines, young = finish_leftovers(cfg, spool_dirs(cfg), now, older_than_s, dry_run, store=store,
                                             trigger=trigger)
    lines += leftover_lines
    lines += finish_no_spool(cfg, None, now, older_than_s, frozenset() if dry_run else busy(spool_dirs(cfg))[1],
                             trigger=trigger, dry_run=dry_run)
    done = collect(cfg, store, older_than_s, now, dry_run)
    if not dry_run:
        lines += [f"removed the marks directory {one_line(n)} (its job ended here)" for n in sweep_job_marks(spool_dirs(cfg))]
    lines += finish_running(cfg, store, young, dry_run)
    lines += finish_unrecorded(cfg, store, now, since_s, older_than_s, dry_run)
    return lines, done


#: The node finalizer's sweep (:func:`sweep_node`): an attempt (or a job sacct knows) untouched this
#: long (s), with no process at work on it, is left over. Above the Epilog's 2 s and a sampler's
#: interval (its samples keep a live job's attempt young); short, so a record is final within a
#: minute of its job's end.
SWEEP_AGE_S = 20.0
#: How far back (s) the sweep looks: older leftovers are the ``collect`` timer's.
SWEEP_WINDOW_S = 3600.0


def sweep_node(cfg: SiteConfig, node: str, now: float, since_s: float = SWEEP_WINDOW_S,
               older_than_s: float = SWEEP_AGE_S) -> list[str]:
    """What the node's finalizer (:mod:`slurm_energy.slurm.jobend.queue`) does every
    ``SWEEP_S`` while it runs and once before it exits, so that ``collect`` finds nothing left:
    the queue's and the journal's loops, trigger ``SWEEP``, for ``node`` and the last ``since_s`` s
    only -- queued records stored,
    ``node``'s spool attempts whose own finalizer was killed (or never started) finished -- and the
    spool-less jobs whose finalizer was killed finished (:func:`finish_no_spool`). What a process
    is at work on (a sampler, a finalizer, a queue entry: :func:`busy`)
    is left alone. The other loops (the results directory's 14 days, every ``running`` record, sacct)
    stay the timer's. The store is opened only when there is something to finish. Returns one line
    per thing done. Raises what the store raises."""
    spools = spool_dirs(cfg)
    for n in sweep_job_marks(spools):
        log.info("marks directory of ended job %s removed", one_line(n))
    lines = store_queued(cfg, spools)
    left = [lo for sd in spools for lo in scan_spool(sd, now, older_than_s, node=node, since=now - since_s)]
    waiting = _no_spool_entries(cfg, node, now, older_than_s)
    if not left and not waiting:
        return lines
    dirs, env_jobs = busy(spools)
    if any(lo.spool.dir.rstrip("/") not in dirs for lo in left):
        from slurm_energy.store import open_store

        store = open_store(cfg.paths.store_url)
        try:
            lines += finish_leftovers(cfg, spools, now, older_than_s, store=store, node=node, since=now - since_s,
                                      busy=dirs, trigger=Trigger.SWEEP)[0]
        finally:
            store.close()
    return lines + finish_no_spool(cfg, node, now, older_than_s, env_jobs, trigger=Trigger.SWEEP)


def sweep_job_marks(spools: list[str]) -> list[str]:
    """The marks directories of jobs that ended on this host (no unfinished attempt in ``spools``:
    :func:`~slurm_energy.slurm.attempt.unfinished_jobs`), moved to the marks root's trash and the
    trash emptied, bounded (:func:`slurm_energy.sampling.marks.sweep_marks`: what a finalizer killed
    before its clean-up left). Off the hook path: the node finalizer's sweep and ``collect``."""
    from slurm_energy.sampling.marks import sweep_marks

    return sweep_marks(Journal(spools).unfinished_jobs)


def _no_spool_entries(cfg: SiteConfig, node: str | None, now: float, older_than_s: float) -> list[str]:
    """``node``'s (None: every node's) :data:`~slurm_energy.slurm.attempt.NO_SPOOL_JOBS` entries at
    least ``older_than_s`` old."""
    return [p for p in no_spool_entries(cfg.paths.log_dir, node) if now - _mtime(p) >= older_than_s]


def finish_no_spool(cfg: SiteConfig, node: str | None, now: float, older_than_s: float,
                    busy_jobs: set[str] | frozenset[str] = frozenset(), trigger: Trigger = Trigger.COLLECT,
                    dry_run: bool = False) -> list[str]:
    """Run again the spool-less finalizer (:func:`~slurm_energy.slurm.jobend.finish.finalize_env_main`)
    of each job whose :data:`~slurm_energy.slurm.attempt.NO_SPOOL_JOBS` entry (``node``'s, or every
    node's for None) is at least ``older_than_s`` old and whose finalizer no longer runs (its
    ``"<job id>@<node>"`` not in ``busy_jobs``): it was killed. Same record as that finalizer's (same start time: an
    upsert, never a second record). Returns one line per job (``dry_run``: per entry, nothing run).
    An unreadable entry is removed (``collect``'s sacct step covers its job)."""
    import json

    from slurm_energy.slurm.jobend.finish import finalize_env_main

    if dry_run:
        return [f"would finish {os.path.basename(p)[:-5]} (no spool)" for p in _no_spool_entries(cfg, node, now, older_than_s)]
    lines: list[str] = []
    for p in _no_spool_entries(cfg, node, now, older_than_s):
        try:
            with open(p, encoding="utf-8") as f:
                ctx_json, t, exit_code, sampler, errors = json.load(f)["argv"]
            ctx = json.loads(ctx_json)
            job_id, at = str(ctx["job_id"]), str(ctx.get("node") or "")
            end_time, errors = float(t), json.loads(errors)
            if node is not None and at != node:  # another node's, whose name ends like this one's (a shared log_dir)
                continue
        except (OSError, ValueError, KeyError, TypeError) as e:
            log.error("%s unreadable (%s): removed; collect's sacct step stores its job", p, e)
            with contextlib.suppress(OSError):
                os.unlink(p)
            continue
        if f"{job_id}@{at}" in busy_jobs:
            continue
        finalize_env_main(ctx_json, end_time, exit_code, SamplerEnd.parse(sampler, SamplerEnd.NO_PIDFILE), list(errors) + [
            f"finalizer did not finish (killed); finished by {trigger.by}"],
            logging_ready=True)
        with contextlib.suppress(OSError):
            os.unlink(p)  # finalize_env_main removed it, unless the config's log_dir changed since
        lines.append(f"finished {job_id} on {at} (no spool: its finalizer was killed)")
    return lines


def store_queued(cfg: SiteConfig, spools: list[str]) -> list[str]:
    """The spool's queue: the records queued in ``spools`` while the store was down, to the store only (the
    finalizer that queued one published it to the rest). One line per thing done or wrong."""
    def to_store(rec: JobRecord) -> None:
        publish(rec, site_sinks(cfg, only=("store",)))

    n, problems = drain(spools, to_store)
    return [f"stored {n} queued record(s)"] * bool(n) + problems


def with_paths(cfg: SiteConfig, store_url: str, results_dir: str) -> SiteConfig:
    """cfg with paths.store_url / results_dir replaced (collect's --store / --results-dir)."""
    return cfg.model_copy(update={"paths": cfg.paths.model_copy(update={"store_url": store_url,
                                                                         "results_dir": results_dir})})


# ---------------------------------------------------------------- the results directory: stale node records
def find_stale_attempts(results_dir: str | Path, older_than_s: float, now: float) -> list[Path]:
    """Attempt directories (``<cluster>/<job>.<restart>``) whose newest ``*.json`` node record is at
    least ``older_than_s`` seconds older than ``now`` (epoch s). Sorted by path."""
    root = Path(results_dir)
    out: list[Path] = []
    for d in sorted(root.glob("*/*.*")) if root.is_dir() else []:
        mt = [p.stat().st_mtime for p in d.glob("*.json") if not p.name.startswith(".")] if d.is_dir() else []
        if mt and now - max(mt) >= older_than_s:
            out.append(d)
    return out


def collect(cfg: SiteConfig, store: RecoverStore, older_than_s: float, now: float,
            dry_run: bool = False) -> list[JobRecord]:
    """Finalise the stale attempts of ``cfg.paths.results_dir`` and the fallback spool's results
    (:func:`~slurm_energy.slurm.jobend.publish.results_dirs`); returns the JobRecords published (or
    that would be). Attempts already in ``store`` with a final record of the same start time are
    skipped. Merge and carbon facts by :func:`slurm_energy.pipeline.finalise_job`, as the finalizer
    does. One bad directory (whatever
    its records hold) is reported on the log and skipped; the other jobs are collected."""
    from slurm_energy.accounting.merge import merge_records, split_runs
    from slurm_energy.slurm.jobend.publish import results_dirs
    from slurm_energy.slurm.jobend.results import read_node_records, retire_run

    done: list[JobRecord] = []
    roots = [Path(d) for d in results_dirs(cfg)]
    seen: set[Path] = set()
    for d in [d for root in roots for d in find_stale_attempts(root, older_than_s, now)]:
        rel = d.relative_to(next(r for r in roots if d.is_relative_to(r)))
        if rel in seen:
            continue
        seen.add(rel)
        try:
            records = [x for r in roots if (r / rel).is_dir() for x in read_node_records(r / rel)]
            for run in split_runs(records):  # a reused job id: each run on its own
                final = _collect_run(cfg, run, store, dry_run)
                if final is not None:
                    done.append(final)
                if not dry_run:  # published now or before: out of a later run's way
                    for r in roots:
                        if (r / rel).is_dir():
                            retire_run(r, final if final is not None else merge_records(run))
        except Exception as e:
            log.error("collect: skipping %s: %s: %s", one_line(str(d)), type(e).__name__, one_line(str(e)))
    return done


def _collect_run(cfg: SiteConfig, records: list[JobRecord], store: RecoverStore, dry_run: bool) -> JobRecord | None:
    """Finalise and publish one run's node records; None if it is already stored (final)."""
    final = finalise_job(records, cfg)
    if store.final_record(RunKey.of_record(final, nodes=False), measured=True) is not None:
        return None
    if final.status == Status.RUNNING:  # only interim summaries were left: the job never ended cleanly
        final.status = Status.PARTIAL
        final.errors.append("no Epilog record: finalised by collect from interim data")
    if not dry_run:
        publish_collected(cfg, final)
    return final


# ---------------------------------------------------------------- the journal: attempts left in a spool
@dataclass
class Leftover:
    """One node's unfinished attempt in a spool: ``<spool>/jobs/<job>-r<k>/`` holding the node's
    context file, not FINALIZED (:class:`~slurm_energy.slurm.attempt.AttemptState`), its newest file at least ``older_than_s``
    old (a finalizer may still be at work); finished once Slurm says the job has (:meth:`SlurmFacts.ended`)."""

    spool: Attempt
    ctx: JobContext
    newest_mtime: float


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


def scan_spool(spool_dir: str, now: float, older_than_s: float, node: str | None = None,
               since: float = 0.0) -> Iterator[Leftover]:
    """:class:`Leftover` node attempts in one spool (Slurm's state is not asked here): the
    :class:`~slurm_energy.slurm.attempt.Journal`'s attempts not finalized, of ``node`` only when
    given, changed since ``since`` (epoch s; 0: all). Stale temp files (``*.tmp<pid>`` older than
    10 min) are removed on the way."""
    cleaned: set[str] = set()
    for sp in Journal([spool_dir]).attempts(node=node, since=since):
        if sp.dir not in cleaned:
            cleaned.add(sp.dir)
            remove_stale_tmp(sp.dir, now)
        newest = sp.newest_mtime()
        if now - newest < older_than_s or sp.is_finalized():
            continue
        try:
            ctx = JobContext.from_json(sp.context_json())
        except (OSError, ValueError) as e:
            log.warning("collect: %s unreadable: %s", sp.context, e)
            continue
        yield Leftover(sp, ctx, newest)


def _end_time(lo: Leftover, ep: EpilogFacts, facts: Facts) -> float:
    from slurm_energy.sampling.samplefile import read_sample_table

    if ep.t:
        return float(ep.t)
    if facts.get("end_time"):
        return float(facts["end_time"])
    ts = read_sample_table(lo.spool.samples).t
    return max(ts) if ts else lo.newest_mtime


def _already_stored(store: RecoverStore | None, lo: Leftover) -> bool:
    """True if a measured final record of this run already covers this node (its finalizer did
    its work but could not write the ``finalized`` marker: a full or read-only spool)."""
    if store is None:
        return False
    key = RunKey(lo.ctx.job_id, restart_count=lo.ctx.restart_count, sluid=lo.ctx.sluid,
                 start=lo.ctx.prolog_time or None)
    r = store.final_record(key, measured=True)
    return r is not None and any(n.node == lo.spool.node for n in r.nodes)


def finish_leftovers(cfg: SiteConfig, spools: list[str], now: float, older_than_s: float, dry_run: bool = False,
                     facts: SlurmFacts | None = None, store: RecoverStore | None = None, node: str | None = None,
                     since: float = 0.0, busy: set[str] | frozenset[str] = frozenset(),
                     trigger: Trigger = Trigger.COLLECT) -> tuple[list[str], set[JobAttempt]]:
    """The journal's attempts left in ``spools``, each finished by ``finish(attempt, trigger)`` once
    Slurm says its job ended. Returns (one line per node attempt finished or that would be,
    (job_id, restart) of attempts not yet old enough: :func:`finish_running` leaves those alone).
    With ``store``, a node already in a measured stored record is only marked finished (never
    replaced by a poorer view). ``node``,
    ``since``: that node's attempts changed since then only (:func:`scan_spool`);
    ``busy``: spool job directories some process is at work on (left alone, as young ones are);
    ``trigger``: who finishes them (SWEEP or COLLECT: :func:`~slurm_energy.slurm.jobend.finish.finish`
    says so in the record's errors); ``facts``: Slurm (:func:`~slurm_energy.slurm.clients.facts.current`
    unless given)."""
    slurm = facts or slurm_facts()
    lines: list[str] = []
    young: set[JobAttempt] = set()
    for sd in spools:
        for lo in scan_spool(sd, now, 0.0, node=node, since=since):
            key = (lo.ctx.job_id, lo.ctx.restart_count)
            if now - lo.newest_mtime < older_than_s or lo.spool.dir.rstrip("/") in busy:
                young.add(key)
                continue
            fin, got = slurm.ended(lo.ctx.job_id, lo.ctx.restart_count)
            said: Facts = got or {}
            if fin is False or (fin is None and now - lo.newest_mtime < UNKNOWN_JOB_S):
                young.add(key)
                continue
            if _already_stored(store, lo):
                if not dry_run:
                    try:
                        lo.spool.mark_finalized(now)
                    except OSError:
                        pass
                continue
            ep = lo.spool.epilog()
            outcome = ep.sampler or SamplerEnd.NO_EPILOG
            what = f"{lo.ctx.job_id} attempt {lo.ctx.restart_count} on {lo.spool.node} ({lo.spool.dir}, sampler {outcome})"
            if dry_run:
                lines.append(f"would finish {what}")
                continue
            try:
                finish(cfg, lo.spool, lo.ctx, trigger, end_time=_end_time(lo, ep, said),
                       exit_code=ep.exit_code or str(said.get("exit_code", "")), sampler=outcome,
                       facts=said or None, ask_slurm=False)
                lines.append(f"finished {what}")
            except Exception as e:
                lines.append(f"could not finish {what}: {type(e).__name__}: {e}")
    return lines, young


# ---------------------------------------------------------------- the store: records left running
def finish_running(cfg: SiteConfig, store: RecoverStore, young: set[JobAttempt], dry_run: bool = False,
                   facts: SlurmFacts | None = None) -> list[str]:
    """The store's ``running`` rows: each whose job has ended (Slurm says so: ``facts``, else
    :func:`~slurm_energy.slurm.clients.facts.current`) and whose attempt is not ``young`` (a journal
    attempt still to finish) becomes ``partial`` from its interim data, with Slurm's state."""
    slurm = facts or slurm_facts()
    lines: list[str] = []
    for r in store.query(states=[Status.RUNNING.value]):
        if (r.job_id, r.restart_count) in young:
            continue
        fin, got = slurm.ended(r.job_id, r.restart_count)
        if not fin:
            continue
        said: Facts = got or {}
        state = str(said.get("job_state", ""))
        if int(said.get("restarts", 0)) > r.restart_count:
            state = "REQUEUED"
        done = r.model_copy(deep=True, update={"status": Status.PARTIAL, "job_state": state or r.job_state})
        done.end_time = max(done.start_time, float(said.get("end_time") or r.end_time))
        done.errors.append(f"no Epilog record: finalised by collect from interim data (Slurm: {state or 'ended'})")
        if not dry_run:
            publish_collected(cfg, done)
        lines.append(f"{'would mark' if dry_run else 'marked'} {r.cluster}/{r.job_id} attempt {r.restart_count}: "
                     f"running -> partial (Slurm {state or 'ended'})")
    return lines


# ---------------------------------------------------------------- Slurm: jobs ended without a record
def with_user_text(rec: JobRecord, text: UserText) -> JobRecord:
    """``rec`` with its job name and work dir from ``sacct --json`` (``text``:
    :func:`~slurm_energy.slurm.clients.sacct.parse_sacct_json`, matched by job id and start time). A job
    the JSON does not give keeps none (no work dir: no report)."""
    got = text.get((rec.job_id, int(rec.start_time)))
    if got is None:
        rec.errors = [*rec.errors, "its job name and work dir: not in sacct --json's answer; no report written"]
        return rec
    rec.job_name, rec.work_dir = got["job_name"], got["work_dir"]
    return rec


def finish_unrecorded(cfg: SiteConfig, store: RecoverStore, now: float, since_s: float, older_than_s: float,
                      dry_run: bool = False, facts: SlurmFacts | None = None) -> list[str]:
    """Slurm's ended jobs: a ``no_data`` record for every job sacct says started and ended in the last
    ``since_s`` seconds (at least ``older_than_s`` ago: its finalizer may still be at work) that has
    no record (any status) of that run in ``store``. Returns one line per job published (or that
    would be). No sacct (no accounting storage) or an sacct error: nothing is done. The jobs are
    found by a query holding no user text (:meth:`SlurmFacts.ended_since`); the job name and work
    dir of each one recorded come from :meth:`SlurmFacts.user_text` (``sacct --json``)."""
    facts = facts or slurm_facts()
    got = facts.ended_since(now - since_s)
    if got is None:
        return []
    found = [x for x in got if now - x.end_time >= older_than_s]
    have: dict[str, list[RunKey]] = {}
    ids = sorted({x.job_id for x in found})
    for chunk in (ids[i:i + 200] for i in range(0, len(ids), 200)):  # summary rows only: no record JSON parsed
        for row in store.rows(jobs=chunk):
            have.setdefault(row.job_id, []).append(RunKey.of_record(row))
    def lost(x: JobRecord) -> bool:  # sacct's line knows no restart count; its cluster name is not compared
        key = RunKey(x.job_id, start=x.start_time, end=x.end_time)
        return not any(same_run(k, key) is not False for k in have.get(x.job_id, []))
    found = [x for x in found if lost(x)]
    if not found:
        return []
    text = facts.user_text(x.job_id for x in found)
    lines: list[str] = []
    for x in found:
        with_user_text(x, text)
        if not dry_run:
            try:
                publish_collected(cfg, x)
            except Exception as e:
                lines.append(f"{x.cluster}/{x.job_id} from sacct not stored: {type(e).__name__}: {one_line(str(e))}")
                continue
        lines.append(f"{'would store' if dry_run else 'stored'} {x.cluster}/{x.job_id} from sacct: "
                     f"no_data ({x.job_state}, no record from the hooks)")
    return lines
