"""``collect``'s last step: every job Slurm's accounting says ran gets a record, even when nothing
of it is left on any node (its spools were unusable *and* its finalizer was killed: the job's
facts then lived only in the finalizer's command line). Such a job is stored as ``no_data`` from
``sacct`` (Slurm's state, times, user, account, partition, work dir, exit code), with the reason;
a measured record found later replaces it (the store's placeholder rule).
"""

from __future__ import annotations

import os
import subprocess
from typing import Callable, Optional

from slurm_energy.model import JobRecord, Status

SACCT = "/usr/bin/sacct"
#: sacct -P fields: the user's text (WorkDir) last, the line split from the left with maxsplit, so a
#: '|' in it stays in it. The job name, the other text a user writes, is asked for apart
#: (:data:`NAME_FIELDS`, also last): two such fields on one line could not be told apart.
FIELDS = ("JobIDRaw", "JobID", "State", "Start", "End", "NodeList", "User", "UID", "GID", "Account",
          "Partition", "ExitCode", "Cluster", "WorkDir")
NAME_FIELDS = ("JobIDRaw", "JobName")
REASON = ("no record from the hooks (no usable spool and no finalizer result on any node); "
          "stored by slurm-energy collect from sacct: nothing was measured")


def _epoch(text: str) -> Optional[float]:
    import time

    try:
        return time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None


def split_last_free(line: str, fields: tuple[str, ...]) -> Optional[dict]:
    """One ``sacct -P`` line as {field: text}: split from the left at most ``len(fields) - 1`` times,
    so the last field (a user's text) keeps any '|' it holds; None for a line with fewer fields."""
    parts = line.rstrip("\n").split("|", len(fields) - 1)
    return dict(zip(fields, parts)) if len(parts) == len(fields) else None


def record_from_sacct(line: str, job_name: str = "") -> Optional[JobRecord]:
    """A ``no_data`` JobRecord from one ``sacct -X -n -P -o FIELDS`` line (``job_name``: from the
    :data:`NAME_FIELDS` query), or None for a job that never started on a node (cancelled while
    pending), has not ended, or a line that is not sacct's."""
    from slurm_energy.slurm.hostlist import expand_hostlist

    f = split_last_free(line, FIELDS)
    if f is None or not f["JobIDRaw"].isdigit():
        return None
    start, end = _epoch(f["Start"]), _epoch(f["End"])
    if start is None or end is None or f["NodeList"] in ("", "None assigned"):
        return None
    jid = f["JobID"]
    arr = jid.split("_", 1) if "_" in jid else None
    het = jid.split("+", 1) if "+" in jid else None
    try:
        nodes = expand_hostlist(f["NodeList"])
    except ValueError:
        nodes = []
    return JobRecord(
        cluster=f["Cluster"], job_id=f["JobIDRaw"], job_name=job_name, user=f["User"],
        uid=int(f["UID"]) if f["UID"].isdigit() else None, gid=int(f["GID"]) if f["GID"].isdigit() else None,
        account=f["Account"], partition=f["Partition"], work_dir=f["WorkDir"], exit_code=f["ExitCode"],
        job_state=f["State"].split()[0] if f["State"] else "", expected_nodes=nodes,
        array_job_id=arr[0] if arr else None, array_task_id=arr[1] if arr else None,
        het_job_id=het[0] if het else None, het_job_offset=het[1] if het else None,
        start_time=start, end_time=max(start, end), status=Status.NO_DATA, errors=[REASON])


def finish_unrecorded(store, now: float, since_s: float, older_than_s: float, dry_run: bool = False,
                      run: Callable = subprocess.run, sacct: str = SACCT) -> list[str]:
    """Store a ``no_data`` record for every job sacct says started and ended in the last
    ``since_s`` seconds (at least ``older_than_s`` ago: its finalizer may still be at work) that has
    no record (any status) of that run in ``store``. Returns one line per job stored (or that would
    be). No sacct (no accounting storage) or an sacct error: nothing is done."""
    import time

    if not os.path.exists(sacct):
        return []
    since = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(now - since_s))

    def query(fields: tuple[str, ...]) -> Optional[list[str]]:
        try:
            r = run([sacct, "-X", "-n", "-P", "-a", "-S", since, "-E", "now", "-o", ",".join(fields)],
                    capture_output=True, text=True, errors="surrogateescape", timeout=60,
                    env={"LANG": "C", **({"SLURM_CONF": os.environ["SLURM_CONF"]} if os.environ.get("SLURM_CONF")
                                         else {})})
        except (OSError, subprocess.TimeoutExpired):
            return None
        return r.stdout.splitlines() if r.returncode == 0 else None

    lines_main = query(FIELDS)
    if lines_main is None:
        return []
    names = {f["JobIDRaw"]: f["JobName"] for f in (split_last_free(x, NAME_FIELDS) for x in query(NAME_FIELDS) or [])
             if f is not None}
    found = []
    for line in lines_main:
        f = split_last_free(line, FIELDS)
        x = record_from_sacct(line, names.get(f["JobIDRaw"], "") if f else "")
        if x is not None:
            found.append(x)
    found = [x for x in found if now - x.end_time >= older_than_s]
    if not found:
        return []
    have: dict[str, list[float]] = {}
    for rec in store.query(start=min(x.start_time for x in found) - 3600):
        have.setdefault(rec.job_id, []).append(rec.start_time)
    lines = []
    for x in found:
        if any(abs(t - x.start_time) < 3600 for t in have.get(x.job_id, [])):
            continue
        if not dry_run:
            try:
                store.put(x)
            except Exception as e:  # noqa: BLE001 - one job must not stop the others
                lines.append(f"{x.cluster}/{x.job_id} from sacct not stored: {type(e).__name__}: {e}")
                continue
        lines.append(f"{'would store' if dry_run else 'stored'} {x.cluster}/{x.job_id} from sacct: "
                     f"no_data ({x.job_state}, no record from the hooks)")
    return lines
