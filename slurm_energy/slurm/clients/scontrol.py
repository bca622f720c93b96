"""The job's final facts from slurmctld, read by the detached finalizer (never by Prolog/Epilog).

Slurm 22.05 gives the Prolog/Epilog no job state, no array/het-job ids and no job name, and its
Epilog's exit code is 0:0 for a job that was cancelled or timed out. The finalizer runs after the
Epilog, detached and with time to spare, so it asks slurmctld (absolute path: hooks have no PATH)
once the job has left COMPLETING. Any failure leaves the facts unknown: the record then keeps what
slurmd's environment gave.

User text (job name, comment, work dir, std paths) can hold `` JobState=COMPLETED ExitCode=0:0``
and newlines, so ``scontrol show job -o``'s ``Key=value`` line cannot be trusted to say which
``JobState=`` is slurmctld's. ``scontrol --json show job`` (Slurm's data_parser, 23.02 and later;
22.05's scontrol has no ``--json``: "unrecognized option", seen on the test cluster) is read
first; the text line only where JSON is not available, and there: output of more than one line (a
newline in user text) is not used at all, the array/het ids are read only before ``JobName=``, a
key after it that appears more than once is dropped (``ambiguous``), never guessed, every number
is bounded, and a state read from text is never waited on. The finalizer then asks slurmdbd for
the state (:meth:`slurm_energy.slurm.clients.facts.SlurmFacts.final_state`).
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import time
from typing import Any

from slurm_energy.slurm.clients.command import SCONTROL, Run, Sleep, slurm_client
from slurm_energy.slurm.clients.formats import parse_timestamp

#: facts about a job, by the keys of :func:`parse_show_job`
Facts = dict[str, Any]

_KEYS = {"ArrayJobId": "array_job_id", "ArrayTaskId": "array_task_id", "HetJobId": "het_job_id",
         "HetJobOffset": "het_job_offset", "JobState": "job_state", "Restarts": "restarts",
         "ExitCode": "exit_code", "MinMemoryNode": "min_memory_node", "MinMemoryCPU": "min_memory_cpu",
         "NumNodes": "num_nodes", "StartTime": "start_time", "EndTime": "end_time"}

#: keys Slurm prints before JobName (no user text there)
_HEAD_KEYS = {"ArrayJobId", "ArrayTaskId", "HetJobId", "HetJobOffset"}

#: states in which the job has not finished yet (the Epilog runs while the job is COMPLETING)
UNFINISHED = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUE_HOLD", "REQUEUE_FED",
              "RESIZING", "SIGNALING", "STAGE_OUT"}


def _text_keys(line: str) -> tuple[Facts, dict[str, int]]:
    """(facts, how often each key after JobName appeared) of one ``show job -o`` line.

    Slurm prints the array/het ids before JobName (``JobId=171 ArrayJobId=170 ArrayTaskId=2
    JobName=...``), where no user text can be: only there are they read. The keys after JobName
    are counted (a job name or comment holding `` JobState=...`` makes one twice; MinMemoryNode
    and MinMemoryCPU, one of which Slurm prints, count as one key, ``MinMemory``)."""
    out: Facts = {}
    head, sep, rest = line.partition(" JobName=")
    if not sep:
        head, rest = "", line
    counts: dict[str, int] = {}
    for k, v in re.findall(r"(?:^|\s)(\w+)=(\S*)", rest):
        if k in _KEYS and k not in _HEAD_KEYS:
            key = "MinMemory" if k.startswith("MinMemory") else k
            counts[key] = counts.get(key, 0) + 1
            if v not in ("", "N/A", "(null)"):
                out[_KEYS[k]] = v
    for k, v in re.findall(r"(?:^|\s)(\w+)=(\S*)", head):
        if k in _HEAD_KEYS and v not in ("", "N/A", "(null)"):
            out[_KEYS[k]] = v
    tres = re.findall(r"(?:^|\s)TRES=\S*?\bmem=([^,\s]+)", rest)
    if len(tres) == 1:
        out["tres_mem"] = tres[0]  # the whole job's memory (all nodes), Slurm's units
    elif tres:
        counts["TRES"] = len(tres)
    # a het job's component prints HetJobIdSet= between its name and UserId= (job_info.c; seen on
    # 22.05: "JobName=het HetJobIdSet=120-121 UserId=..."): not part of the name
    m = re.search(r"(?:^|\s)JobName=(.*?) (?:HetJobIdSet=\S+ )?UserId=", line)
    if m and m.group(1) not in ("", "(null)"):
        out["job_name"] = m.group(1)
    return out, counts


def parse_show_job(line: str) -> Facts:
    """Facts from one ``scontrol show job -o`` line.

    Returns {"array_job_id", "array_task_id", "het_job_id", "het_job_offset", "job_state",
    "restarts" (int), "exit_code", "job_name", "min_memory_node" / "min_memory_cpu" (the memory
    request, Slurm's units, e.g. "4000M"), "tres_mem" (TRES mem=, all nodes), "num_nodes",
    "start_time"/"end_time" (epoch s, from the controller's local time)} for the keys present;
    "N/A" / "(null)" values are
    dropped. JobName may contain spaces (it runs up to `` UserId=``). Array/het ids are read only
    before `` JobName=`` (where Slurm prints them and no user text can be); a key after it that
    appears more than once (a user's job name or comment holding ``JobState=...``) is left out, and
    listed in "ambiguous" (e.g. ``["ExitCode", "JobState"]``).
    """
    out, counts = _text_keys(line)
    twice = sorted(k for k, n in counts.items() if n > 1)
    for k in twice:  # which one is slurmctld's cannot be told
        for name in ([_KEYS["MinMemoryNode"], _KEYS["MinMemoryCPU"]] if k == "MinMemory" else
                     ["tres_mem"] if k == "TRES" else [_KEYS[k]]):
            out.pop(name, None)
    if twice:
        out["ambiguous"] = twice
    for k in ("restarts", "array_job_id", "array_task_id", "het_job_id", "het_job_offset", "num_nodes"):
        if k in out and not _bounded_int_text(out[k]):
            del out[k]  # not a number Slurm prints: left unknown
    if "restarts" in out:
        out["restarts"] = int(out["restarts"])
    if "job_state" in out:
        out["job_state"] = out["job_state"].split("+")[0]
    for k in ("start_time", "end_time"):  # slurmctld's local time; "Unknown": not started / not ended yet
        t = parse_timestamp(out.pop(k, ""))
        if t is not None:
            out[k] = t
    return out


#: every number read from Slurm's output is below this (Slurm's own are 32 or 64 bit unsigned)
MAX_NUMBER = 2**64


def _bounded_int_text(v: str) -> bool:
    """``v`` is a decimal integer of at most 20 digits (a Slurm id, count or restart number)."""
    return v.isascii() and v.isdigit() and len(v) <= 20


def json_number(v: object) -> int | None:
    """A JSON number as Slurm writes it: a plain int (the older openapi plugins' form) or
    ``{"set": true, "infinite": false, "number": N}`` (data_parser); None when unset/infinite, or
    not a finite number in [0, 2**64) (nothing Slurm writes)."""
    if isinstance(v, dict):
        if not v.get("set", True) or v.get("infinite"):
            return None
        v = v.get("number")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and not math.isfinite(v)):
        return None
    return int(v) if 0 <= v < MAX_NUMBER else None


def _json_exit_code(ec: object) -> str:
    """``"exit:signal"`` from Slurm's JSON exit_code: ``{"return_code": N, "signal": {"id": S}}``
    (data_parser) or the wait status as an int (older plugins); '' when absent."""
    if isinstance(ec, dict):
        rc, sig = json_number(ec.get("return_code")), json_number((ec.get("signal") or {}).get("id"))
        return f"{rc}:{sig or 0}" if rc is not None else ""
    w = json_number(ec)
    return f"{(w >> 8) & 0xFF}:{w & 0x7F}" if w is not None else ""


def _json_ids(job: dict[str, Any], out: Facts) -> None:
    """Array/het ids (0 / unset: not an array or het job; a task or offset only with its job id)."""
    for key in ("array_job_id", "array_task_id", "het_job_id", "het_job_offset"):
        n = json_number(job.get(key))
        if n is not None and (n or key in ("array_task_id", "het_job_offset")) and n != 4294967294:
            out[key] = str(n)
    if "array_task_id" in out and "array_job_id" not in out:
        del out["array_task_id"]
    if "het_job_offset" in out and "het_job_id" not in out:
        del out["het_job_offset"]


def _json_requests(job: dict[str, Any], out: Facts) -> None:
    """Memory request (MB), TRES mem=, node count, start/end (epoch s)."""
    for key, name in (("memory_per_node", "min_memory_node"), ("memory_per_cpu", "min_memory_cpu")):
        n = json_number(job.get(key))
        if n:
            out[name] = f"{n}M"
    m = re.search(r"(?:^|,)mem=([^,\s]+)", job.get("tres_alloc_str") or "")
    if m:
        out["tres_mem"] = m.group(1)
    if json_number(job.get("node_count")):
        out["num_nodes"] = str(json_number(job.get("node_count")))
    for key in ("start_time", "end_time"):
        n = json_number(job.get(key))
        if n:
            out[key] = float(n)


def parse_show_job_json(text: str, job_id: str) -> Facts | None:
    """Facts (the keys of :func:`parse_show_job`) from ``scontrol --json show job JOB``'s output;
    None when it is not JSON or names no such job. Fields by Slurm's data_parser names (both shapes
    read: the older plugins' plain values and data_parser's objects):
    ``job_state`` (a string, or a list of flags), ``exit_code`` (an int wait status, or
    ``{"return_code": N, "signal": {"id": S}}``), ``restart_cnt``, ``array_job_id``, ``array_task_id``,
    ``het_job_id``, ``het_job_offset``, ``name``, ``memory_per_node`` / ``memory_per_cpu`` (MB),
    ``tres_alloc_str``, ``node_count``, ``start_time`` / ``end_time`` (epoch s)."""
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    jobs = doc.get("jobs") if isinstance(doc, dict) else None
    job = next((j for j in jobs or [] if isinstance(j, dict) and str(json_number(j.get("job_id"))) == str(job_id)), None)
    if job is None:
        return None
    out: Facts = {}
    st = job.get("job_state")
    st = st[0] if isinstance(st, list) and st else st
    if isinstance(st, str) and st:
        out["job_state"] = st.split("+")[0]
    ec = _json_exit_code(job.get("exit_code"))
    if ec:
        out["exit_code"] = ec
    if json_number(job.get("restart_cnt")) is not None:
        out["restarts"] = json_number(job.get("restart_cnt"))
    _json_ids(job, out)
    if isinstance(job.get("name"), str) and job["name"]:
        out["job_name"] = job["name"]
    _json_requests(job, out)
    return out


#: the longest (s) a job's finalizer waits for slurmctld to say the job has finished. The node's
#: finalizer works its queue of ended jobs one at a time, so this bounds what one job can hold up
#: every other job on the node (slurmctld's state is read from its JSON, which user text cannot
#: change; a job still COMPLETING after it, or in the text form, gets slurmdbd's state, else the
#: state derived from slurmd's exit code: :func:`slurm_energy.slurm.jobend.jobfacts.slurm_facts`).
WAIT_S = 5.0
#: at most this many bytes of a client's output are parsed (a job's JSON is a few KiB)
MAX_OUTPUT = 4 << 20


def parse_show_job_text(stdout: str, job_id: str) -> Facts | None:
    """``scontrol show job -o JOB``'s output parsed with :func:`parse_show_job`, or None when it
    names no job. One record is one line; a newline inside user text (job name, comment, work dir)
    starts a line the user wrote, and an array's first task (its raw id is the array's) lists every
    task, one line each. Output of more than one line: only the array/het ids before ``JobName=``
    of the one line that starts ``JobId=<JOB> `` are taken (Slurm's, before any user text), nothing
    else, and it says so (``{"untrusted": why}``); two such lines (one forged): nothing at all."""
    lines = [x for x in stdout[:MAX_OUTPUT].split("\n") if x.strip()]
    if not lines or not lines[0].startswith("JobId="):
        return None
    if len(lines) == 1:
        return parse_show_job(lines[0])
    ids = [x.split(" ", 1)[0] for x in lines]
    if all(i.startswith("JobId=") for i in ids) and len(set(ids)) == len(ids):  # one record per line
        why = (f"it lists {len(lines)} jobs, one line each (a heterogeneous job's components or an array's tasks: "
               "Slurm lists them all for the first)")
    else:
        why = (f"its one-line output (-o) came as {len(lines)} lines (user text -- job name, comment or work dir "
               "-- holding a newline)")
    mine = [x for x in lines if x.startswith(f"JobId={job_id} ")]
    if len(mine) != 1:
        return {"untrusted": why}
    head = mine[0].partition(" JobName=")[0]
    out = {k: v for k, v in parse_show_job(head + " JobName=").items() if k in (
        "array_job_id", "array_task_id", "het_job_id", "het_job_offset")}
    return {**out, "untrusted": why + "; only the array/het ids before its JobName= are used"}


def show_job(job_id: str, *, attempt: int | None = None, wait_s: float = WAIT_S, timeout_s: float = 5.0,
             scontrol: str = SCONTROL, run: Run = subprocess.run, sleep: Sleep = time.sleep) -> Facts | None:
    """slurmctld's facts about ``job_id``, waiting (up to ``wait_s``) until the job has finished
    (or, given the ``attempt``'s restart count, until slurmctld shows a later attempt: requeued).

    ``scontrol --json show job`` first (:func:`parse_show_job_json`); where it gives no JSON (22.05:
    no ``--json``), ``show job -o`` (:func:`parse_show_job_text`) from then on, and a state read
    from text is never waited on (user text can say ``JobState=RUNNING``). (22.05's ``squeue
    --json`` ignores ``-j`` and prints every job slurmctld knows: not asked per job.) Output that is not UTF-8 (a
    user's job name) is decoded losslessly (surrogateescape).

    Returns the facts (see :func:`parse_show_job`), the last unfinished ones if it never finished
    within ``wait_s``, or None when scontrol is missing, fails, times out or knows no such job.
    """
    if not os.path.exists(scontrol):
        return None
    deadline = time.monotonic() + wait_s
    facts: Facts | None = None
    sources = [[scontrol, "--json", "show", "job", str(job_id)]]
    while True:
        argv = sources[0] if sources else [scontrol, "show", "job", "-o", str(job_id)]
        try:
            r = slurm_client(argv, run, timeout_s)
        except (OSError, subprocess.TimeoutExpired):
            if sources:
                sources.pop(0)
                continue
            return facts
        if sources:
            got = parse_show_job_json(r.stdout[:MAX_OUTPUT], str(job_id)) if r.returncode == 0 else None
            if got is None:
                sources.pop(0)  # no JSON here (or no such job in it): the next form, once
                continue
        else:
            if r.returncode != 0:
                return facts
            got = parse_show_job_text(r.stdout, str(job_id))
            if got is None:
                return facts
            if got.get("untrusted") or got.get("job_state") in UNFINISHED:
                return got  # text: a state a user may have written is not waited on
        facts = got
        if facts.get("job_state") not in UNFINISHED or time.monotonic() > deadline:
            return facts
        if attempt is not None and facts.get("restarts", 0) > attempt:
            return facts
        sleep(0.5)
