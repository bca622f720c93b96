"""The parts of ``slurm-energy collect`` that finish what faults left behind (see
:mod:`slurm_energy.slurm.leftovers`), and ``slurm-energy prune`` (spool retention).

collect, in order: (1) store the records queued while the store was down or locked; (2) finish
each node attempt left in a spool (finalizer killed or never started) once Slurm says the job
ended, stopping a sampler that outlived its job; (3) the caller merges attempts whose nodes never
all reported; (4) every record still ``running`` whose job Slurm says has ended becomes
``partial`` from its interim data, with Slurm's state. Run it as root on every node (the spool is
node-local) from the timer or cron line ``slurm-energy install`` prints.
"""

from __future__ import annotations

import logging
import os
import shutil
from typing import Callable

from slurm_energy.model import Status

log = logging.getLogger("slurm_energy.collect")

#: a job Slurm no longer knows (no accounting, purged) is taken as ended after this long, s
UNKNOWN_JOB_S = 86400.0


def _stop_stray_sampler(lo) -> None:
    from slurm_energy.slurm.detach import cmdline, find_sampler, is_running, stop_process

    pid = None
    try:
        with open(lo.spool.pidfile) as f:
            pid = int(f.read().strip())
        if lo.spool.dir not in cmdline(pid):
            pid = None
    except (OSError, ValueError):
        pid = None
    pid = pid or find_sampler("/jobs/" + os.path.basename(lo.spool.dir), lo.spool.node)
    if pid and is_running(pid):
        log.info("collect: stopping sampler %d of ended job %s", pid, lo.ctx.job_id)
        stop_process(pid, term_wait_s=5.0, kill_wait_s=1.0)


def _end_time(lo, ep: dict, facts: dict) -> float:
    from slurm_energy.sampling.samplefile import read_sample_table

    if ep.get("t"):
        return float(ep["t"])
    if facts.get("end_time"):
        return float(facts["end_time"])
    ts = read_sample_table(lo.spool.samples).t
    return max(ts) if ts else lo.newest_mtime


def _already_stored(store, lo) -> bool:
    """True if a measured final record of this run already covers this node (its finalizer did
    its work but could not write the ``finalized`` marker: a full or read-only spool)."""
    if store is None:
        return False
    for r in store.query(jobs=[lo.ctx.job_id]):
        if (r.job_id == lo.ctx.job_id and r.restart_count == lo.ctx.restart_count
                and r.status not in (Status.RUNNING, Status.NO_DATA)
                and (not lo.ctx.prolog_time or abs(r.start_time - lo.ctx.prolog_time) < 3600)
                and any(n.node == lo.spool.node for n in r.nodes)):
            return True
    return False


def finish_leftovers(cfg, spool_dirs: list[str], now: float, older_than_s: float, dry_run: bool = False,
                     final_facts: Callable | None = None, store=None) -> tuple[list[str], set]:
    """Step (2). Returns (one line per node attempt finished or that would be, (job_id, restart) of
    attempts not yet old enough: step (4) leaves those alone). With ``store``, a node already in a
    measured stored record is only marked finished (never replaced by a poorer view)."""
    from slurm_energy.slurm.finalize import finalize_spool
    from slurm_energy.slurm.leftovers import scan_spool, slurm_final_facts

    final_facts = final_facts or slurm_final_facts
    lines, young = [], set()
    for sd in spool_dirs:
        for lo in scan_spool(sd, now, 0.0):
            key = (lo.ctx.job_id, lo.ctx.restart_count)
            if now - lo.newest_mtime < older_than_s:
                young.add(key)
                continue
            fin, facts = final_facts(lo.ctx.job_id, lo.ctx.restart_count)
            facts = facts or {}
            if fin is False or (fin is None and now - lo.newest_mtime < UNKNOWN_JOB_S):
                young.add(key)
                continue
            if _already_stored(store, lo):
                if not dry_run:
                    try:
                        from slurm_energy.slurm.spool import write_private

                        write_private(lo.spool.finalized, repr(now))
                    except OSError:
                        pass
                continue
            ep = lo.spool.epilog_facts()
            outcome = ep.get("sampler") or "no_epilog"
            what = f"{lo.ctx.job_id} attempt {lo.ctx.restart_count} on {lo.spool.node} ({lo.spool.dir}, sampler {outcome})"
            if dry_run:
                lines.append(f"would finish {what}")
                continue
            _stop_stray_sampler(lo)
            if not ep:
                lo.spool.record_error("no Epilog ran for this attempt on this node (or it could not write "
                                      "its spool); finished by slurm-energy collect")
            lo.spool.record_error("finalizer did not finish (killed or never started); finished by slurm-energy collect")
            try:
                finalize_spool(cfg, lo.spool, lo.ctx, _end_time(lo, ep, facts),
                               ep.get("exit_code") or facts.get("exit_code", ""), outcome, facts or None)
                lines.append(f"finished {what}")
            except Exception as e:  # noqa: BLE001 - one bad attempt must not stop the others
                lines.append(f"could not finish {what}: {type(e).__name__}: {e}")
    return lines, young


def finish_running(store, young: set, dry_run: bool = False, final_facts: Callable | None = None) -> list[str]:
    """Step (4): records left ``running`` whose job has ended (Slurm says so) become ``partial``."""
    from slurm_energy.slurm.leftovers import slurm_final_facts

    final_facts = final_facts or slurm_final_facts
    lines = []
    for r in store.query(states=[Status.RUNNING.value]):
        if (r.job_id, r.restart_count) in young:
            continue
        fin, facts = final_facts(r.job_id, r.restart_count)
        if not fin:
            continue
        facts = facts or {}
        state = facts.get("job_state", "")
        if facts.get("restarts", 0) > r.restart_count:
            state = "REQUEUED"
        done = r.model_copy(deep=True, update={"status": Status.PARTIAL, "job_state": state or r.job_state})
        done.end_time = max(done.start_time, float(facts.get("end_time") or r.end_time))
        done.errors.append(f"no Epilog record: finalised by collect from interim data (Slurm: {state or 'ended'})")
        if not dry_run:
            store.put(done)
        lines.append(f"{'would mark' if dry_run else 'marked'} {r.cluster}/{r.job_id} attempt {r.restart_count}: "
                     f"running -> partial (Slurm {state or 'ended'})")
    return lines


def prune(cfg, store, spool_dirs: list[str], results_dirs: list[str], older_than_s: float, now: float,
          dry_run: bool = False) -> list[str]:
    """Remove spool attempts and results attempts older than ``older_than_s`` whose job attempt is
    stored as a final record (never one not yet stored; queue files are never removed). A spool
    attempt whose record is ``no_data`` is kept until every node's finalizer marked it finished.
    Returns one line per directory removed (or that would be)."""
    from pathlib import Path

    from slurm_energy.slurm.leftovers import _newest
    from slurm_energy.slurm.spool import _DIR_RE, JobSpool, remove_stale_tmp

    def stored(job_id: str, restart: int, cluster: str | None = None):
        recs = [r for r in store.query(jobs=[job_id]) if r.job_id == job_id and r.restart_count == restart
                and (cluster is None or r.cluster == cluster) and r.status != Status.RUNNING]
        return recs

    out = []
    for sd in spool_dirs:
        jobs = Path(sd) / "jobs"
        for d in sorted(jobs.glob("*-r*")) if jobs.is_dir() else []:
            remove_stale_tmp(str(d), now)
            m = _DIR_RE.match(d.name)
            if not m or now - _newest(str(d)) < older_than_s:
                continue
            job_id, r = m.group(1), int(m.group(2))
            recs = stored(job_id, r)
            nodes = [p.name[len("context-"):-5] for p in d.glob("context-*.json")]
            all_final = all(os.path.exists(JobSpool(sd, job_id, r, n, m.group(3) or "").finalized) for n in nodes)
            if not recs or (all(x.status == Status.NO_DATA for x in recs) and not all_final):
                continue
            out.append(f"{'would remove' if dry_run else 'removed'} {d}")
            if not dry_run:
                shutil.rmtree(d, ignore_errors=True)
    for rd in results_dirs:
        root = Path(rd)
        for d in sorted(root.glob("*/*.*")) if root.is_dir() else []:
            job_id, _, r = d.name.rpartition(".")
            if not d.is_dir() or not r.isdigit() or now - _newest(str(d)) < older_than_s:
                continue
            if not stored(job_id, int(r), d.parent.name if d.parent.name != "default" else ""):
                continue
            out.append(f"{'would remove' if dry_run else 'removed'} {d}")
            if not dry_run:
                shutil.rmtree(d, ignore_errors=True)
    return out


def with_paths(cfg, store_url: str, results_dir: str):
    """cfg with paths.store_url / results_dir replaced (collect's --store / --results-dir)."""
    return cfg.model_copy(update={"paths": cfg.paths.model_copy(update={"store_url": store_url,
                                                                         "results_dir": results_dir})})


__all__ = ["finish_leftovers", "finish_running", "prune", "with_paths"]
