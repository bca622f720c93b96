"""A job's embodied emissions: SCI's M = TE x (TS / EL) x RS for each unit of hardware it reserved
(:mod:`slurm_energy.carbon.embodied` holds the factors and the formula).

What the job reserved, per node (TS = the job's elapsed time on every unit):

* each GPU allocated (``gpu`` devices; a MIG slice or partition by its fraction): RS = 1 (or the fraction);
* the CPU sockets (``static.sockets``, 1 when unknown): RS = the job's share of the CPUs' energy
  as attributed (job energy / device energy, the same share its energy figure uses), else, for the
  per-core TDP model, its cores / the node's cores;
* DRAM: the memory the job requested on the node, in GB (1e9 bytes), RS = 1;
* the server chassis: one per node, RS = the larger of the job's CPU share and its share of the
  node's GPUs (a job holding 4 of 8 GPUs reserves at least half the server).

A unit whose factor is missing gets no line (``notes`` says which); the job's M sums the lines it has.
"""

from __future__ import annotations

from collections.abc import Mapping

from slurm_energy.carbon.embodied import DEFAULT_LIFETIME_SOURCE, DEFAULT_LIFETIME_YEARS, EmbodiedFactor, embodied_kg, find_factor
from slurm_energy.model import EmbodiedShare, JobRecord, NodeSummary


def _fraction(flags: list[str]) -> float:
    for f in flags:
        for lead in ("mig_fraction:", "partition_fraction:", "tile_fraction:"):
            if f.startswith(lead):
                try:
                    return min(1.0, max(0.0, float(f[len(lead):])))
                except ValueError:
                    pass
    return 1.0


def _cpu_share(node: NodeSummary) -> float | None:
    cpus = [d for d in node.devices if d.device_class == "cpu"]
    job = sum(d.energy_j for d in cpus if d.energy_j is not None and d.device_energy_j)
    dev = sum(d.device_energy_j for d in cpus if d.energy_j is not None and d.device_energy_j)
    if dev > 0:
        return min(1.0, job / dev)
    cores = (node.static.get("sockets") or 0) * (node.static.get("cores_per_socket") or 0)
    counted = sum(d.count for d in cpus)
    return min(1.0, counted / cores) if cores and counted else None


def job_embodied(rec: JobRecord, factors: tuple[EmbodiedFactor, ...],
                 lifetimes: Mapping[str, float] | None = None) -> tuple[list[EmbodiedShare], list[str]]:
    """The job's :class:`EmbodiedShare` lines (M per unit reserved) and notes naming the units
    without a factor. ``lifetimes``: years by component (site.yaml), over the factor's own, over
    :data:`DEFAULT_LIFETIME_YEARS`."""
    life = dict(lifetimes or {})
    ts = rec.elapsed_s
    out: list[EmbodiedShare] = []
    missing: set[str] = set()

    def add(node: str, component: str, model: str, units: float, share: float) -> None:
        f = find_factor(factors, component, model)
        if f is None:
            missing.add(f"{component} {model or '(model unknown)'}")
            return
        if component in life:
            years, src = life[component], f"lifetime {life[component]:g} years from site.yaml"
        elif f.lifetime_years is not None:
            years, src = f.lifetime_years, f"lifetime {f.lifetime_years:g} years from the factor's source"
        else:
            years, src = DEFAULT_LIFETIME_YEARS[component], DEFAULT_LIFETIME_SOURCE
        m = units * embodied_kg(f.kg_per_unit, ts, years, share)
        out.append(EmbodiedShare(node=node, component=component, model=f.model, units=units, share=share,
                                 te_kg=f.kg_per_unit, lifetime_years=years, time_s=ts, kg=m,
                                 source=f"{f.source}; {src}"))

    for n in rec.nodes:
        gpus = [d for d in n.devices if d.device_class == "gpu"]
        for d in gpus:
            add(n.node, "gpu", d.model, float(d.count), _fraction(d.flags))
        cpu_share = _cpu_share(n)
        if cpu_share is None and any(d.device_class == "cpu" for d in n.devices):
            missing.add("cpu (the job's share of the node unknown)")
        elif cpu_share is not None:
            add(n.node, "cpu", str(n.static.get("cpu_model") or ""), float(n.static.get("sockets") or 1), cpu_share)
        if n.req_mem_bytes:
            add(n.node, "ram", "", n.req_mem_bytes / 1e9, 1.0)
        node_gpus = [x for x in (n.static.get("devices") or []) if isinstance(x, dict) and x.get("device_class") == "gpu"]
        gpu_share = min(1.0, sum(d.count for d in gpus) / len(node_gpus)) if node_gpus and gpus else 0.0
        chassis = max(cpu_share or 0.0, gpu_share)
        if chassis > 0:
            add(n.node, "chassis", "", 1.0, chassis)
    notes = [f"embodied: no factor for {', '.join(sorted(missing))} (not counted; set embodied in site.yaml)"] \
        if missing else []
    return out, notes
