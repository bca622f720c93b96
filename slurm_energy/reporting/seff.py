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

``sacct`` missing or not knowing the job leaves the allocation lines as ``n/a`` with why. The
allocation is the caller's to fetch (:func:`slurm_energy.slurm.clients.sacct.allocation`): this
module only presents a record and what it is given.
"""

from __future__ import annotations

from typing import Any

from slurm_energy.model import JobRecord, Method
from slurm_energy.reporting.scale import format_duration
from slurm_energy.units import J_PER_KWH

_MEASURED = {Method.COUNTER: "measured: hardware energy counter", Method.POWER_INTEGRATION:
             "measured: sampled power integrated over time", Method.TDP_ESTIMATE:
             "estimated: rated power x utilisation x time", Method.UNAVAILABLE: "not measured"}


def _mib(b: float) -> str:
    return f"{b / 2**30:.2f} GiB" if b >= 2**30 else f"{b / 2**20:.2f} MiB"


def _kwh(j: float | None) -> str:
    return "n/a (not measured)" if j is None else f"{j / J_PER_KWH:.4g} kWh"


def seff_block(rec: JobRecord, alloc: dict[str, Any], alloc_why: str = "") -> str:
    """The seff-like text for ``rec`` (see module doc); ``alloc`` from
    :func:`slurm_energy.slurm.clients.sacct.allocation` (may be {})."""
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
