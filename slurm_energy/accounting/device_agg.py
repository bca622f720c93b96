"""One device's energy sums over some of a job's intervals, and the :class:`DeviceEnergy` they give.

:mod:`slurm_energy.accounting.summary` sums a device's intervals into a :class:`DeviceAgg` and
turns it into the device's :class:`~slurm_energy.model.DeviceEnergy` (method, coverage and flags
included). Two aggregates of the same device over consecutive stretches of the job :meth:`merge`
into the aggregate of both: the sampler's interim summaries add the rows of the last minute to
what they had (:mod:`slurm_energy.accounting.running`) instead of summing the whole job again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from slurm_energy.accounting import attribution
from slurm_energy.accounting.idle_gpu import IdleSums
from slurm_energy.core import DeviceStatic, Flag, Method, worst_method
from slurm_energy.model import DeviceEnergy
from slurm_energy.sampling.sampletable import SampleTable

#: (time-weighted mean, variance, weight in s); (None, None, 0.0) when nothing was weighed
Stats = tuple[float | None, float | None, float]
NO_STATS: Stats = (None, None, 0.0)


def merge_stats(a: Stats, b: Stats) -> Stats:
    """The mean and variance of two weighted samples together (Chan et al.'s pairwise update:
    M2 = var_a w_a + var_b w_b + (mean_b - mean_a)^2 w_a w_b / (w_a + w_b))."""
    ma, va, wa = a
    mb, vb, wb = b
    if ma is None or va is None or wa <= 0:
        return b
    if mb is None or vb is None or wb <= 0:
        return a
    w = wa + wb
    mean = (wa * ma + wb * mb) / w
    m2 = va * wa + vb * wb + (mb - ma) ** 2 * wa * wb / w
    return mean, m2 / w, w


def _add(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else a + b


@dataclass
class DeviceAgg:
    """A device over some intervals: the job's and the whole device's energy (J, None = no interval
    measured), the seconds with a job energy, the statistics of attributed power (W) and of
    utilisation, counter anomalies, the methods of its readings, its flags and clamped ratios."""

    device_class: str
    device_id: str
    methods: set[Method]
    job_j: float | None
    whole_j: float | None
    measured_s: float
    power: Stats = NO_STATS
    util: Stats = NO_STATS
    wraps: int = 0
    resets: int = 0
    dropped: int = 0
    flags: set[str] = field(default_factory=set)
    clamps: dict[str, float] = field(default_factory=dict)
    # a GPU's allocated-but-idle seconds and the job's energy in them (accounting.idle_gpu.idle_sums)
    idle: IdleSums | None = None

    def merge(self, o: DeviceAgg) -> None:
        """Add ``o``, the same device over a later stretch."""
        self.methods |= o.methods
        self.job_j, self.whole_j = _add(self.job_j, o.job_j), _add(self.whole_j, o.whole_j)
        self.measured_s += o.measured_s
        self.power, self.util = merge_stats(self.power, o.power), merge_stats(self.util, o.util)
        self.wraps, self.resets, self.dropped = self.wraps + o.wraps, self.resets + o.resets, self.dropped + o.dropped
        self.flags |= o.flags
        if o.idle is not None:
            if self.idle is None:
                self.idle = IdleSums()
            self.idle.merge(o.idle)
        for k, v in o.clamps.items():
            attribution.clamp_ratio(v, k, self.clamps)
        self.device_class = o.device_class

    def energy(self, st: DeviceStatic | None, *, policy: str, elapsed: float, span_known: bool, node: str,
               node_flags: list[str], span_s: float | None = None, usage_source: str = "") -> DeviceEnergy:
        """The device's :class:`DeviceEnergy` over ``elapsed`` s of the job: method (the worst of
        its readings', unavailable without a job energy; a zero-length job measured is 0 J),
        coverage = measured s / ``span_s`` (clamped, flagged), flags with the clamped ratios'.

        ``span_s`` (default ``elapsed``): the job's span as the measurement defines it, the
        seconds its measured intervals are drawn from -- from the Prolog (or its first row) to the
        Epilog (or its last row, which the Epilog's stop makes a moment later): a fully measured
        job has coverage 1 exactly, and above 1 (clamped, ``coverage_clamped``) means intervals
        counted twice, never the Epilog's reaction time."""
        job_total, methods = self.job_j, self.methods
        method = worst_method(methods) if job_total is not None else Method.UNAVAILABLE
        known = methods - {Method.UNAVAILABLE}
        if job_total is None and elapsed == 0 and known and span_known:  # zero-length job: 0 J, no division by 0
            job_total, method = 0.0, worst_method(known)
        clamps = dict(self.clamps)
        gpu = self.device_class == "gpu"  # only a GPU carries idle seconds
        span = elapsed if span_s is None else span_s
        coverage = 1.0 if span == 0 else attribution.clamp_ratio(self.measured_s / span, "coverage", clamps)
        return DeviceEnergy(
            device_class=self.device_class, device_id=self.device_id, node=node, model=st.model if st else "",
            count=st.count if st else 1, index=device_index(st), method=method, energy_j=job_total,
            device_energy_j=self.whole_j, rated_power_w=st.rated_power_w if st else None,
            mean_power_w=self.power[0], var_power_w2=self.power[1], mean_util=self.util[0], var_util=self.util[1],
            duration_s=elapsed, coverage=coverage, wraps=self.wraps, resets=self.resets,
            dropped_samples=self.dropped, covers=_covers(self.device_class, self.device_id, method, policy, st, usage_source),
            flags=sorted(self.flags | clamp_flags(clamps) | set(node_flags) | (self.idle.flags if gpu and self.idle else set())),
            unclamped=clamps,
            idle_s=self.idle.seconds() if gpu and self.idle else None,
            idle_energy_j=self.idle.energy_j() if gpu and self.idle and job_total is not None else None,
            idle_spans=[list(x) for x in self.idle.spans] if gpu and self.idle else [],
            idle_bound_w=self.idle.bound_w if gpu and self.idle else None,
        )


@dataclass
class UsageAgg:
    """The job's CPU time and memory over some rows, added stretch by stretch (a running summary)
    or at once: the largest CPU time (CPU-s), the memory's sum and count (bytes; for the mean), the
    largest memory or peak seen (bytes), the source of the last row with the job's usage."""

    cpu_max: float | None = None
    mem_sum: float = 0.0
    mem_n: int = 0
    max_mem: int | None = None
    source: str = ""

    def add_rows(self, table: SampleTable) -> None:
        """The job's memory and source in the table's rows."""
        for p, m, mx, src in zip(table.job_present, table.job_mem, table.job_max_mem, table.job_source):
            if not p:
                continue
            if m is not None:
                self.mem_sum += m
                self.mem_n += 1
            for v in (m, mx):
                if v is not None and (self.max_mem is None or v > self.max_mem):
                    self.max_mem = v
            self.source = src or self.source

    def add_cpu(self, job_cpu: Sequence[float | None]) -> None:
        """The job's CPU-time column (CPU-s, None = not observed) over some rows."""
        cpu = [v for v in job_cpu if v is not None] + ([self.cpu_max] if self.cpu_max is not None else [])
        if cpu:
            self.cpu_max = max(cpu)

    def fields(self) -> dict[str, Any]:
        """:class:`~slurm_energy.model.NodeSummary`'s usage fields (CPU time only with a source)."""
        return {"cpu_time_s": self.cpu_max if self.source else None, "max_mem_bytes": self.max_mem,
                "mean_mem_bytes": self.mem_sum / self.mem_n if self.mem_n else None, "cpu_time_source": self.source}


def device_index(st: DeviceStatic | None) -> int | None:
    """The device's number from its inventory (a GPU's minor number), if the reader gave one."""
    v = (st.extra or {}).get("minor") if st else None
    return v if isinstance(v, int) else None


#: Whose CPU time a CPU share is taken by, from the job's usage source (``JobUsage.source``).
_CPU_SHARE = {"procfs": "the process tree's share by its CPU time / node busy CPU time",
              "rusage": "the process tree's share by its CPU time / node busy CPU time",
              "psutil": "job share by its processes' CPU time / node busy CPU time"}


def _covers(cls: str, dev_id: str, method: Method, policy: str, st: DeviceStatic | None, usage_source: str = "") -> str:
    """What the device's energy covers: the device, its method and the job's share of it (whose
    CPU time by ``usage_source``: a job cgroup, the job's processes, or a process tree outside Slurm)."""
    share = {"cpu": _CPU_SHARE.get(usage_source, "job share by cgroup CPU time / node busy CPU time"),
             "ram": "job share by job memory / node used memory",
             "gpu": "GPU allocated to the job (or share by per-process utilisation)"}.get(cls, "")
    if policy == "exclusive_whole_node":
        share = "whole device charged to the job (exclusive_whole_node)"
    what = dev_id if not st or not st.model else f"{dev_id} ({st.model})"
    return f"{what}; {method.value}; {share}"


def clamp_flags(clamps: dict[str, float]) -> set[str]:
    """Flags for the ratios that were clamped (keys of ``clamps``: ``*_util``, ``*_share``, ``coverage``)."""
    out: set[str] = set()
    for k in clamps:
        out.add(Flag.COVERAGE_CLAMPED if k == "coverage" else
                Flag.SHARE_CLAMPED if k.endswith("_share") else Flag.UTIL_CLAMPED)
    return out
