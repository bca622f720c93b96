"""``jobenergy --seff JOBID``: a seff-like block with the job's energy, for people and for mail.

seff (Slurm's contrib tool) prints CPU and memory efficiency from sacct; this block prints the same
lines from our record (CPU time and peak memory measured from the job's cgroup by the sampler) and
the allocation from ``sacct`` (AllocCPUS; ReqMem where the record has no per-node request), then the energy by
device class with how each number was obtained, the CO2e and the coverage::

    Job ID: 13
    Cluster: lab
    User/Account: alice/research
    State: COMPLETED (exit code 0:0)
    Nodes: 1 (n1)
    Cores: 1
    CPU Utilized: 00:00:07
    CPU Efficiency: 93.10% of 00:00:08 core-walltime
    Job Wall-clock time: 00:00:08
    Memory Utilized: 9.83 MiB
    Memory Efficiency: 4.91% of 200.00 MiB
    Energy (IT, job's share): 9.614e-06 kWh
      cpu: 9.61e-06 kWh  tdp_estimate (estimated: rated power x utilisation x time)
      ram: 3.64e-09 kWh  tdp_estimate (estimated: rated power x utilisation x time)
    Facility energy: 1.519e-05 kWh (IT x PUE 1.58)
    CO2e: 7.215 g (475 gCO2e/kWh: default: world average ...)
    Method: cpu=tdp_estimate,ram=tdp_estimate
    Coverage: complete

``sacct`` missing or not knowing the job leaves the allocation lines as ``n/a`` with why.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable

from slurm_energy.model import JobRecord, Method
from slurm_energy.reporting.scale import format_duration
from slurm_energy.slurm.formats import SlurmFormatError, parse_memory
from slurm_energy.slurm.sacct import SACCT, slurm_client
from slurm_energy.units import J_PER_KWH

_MEASURED = {Method.COUNTER: "measured: hardware energy counter", Method.POWER_INTEGRATION:
             "measured: sampled power integrated over time", Method.TDP_ESTIMATE:
             "estimated: rated power x utilisation x time", Method.UNAVAILABLE: "not measured"}


def parse_mem(text: str, cpus: int | None, nodes: int | None) -> int | None:
    """sacct's ReqMem ("200M", "4G", older "2Gn" per node / "500Mc" per CPU) -> bytes for the job
    (parsed by :func:`slurm_energy.slurm.formats.parse_memory`); None when unknown or unparsable."""
    try:
        got = parse_memory(text or None, "ReqMem")
    except SlurmFormatError:
        return None
    if not got or not got[0]:
        return None
    b, per = got
    return b * (cpus or 1) if per == "cpu" else b * (nodes or 1) if per == "node" else b


def allocation(job_id: str, sacct: str | None = None, run: Callable = subprocess.run,
               warn: Callable[[str], None] | None = None) -> tuple[dict, str]:
    """({"cpus": int, "req_mem_bytes": int|None, "nodes": int}, "") from ``sacct -X``, or ({}, why).

    ``why`` is short, for the block's ``n/a (...)`` lines: ``/usr/bin/sacct not found``, ``sacct failed
    (exit 1)``, ``sacct timed out``, ``sacct knows no job 55``. ``warn``, when given, also receives one
    line naming what failed, sacct's own last error line (never its raw multi-line stderr) and the fix.
    ``sacct``: the program (default :data:`SACCT`).
    """
    sacct = sacct or SACCT
    try:
        r = slurm_client([sacct, "-X", "-n", "-P", "-j", job_id, "-o", "AllocCPUS,ReqMem,NNodes"], run)
    except FileNotFoundError:
        return _failed(warn, job_id, f"{sacct} not found", "run it on a host with Slurm's client commands")
    except subprocess.TimeoutExpired:
        return _failed(warn, job_id, "sacct timed out", _SACCT_FIX.format(job_id=job_id))
    except OSError as e:
        return _failed(warn, job_id, f"sacct could not run ({e.strerror or e})", "check its permissions")
    line = (r.stdout.strip().splitlines() or [""])[0]
    parts = line.split("|")
    if r.returncode != 0:
        said = _last_error_line(r.stderr)
        return _failed(warn, job_id, f"sacct failed (exit {r.returncode})", _SACCT_FIX.format(job_id=job_id),
                       f": {said}" if said else "")
    if len(parts) < 3:
        return _failed(warn, job_id, f"sacct knows no job {job_id}",
                       "the job may be on another cluster (SLURM_CONF) or purged from Slurm's accounting")
    try:
        cpus, nodes = int(parts[0]), int(parts[2])
    except ValueError:
        return _failed(warn, job_id, "sacct gave no allocation", "", f": {line[:80]!r}")
    return {"cpus": cpus, "nodes": nodes, "req_mem_bytes": parse_mem(parts[1], cpus, nodes)}, ""


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


def _failed(warn, job_id: str, why: str, fix: str, said: str = "") -> tuple[dict, str]:
    if warn is not None:
        warn(f"--seff: job {job_id}'s allocation (cores, requested memory) is unknown: {why}{said}; its CPU and "
             f"memory efficiency show n/a, the energy is shown" + (f". Fix: {fix}" if fix else ""))
    return {}, why


def _mib(b: float) -> str:
    return f"{b / 2**30:.2f} GiB" if b >= 2**30 else f"{b / 2**20:.2f} MiB"


def _kwh(j: float | None) -> str:
    return "n/a (not measured)" if j is None else f"{j / J_PER_KWH:.4g} kWh"


def seff_block(rec: JobRecord, alloc: dict, alloc_why: str = "") -> str:
    """The seff-like text for ``rec`` (see module doc); ``alloc`` from :func:`allocation` (may be {})."""
    cpu_s = [n.cpu_time_s for n in rec.nodes]
    cpu = sum(c for c in cpu_s if c is not None) if any(c is not None for c in cpu_s) else None
    mem = [n.max_mem_bytes for n in rec.nodes]
    peak = sum(m for m in mem if m is not None) if any(m is not None for m in mem) else None
    na = f"n/a ({alloc_why})" if alloc_why else "n/a"
    lines = [f"Job ID: {rec.job_id}" + (f" (array {rec.array_job_id}_{rec.array_task_id})" if rec.array_job_id else ""),
             f"Cluster: {rec.cluster}", f"User/Account: {rec.user}/{rec.account}",
             f"State: {rec.job_state or 'UNKNOWN'} (exit code {rec.exit_code or 'n/a'})",
             f"Nodes: {len(rec.nodes)} ({','.join(n.node for n in rec.nodes)})",
             f"Cores: {alloc['cpus'] if alloc else na}",
             f"CPU Utilized: {format_duration(cpu) if cpu is not None else 'n/a (not measured)'}"]
    if alloc and cpu is not None and rec.elapsed_s > 0:
        core_wall = alloc["cpus"] * rec.elapsed_s
        lines.append(f"CPU Efficiency: {100 * cpu / core_wall:.2f}% of {format_duration(core_wall)} core-walltime")
    else:
        lines.append(f"CPU Efficiency: {na if not alloc else 'n/a'}")
    lines += [f"Job Wall-clock time: {format_duration(rec.elapsed_s)}",
              f"Memory Utilized: {_mib(peak) if peak is not None else 'n/a (not measured)'}"]
    reqs = [n.req_mem_bytes for n in rec.nodes]  # the finalizer's per-node request, else sacct's
    req = sum(r or 0 for r in reqs) if reqs and all(reqs) else (alloc.get("req_mem_bytes") if alloc else None)
    lines.append(f"Memory Efficiency: {100 * peak / req:.2f}% of {_mib(req)}" if req and peak is not None
                 else f"Memory Efficiency: {na if not alloc else 'n/a'}")
    lines.append(f"Energy (IT, job's share): {_kwh(None if rec.it_kwh is None else rec.it_kwh * J_PER_KWH)}")
    for cls in sorted(rec.methods):
        m = Method(rec.methods[cls])
        lines.append(f"  {cls}: {_kwh(rec.energy_it_j.get(cls))}  {m.value} ({_MEASURED[m]})")
    if rec.rest_of_node_method:  # the node beyond its components (docs/NODE_METER.md)
        lines.append("  rest of node: not metered" if rec.rest_of_node_j is None else
                     f"  rest of node: {_kwh(rec.rest_of_node_j)}  {rec.rest_of_node_method}")
    from slurm_energy.reporting.gpu_idle import summary_line

    idle = summary_line(rec)
    if idle:
        lines.append(idle)
    c = rec.carbon
    if rec.facility_kwh is not None:
        default = f", {c.pue_source[len('DEFAULT: '):]}: the default, no site value" if "pue" in c.defaults_used else ""
        lines.append(f"Facility energy: {rec.facility_kwh:.4g} kWh (IT x PUE {c.pue:g}{default})")
    if rec.co2e_gross_kg is not None:  # location-based, offsets excluded; the net figure below it
        lines.append(f"CO2e: {rec.co2e_gross_kg * 1000:.4g} g ({c.ci_g_per_kwh:g} gCO2e/kWh: {c.ci_source}; "
                     "location-based, offsets excluded)")
    from slurm_energy.reporting.footprint import text_lines

    lines += text_lines(rec)[1:]
    lines.append(f"Method: {rec.method_summary or 'n/a'}")
    lower = "" if rec.coverage_complete else ", some device unmeasured or partly measured: totals are a lower bound"
    cov = "complete" if rec.coverage_complete and rec.status.value == "complete" else f"{rec.status.value}{lower}"
    lines.append(f"Coverage: {cov}")
    return "\n".join(lines)
