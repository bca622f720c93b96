"""One node's samples as the columns attribution needs (pure): the job's CPU time and memory and
the node's busy CPU time and memory per sample, each device's readings, and the job's share and
utilisation of a device over one interval (see :mod:`slurm_energy.accounting.summary`)."""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Sequence as SequenceABC
from typing import Any, Optional, Sequence, Union

from slurm_energy.accounting import attribution
from slurm_energy.accounting.integrate import Interval
from slurm_energy.core import DeviceStatic, Flag, JobUsage, NodeUsage, Reading, Sample
from slurm_energy.sampling.sampletable import NODE_FIELDS, SampleTable

#: Node busy CPU time over total up to this many seconds per logical CPU is the counters' noise,
#: clamped to 1 without a flag: /proc/stat counts in 10 ms ticks (USER_HZ 100) and its iowait can
#: step backwards (the kernel's Documentation/filesystems/proc.rst: "the iowait field ... is not
#: reliable"), so busy = total - idle - iowait may exceed total by a tick or two per CPU on a
#: saturated node (seen: raw 1.0000x on 9 of 30 jobs of a burst on 2 busy CPUs). Beyond it the
#: clamp is flagged (``util_clamped``, ``node_busy_raw:<f>``), as a real anomaly.
NODE_BUSY_NOISE_S_PER_CPU = 0.02


#: A device's readings in time order: [(sample time t, Reading)].
DeviceSeries = list[tuple[float, Reading]]


@dataclass
class Columns:
    """One node's samples as columns aligned with ``samples`` (sorted by time)."""

    samples: list[Sample]
    index: dict[float, int]  # sample time -> row
    job_cpu: list[Optional[float]]  # cumulative job CPU time, s (see job_cpu_at)
    node_busy: list[Optional[float]]  # node busy CPU time since boot, s
    node_mem: list[Optional[int]]  # node memory used, bytes
    job_mem: list[Optional[int]]  # job memory, bytes
    job_pids: set[int]
    cpus_alloc: Optional[int]
    cpu_for_share: Optional[list[Optional[float]]] = None  # job_cpu with the unobserved tail filled (fill_cpu_tail)

    def ncpu(self, i: int) -> Optional[int]:
        return self.samples[i].node.ncpu


def job_cpu_at(samples: list[Sample]) -> list[Optional[float]]:
    """Cumulative job CPU time per row: 0 before the job is first seen (it had just started), but
    None everywhere if it was never seen at all;
    carried forward once the job is known to have ended (a ``cgroup_gone`` or ``final`` row);
    None where the job was running but nobody looked (the sampler died): the job's share of such
    an interval is unknown, never 0."""
    return job_cpu_column([r.job.cpu_time_s if r.job else None for r in samples], [r.kind for r in samples])


def job_cpu_column(values: Sequence[Optional[float]], kinds: Sequence[str]) -> list[Optional[float]]:
    """:func:`job_cpu_at` on columns: the job's CPU time per row (None where the job was not
    observed) and the rows' kinds."""
    out: list[Optional[float]] = []
    last: Optional[float] = None
    seen = ended = False
    for v, kind in zip(values, kinds):
        if v is not None and (seen or v > 0):  # a cgroup read at 0 ns: nothing of the job ran yet
            seen = True
            last = v if last is None else max(last, v)
            out.append(last)
        elif not seen:
            out.append(0.0)
        else:
            out.append(last if ended else None)
        if kind in ("cgroup_gone", "final"):
            ended = True
    if not seen:  # the job ended before anyone saw it (shorter than the first poll): unknown, not 0
        return [None] * len(out)
    return out


def typed_samples(rows: Sequence[Union[Sample, dict[str, Any]]]) -> list[Sample]:
    """Samples sorted by time; JSON rows (older callers) are read with :meth:`Sample.from_dict`."""
    return sorted((r if isinstance(r, Sample) else Sample.from_dict(r) for r in rows), key=lambda r: r.t)


class LazySamples(SequenceABC):  # type: ignore[type-arg]
    """A table's rows as :class:`Sample` s without readings, made when looked at (the general
    path looks at a few; a long job has tens of thousands)."""

    def __init__(self, table: SampleTable):
        self.table = table

    def __len__(self) -> int:
        return len(self.table)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        tb = self.table
        i = range(len(tb))[i]
        job = (JobUsage(tb.job_cpu[i], tb.job_mem[i], tb.job_max_mem[i], tb.job_pids[i], tb.job_source[i])
               if tb.job_present[i] else None)
        return Sample(tb.t[i], tb.kind[i], job, NodeUsage(*(tb.node[k][i] for k in NODE_FIELDS)), [])


def table_columns(table: SampleTable, cpus_alloc: Optional[int]) -> Columns:
    """:func:`columns` of a :class:`SampleTable` (sorted by time), built from its columns."""
    pids: set[int] = set()
    seen: set[int] = set()
    for p, present in zip(table.job_pids, table.job_present):
        if present and id(p) not in seen:  # rows of one writer share the list while the PIDs stay
            seen.add(id(p))
            pids.update(p)
    job_cpu = [v if present else None for v, present in zip(table.job_cpu, table.job_present)]
    job_mem = [v if present else None for v, present in zip(table.job_mem, table.job_present)]
    return Columns(
        samples=LazySamples(table), index={t: i for i, t in enumerate(table.t)},  # type: ignore[arg-type]
        job_cpu=job_cpu_column(job_cpu, table.kind), node_busy=list(table.node["cpu_busy_s"]),
        node_mem=list(table.node["mem_used_bytes"]), job_mem=job_mem, job_pids=pids, cpus_alloc=cpus_alloc)


def columns(samples: list[Sample], cpus_alloc: Optional[int]) -> Columns:
    pids: set[int] = set()
    for r in samples:
        pids.update(r.job.pids if r.job else [])
    return Columns(
        samples=samples, index={r.t: i for i, r in enumerate(samples)}, job_cpu=job_cpu_at(samples),
        node_busy=[r.node.cpu_busy_s for r in samples], node_mem=[r.node.mem_used_bytes for r in samples],
        job_mem=[r.job.mem_bytes if r.job else None for r in samples], job_pids=pids, cpus_alloc=cpus_alloc)


def per_device(samples: list[Sample]) -> dict[str, DeviceSeries]:
    out: dict[str, DeviceSeries] = {}
    for r in samples:
        for rd in r.readings:
            out.setdefault(rd.device_id, []).append((r.t, rd))
    return out


def fill_tdp_cpu_power(samples: DeviceSeries, cols: Columns, st: Optional[DeviceStatic]) -> None:
    """A modelled CPU reading without its mean power (the first read of a reader in a new process:
    the Prolog's, the sampler's first, the Epilog's) gets it from the rows' node counters:
    TDP_total x busy CPU-time delta / all CPU-time delta since the device's previous reading."""
    if not st or not st.rated_power_w:
        return
    for k in range(1, len(samples)):
        t, rd = samples[k]
        if rd.device_class != "cpu" or rd.method != "tdp_estimate" or rd.mean_power_w is not None:
            continue
        a = cols.samples[cols.index[samples[k - 1][0]]].node
        b = cols.samples[cols.index[t]].node
        if None in (a.cpu_total_s, b.cpu_total_s, a.cpu_busy_s, b.cpu_busy_s):
            continue
        d_total = b.cpu_total_s - a.cpu_total_s  # type: ignore[operator]
        d_busy = b.cpu_busy_s - a.cpu_busy_s  # type: ignore[operator]
        if d_total > 0:
            raw = d_busy / d_total
            busy = attribution.clamp_ratio(raw)
            assert busy is not None  # raw is a number
            rd.mean_power_w = st.rated_power_w * busy
            rd.flags = list(rd.flags or []) + [Flag.UTIL_FROM_NODE_COUNTERS.value]
            if d_busy - d_total > NODE_BUSY_NOISE_S_PER_CPU * (b.ncpu or 1):  # clamped beyond noise: flagged
                rd.flags += [Flag.UTIL_CLAMPED.value, Flag.NODE_BUSY_RAW.detail(f"{raw:.4g}")]


def share(cls: str, i0: Optional[int], i1: Optional[int], cols: Columns, reading: Optional[Reading],
           flags: set[str], clamps: Optional[dict[str, float]] = None) -> Optional[float]:
    """The job's share of the device over the interval between rows ``i0`` and ``i1``; None = unknown."""
    if i0 is None or i1 is None:
        return None
    job_cpu, node_busy, job_mem, node_mem = cols.job_cpu, cols.node_busy, cols.job_mem, cols.node_mem
    if cls == "cpu":
        cpu = cols.cpu_for_share or job_cpu
        c0, c1, b0, b1 = cpu[i0], cpu[i1], node_busy[i0], node_busy[i1]
        jc = None if c1 is None or c0 is None else c1 - c0
        nb = None if b1 is None or b0 is None else b1 - b0
        s = attribution.cpu_share(jc, nb, clamps)
        if s is None and jc == 0:
            return 0.0
        return s
    if cls == "ram":
        if job_cpu[i1] is None:
            return None  # the sampler was not running: the job's memory is unknown
        jm = job_mem[i1] if job_mem[i1] is not None else job_mem[i0]
        if jm is None:
            return 0.0 if job_cpu[i1] == job_cpu[i0] else None  # no memory seen and no CPU used: job not running
        return attribution.ram_share(jm, node_mem[i1], clamps)
    if cls == "gpu":
        if reading is not None and reading.proc_util:
            s = attribution.gpu_process_share(cols.job_pids, {int(k): v for k, v in reading.proc_util.items()},
                                              clamps)
            if s is not None:
                flags.add(Flag.SHARED_GPU.value)
                return s
        return 1.0  # a GPU Slurm allocated to the job: the whole GPU is the job's
    return None


def fill_cpu_tail(cols: Columns, job_cpu_total_s: Optional[float] = None) -> Optional[str]:
    """Charge the job's CPU share of the stretch after its last observation (issue 9 item 3).

    The stretch runs from the last row with a known job CPU time (row 0 at 0 CPU-s when the job was
    never seen: it started at the Prolog) to the last row; it is unobserved when the job's CPU time
    at the last row is unknown (sampler killed, job ended between polls or before the first one).
    Its share, applied to every interval in it::

        share = (job_cpu_total_s - job CPU time last observed) / node busy CPU-time delta of the stretch

    (CPU-seconds over CPU-seconds, clamped to [0, 1]), flag ``tail_from_slurm_totalcpu``. Without
    ``job_cpu_total_s`` (the job's true CPU time on this node, e.g. sacct TotalCPU or the cgroup's
    last ``cpuacct``/``cpu.stat`` value) it is estimated, flag ``tail_estimated``: the share of the
    last interval with a known share, else allocated CPUs / node CPUs; with neither it stays unknown.

    Sets ``cols.cpu_for_share`` (job CPU time filled along the node's busy CPU time over the stretch,
    so :func:`share` yields the stretch's share per interval). Returns the flag, or None when there
    is no unobserved stretch or nothing to charge it from.
    """
    job_cpu, busy = cols.job_cpu, cols.node_busy
    n = len(job_cpu)
    if n < 2 or job_cpu[-1] is not None:
        return None
    known = [i for i, v in enumerate(job_cpu) if v is not None]
    i_last = known[-1] if known else 0
    c_last = job_cpu[i_last] if known else 0.0
    b_last = busy[i_last]
    if b_last is None or busy[-1] is None or busy[-1] - b_last <= 0:
        return None
    s, flag = _tail_share(cols, job_cpu_total_s, c_last, busy[-1] - b_last, i_last)
    if s is None:
        return None
    filled = list(job_cpu)
    if not known:
        filled[0] = 0.0
    for i in range(i_last + 1, n):
        filled[i] = None if busy[i] is None else c_last + s * (busy[i] - b_last)  # type: ignore[operator]
    cols.cpu_for_share = filled
    return flag


def _tail_share(cols: Columns, total_s: Optional[float], c_last: Optional[float], busy_delta_s: float,
                i_last: int) -> tuple[Optional[float], str]:
    """(share of the unobserved stretch, flag): from the job's true CPU time, else estimated."""
    if total_s is not None and c_last is not None:  # Slurm's (or the cgroup's) number: a measured share
        return attribution.clamp_ratio(max(0.0, total_s - c_last) / busy_delta_s), Flag.TAIL_FROM_SLURM_TOTALCPU.value
    for k in range(i_last, 0, -1):  # the share of the last observed interval
        c0, c1, b0, b1 = cols.job_cpu[k - 1], cols.job_cpu[k], cols.node_busy[k - 1], cols.node_busy[k]
        if None not in (c0, c1, b0, b1) and b1 - b0 > 0:  # type: ignore[operator]
            sh = attribution.cpu_share(c1 - c0, b1 - b0)  # type: ignore[operator]
            if sh:  # an idle last interval says nothing of the stretch: never estimate 0
                return sh, Flag.TAIL_ESTIMATED.value
    ncpu = next((r.node.ncpu for r in reversed(cols.samples) if r.node.ncpu), None)
    if cols.cpus_alloc and ncpu:
        return min(1.0, cols.cpus_alloc / ncpu), Flag.TAIL_ESTIMATED.value
    return None, ""


def utilisation(cls: str, intervals: list[Interval], cols: Columns, by_t: dict[float, Reading],
                 clamps: Optional[dict[str, float]] = None) -> list[Optional[float]]:
    """The job's utilisation u in [0, 1] per interval (aligned with ``intervals``; None = unknown):
    CPU = job CPU-time delta / (interval x allocated CPUs); RAM = job memory / node memory;
    GPU = NVML utilisation of the device. Values outside [0, 1] (hyperthreads, accounting jitter)
    are clamped, the raw extreme kept in ``clamps`` as ``<class>_util``."""
    out: list[Optional[float]] = []
    for iv in intervals:
        i0, i1 = cols.index.get(iv.t0), cols.index.get(iv.t1)
        d = iv.duration_s
        u = None
        if i0 is not None and i1 is not None and d > 0:
            c0, c1, mem = cols.job_cpu[i0], cols.job_cpu[i1], cols.job_mem[i1]
            if cls == "cpu":
                n = cols.cpus_alloc or cols.ncpu(i1) or 1
                if c1 is not None and c0 is not None:
                    u = (c1 - c0) / (d * n)
            elif cls == "ram":
                tot = cols.samples[i1].node.mem_total_bytes
                if mem is not None and tot:
                    u = mem / tot
            else:
                rd = by_t.get(iv.t1)
                if rd is not None and rd.util is not None:
                    u = rd.util
        out.append(attribution.clamp_ratio(u, f"{cls}_util", clamps))
    return out


def utilisation_weighted(cls: str, whole: Any, st: Optional[DeviceStatic], cols: Columns,
                          by_t: dict[float, Reading]) -> Any:
    """Policy ``utilisation_weighted``: per interval n x u x P x t with P the rated power (TDP) of
    the job's part of the device; needs the device's rated power, else every interval is dropped."""
    from slurm_energy.accounting.integrate import summarise_intervals

    ivs = []
    utils = utilisation(cls, whole.intervals, cols, by_t)
    for iv, u in zip(whole.intervals, utils):
        p = st.rated_power_w if st else None
        if cls == "cpu" and p is not None:
            ncpu = cols.ncpu(cols.index[iv.t1]) or 1
            p = p * min(1.0, (cols.cpus_alloc or ncpu) / ncpu)  # rated power of the allocated CPUs
        if u is None or p is None:
            ivs.append(Interval(iv.t0, iv.t1, None, [Flag.SHARE_UNKNOWN.value]))
        else:
            ivs.append(Interval(iv.t0, iv.t1, attribution.utilisation_weighted_j(1, u, p, iv.duration_s), []))
    return summarise_intervals(ivs)
