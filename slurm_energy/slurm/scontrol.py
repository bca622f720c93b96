"""The job's final facts from slurmctld, read by the detached finalizer (never by Prolog/Epilog).

Slurm 22.05 gives the Prolog/Epilog no job state, no array/het-job ids and no job name, and its
Epilog's exit code is 0:0 for a job that was cancelled or timed out. The finalizer runs after the
Epilog, detached and with time to spare, so it asks ``scontrol show job -o`` (absolute path: hooks
have no PATH) once the job has left COMPLETING. Any failure leaves the facts unknown: the record
then keeps what the environment and the job's processes gave.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from typing import Callable, Optional

SCONTROL = "/usr/bin/scontrol"

_KEYS = {"ArrayJobId": "array_job_id", "ArrayTaskId": "array_task_id", "HetJobId": "het_job_id",
         "HetJobOffset": "het_job_offset", "JobState": "job_state", "Restarts": "restarts",
         "ExitCode": "exit_code", "MinMemoryNode": "min_memory_node", "MinMemoryCPU": "min_memory_cpu",
         "NumNodes": "num_nodes", "StartTime": "start_time", "EndTime": "end_time"}

#: states in which the job has not finished yet (the Epilog runs while the job is COMPLETING)
UNFINISHED = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUE_HOLD", "REQUEUE_FED",
              "RESIZING", "SIGNALING", "STAGE_OUT"}


def parse_show_job(line: str) -> dict:
    """Facts from one ``scontrol show job -o`` line.

    Returns {"array_job_id", "array_task_id", "het_job_id", "het_job_offset", "job_state",
    "restarts" (int), "exit_code", "job_name", "min_memory_node" / "min_memory_cpu" (the memory
    request, Slurm's units, e.g. "4000M"), "tres_mem" (TRES mem=, all nodes), "num_nodes",
    "start_time"/"end_time" (epoch s, from the controller's local time)} for the keys present;
    "N/A" / "(null)" values are
    dropped. JobName may contain spaces (it runs up to `` UserId=``).
    """
    out: dict = {}
    for k, v in re.findall(r"(?:^|\s)(\w+)=(\S*)", line):
        if k in _KEYS and v not in ("", "N/A", "(null)"):
            out[_KEYS[k]] = v
    m = re.search(r"(?:^|\s)TRES=\S*?\bmem=([^,\s]+)", line)
    if m:
        out["tres_mem"] = m.group(1)  # the whole job's memory (all nodes), Slurm's units
    m = re.search(r"(?:^|\s)JobName=(.*?) UserId=", line)
    if m and m.group(1) not in ("", "(null)"):
        out["job_name"] = m.group(1)
    if "restarts" in out:
        try:
            out["restarts"] = int(out["restarts"])
        except ValueError:
            del out["restarts"]
    if "job_state" in out:
        out["job_state"] = out["job_state"].split("+")[0]
    for k in ("start_time", "end_time"):  # slurmctld's local time, e.g. 2026-12-01T05:41:14
        if k in out:
            try:
                out[k] = time.mktime(time.strptime(out[k], "%Y-%m-%dT%H:%M:%S"))
            except ValueError:  # "Unknown" (not started / not ended yet)
                del out[k]
    return out


def show_job(job_id: str, *, attempt: Optional[int] = None, wait_s: float = 20.0, timeout_s: float = 5.0,
             scontrol: str = SCONTROL, run: Callable = subprocess.run, sleep: Callable = time.sleep) -> Optional[dict]:
    """``scontrol show job -o JOB`` parsed, waiting (up to ``wait_s``) until the job has finished
    (or, given the ``attempt``'s restart count, until slurmctld shows a later attempt: requeued).

    Returns the facts (see :func:`parse_show_job`), the last unfinished ones if it never finished
    within ``wait_s``, or None when scontrol is missing, fails, times out or knows no such job.
    """
    if not os.path.exists(scontrol):
        return None
    deadline = time.monotonic() + wait_s
    facts = None
    while True:
        try:
            r = run([scontrol, "show", "job", "-o", str(job_id)], capture_output=True, text=True,
                    timeout=timeout_s, env={"LANG": "C", **({"SLURM_CONF": os.environ["SLURM_CONF"]}
                                                           if os.environ.get("SLURM_CONF") else {})})
        except (OSError, subprocess.TimeoutExpired):
            return facts
        if r.returncode != 0 or "JobId=" not in r.stdout:
            return facts
        facts = parse_show_job(r.stdout.strip().splitlines()[0])
        if facts.get("job_state") not in UNFINISHED or time.monotonic() > deadline:
            return facts
        if attempt is not None and facts.get("restarts", 0) > attempt:
            return facts
        sleep(0.5)
