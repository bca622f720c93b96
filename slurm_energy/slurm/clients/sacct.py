"""sacct: what slurmdbd keeps about a job, asked after its end (never on the Prolog/Epilog path).

Every query here is one row of :data:`QUERIES` (CEEMS keeps its ``sacctFields`` the same way): each
field written by Slurm or an admin, none by a user (no job name, comment or work dir: a newline in
one starts a line the user wrote), so every line of a ``-P`` answer is slurmdbd's. The user's text
of a job is read from ``sacct --json`` (:func:`parse_sacct_json`), where a newline is a character.

Each query has a runner (starts sacct through :func:`slurm_energy.slurm.clients.command.slurm_client`,
waits, says why it failed) and a pure parser of its text (``parse_*``, fed captured output in the
tests). Slurm's own energy (``ConsumedEnergyRaw``, J, from the site's AcctGatherEnergyType plugin:
rapl, ipmi, gpu, pm_counters, xcc) is recorded beside our measurement, labelled Slurm's. Slurm
writes 0 both for "no energy plugin" and for "nothing measured", so 0 is taken as *not collected*
(``None``); an empty field (slurmdbd has no record yet) is unavailable too. Never 0 for "unknown".
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Callable, Iterable
from typing import Any

from slurm_energy.errors import SlurmFormatError
from slurm_energy.model import JobRecord, Status
from slurm_energy.slurm.clients.command import SACCT, SCONTROL, Run, Sleep, slurm_client
from slurm_energy.slurm.clients.formats import (
    parse_duration,
    parse_energy_j,
    parse_memory,
    parse_timestamp,
)
from slurm_energy.slurm.clients.scontrol import MAX_OUTPUT, json_number

#: the sacct ``-o`` fields of every query here, by what it asks
QUERIES: dict[str, tuple[str, ...]] = {
    # jobs that ended in a window (sacct -X -a -S -E): a ``no_data`` record each (record_from_sacct)
    "ended": ("JobIDRaw", "JobID", "State", "Start", "End", "NodeList", "User", "UID", "GID", "Account",
              "Partition", "ExitCode", "Cluster"),
    "final": ("State", "Start", "End"),  # one job's allocation, once slurmctld forgot it
    "state": ("JobIDRaw", "State"),  # one job's final state
    # one job's steps, by the raw id asked for (JobID prints an array task as 2103_8, a het component as 2164+1)
    "total_cpu": ("JobIDRaw", "State", "TotalCPU"),
    "energy": ("ConsumedEnergyRaw",),  # one job's allocation
    "allocation": ("AllocCPUS", "ReqMem", "NNodes"),  # one job's allocation, for --seff
}
#: the ``ended`` query's fields (:func:`record_from_sacct`)
FIELDS = QUERIES["ended"]
REASON = ("no record from the hooks (no usable spool and no finalizer result on any node); "
          "stored by slurm-energy collect from sacct: nothing was measured")
#: Allocation states after which slurmdbd has every step's TotalCPU (not RUNNING/PENDING/COMPLETING...).
_UNFINISHED = ("PENDING", "RUNNING", "COMPLETING", "REQUEUED", "RESIZING", "SUSPENDED", "CONFIGURING")
#: the most job ids one ``sacct -j`` is given
IDS_PER_QUERY = 200


def _fields(query: str) -> str:
    return ",".join(QUERIES[query])


# ------------------------------------------------------------------ the energy plugin (scontrol)
#: How long (s) a process reuses the plugin it read (the node's finalizer asks for each job it
#: finalizes; ``scontrol show config`` was a tenth of a job's finalizing CPU).
PLUGIN_TTL_S = 300.0
_PLUGIN: dict[str, tuple[float, str | None]] = {}


def parse_energy_plugin(text: str) -> str:
    """The AcctGatherEnergyType in ``scontrol show config``'s text (``acct_gather_energy/rapl``);
    ``"none"`` for ``acct_gather_energy/none``, ``(null)``, empty or absent (older printouts omit
    an unset plugin). Pure."""
    for line in text.splitlines():
        key, _, val = line.partition("=")
        if key.strip() == "AcctGatherEnergyType":
            v = val.strip()
            return "none" if v in ("", "(null)", "acct_gather_energy/none") else v
    return "none"


def energy_plugin(*, scontrol: str = SCONTROL, run: Run = subprocess.run, timeout_s: float = 5.0) -> str | None:
    """The site's AcctGatherEnergyType (e.g. ``acct_gather_energy/rapl``), ``"none"`` for
    ``acct_gather_energy/none`` or ``(null)``, ``None`` if it cannot be read. With the real
    ``subprocess.run``, a value read is reused for :data:`PLUGIN_TTL_S` seconds."""
    if not os.path.exists(scontrol):
        return None
    if run is not subprocess.run:
        return _energy_plugin(scontrol, run, timeout_s)
    key = f"{scontrol} {os.environ.get('SLURM_CONF', '')}"
    hit = _PLUGIN.get(key)
    if hit is None or time.monotonic() - hit[0] > PLUGIN_TTL_S:
        hit = _PLUGIN[key] = (time.monotonic(), _energy_plugin(scontrol, run, timeout_s))
        if hit[1] is None:  # unreadable: asked again next time
            del _PLUGIN[key]
    return hit[1]


def _energy_plugin(scontrol: str, run: Run, timeout_s: float) -> str | None:
    try:
        r = slurm_client([scontrol, "show", "config"], run, timeout_s)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_energy_plugin(r.stdout) if r.returncode == 0 else None


# ------------------------------------------------------------------ ConsumedEnergyRaw
def parse_consumed_energy(text: str, plugin: str | None) -> tuple[float | None, str]:
    """``sacct -X -n -P -o ConsumedEnergyRaw``'s text (the newest run last) -> (J, label) or
    ``(None, "unavailable: <why>")``; 0 J is Slurm's "not collected". Pure."""
    lines = [x.strip() for x in text.splitlines() if x.strip()]
    if not lines:
        return None, "unavailable: slurmdbd has no record of the job (yet)"
    try:
        j = parse_energy_j(lines[-1], "ConsumedEnergyRaw")  # -X: the allocation; the newest run last
    except SlurmFormatError as e:
        return None, f"unavailable: {e}"
    if j is None:
        return None, "unavailable: ConsumedEnergyRaw is empty"
    if j == 0:  # Slurm writes 0 for "not collected" as well: never report it as a measured 0 J
        return None, f"unavailable: Slurm recorded 0 J (not collected; plugin {plugin or 'unknown'})"
    return j, f"Slurm's ConsumedEnergyRaw (sacct), plugin {plugin or 'unknown'}"


def consumed_energy(job_id: str, *, sacct: str = SACCT, scontrol: str = SCONTROL, run: Run = subprocess.run,
                    wait_s: float = 10.0, sleep: Sleep = time.sleep, timeout_s: float = 10.0,
                    ) -> tuple[float | None, str]:
    """Slurm's ConsumedEnergyRaw for ``job_id`` in J, and its label.

    Returns ``(joules, "Slurm's ConsumedEnergyRaw (sacct), plugin acct_gather_energy/rapl")``, or
    ``(None, "unavailable: <why>")`` when the site has no energy plugin, sacct is missing or fails
    (no slurmdbd), slurmdbd has no record within ``wait_s`` s, or the value is 0. Never raises.
    """
    plugin = energy_plugin(scontrol=scontrol, run=run)
    if plugin == "none":
        return None, "unavailable: Slurm collects no energy (AcctGatherEnergyType=acct_gather_energy/none)"
    if not os.path.exists(sacct):
        return None, f"unavailable: {sacct} not found"
    out, why = _sacct_until([sacct, "-j", str(job_id), "-X", "-n", "-P", "-o", _fields("energy")],
                            lambda text: bool(text.strip()), run, wait_s, sleep, timeout_s)
    return (None, why) if out is None else parse_consumed_energy(out, plugin)


# ------------------------------------------------------------------ TotalCPU
def total_cpu_s(job_id: str, *, sacct: str = SACCT, run: Run = subprocess.run, wait_s: float = 15.0,
                sleep: Sleep = time.sleep, timeout_s: float = 10.0) -> tuple[float | None, str]:
    """The job's true CPU time (user + system, all its steps), CPU-s, from slurmdbd, and its label.

    Runs ``sacct -j ID -n -P -o JobIDRaw,State,TotalCPU`` (all steps) until the newest run's allocation
    line has a final state (up to ``wait_s`` s: slurmdbd hears of the job's end after the Epilog),
    then :func:`parse_total_cpu`. The whole job's: use it for a job on one node only.

    Returns ``(seconds, "sacct TotalCPU")`` or ``(None, "unavailable: <why>")``. Never raises.
    """
    if not os.path.exists(sacct):
        return None, f"unavailable: {sacct} not found"
    out, why = _sacct_until([sacct, "-j", str(job_id), "-n", "-P", "-o", _fields("total_cpu")],
                            lambda text: parse_total_cpu(text, str(job_id))[0] is not None, run, wait_s, sleep, timeout_s)
    return (None, why) if out is None else parse_total_cpu(out, str(job_id))


def _sacct_until(argv: list[str], ready: Callable[[str], bool], run: Run, wait_s: float, sleep: Sleep,
                 timeout_s: float) -> tuple[str | None, str]:
    """sacct's output once ``ready(output)`` or ``wait_s`` s have passed (slurmdbd hears of a job's
    end after the Epilog), polled every second: ``(output, "")``, or ``(None, "unavailable: <why>")``
    when sacct cannot run or fails."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            r = slurm_client(argv, run, timeout_s)
        except (OSError, subprocess.TimeoutExpired) as e:
            return None, f"unavailable: sacct failed ({type(e).__name__})"
        if r.returncode != 0:
            return None, f"unavailable: sacct: {(r.stderr or '').strip()[:120] or f'exit {r.returncode}'}"
        if ready(r.stdout) or time.monotonic() > deadline:
            return r.stdout, ""
        sleep(1.0)


def parse_total_cpu(text: str, job_id: str) -> tuple[float | None, str]:
    """sacct ``JobIDRaw|State|TotalCPU`` lines -> (CPU-s of the newest run, label), None while
    unfinished. The steps' TotalCPU (batch, extern, numbered steps: disjoint cgroups) summed; the
    allocation's own value when it lists no step. Slurm's duration forms
    (:func:`slurm_energy.slurm.clients.formats.parse_duration`). Pure."""
    rows = [line.split("|") for line in text.splitlines() if line.count("|") >= 2]
    alloc = [i for i, f in enumerate(rows) if f[0].strip() == job_id]
    if not alloc:
        return None, "unavailable: slurmdbd has no record of the job (yet)"
    first = alloc[-1]  # a requeued or reused id: the newest run's lines come last
    state = rows[first][1].strip().split(" ")[0]
    if state in _UNFINISHED:
        return None, f"unavailable: the job is still {state} in slurmdbd"
    try:
        steps = [parse_duration(f[2], "TotalCPU") for f in rows[first + 1:] if f[0].startswith(job_id + ".")]
        own = parse_duration(rows[first][2], "TotalCPU")
    except SlurmFormatError as e:
        return None, f"unavailable: {e}"
    known = [s for s in steps if s is not None]
    total = sum(known) if known else own
    if total is None:
        return None, "unavailable: TotalCPU is empty"
    return total, "sacct TotalCPU"


# ------------------------------------------------------------------ a job's final state
def parse_final_state(text: str, job_id: str) -> str | None:
    """The newest run's final state in ``sacct -X -n -P -o JobIDRaw,State``'s text (``CANCELLED by
    0`` -> ``CANCELLED``); None while it is unfinished or absent. Pure."""
    rows = [line.split("|") for line in text.splitlines()]
    states = [r[1].split(" ")[0].split("+")[0] for r in rows if len(r) == 2 and r[0] == str(job_id)]
    return states[-1] if states and states[-1] not in _UNFINISHED and states[-1].isalpha() else None


def sacct_state(job_id: str, *, sacct: str = SACCT, run: Run = subprocess.run, wait_s: float = 3.0,
                sleep: Sleep = time.sleep, timeout_s: float = 5.0) -> tuple[str | None, str]:
    """The newest run's final state from slurmdbd (``sacct -X -n -P -j ID -o JobIDRaw,State``: no
    field a user writes, so each line is Slurm's), waiting up to ``wait_s`` s for a final one
    (slurmdbd hears of the end after the Epilog). ``(state, "")`` (``CANCELLED by 0`` ->
    ``CANCELLED``), or ``(None, "unavailable: <why>")``. Never raises."""
    if not os.path.exists(sacct):
        return None, f"unavailable: {sacct} not found"
    out, why = _sacct_until([sacct, "-X", "-n", "-P", "-j", str(job_id), "-o", _fields("state")],
                            lambda text: parse_final_state(text, str(job_id)) is not None, run, wait_s, sleep, timeout_s)
    if out is None:
        return None, why
    state = parse_final_state(out, str(job_id))
    return (state, "") if state else (None, "unavailable: slurmdbd has no final state for the job (yet)")


def parse_sacct_line(line: str) -> dict[str, Any]:
    """``State|Start|End`` from ``sacct -X -n -P -o State,Start,End`` -> {"job_state", "start_time",
    "end_time"} (epoch s; "Unknown"/"None" dropped). "CANCELLED by 0" -> "CANCELLED". Pure."""
    parts = line.strip().split("|")
    out: dict[str, Any] = {}
    if parts and parts[0]:
        out["job_state"] = parts[0].split()[0].split("+")[0]
    for key, v in zip(("start_time", "end_time"), parts[1:3]):
        if (t := parse_timestamp(v)) is not None:
            out[key] = t
    return out


def final_row(job_id: str, *, sacct: str = SACCT, run: Run = subprocess.run,
              timeout_s: float = 10.0) -> dict[str, Any] | None:
    """The newest run's ``State|Start|End`` (:func:`parse_sacct_line`) from ``sacct -X -j ID``, no
    waiting; None when sacct is missing, fails or knows no such job. Never raises."""
    if not os.path.exists(sacct):
        return None
    try:
        r = slurm_client([sacct, "-X", "-n", "-P", "-j", str(job_id), "-o", _fields("final")], run, timeout_s)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = [x for x in r.stdout.splitlines() if x.strip()] if r.returncode == 0 else []
    return parse_sacct_line(lines[-1]) if lines else None


# ------------------------------------------------------------------ jobs that ended in a window
_JOBID = re.compile(r"^[0-9]{1,20}(?:[_+][0-9]{1,20})?$")


def record_from_sacct(line: str) -> JobRecord | None:
    """A ``no_data`` JobRecord from one ``sacct -X -n -P -o FIELDS`` line (:data:`FIELDS`: none a
    user writes), or None for a job that never started on a node (cancelled while pending), has
    not ended, or a line that is not sacct's (a field count or id Slurm never prints). Its job name
    and work dir are the caller's to add (from :func:`parse_sacct_json`). Pure."""
    from hostlist import BadHostlist, expand_hostlist  # python-hostlist

    parts = line.rstrip("\n").split("|")
    if len(parts) != len(FIELDS):
        return None
    f = dict(zip(FIELDS, parts))
    if not f["JobIDRaw"].isascii() or not f["JobIDRaw"].isdigit() or len(f["JobIDRaw"]) > 20 or \
            not _JOBID.match(f["JobID"]):
        return None
    start, end = parse_timestamp(f["Start"]), parse_timestamp(f["End"])
    if start is None or end is None or f["NodeList"] in ("", "None assigned"):
        return None
    jid = f["JobID"]
    arr = jid.split("_", 1) if "_" in jid else None
    het = jid.split("+", 1) if "+" in jid else None
    try:
        nodes = expand_hostlist(f["NodeList"])
    except BadHostlist:
        nodes = []

    def ident(v: str) -> int | None:
        return int(v) if v.isascii() and v.isdigit() and len(v) <= 10 else None
    return JobRecord(
        cluster=f["Cluster"], job_id=f["JobIDRaw"], job_name="", user=f["User"], uid=ident(f["UID"]),
        gid=ident(f["GID"]), account=f["Account"], partition=f["Partition"], work_dir="", exit_code=f["ExitCode"],
        job_state=f["State"].split()[0] if f["State"] else "", expected_nodes=nodes,
        array_job_id=arr[0] if arr else None, array_task_id=arr[1] if arr else None,
        het_job_id=het[0] if het else None, het_job_offset=het[1] if het else None,
        start_time=start, end_time=max(start, end), status=Status.NO_DATA, errors=[REASON])


def parse_ended(text: str) -> list[JobRecord]:
    """The ``no_data`` records of ``sacct -X -n -P -o FIELDS``'s text, one per line Slurm wrote
    for a job that ran on a node and ended (:func:`record_from_sacct`). Pure."""
    return [x for x in map(record_from_sacct, text.splitlines()) if x is not None]


def _query(sacct: str, argv: list[str], run: Run, timeout_s: float) -> str | None:
    try:
        r = slurm_client([sacct, *argv], run, timeout_s)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout if r.returncode == 0 else None


def ended_since(since: float, *, sacct: str = SACCT, run: Run = subprocess.run,
                timeout_s: float = 60.0) -> list[JobRecord] | None:
    """A ``no_data`` record (no job name or work dir: :func:`user_text`) for every job sacct says
    started and ended from ``since`` (epoch s, the controller's local time) to now, on any account
    (``-a``). None when there is no sacct (no accounting storage) or it fails. Never raises."""
    if not os.path.exists(sacct):
        return None
    start = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(since))
    out = _query(sacct, ["-X", "-n", "-P", "-a", "-S", start, "-E", "now", "-o", _fields("ended")], run, timeout_s)
    return None if out is None else parse_ended(out)


def user_text(job_ids: Iterable[str], *, sacct: str = SACCT, run: Run = subprocess.run,
              timeout_s: float = 60.0) -> dict[tuple[str, int], dict[str, str]]:
    """The job name and work dir of each of ``job_ids`` from ``sacct --json -a -X -j`` (at most
    :data:`IDS_PER_QUERY` ids a query), by (job id, start time): :func:`parse_sacct_json`. A query
    that fails gives nothing for its ids. Never raises."""
    ids = sorted(set(job_ids))
    text: dict[tuple[str, int], dict[str, str]] = {}
    if not ids or not os.path.exists(sacct):
        return text
    for chunk in (ids[i:i + IDS_PER_QUERY] for i in range(0, len(ids), IDS_PER_QUERY)):
        text.update(parse_sacct_json(_query(sacct, ["--json", "-a", "-X", "-j", ",".join(chunk)], run, timeout_s) or ""))
    return text


def parse_sacct_json(text: str) -> dict[tuple[str, int], dict[str, str]]:
    """The user text of each job in ``sacct --json``'s output, by (job id, start time in epoch s):
    ``{"job_name": ..., "work_dir": ...}`` -- read as data from JSON, where a newline or ``|`` in
    them is only a character. Both shapes Slurm writes are read: 22.05's (openapi/dbv0.0.38,
    ``time.start`` a plain int; tests/slurm/clients/data/slurm-22.05-sacct.json, captured on the test
    cluster) and data_parser's (23.02 on: numbers as ``{"set", "infinite", "number"}``). Output that
    is not JSON, or a job without an id or start Slurm could write, gives nothing for it. Pure."""
    try:
        doc = json.loads(text[:MAX_OUTPUT * 64]) if text.strip() else {}
    except ValueError:
        return {}
    jobs = doc.get("jobs") if isinstance(doc, dict) else None
    out: dict[tuple[str, int], dict[str, str]] = {}
    for job in jobs if isinstance(jobs, list) else []:
        if not isinstance(job, dict):
            continue
        jid, start = json_number(job.get("job_id")), json_number((job.get("time") or {}).get("start"))
        if jid is None or start is None:
            continue
        name, wd = job.get("name"), job.get("working_directory")
        out[(str(jid), start)] = {"job_name": name if isinstance(name, str) else "",
                                  "work_dir": wd if isinstance(wd, str) else ""}
    return out


# ------------------------------------------------------------------ a job's allocation (--seff)
def parse_mem(text: str, cpus: int | None, nodes: int | None) -> int | None:
    """sacct's ReqMem ("200M", "4G", older "2Gn" per node / "500Mc" per CPU) -> bytes for the job
    (parsed by :func:`slurm_energy.slurm.clients.formats.parse_memory`); None when unknown or
    unparsable. Pure."""
    try:
        got = parse_memory(text or None, "ReqMem")
    except SlurmFormatError:
        return None
    if not got or not got[0]:
        return None
    b, per = got
    return b * (cpus or 1) if per == "cpu" else b * (nodes or 1) if per == "node" else b


def parse_allocation(text: str) -> dict[str, Any] | None:
    """``{"cpus", "nodes", "req_mem_bytes"}`` from ``sacct -X -n -P -o AllocCPUS,ReqMem,NNodes``'s
    first line; None when it names no job (fewer than 3 fields). Raises ValueError for counts that
    are not numbers. Pure."""
    parts = (text.strip().splitlines() or [""])[0].split("|")
    if len(parts) < 3:
        return None
    cpus, nodes = int(parts[0]), int(parts[2])
    return {"cpus": cpus, "nodes": nodes, "req_mem_bytes": parse_mem(parts[1], cpus, nodes)}


def allocation(job_id: str, sacct: str | None = None, run: Run = subprocess.run,
               warn: Callable[[str], None] | None = None) -> tuple[dict[str, Any], str]:
    """({"cpus": int, "req_mem_bytes": int|None, "nodes": int}, "") from ``sacct -X``, or ({}, why).

    ``why`` is short, for the block's ``n/a (...)`` lines: ``/usr/bin/sacct not found``, ``sacct failed
    (exit 1)``, ``sacct timed out``, ``sacct knows no job 55``. ``warn``, when given, also receives one
    line naming what failed, sacct's own last error line (never its raw multi-line stderr) and the fix.
    ``sacct``: the program (default :data:`SACCT`).
    """
    sacct = sacct or SACCT
    try:
        r = slurm_client([sacct, "-X", "-n", "-P", "-j", job_id, "-o", _fields("allocation")], run)
    except FileNotFoundError:
        return _failed(warn, job_id, f"{sacct} not found", "run it on a host with Slurm's client commands")
    except subprocess.TimeoutExpired:
        return _failed(warn, job_id, "sacct timed out", _SACCT_FIX.format(job_id=job_id))
    except OSError as e:
        return _failed(warn, job_id, f"sacct could not run ({e.strerror or e})", "check its permissions")
    if r.returncode != 0:
        said = _last_error_line(r.stderr)
        return _failed(warn, job_id, f"sacct failed (exit {r.returncode})", _SACCT_FIX.format(job_id=job_id),
                       f": {said}" if said else "")
    try:
        got = parse_allocation(r.stdout)
    except ValueError:
        line = (r.stdout.strip().splitlines() or [""])[0]
        return _failed(warn, job_id, "sacct gave no allocation", "", f": {line[:80]!r}")
    if got is None:
        return _failed(warn, job_id, f"sacct knows no job {job_id}",
                       "the job may be on another cluster (SLURM_CONF) or purged from Slurm's accounting")
    return got, ""


_SACCT_FIX = "check that `sacct -j {job_id}` works here (slurmdbd reachable, SLURM_CONF pointing at the cluster)"


def _last_error_line(stderr: str) -> str:
    """sacct's last non-empty stderr line without its ``sacct: error:`` prefix, cut to 120 characters
    (sacct prints a chain of lines for one failure; the last says what it means)."""
    lines = [x.strip() for x in (stderr or "").splitlines() if x.strip()]
    if not lines:
        return ""
    last = lines[-1]
    for prefix in ("sacct: error:", "sacct:"):
        if last.startswith(prefix):
            last = last[len(prefix):].strip()
            break
    return last[:120]


def _failed(warn: Callable[[str], None] | None, job_id: str, why: str, fix: str,
            said: str = "") -> tuple[dict[str, Any], str]:
    if warn is not None:
        warn(f"--seff: job {job_id}'s allocation (cores, requested memory) is unknown: {why}{said}; its CPU and "
             f"memory efficiency show n/a, the energy is shown" + (f". Fix: {fix}" if fix else ""))
    return {}, why
