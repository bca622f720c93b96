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


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


def busy(spools: list[str]) -> tuple[set[str], set[str]]:
    """What is at work on this machine or waits for it: (spool job directories a sampler or a
    single-job finalizer runs for, or that wait in a node finalizer's queue in ``spools``;
    ``"<job id>@<node>"`` of each job a spool-less finalizer, ``finalize-env``, runs for). Processes are found by argv in /proc
    (``python -I -m slurm_energy.slurm.hooks {sampler|finalize|finalize-env} ...``, run by root:
    a user's process copying that argv is not root's). The node finalizer's sweep
    (:func:`slurm_energy.slurm.collect.sweep_node`) leaves these alone."""
    import json

    from slurm_energy.slurm.detach import cmdline
    from slurm_energy.slurm.spool import FINALIZE_QUEUE

    dirs: set[str] = set()
    job_ids: set[str] = set()  # "<job id>@<node>"
    me = os.geteuid()
    for name in os.listdir("/proc"):
        try:
            if not name.isdigit() or int(name) == os.getpid() or os.stat(f"/proc/{name}").st_uid != me:
                continue
        except OSError:
            continue
        argv = cmdline(int(name))
        if "slurm_energy.slurm.hooks" not in argv:
            continue
        rest = argv[argv.index("slurm_energy.slurm.hooks") + 1:]
        if len(rest) >= 2 and rest[0] in ("sampler", "finalize"):
            dirs.add(rest[1].rstrip("/"))
        elif len(rest) >= 2 and rest[0] == "finalize-env":
            try:
                ctx = json.loads(rest[1])
                job_ids.add(f"{ctx['job_id']}@{ctx.get('node', '')}")
            except (ValueError, KeyError, TypeError):
                pass
    for sd in spools:
        root = os.path.join(sd, FINALIZE_QUEUE)
        try:
            qdirs = [os.path.join(root, n) for n in os.listdir(root)]
        except OSError:
            continue
        from slurm_energy.slurm.finalize_queue import entries

        for path in (p for q in qdirs for p in entries(q)):
            try:
                with open(path, encoding="utf-8") as f:
                    dirs.add(str(json.load(f)["dir"]).rstrip("/"))
            except (OSError, ValueError, KeyError, TypeError):
                continue
    return dirs, job_ids


def scan_spool(spool_dir: str, now: float, older_than_s: float, node: str | None = None,
               since: float = 0.0) -> Iterator[Leftover]:
    """Leftover node attempts in one spool (see module docstring; Slurm's state is not asked here),
    of ``node`` only when given; ``since`` (epoch s): attempt directories last changed (a file
    created or renamed in them) before it are not looked into (the node finalizer's sweep looks at
    the last hour, not at the spool's 14 days). Stale temp files (``*.tmp<pid>`` older than 10 min)
    are removed on the way."""
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
        if since and _mtime(d) < since and (node is None or _mtime(os.path.join(d, f"samples-{node}.jsonl")) < since):
            continue  # (a long job's sampler appends to its samples file: that leaves the directory's mtime)
        if node is not None and not os.path.exists(os.path.join(d, f"context-{node}.json")):
            continue
        remove_stale_tmp(d, now)
        newest = _newest(d)
        if now - newest < older_than_s:
            continue
        for f in sorted(os.listdir(d)):
            if not (f.startswith("context-") and f.endswith(".json")):
                continue
            at = f[len("context-"):-len(".json")]
            if node is not None and at != node:
                continue
            sp = JobSpool(spool_dir, m.group(1), int(m.group(2)), at, m.group(3) or "")
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
    from slurm_energy.slurm.formats import parse_timestamp

    parts = line.strip().split("|")
    out: dict = {}
    if parts and parts[0]:
        out["job_state"] = parts[0].split()[0].split("+")[0]
    for key, v in zip(("start_time", "end_time"), parts[1:3]):
        if (t := parse_timestamp(v)) is not None:
            out[key] = t
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
