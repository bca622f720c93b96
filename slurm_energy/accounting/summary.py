"""Samples -> one node's :class:`~slurm_energy.model.NodeSummary` (pure; no files, no Slurm).

For every device in the sample rows:

1. its whole energy per interval, by its readings' method (:func:`integrate.device_series`);
2. the job's share per interval (:mod:`attribution`): CPU by the job's CPU-time delta / the node's
   busy CPU-time delta; RAM by the job's memory / the node's used memory; a GPU allocated to the job
   is the job's (share 1) unless NVML per-process utilisation says it is shared; a MIG slice, an AMD
   compute partition or an Intel tile gets the card's energy x its fraction (``Reading.mig_fraction``,
   flags ``partition_fraction:<f>`` / ``tile_fraction:<f>`` on its readings; the device is flagged alike);
3. job energy = sum_k energy_k x share_k; device energy = sum_k energy_k; coverage = seconds with a
   job energy / the job's span on the node as measured (Prolog to Epilog, widened to the rows: the
   sampler's last row follows the Epilog's start), so a fully measured job has coverage 1.

Per-class statistics (mean and variance of attributed power and of utilisation, time-weighted),
a power trace for the report and the job's energy per UTC hour (for hourly carbon intensity) come
from the same intervals.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from slurm_energy.accounting import attribution, phases
from slurm_energy.accounting.device_agg import NO_STATS, DeviceAgg, Stats, UsageAgg, device_index
from slurm_energy.accounting.idle_gpu import DEFAULT_RULE, IdleRule, idle_sums
from slurm_energy.accounting.integrate import Arr, device_series, unique
from slurm_energy.accounting.node_series import (
    Columns,
    fill_cpu_tail,
    shares,
    table_columns,
    tdp_cpu_power,
    utilisation,
    utilisation_weighted,
)
from slurm_energy.accounting.phases import Marks
from slurm_energy.accounting.trace import bucket_trace
from slurm_energy.carbon.hourly import hour_key, split_interval_by_hour
from slurm_energy.core import DeviceStatic, Flag, Sample
from slurm_energy.model import DeviceEnergy, Method, NodeSummary, Status, WindowEnergy, worst_method
from slurm_energy.natsort import device_sort_key
from slurm_energy.sampling.sampletable import DeviceColumns, SampleTable, table_from

#: The trace column of each device class (attributed power, W).
_TRACE_COL = {"cpu": 0, "gpu": 1, "ram": 2}


@dataclass
class Traces:
    """Accumulated over devices: the job's attributed power per class (W, NaN = none) at each row
    that ends a measured interval (``present``), energy per UTC hour, and each device's attributed
    intervals (made only when the job marked phases)."""

    t: list[float]
    watts: Arr  # (3, rows): cpu, gpu, ram; NaN where no device of the class
    present: Any  # bool per row
    hourly: dict[str, float] = field(default_factory=dict)
    series: list[Callable[[], tuple[str, Method, list[tuple[float, float, float | None]]]]] = field(
        default_factory=list)

    @classmethod
    def of(cls, t: list[float]) -> Traces:
        return cls(t, np.full((3, len(t)), np.nan), np.zeros(len(t), dtype=bool))

    def power_trace(self) -> list[list[float | None]]:
        """Rows ``[t, cpu_w, gpu_w, ram_w]`` (None where no device of the class) in time order, at
        most :data:`~slurm_energy.accounting.trace.TRACE_POINTS`: a longer job's rows are bucket
        means weighted by each row's interval (:func:`~slurm_energy.accounting.trace.bucket_trace`)."""
        idx = np.flatnonzero(self.present)
        t = np.asarray(self.t, dtype=np.float64)
        dt = t[idx] - t[np.maximum(idx - 1, 0)]  # a present row ends an interval: idx >= 1
        return bucket_trace(t[idx], dt, self.watts[:, idx].T)

    def add(self, cls: str, rows: Any, t0: Arr, t1: Arr, e: Arr) -> None:
        """A device's attributed intervals (J, NaN = none) ending at rows ``rows``: their energy to
        the UTC hours (:func:`split_interval_by_hour`, in interval order), their power to the rows."""
        ok = ~np.isnan(e) & (t1 > t0)
        t0, t1, e = t0[ok], t1[ok], e[ok]
        dt = t1 - t0
        _add_hourly(self.hourly, t0, t1, e, dt)
        idx = rows[ok]
        self.present[idx] = True
        col = _TRACE_COL.get(cls)
        if col is not None:
            w = self.watts[col]
            w[idx] = np.where(np.isnan(w[idx]), 0.0, w[idx]) + e / dt


def _add_hourly(hourly: dict[str, float], t0: Arr, t1: Arr, e: Arr, dt: Arr) -> None:
    """Add each interval's energy to its UTC hour (:func:`split_interval_by_hour` for one that
    crosses an hour), in interval order: a run of intervals in one hour is one C-level accumulate."""
    if not len(t0):
        return
    hour = np.floor(t0 / 3600.0)
    single = t1 <= (hour + 1) * 3600.0
    part = e * dt / dt  # split_interval_by_hour's energy x (b - a) / (t1 - t0) for one hour
    brk = np.flatnonzero((np.diff(hour) != 0) | ~single[1:] | ~single[:-1]) + 1
    starts, ends = [0, *brk.tolist()], [*brk.tolist(), len(t0)]
    parts, t0l, t1l, el = part.tolist(), t0.tolist(), t1.tolist(), e.tolist()
    for a, b in zip(starts, ends):
        if single[a]:
            key = hour_key(t0l[a])
            hourly[key] = list(itertools.accumulate(parts[a:b], initial=hourly.get(key, 0.0)))[-1]
        else:
            for key, y in split_interval_by_hour(t0l[a], t1l[a], el[a]).items():
                hourly[key] = hourly.get(key, 0.0) + y


def weighted_stats(v: Arr, w: Arr) -> Stats:
    """Time-weighted mean and variance of values ``v`` with weights ``w`` (s; NaN values and
    weights <= 0 left out), and the weight; (None, None, 0) if no weight. Summed in order."""
    keep = ~np.isnan(v) & (w > 0)
    v, w = v[keep], w[keep]
    wsum = sum(w.tolist())
    if wsum <= 0:
        return NO_STATS
    mean = sum((v * w).tolist()) / wsum
    var = sum((w * (v - mean) ** 2).tolist()) / wsum
    return mean, var, wsum


def effective_policy(policy: str, ncpus: Sequence[int | None], cpus_alloc: int | None) -> tuple[str, list[str]]:
    """``exclusive_whole_node`` only for a job holding every CPU of the node (``ncpus``: the rows'
    logical CPU counts); else ``shared``, flagged."""
    if policy != "exclusive_whole_node":
        return policy, []
    ncpu = next((n for n in ncpus if n), None)
    if cpus_alloc and ncpu and cpus_alloc >= ncpu:
        return policy, []
    return "shared", [Flag.NOT_EXCLUSIVE.value]


def summarise_node(rows: SampleTable | Sequence[Sample | dict[str, Any]], *, job_id: str, node: str,
                   start_time: float, end_time: float, statics: Sequence[DeviceStatic] = (), cpus_alloc: int | None = None,
                   policy: str = "shared", interval_s: float = 5.0, status: Status = Status.COMPLETE,
                   errors: list[str] | None = None, span_known: bool = True,
                   marks: Marks | None = None, job_cpu_total_s: float | None = None,
                   gpu_idle: IdleRule = DEFAULT_RULE) -> NodeSummary:
    """Build a node summary from the node's samples (see :mod:`slurm_energy.sampling.samplefile`).

    Args:
        rows: the sample file as a :class:`~slurm_energy.sampling.sampletable.SampleTable`
            (:func:`slurm_energy.sampling.samplefile.read_sample_table`), or as
            :class:`~slurm_energy.core.Sample` s (or their JSON objects) -- Prolog start, samples,
            final, Epilog reading; sorted by time here.
        job_id, node: identify the summary.
        start_time, end_time: the job's span on this node, epoch s (Prolog and Epilog times).
        statics: device inventory (model names, rated power) for the report.
        cpus_alloc: CPUs allocated to the job on this node (for the CPU utilisation u_cpu).
        policy: attribution policy (``shared``, ``exclusive_whole_node``, ``utilisation_weighted``);
            ``exclusive_whole_node`` applies to jobs that hold every CPU of the node
            (``cpus_alloc`` >= the node's CPUs); other jobs on such a site are shared, flagged.
        span_known: False when the job's start is unknown (no Prolog ran): a zero-length span then
            means "not measured" (None), not a zero-length job (0 J).
        marks: the job's phase/stage marks on this node (:func:`slurm_energy.accounting.phases.parse_marks`);
            their energies (from the same attributed intervals) go to ``windows``.
        job_cpu_total_s: the job's true CPU time on this node, CPU-s (sacct TotalCPU for a one-node
            job, or the cgroup's last value), if known: under ``shared`` the stretch after the job's
            last observation is charged from it (:func:`node_series.fill_cpu_tail`), else estimated;
            either way flagged on the CPU devices.
        gpu_idle: what an idle GPU interval is (:mod:`slurm_energy.accounting.idle_gpu`); each
            GPU's ``idle_s`` / ``idle_energy_j``.
    Returns:
        NodeSummary; a device never read gets method ``unavailable`` and energy None.
    Raises:
        ValueError: unknown policy.
    """
    table = table_from(rows).sorted()
    elapsed = max(0.0, end_time - start_time)
    # coverage's denominator: the span the rows' intervals are drawn from, the job's span widened to
    # the rows (the sampler's last row follows the Epilog's start by its reaction time)
    span = max(end_time, table.t[-1]) - min(start_time, table.t[0]) if len(table) else elapsed
    policy, node_flags = effective_policy(policy, table.node["ncpu"], cpus_alloc)
    cols = table_columns(table, cpus_alloc)
    tail_flag = fill_cpu_tail(cols, job_cpu_total_s) if policy == "shared" else None
    static_by_id = {s.device_id: s for s in statics}
    traces = Traces.of(table.t)
    devices = []
    source = next((s for s in reversed(table.job_source) if s), "")
    for dc, agg in device_aggs(table, cols, static_by_id, policy, traces, gpu_idle):
        cpu = dc.static[-1].get("device_class") == "cpu"
        devices.append(agg.energy(static_by_id.get(dc.device_id), policy=policy, elapsed=elapsed,
                                  span_known=span_known, node=node, span_s=span, usage_source=source,
                                  node_flags=node_flags + ([tail_flag] if tail_flag and cpu else [])))
    return _node_summary(table, cols, devices, traces, job_id=job_id, node=node, start_time=start_time,
                         end_time=end_time, interval_s=interval_s, status=status, errors=errors, marks=marks)


def device_aggs(table: SampleTable, cols: Columns, static_by_id: dict[str, DeviceStatic], policy: str,
                traces: Traces, gpu_idle: IdleRule = DEFAULT_RULE) -> list[tuple[DeviceColumns, DeviceAgg]]:
    """Each device's sums over the table's intervals (:func:`device_agg`), in device order (numeric:
    cpu, gpu 0, 1, ... 10), the job's power and hourly energy added to ``traces``.

    Raises:
        ValueError: unknown policy.
    """
    if policy not in attribution.POLICIES:
        raise ValueError(f"attribution.policy: {policy!r} is not one of {attribution.POLICIES}")
    t = np.array(table.t, dtype=np.float64)
    return [(dc, device_agg(dc, t, cols, static_by_id.get(dc.device_id), policy=policy, traces=traces, gpu_idle=gpu_idle))
            for dc in sorted(table.devices.values(), key=lambda dc: _device_key(dc, static_by_id))]


def _node_summary(table: SampleTable, cols: Columns, devices: list[DeviceEnergy], traces: Traces, *, job_id: str, node: str,
                  start_time: float, end_time: float, interval_s: float, status: Status,
                  errors: list[str] | None, marks: Marks | None) -> NodeSummary:
    """The node's summary around its devices: the job's CPU time and memory over the samples, and
    the marked phases' windows."""
    windows, marks_flags = _windows(traces.series, marks, start_time, end_time, interval_s)
    usage = UsageAgg()
    usage.add_rows(table)
    usage.add_cpu(cols.job_cpu)
    ns = NodeSummary(
        node=node, job_id=job_id, start_time=start_time, end_time=end_time, **usage.fields(),
        n_samples=len(table), interval_s=interval_s, devices=devices,
        hourly_energy_j=traces.hourly,
        windows=windows, marks_flags=marks_flags,
        status=status, errors=list(errors or []),
    )
    # built here from floats and None: not validated again row by row (17,280 rows for a day at 5 s)
    ns.power_trace = traces.power_trace()
    return ns


def device_agg(dc: DeviceColumns, t: Arr, cols: Columns, st: DeviceStatic | None, *, policy: str,
               traces: Traces, gpu_idle: IdleRule = DEFAULT_RULE) -> DeviceAgg:
    """One device's sums over its intervals: its whole energy per interval by its readings' method
    (:func:`integrate.device_series`), the job's share per interval (:func:`node_series.shares`; a
    card's slice x its fraction), the job's energy = whole x share (``share_unknown`` where the share
    is not known), statistics of attributed power and utilisation, and a GPU's idle intervals
    (:func:`idle_gpu.idle_sums`, rule ``gpu_idle``); adds its attributed power to ``traces``.
    ``t``: the table's times (s); ``cols``: the table's :class:`Columns`."""
    cls = str(dc.static[-1].get("device_class"))
    rows = np.asarray(dc.rows, dtype=np.intp)
    kinds = unique(dc.static)
    mean_power, tdp_flags = tdp_cpu_power(dc, cols, st, kinds)
    whole = device_series(t[rows], dc, mean_power, kinds)
    if len(dc) > 1:
        whole.extra |= tdp_flags
    dt = whole.dt
    flags: set[str] = set(whole.flags)
    clamps: dict[str, float] = {}
    share = shares(cls, rows, dc, cols, flags, clamps)
    if cls in ("cpu", "ram") and cols.never_observed:
        flags.add(Flag.JOB_NEVER_OBSERVED.value)
    kind, frac = _share_fraction(kinds)
    if frac is not None:  # a slice of a card measured whole: the card's energy x the slice's fraction
        share = share * frac
        flags.add(f"{kind}{frac:.4g}")
    methods = {Method.parse(k.get("method")) for k in kinds}
    inconsistent = whole.masks.get(Flag.COUNTER_INCONSISTENT.value)
    if inconsistent is not None:  # stuck/runaway intervals were charged by power integration
        methods |= {Method.POWER_INTEGRATION}
        if not (whole.measured & ~inconsistent).any():
            methods -= {Method.COUNTER}  # no interval kept its counter
    utils = utilisation(cls, rows, dc, cols, dt, clamps)
    if policy == "utilisation_weighted":
        job = utilisation_weighted(cls, rows, utils, dt, st, cols)
        unknown = np.isnan(job)
    else:
        job = attribution.attribute_series(whole, share, policy).energy
        unknown = whole.measured & np.isnan(job)
    if unknown.any():
        flags.add(Flag.SHARE_UNKNOWN.value)
    measured = ~np.isnan(job)
    job_list = job[measured].tolist()
    job_total = sum(job_list) if job_list else None
    if policy == "utilisation_weighted" and job_total is not None:
        methods = {Method.TDP_ESTIMATE}
    method = worst_method(methods) if job_total is not None else Method.UNAVAILABLE
    traces.add(cls, rows[1:], whole.t0, whole.t1, job)
    traces.series.append(lambda: (cls, method, [(a, b, None if e != e else e) for a, b, e in
                                                zip(whole.t0.tolist(), whole.t1.tolist(), job.tolist())]))
    with np.errstate(divide="ignore", invalid="ignore"):
        p_stats = weighted_stats(job / dt, dt)
    idle = None
    if cls == "gpu":
        idle = idle_sums(zip(whole.t0.tolist(), whole.t1.tolist(), whole.energy.tolist(), job.tolist(), utils.tolist()),
                         gpu_idle, st.rated_power_w if st else None)
    return DeviceAgg(cls, dc.device_id, methods, job_total, whole.total_j, sum(dt[measured].tolist()), power=p_stats,
                     util=weighted_stats(utils, dt), wraps=whole.wraps, resets=whole.resets, dropped=whole.dropped,
                     flags=flags, clamps=clamps, idle=idle)


def _device_key(dc: DeviceColumns, static_by_id: dict[str, DeviceStatic]) -> tuple[Any, ...]:
    """Numeric device order (:func:`slurm_energy.natsort.device_sort_key`) by the device's last reading's class."""
    return device_key_of(str(dc.static[-1].get("device_class")), dc.device_id, static_by_id)


def device_key_of(cls: str, dev_id: str, static_by_id: dict[str, DeviceStatic]) -> tuple[Any, ...]:
    return device_sort_key(cls, dev_id, device_index(static_by_id.get(dev_id)))


def _windows(series: list[Callable[[], Any]], marks: Marks | None, start: float, end: float,
             interval_s: float) -> tuple[list[WindowEnergy], list[str]]:
    """The marked phases' windows and the marks' flags; a failure here costs the phases (flagged
    ``phases_not_computed``), never the node's summary."""
    if not marks:
        return [], []
    try:
        return phases.node_windows([s() for s in series], marks, start, end, interval_s), list(marks.flags)
    except Exception as e:
        return [], list(marks.flags) + [f"phases_not_computed:{type(e).__name__}"]


#: Flags saying a device is a share of a card that the reader measured whole: a MIG slice (NVML),
#: an AMD compute partition or an Intel tile (hwmon); the card's energy x fraction is the device's.
SHARE_FLAGS = ("mig_fraction:", "partition_fraction:", "tile_fraction:", "package_fraction:")


def _share_fraction(statics: Sequence[dict[str, Any]]) -> tuple[str, float | None]:
    """(flag prefix, fraction) of the device's readings' share of a card (``mig_fraction``, else
    the first share flag), else ("", None); ``statics``: the readings' static fields in order."""
    for st in statics:
        if st.get("mig_fraction") is not None:
            return "mig_fraction:", float(st["mig_fraction"])
        for f in st.get("flags") or []:
            if isinstance(f, str) and f.startswith(SHARE_FLAGS):
                kind, _, v = f.partition(":")
                try:
                    return kind + ":", float(v)
                except ValueError:
                    return "", None
    return "", None
