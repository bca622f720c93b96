"""What ``slurm-energy collect`` finishes on a node: job attempts whose finalizer never ran or was
killed, samplers that outlived their job, temp files of killed writers; and Slurm's final word on
a job (scontrol while slurmctld remembers it, else sacct). Never called from the Prolog/Epilog.

A spool attempt ``<spool>/jobs/<job>-r<k>/`` is *left over* on a node when it holds the node's
context file but no ``finalized-<node>.done`` marker, its newest file is at least ``older_than_s``
old (a finalizer may still be at work) and Slurm says the job has finished.
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from slurm_energy.slurm.env import JobContext
from slurm_energy.slurm.sacct import SACCT, slurm_client
from slurm_energy.slurm.spool import _DIR_RE, JobSpool, remove_stale_tmp

log = logging.getLogger("slurm_energy.collect")



@dataclass
class Leftover:
    """One node's unfinished attempt in a spool."""

    spool: JobSpool
    ctx: JobContext
    newest_mtime: float


def _newest(d: str) -> float:
    try:
        return max(os.lstat(os.path.join(d, n)).st_mtime for n in os.listdir(d))
    except (OSError, ValueError):
        return 0.0


def scan_spool(spool_dir: str, now: float, older_than_s: float) -> Iterator[Leftover]:
    """Leftover node attempts in one spool (see module docstring; Slurm's state is not asked here).
    Stale temp files (``*.tmp<pid>`` older than 10 min) are removed on the way."""
    jobs = os.path.join(spool_dir, "jobs")
    try:
        names = sorted(os.listdir(jobs))
    except OSError:
        return
    for name in names:
        d = os.path.join(jobs, name)
        m = _DIR_RE.match(name)  # <job_id>-r<restart>[-<tag> of a reused job id's later run]
        if not m or not os.path.isdir(d):
            continue
        remove_stale_tmp(d, now)
        newest = _newest(d)
        if now - newest < older_than_s:
            continue
        for f in sorted(os.listdir(d)):
            if not (f.startswith("context-") and f.endswith(".json")):
                continue
            node = f[len("context-"):-len(".json")]
            sp = JobSpool(spool_dir, m.group(1), int(m.group(2)), node, m.group(3) or "")
            if os.path.exists(sp.finalized):
                continue
            try:
                with open(sp.context, encoding="utf-8") as fh:
                    ctx = JobContext.from_json(fh.read())
            except (OSError, ValueError) as e:
                log.warning("collect: %s unreadable: %s", sp.context, e)
                continue
            yield Leftover(sp, ctx, newest)


def parse_sacct_line(line: str) -> dict:
    """``State|Start|End`` from ``sacct -X -n -P -o State,Start,End`` -> {"job_state", "start_time",
    "end_time"} (epoch s; "Unknown"/"None" dropped). "CANCELLED by 0" -> "CANCELLED"."""
    import time

    parts = line.strip().split("|")
    out: dict = {}
    if parts and parts[0]:
        out["job_state"] = parts[0].split()[0].split("+")[0]
    for key, v in zip(("start_time", "end_time"), parts[1:3]):
        try:
            out[key] = time.mktime(time.strptime(v, "%Y-%m-%dT%H:%M:%S"))
        except ValueError:
            pass
    return out


def slurm_final_facts(job_id: str, restart_count: int = 0, *, run: Callable = subprocess.run,
                      scontrol: str = "/usr/bin/scontrol", sacct: str = SACCT) -> tuple[bool | None, dict | None]:
    """(finished?, facts) for one job: scontrol first (no waiting), then sacct once slurmctld has
    forgotten the job (MinJobAge). finished is None when neither knows the job (no accounting)."""
    from slurm_energy.slurm.scontrol import UNFINISHED, show_job

    facts = show_job(job_id, attempt=restart_count, wait_s=0.0, scontrol=scontrol, run=run)
    if facts and facts.get("job_state"):
        later = facts.get("restarts", 0) > restart_count
        return later or facts["job_state"] not in UNFINISHED, facts
    if not os.path.exists(sacct):
        return None, None
    try:
        r = slurm_client([sacct, "-X", "-n", "-P", "-j", str(job_id), "-o", "State,Start,End"], run)
    except (OSError, subprocess.TimeoutExpired):
        return None, None
    lines = [x for x in r.stdout.splitlines() if x.strip()] if r.returncode == 0 else []
    if not lines:
        return None, None
    facts = parse_sacct_line(lines[-1])
    return facts.get("job_state") not in UNFINISHED, facts
