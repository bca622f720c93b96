"""``slurm-energy prune``: spool retention. Removes spool attempts (listed by the
:class:`~slurm_energy.slurm.attempt.Journal`) and results attempts older than a given age whose job
attempt is stored as a final record (:meth:`Store.final_record
<slurm_energy.store.sqlstore.Store.final_record>`); never one not yet stored, never a queue file."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from slurm_energy.jobmeta import RunKey
from slurm_energy.model import JobRecord, Status
from slurm_energy.slurm.attempt import Journal, remove_stale_tmp

if TYPE_CHECKING:
    from slurm_energy.store import Store


def _newest(d: str) -> float:
    try:
        return max(os.lstat(os.path.join(d, n)).st_mtime for n in os.listdir(d))
    except (OSError, ValueError):
        return 0.0


def prune(store: Store, spools: list[str], results_dirs: list[str], older_than_s: float, now: float,
          dry_run: bool = False) -> list[str]:
    """Remove spool attempts and results attempts older than ``older_than_s`` whose job attempt is
    stored as a final record (never one not yet stored; queue files are never removed). A spool
    attempt whose record is ``no_data`` is kept until every node's finalizer marked it finished.
    Returns one line per directory removed (or that would be)."""
    def stored(job_id: str, restart: int, cluster: str | None = None) -> JobRecord | None:
        return store.final_record(RunKey(job_id, cluster=cluster, restart_count=restart))

    out = []
    for run in Journal(spools).runs():
        remove_stale_tmp(run.path, now)
        if now - run.newest_mtime() < older_than_s:
            continue
        rec = stored(run.job_id, run.restart_count)
        all_final = all(a.is_finalized() for a in run.attempts())
        if rec is None or (rec.status == Status.NO_DATA and not all_final):
            continue
        out.append(f"{'would remove' if dry_run else 'removed'} {run.path}")
        if not dry_run:
            shutil.rmtree(run.path, ignore_errors=True)
    for rd in results_dirs:
        root = Path(rd)
        for d in sorted(root.glob("*/*.*")) if root.is_dir() else []:
            job_id, _, restart = d.name.rpartition(".")
            if not d.is_dir() or not restart.isdigit() or now - _newest(str(d)) < older_than_s:
                continue
            if stored(job_id, int(restart), d.parent.name if d.parent.name != "default" else "") is None:
                continue
            out.append(f"{'would remove' if dry_run else 'removed'} {d}")
            if not dry_run:
                shutil.rmtree(d, ignore_errors=True)
    return out
