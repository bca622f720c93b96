"""Slurm's own energy for a job (acct_gather_energy plugins), read by the detached finalizer.

slurmdbd keeps ``ConsumedEnergyRaw`` (J) per job when the site runs an AcctGatherEnergyType plugin
(rapl, ipmi, gpu, pm_counters, xcc). It is recorded beside our measurement, labelled Slurm's, so an
admin can compare the two. Slurm writes 0 both for "no energy plugin" and for "nothing measured",
so 0 is taken as *not collected* (unavailable, ``None``); an empty field (slurmdbd has no record yet,
or no accounting storage) is unavailable too. Never 0 for "unknown".

Absolute paths (the finalizer inherits the hooks' empty PATH); never run on the Prolog/Epilog path.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable

from slurm_energy.slurm.formats import SlurmFormatError, parse_duration, parse_energy_j

SACCT = "/usr/bin/sacct"
SCONTROL = "/usr/bin/scontrol"


def slurm_client(argv: list[str], run: Callable = subprocess.run, timeout_s: float = 10.0):
    """Run a Slurm client (``argv[0]`` an absolute path: sacct, scontrol) as every caller here does:
    ``LANG=C`` and only the caller's ``SLURM_CONF`` in its environment, text out (a user's
    non-UTF-8 job name kept losslessly, surrogateescape), at most ``timeout_s`` s. Returns the
    ``subprocess.CompletedProcess``; raises OSError (FileNotFoundError: not installed) and
    subprocess.TimeoutExpired. ``run``: ``subprocess.run`` or a test's stand-in."""
    env = {"LANG": "C", **({"SLURM_CONF": os.environ["SLURM_CONF"]} if os.environ.get("SLURM_CONF") else {})}
    return run(argv, capture_output=True, text=True, errors="surrogateescape", timeout=timeout_s, env=env)


#: How long (s) a process reuses the plugin it read (the node's finalizer asks for each job it
#: finalizes; ``scontrol show config`` was a tenth of a job's finalizing CPU).
PLUGIN_TTL_S = 300.0
_PLUGIN: dict[str, tuple[float, str | None]] = {}


def energy_plugin(*, scontrol: str = SCONTROL, run: Callable = subprocess.run, timeout_s: float = 5.0) -> str | None:
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


def _energy_plugin(scontrol: str, run: Callable, timeout_s: float) -> str | None:
    try:
        r = slurm_client([scontrol, "show", "config"], run, timeout_s)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if r.returncode != 0:
        return None
    for line in r.stdout.splitlines():
        key, _, val = line.partition("=")
        if key.strip() == "AcctGatherEnergyType":
            v = val.strip()
            return "none" if v in ("", "(null)", "acct_gather_energy/none") else v
    return "none"  # older slurm.conf printouts omit an unset plugin


def consumed_energy(job_id: str, *, sacct: str = SACCT, scontrol: str = SCONTROL, run: Callable = subprocess.run,
                    wait_s: float = 10.0, sleep: Callable = time.sleep, timeout_s: float = 10.0,
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
    out, why = _sacct_until([sacct, "-j", str(job_id), "-X", "-n", "-P", "-o", "ConsumedEnergyRaw"],
                            lambda text: bool(text.strip()), run, wait_s, sleep, timeout_s)
    if out is None:
        return None, why
    lines = [x.strip() for x in out.splitlines() if x.strip()]
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


#: Allocation states after which slurmdbd has every step's TotalCPU (not RUNNING/PENDING/COMPLETING...).
_UNFINISHED = ("PENDING", "RUNNING", "COMPLETING", "REQUEUED", "RESIZING", "SUSPENDED", "CONFIGURING")


def total_cpu_s(job_id: str, *, sacct: str = SACCT, run: Callable = subprocess.run, wait_s: float = 15.0,
                sleep: Callable = time.sleep, timeout_s: float = 10.0) -> tuple[float | None, str]:
    """The job's true CPU time (user + system, all its steps), CPU-s, from slurmdbd, and its label.

    Runs ``sacct -j ID -n -P -o JobID,State,TotalCPU`` (all steps; Slurm's duration forms, parsed by
    :func:`slurm_energy.slurm.formats.parse_duration`) until the newest run's allocation line has a
    final state (up to ``wait_s`` s: slurmdbd hears of the job's end after the Epilog), and sums its
    steps' TotalCPU (batch, extern, numbered steps: disjoint cgroups); the allocation's own value
    when it lists no step. The whole job's: use it for a job on one node only.

    Returns ``(seconds, "sacct TotalCPU")`` or ``(None, "unavailable: <why>")``. Never raises.
    """
    if not os.path.exists(sacct):
        return None, f"unavailable: {sacct} not found"
    out, why = _sacct_until([sacct, "-j", str(job_id), "-n", "-P", "-o", "JobID,State,TotalCPU"],
                            lambda text: _sum_total_cpu(text, str(job_id))[0] is not None, run, wait_s, sleep, timeout_s)
    return (None, why) if out is None else _sum_total_cpu(out, str(job_id))


def _sacct_until(argv: list[str], ready: Callable[[str], bool], run: Callable, wait_s: float, sleep: Callable,
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


def _sum_total_cpu(text: str, job_id: str) -> tuple[float | None, str]:
    """sacct ``JobID|State|TotalCPU`` lines -> (CPU-s of the newest run, label), None while unfinished."""
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


def sacct_state(job_id: str, *, sacct: str = SACCT, run: Callable = subprocess.run, wait_s: float = 3.0,
                sleep: Callable = time.sleep, timeout_s: float = 5.0) -> tuple[str | None, str]:
    """The newest run's final state from slurmdbd (``sacct -X -n -P -j ID -o JobIDRaw,State``: no
    field a user writes, so each line is Slurm's), waiting up to ``wait_s`` s for a final one
    (slurmdbd hears of the end after the Epilog). ``(state, "")`` (``CANCELLED by 0`` ->
    ``CANCELLED``), or ``(None, "unavailable: <why>")``. Never raises."""
    if not os.path.exists(sacct):
        return None, f"unavailable: {sacct} not found"

    def final(text: str) -> str | None:
        rows = [line.split("|") for line in text.splitlines()]
        states = [r[1].split(" ")[0].split("+")[0] for r in rows if len(r) == 2 and r[0] == str(job_id)]
        return states[-1] if states and states[-1] not in _UNFINISHED and states[-1].isalpha() else None

    out, why = _sacct_until([sacct, "-X", "-n", "-P", "-j", str(job_id), "-o", "JobIDRaw,State"],
                            lambda text: final(text) is not None, run, wait_s, sleep, timeout_s)
    if out is None:
        return None, why
    state = final(out)
    return (state, "") if state else (None, "unavailable: slurmdbd has no final state for the job (yet)")


def parse_sacct_json(text: str) -> dict[tuple[str, int], dict]:
    """The user text of each job in ``sacct --json``'s output, by (job id, start time in epoch s):
    ``{"job_name": ..., "work_dir": ...}`` -- read as data from JSON, where a newline or ``|`` in
    them is only a character. Both shapes Slurm writes are read: 22.05's (openapi/dbv0.0.38,
    ``time.start`` a plain int; tests/slurm/data/slurm-22.05-sacct.json, captured on the test
    cluster) and data_parser's (23.02 on: numbers as ``{"set", "infinite", "number"}``). Output that
    is not JSON, or a job without an id or start Slurm could write, gives nothing for it. Pure."""
    import json

    from slurm_energy.slurm.scontrol import MAX_OUTPUT, json_number

    try:
        doc = json.loads(text[:MAX_OUTPUT * 64]) if text.strip() else {}
    except ValueError:
        return {}
    jobs = doc.get("jobs") if isinstance(doc, dict) else None
    out: dict[tuple[str, int], dict] = {}
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
