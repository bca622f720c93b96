"""One node's samples as the columns attribution needs (pure): the job's CPU time and memory and
the node's busy CPU time and memory per row, and the job's share and utilisation of a device over
each of its intervals, on arrays (NaN = unknown; see :mod:`slurm_energy.accounting.summary`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from slurm_energy.accounting import attribution
from slurm_energy.accounting.formulas import class_energy_j
from slurm_energy.accounting.integrate import Arr, floats
from slurm_energy.core import DeviceStatic, Flag
from slurm_energy.sampling.sampletable import DeviceColumns, SampleTable, proc_util_dict

#: Node busy CPU time over total up to this many seconds per logical CPU is the counters' noise,
#: clamped to 1 without a flag: /proc/stat counts in 10 ms ticks (USER_HZ 100) and its iowait can
#: step backwards (the kernel's Documentation/filesystems/proc.rst: "the iowait field ... is not
#: reliable"), so busy = total - idle - iowait may exceed total by a tick or two per CPU on a
#: saturated node (seen: raw 1.0000x on 9 of 30 jobs of a burst on 2 busy CPUs). Beyond it the
#: clamp is flagged (``util_clamped``, ``node_busy_raw:<f>``), as a real anomaly.
NODE_BUSY_NOISE_S_PER_CPU = 0.02


@dataclass
class CpuState:
    """The job's CPU-time column carried from one stretch of rows to the next (a running summary):
    the largest CPU time seen (CPU-s), whether the job was seen, whether it is known to have ended."""

    last: float | None = None
    seen: bool = False
    ended: bool = False


def job_cpu_column(values: Sequence[float | None], kinds: Sequence[str], state: CpuState | None = None,
                   carried: Sequence[float | None] = ()) -> list[float | None]:
    """The job's cumulative CPU time per row (CPU-s): 0 before the job is first seen (it had just
    started), but None everywhere if it was never seen at all; a reading of 0 CPU-s is a reading
    (an idle job, or one blocked on I/O or a GPU, uses less than a clock tick): "not seen" is the
    absence of a reading (None), never its value; carried forward once the job is known
    to have ended (a ``cgroup_gone`` or ``final`` row); None where the job was running but nobody
    looked (the sampler died): the job's share of such an interval is unknown, never 0.

    Args:
        values: the job's CPU time per row (None where the job was not observed).
        kinds: the rows' kinds.
        state: carried from the previous rows (a running summary) and updated; None = from the start.
        carried: the column's values already computed for rows before ``values`` (prepended; a
            running summary's last row), zeroed too when the job is first seen in ``values``.
    """
    st = CpuState() if state is None else state
    seen_before = st.seen
    out: list[float | None] = list(carried)
    for v, kind in zip(values, kinds):
        if v is not None:
            st.seen = True
            st.last = v if st.last is None else max(st.last, v)
            out.append(st.last)
        else:
            out.append(st.last if st.seen and st.ended else None)
        if kind in ("cgroup_gone", "final"):
            st.ended = True
    if st.seen and not seen_before:  # first seen here: 0 CPU-s before (the job had just started)
        first = next(i for i in range(len(carried), len(out)) if out[i] is not None)
        out[:first] = [0.0] * first
    return out


@dataclass
class Columns:
    """One node's rows (sorted by time) as the columns attribution needs; lists as read (None =
    unknown), float arrays (NaN = unknown) made when first used."""

    t: list[float]
    kind: list[str]
    job_cpu: list[float | None]  # cumulative job CPU time, s (job_cpu_column)
    node_busy: list[float | None]  # node busy CPU time since boot, s
    node_total: list[float | None]  # node CPU time since boot, s
    node_mem: list[int | None]  # node memory used, bytes
    mem_total: list[int | None]  # node memory, bytes
    ncpu: list[int | None]  # node logical CPUs
    job_mem: list[int | None]  # job memory, bytes
    job_pids: set[int]
    cpus_alloc: int | None
    job_present: list[bool] = field(default_factory=list)  # the row holds a reading of the job's usage
    cpu_for_share: list[float | None] | None = None  # job_cpu with the unobserved tail filled (fill_cpu_tail)
    _cache: dict[str, Arr] = field(default_factory=dict, repr=False)

    def arr(self, name: str) -> Arr:
        """Column ``name`` as floats (NaN = None), made once."""
        a = self._cache.get(name)
        if a is None:
            a = self._cache[name] = floats(getattr(self, name))
        return a

    @cached_property
    def never_observed(self) -> bool:
        return all(v is None for v in self.job_cpu)


def table_columns(table: SampleTable, cpus_alloc: int | None, state: CpuState | None = None,
                  carried: Sequence[float | None] = ()) -> Columns:
    """The :class:`Columns` of a :class:`SampleTable` (sorted by time); ``state``/``carried``: the
    job's CPU time carried from earlier rows (:func:`job_cpu_column`), for the rows after ``carried``."""
    pids: set[int] = set()
    seen: set[int] = set()
    for p, present in zip(table.job_pids, table.job_present):
        if present and id(p) not in seen:  # rows of one writer share the list while the PIDs stay
            seen.add(id(p))
            pids.update(p)
    k = len(carried)
    job_cpu = [v if present else None for v, present in zip(table.job_cpu[k:], table.job_present[k:])]
    job_mem = [v if present else None for v, present in zip(table.job_mem, table.job_present)]
    node = table.node
    return Columns(t=table.t, kind=table.kind, job_cpu=job_cpu_column(job_cpu, table.kind[k:], state, carried),
                   node_busy=node["cpu_busy_s"], node_total=node["cpu_total_s"], node_mem=node["mem_used_bytes"],
                   mem_total=node["mem_total_bytes"], ncpu=node["ncpu"], job_mem=job_mem, job_pids=pids,
                   cpus_alloc=cpus_alloc, job_present=list(table.job_present))


def tdp_cpu_power(dc: DeviceColumns, cols: Columns, st: DeviceStatic | None,
                  kinds: Sequence[dict[str, Any]]) -> tuple[list[Any] | None, set[str]]:
    """A modelled CPU reading without its mean power (the first read of a reader in a new process:
    the Prolog's, the sampler's first, the Epilog's) gets it from the rows' node counters:
    TDP_total x busy CPU-time delta / all CPU-time delta since the device's previous reading.

    Returns the device's mean powers (W) with those filled (None: nothing to fill) and the flags
    the filled readings carry (``util_from_node_counters``; beyond the noise, ``util_clamped`` and
    ``node_busy_raw:<f>``). ``kinds``: the readings' distinct static fields."""
    if not st or not st.rated_power_w or not any(
            k.get("device_class") == "cpu" and k.get("method") == "tdp_estimate" for k in kinds):
        return None, set()
    vals = dc.vals["mean_power_w"]
    todo = [j for j in range(1, len(vals)) if vals[j] is None and dc.static[j].get("device_class") == "cpu"
            and dc.static[j].get("method") == "tdp_estimate"]
    if not todo:
        return None, set()
    out, flags = list(vals), set()
    busy, total, ncpu = cols.node_busy, cols.node_total, cols.ncpu
    for j in todo:
        a, b = dc.rows[j - 1], dc.rows[j]
        if None in (total[a], total[b], busy[a], busy[b]):
            continue
        d_total = total[b] - total[a]  # type: ignore[operator]
        d_busy = busy[b] - busy[a]  # type: ignore[operator]
        if d_total > 0:
            raw = d_busy / d_total
            out[j] = st.rated_power_w * (attribution.clamp_ratio(raw) or 0.0)
            flags.add(Flag.UTIL_FROM_NODE_COUNTERS.value)
            if d_busy - d_total > NODE_BUSY_NOISE_S_PER_CPU * (ncpu[b] or 1):  # clamped beyond noise: flagged
                flags |= {Flag.UTIL_CLAMPED.value, Flag.NODE_BUSY_RAW.detail(f"{raw:.4g}")}
    return out, flags


def shares(cls: str, rows: Any, dc: DeviceColumns, cols: Columns, flags: set[str],
           clamps: dict[str, float] | None = None) -> Arr:
    """The job's share of the device over each interval between its rows ``rows`` (NaN = unknown):
    CPU by the job's CPU-time delta / the node's busy CPU-time delta (:func:`attribution.cpu_shares`:
    0 when the node was idle or the job used none); RAM by the job's memory / the node's used memory
    (:func:`attribution.ram_shares`; 0 when no memory was seen and the job used no CPU; unknown while
    the sampler was not looking); a GPU allocated to the job is the job's (share 1) unless NVML
    per-process utilisation says it is shared (flag ``shared_gpu_by_process_util``)."""
    i0, i1 = rows[:-1], rows[1:]
    with np.errstate(divide="ignore", invalid="ignore"):
        if cls == "cpu":
            cpu = floats(cols.cpu_for_share) if cols.cpu_for_share else cols.arr("job_cpu")
            busy = cols.arr("node_busy")
            jc = cpu[i1] - cpu[i0]
            s = attribution.cpu_shares(jc, busy[i1] - busy[i0], clamps)
            s[np.isnan(s) & (jc == 0)] = 0.0  # no CPU used: none of the package's energy, node counters or not
            return s
        if cls == "ram":
            c = cols.arr("job_cpu")
            c0, c1 = c[i0], c[i1]
            mem = cols.arr("job_mem")
            jm = np.where(np.isnan(mem[i1]), mem[i0], mem[i1])
            s = attribution.ram_shares(np.where(np.isnan(c1), np.nan, jm), cols.arr("node_mem")[i1], clamps)
            # no reading of the job at the interval's end and no CPU used: the job not running yet (or
            # ended); a job read without its memory keeps an unknown share, however idle it was
            absent = ~np.asarray(cols.job_present, dtype=bool)[i1] if cols.job_present else np.ones(len(i1), bool)
            s[np.isnan(jm) & (c1 == c0) & absent] = 0.0
            return s
    if cls == "gpu":
        texts = dc.vals["proc_util"][1:]
        got: dict[str | None, float] = {}
        for txt in set(texts):  # each distinct text once
            sh = None if not txt or txt == "{}" else attribution.gpu_process_share(cols.job_pids, proc_util_dict(txt),
                                                                                   clamps)
            if sh is not None:
                flags.add(Flag.SHARED_GPU.value)
            got[txt] = 1.0 if sh is None else sh
        return np.array([got[x] for x in texts], dtype=np.float64)
    return np.full(len(i0), np.nan)


def utilisation(cls: str, rows: Any, dc: DeviceColumns, cols: Columns, dt: Arr,
                clamps: dict[str, float] | None = None) -> Arr:
    """The job's utilisation u in [0, 1] per interval (NaN = unknown): CPU = job CPU-time delta /
    (interval x allocated CPUs); RAM = job memory / node memory; GPU = the utilisation the device
    reported at the interval's end. Values outside [0, 1] (hyperthreads, accounting jitter) are
    clamped, the raw extreme kept in ``clamps`` as ``<class>_util``."""
    i0, i1 = rows[:-1], rows[1:]
    with np.errstate(divide="ignore", invalid="ignore"):
        if cls == "cpu":
            n = np.full(len(i1), float(cols.cpus_alloc)) if cols.cpus_alloc else cols.arr("ncpu")[i1]
            n = np.where(np.isnan(n) | (n == 0), 1.0, n)
            c = cols.arr("job_cpu")
            u = (c[i1] - c[i0]) / (dt * n)
        elif cls == "ram":
            tot = cols.arr("mem_total")[i1]
            u = np.where(np.isnan(tot) | (tot == 0), np.nan, cols.arr("job_mem")[i1] / tot)
        else:
            u = floats(dc.vals["util"][1:])
    return attribution.clamp_ratios(np.where(dt > 0, u, np.nan), f"{cls}_util", clamps)


def utilisation_weighted(cls: str, rows: Any, utils: Arr, dt: Arr, st: DeviceStatic | None, cols: Columns) -> Arr:
    """Policy ``utilisation_weighted``: per interval n x u x P x t (J; NaN = unknown) with P the
    rated power (TDP) of the job's part of the device (for a CPU, x allocated / node CPUs, at most
    1): :func:`formulas.class_energy_j`. Needs the device's rated power, else unknown."""
    p = st.rated_power_w if st else None
    if p is None:
        return np.full(len(dt), np.nan)
    pw = np.full(len(dt), float(p))
    if cls == "cpu":
        ncpu = cols.arr("ncpu")[rows[1:]]
        ncpu = np.where(np.isnan(ncpu) | (ncpu == 0), 1.0, ncpu)
        alloc = np.full(len(dt), float(cols.cpus_alloc)) if cols.cpus_alloc else ncpu
        pw = pw * np.minimum(1.0, alloc / ncpu)  # rated power of the allocated CPUs
    e: Arr = class_energy_j(1, utils, pw, dt)
    return e


def fill_cpu_tail(cols: Columns, job_cpu_total_s: float | None = None) -> str | None:
    """Charge the job's CPU share of the stretch after its last observation.

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
    so :func:`shares` yields the stretch's share per interval). Returns the flag, or None when there
    is no unobserved stretch or nothing to charge it from.
    """
    job_cpu, busy = cols.job_cpu, cols.node_busy
    n = len(job_cpu)
    if n < 2 or job_cpu[-1] is not None:
        return None
    known = [i for i, v in enumerate(job_cpu) if v is not None]
    i_last = known[-1] if known else 0
    c_last = job_cpu[i_last] if known else 0.0
    b_last, b_end = busy[i_last], busy[-1]
    if b_last is None or b_end is None or b_end - b_last <= 0:
        return None
    s, flag = _tail_share(cols, job_cpu_total_s, c_last, b_end - b_last, i_last)
    if s is None:
        return None
    filled = list(job_cpu)
    if not known:
        filled[0] = 0.0
    for i in range(i_last + 1, n):
        b = busy[i]
        filled[i] = None if b is None or c_last is None else c_last + s * (b - b_last)
    cols.cpu_for_share = filled
    return flag


def _tail_share(cols: Columns, total_s: float | None, c_last: float | None, busy_delta_s: float,
                i_last: int) -> tuple[float | None, str]:
    """(share of the unobserved stretch, flag): from the job's true CPU time, else estimated."""
    if total_s is not None and c_last is not None:  # Slurm's (or the cgroup's) number: a measured share
        return attribution.clamp_ratio(max(0.0, total_s - c_last) / busy_delta_s), Flag.TAIL_FROM_SLURM_TOTALCPU.value
    for k in range(i_last, 0, -1):  # the share of the last observed interval
        c0, c1, b0, b1 = cols.job_cpu[k - 1], cols.job_cpu[k], cols.node_busy[k - 1], cols.node_busy[k]
        # an idle last interval says nothing of the stretch: never estimate 0
        if c0 is not None and c1 is not None and b0 is not None and b1 is not None and b1 > b0 and c1 > c0:
            return attribution.clamp_ratio((c1 - c0) / (b1 - b0)), Flag.TAIL_ESTIMATED.value
    ncpu = next((n for n in reversed(cols.ncpu) if n), None)
    if cols.cpus_alloc and ncpu:
        return min(1.0, cols.cpus_alloc / ncpu), Flag.TAIL_ESTIMATED.value
    return None, ""
