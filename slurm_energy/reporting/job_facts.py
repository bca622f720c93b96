"""Small per-job facts for the HTML report that say what each number is: requested vs used memory
per node, and what a device's utilisation number measures."""

from __future__ import annotations

from slurm_energy.model import DeviceEnergy, JobRecord


def util_label(d: DeviceEnergy) -> str:
    """What the device's utilisation number is, for the report's provenance table: the job's own
    CPU time per allocated CPU, the job's share of the node's memory, or the whole GPU's busy time --
    and, for a CPU whose power was modelled from the node's busy fraction (flag
    ``util_from_node_counters``), that the node's utilisation (all jobs) set the power before the
    job's CPU-time share was taken. A clamped value names its raw number."""
    what = {"cpu": "job: CPU time / (allocated CPUs × wall)",
            "ram": "job: its memory / node memory",
            "gpu": "whole GPU busy (NVML), all processes"}.get(d.device_class, "")
    if d.device_class == "cpu" and "util_from_node_counters" in d.flags:
        what += "; power modelled from the node's busy CPU (all jobs), then the job's CPU-time share"
    raw = d.unclamped.get(f"{d.device_class}_util")
    if raw is not None:
        what += f"; clamped from {raw * 100:.1f} %"
    return what


def _gib(b: int | None) -> str:
    if b is None:
        return "n/a"
    return f"{b / 2**30:.2f} GiB" if b >= 2**30 else f"{b / 2**20:.0f} MiB"


def memory_rows(record: JobRecord) -> list[dict[str, str]]:
    """Requested vs used (peak) memory per node, for users tuning ``--mem``; nodes alike are one row."""
    rows: list[dict[str, str]] = []
    for n in record.nodes:
        if n.req_mem_bytes is None and n.max_mem_bytes is None:
            continue
        share = ""
        if n.req_mem_bytes and n.max_mem_bytes is not None:
            share = f"{100.0 * n.max_mem_bytes / n.req_mem_bytes:.0f} %"
        row = {"node": n.node, "requested": _gib(n.req_mem_bytes) if n.req_mem_bytes is not None else "n/a (unknown)",
               "used": _gib(n.max_mem_bytes), "share": share, "source": n.req_mem_source}
        rows.append(row)
    if rows and all({k: v for k, v in r.items() if k != "node"} == {k: v for k, v in rows[0].items() if k != "node"}
                    for r in rows):
        return rows[:1]
    return rows


#: Device flags that mean the job's share of a CPU/RAM device was not measured but filled by a rule,
#: with what the report's headline says of each.
_SHARE_FALLBACKS = {
    "job_never_observed": "the job's processes were never read on {nodes}; its {cls} share is a fallback",
    "tail_estimated": "the job's last stretch on {nodes} was not observed; its {cls} share there is estimated "
                      "(the last observed share, else allocated / node CPUs)",
}


def share_fallbacks(record: JobRecord) -> list[str]:
    """One line per fallback share rule that set part of the job's energy (flags
    ``job_never_observed`` and ``tail_estimated`` on its devices), for the report's headline: a
    fallback can charge a job the whole node's CPU, so it is said where the totals are."""
    hit: dict[tuple[str, str], list[str]] = {}
    for n in record.nodes:
        for d in n.devices:
            for flag in _SHARE_FALLBACKS:
                if flag in d.flags:
                    nodes = hit.setdefault((flag, d.device_class.upper()), [])
                    if n.node not in nodes:
                        nodes.append(n.node)
    return [_SHARE_FALLBACKS[flag].format(cls=cls, nodes=", ".join(nodes)) for (flag, cls), nodes in hit.items()]


#: The job-usage sources of a process tree measured outside Slurm's hooks (``track()``, ``run``,
#: ``attach``): the tree's /proc files, and ``run``'s wait4 rusage at the end.
LOCAL_SOURCES = frozenset({"procfs", "rusage"})


def ran_outside_slurm(record: JobRecord) -> bool:
    """True when the record is a process tree measured outside Slurm's hooks (a laptop, a
    workstation, ``track()`` without the Prolog): every node's CPU time came from the tree's /proc
    files or rusage, never a job cgroup or Slurm's PIDs. Such a record has no Slurm job, account,
    partition or cluster: its texts say "run" and "host"."""
    sources = {n.cpu_time_source for n in record.nodes}
    return bool(sources) and sources <= LOCAL_SOURCES
