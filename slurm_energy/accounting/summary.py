"""Samples -> one node's :class:`~slurm_energy.model.NodeSummary` (pure; no files, no Slurm).

For every device in the sample rows:

1. its whole energy per interval, by its readings' method (:func:`integrate.series_from_readings`);
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

from dataclasses import dataclass, field
from typing import Any, Iterable, Optional, Sequence, Union

from slurm_energy.accounting import attribution, phases
from slurm_energy.accounting.idle_gpu import DEFAULT_RULE, IdleRule, idle_sums
from slurm_energy.accounting.device_agg import NO_STATS, DeviceAgg, Stats
from slurm_energy.accounting.integrate import FLAG_COUNTER_INCONSISTENT, Interval, series_from_readings
from slurm_energy.accounting.node_series import (Columns, DeviceSeries, fill_cpu_tail, fill_tdp_cpu_power, share,
                                                 table_columns, utilisation, utilisation_weighted)
from slurm_energy.accounting.phases import Marks
from slurm_energy.carbon.hourly import split_interval_by_hour
from slurm_energy.core import DeviceStatic, Flag, Reading, Sample
from slurm_energy.model import DeviceEnergy, Method, NodeSummary, Status, WindowEnergy, worst_method
from slurm_energy.natsort import device_sort_key
from slurm_energy.sampling.sampletable import DeviceColumns, SampleTable, table_from


#: From this many rows on, devices whose readings are all alike are summed on arrays
#: (:mod:`slurm_energy.accounting.fast_device`, numpy); the sampler's interim updates (a minute of
#: rows) stay in plain Python and keep numpy out of the sampler's memory.
FAST_MIN_ROWS = 100


@dataclass
class _Traces:
    """Accumulated over devices: the job's attributed power per class (W, NaN = none) at each row
    that ends a measured interval (``present``), energy per UTC hour, and each device's attributed
    intervals (for the job's phase windows)."""

    t: list[float]
    index: dict[float, int]
    watts: list[list[float]]  # cpu, gpu, ram: one value per row, NaN where no device of the class
    present: list[bool]
    hourly: dict[str, float] = field(default_factory=dict)
    # each device's intervals, or a function that makes them (built only when the job marked phases)
    series: list[Any] = field(default_factory=list)

    @classmethod
    def of(cls, t: list[float], index: dict[float, int]) -> "_Traces":
        nan = float("nan")
        return cls(t, index, [[nan] * len(t) for _ in range(3)], [False] * len(t))

    def power_trace(self) -> list[list[Optional[float]]]:
        """Rows ``[t, cpu_w, gpu_w, ram_w]`` (None where no device of the class) in time order."""
        c, g, r = ([None if x != x else x for x in w] for w in self.watts)
        return [[t, c[i], g[i], r[i]] for i, (t, p) in enumerate(zip(self.t, self.present)) if p]


def _weighted_stats(values: Iterable[tuple[Optional[float], float]]) -> Stats:
    """Time-weighted mean and variance of [(value, weight_s)] and the weight; (None, None, 0) if no weight."""
    vals = [(v, w) for v, w in values if v is not None and w > 0]
    wsum = sum(w for _, w in vals)
    if wsum <= 0:
        return NO_STATS
    mean = sum(v * w for v, w in vals) / wsum
    var = sum(w * (v - mean) ** 2 for v, w in vals) / wsum
    return mean, var, wsum


def _effective_policy(policy: str, ncpus: Sequence[Optional[int]], cpus_alloc: Optional[int]) -> tuple[str, list[str]]:
    """``exclusive_whole_node`` only for a job holding every CPU of the node (``ncpus``: the rows'
    logical CPU counts); else ``shared``, flagged."""
    if policy != "exclusive_whole_node":
        return policy, []
    ncpu = next((n for n in ncpus if n), None)
    if cpus_alloc and ncpu and cpus_alloc >= ncpu:
        return policy, []
    return "shared", [Flag.NOT_EXCLUSIVE.value]


def summarise_node(rows: Union[SampleTable, Sequence[Union[Sample, dict[str, Any]]]], *, job_id: str, node: str,
                   start_time: float, end_time: float, statics: Sequence[DeviceStatic] = (), cpus_alloc: Optional[int] = None,
                   policy: str = "shared", interval_s: float = 5.0, status: Status = Status.COMPLETE,
                   errors: Optional[list[str]] = None, span_known: bool = True,
                   marks: Optional[Marks] = None, job_cpu_total_s: Optional[float] = None,
                   gpu_idle: IdleRule = DEFAULT_RULE) -> NodeSummary:
    """Build a node summary from the node's samples (see :mod:`slurm_energy.sampling.samplefile`).

    Args:
        rows: the sample file as a :class:`~slurm_energy.sampling.sampletable.SampleTable`
            (:func:`slurm_energy.sampling.samplefile.read_sample_table`), or as
            :class:`~slurm_energy.core.Sample` s (or their JSON objects) -- Prolog start, samples,
            final, Epilog reading; sorted by time here. A device whose readings are all alike is
            computed on arrays (:mod:`slurm_energy.accounting.fast_device`: same numbers).
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
    if policy not in attribution.POLICIES:
        raise ValueError(f"attribution.policy: {policy!r} is not one of {attribution.POLICIES}")
    table = table_from(rows).sorted()
    elapsed = max(0.0, end_time - start_time)
    # coverage's denominator: the span the rows' intervals are drawn from, the job's span widened to
    # the rows (the sampler's last row follows the Epilog's start by its reaction time)
    span = max(end_time, table.t[-1]) - min(start_time, table.t[0]) if len(table) else elapsed
    policy, node_flags = _effective_policy(policy, table.node["ncpu"], cpus_alloc)
    cols = table_columns(table, cpus_alloc)
    if policy == "shared":
        tail_flag = fill_cpu_tail(cols, job_cpu_total_s)
    else:
        tail_flag = None
    static_by_id = {s.device_id: s for s in statics}
    traces = _Traces.of(table.t, cols.index)
    devices = []
    for dc, agg in device_aggs(table, cols, static_by_id, policy, traces, gpu_idle):
        cpu = dc.static[-1].get("device_class") == "cpu"
        devices.append(device_energy(agg, static_by_id.get(dc.device_id), policy=policy, elapsed=elapsed,
                                     span_known=span_known, node=node, span_s=span,
                                     node_flags=node_flags + ([tail_flag] if tail_flag and cpu else [])))
    return _node_summary(table, cols, devices, traces, job_id=job_id, node=node, start_time=start_time,
                         end_time=end_time, interval_s=interval_s, status=status, errors=errors, marks=marks)


def device_aggs(table: SampleTable, cols: Columns, static_by_id: dict[str, DeviceStatic], policy: str,
                traces: _Traces, gpu_idle: IdleRule = DEFAULT_RULE) -> list[tuple[DeviceColumns, DeviceAgg]]:
    """Each device's sums over the table's intervals, in device order (numeric: cpu, gpu 0, 1, ...
    10), the job's power and hourly energy added to ``traces``. A device whose readings are all
    alike is summed on arrays (:func:`fast_device.fast_series`), any other interval by interval;
    either way a GPU's idle intervals by :func:`idle_gpu.idle_sums` (rule ``gpu_idle``)."""
    fast: Any = None
    if len(table) >= FAST_MIN_ROWS and all(a < b for a, b in zip(table.t, table.t[1:])):
        from slurm_energy.accounting import fast_device as fast  # numpy: only for long stretches

        arrays = fast.NodeArrays.of(table, cols)
    out = []
    for dc in sorted(table.devices.values(), key=lambda dc: _device_key(dc, static_by_id)):
        fs = fast.fast_series(dc, cols, arrays, policy) if fast is not None else None
        st = static_by_id.get(dc.device_id)
        if fs is not None:
            agg = fast.device_agg(dc, fs, traces)
            if fs.cls == "gpu":
                agg.idle = idle_sums(zip(fs.t0.tolist(), fs.t1.tolist(), fs.whole.tolist(), fs.job.tolist(),
                                         fs.util.tolist()), gpu_idle, st.rated_power_w if st else None)
            out.append((dc, agg))
            continue
        series = table.device_series(dc.device_id)
        fill_tdp_cpu_power(series, cols, st)
        out.append((dc, _device_agg(dc.device_id, series, cols, st, policy=policy, traces=traces, gpu_idle=gpu_idle)))
    return out


def device_energy(agg: DeviceAgg, st: Optional[DeviceStatic], *, policy: str, elapsed: float, span_known: bool,
                  node: str, node_flags: list[str], span_s: Optional[float] = None) -> DeviceEnergy:
    """The device's :class:`DeviceEnergy` from its sums (:meth:`DeviceAgg.energy`; ``span_s``:
    coverage's denominator, default ``elapsed``)."""
    return agg.energy(st, policy=policy, elapsed=elapsed, span_known=span_known, node=node, node_flags=node_flags,
                      span_s=span_s,
                      index=_index(st), covers=lambda m: _covers(agg.device_class, agg.device_id, m, policy, st))


def _node_summary(table: SampleTable, cols: Columns, devices: list[DeviceEnergy], traces: _Traces, *, job_id: str, node: str,
                  start_time: float, end_time: float, interval_s: float, status: Status,
                  errors: Optional[list[str]], marks: Optional[Marks]) -> NodeSummary:
    """The node's summary around its devices: the job's CPU time and memory over the samples, and
    the marked phases' windows."""
    windows, marks_flags = _windows(traces.series, marks, start_time, end_time, interval_s)
    cpu_times = [v for v in cols.job_cpu if v is not None]
    mems = [m for m in cols.job_mem if m is not None]
    present = table.job_present
    max_mems = [m for m, p in zip(table.job_max_mem, present) if p and m is not None]
    src = next((s for s, p in zip(reversed(table.job_source), reversed(present)) if p and s), "")
    ns = NodeSummary(
        node=node, job_id=job_id, start_time=start_time, end_time=end_time,
        cpu_time_s=max(cpu_times) if src and cpu_times else None,
        max_mem_bytes=max(max_mems + mems) if (max_mems or mems) else None,
        mean_mem_bytes=sum(mems) / len(mems) if mems else None,
        n_samples=len(cols.samples), interval_s=interval_s, cpu_time_source=src, devices=devices,
        hourly_energy_j=traces.hourly,
        windows=windows, marks_flags=marks_flags,
        status=status, errors=list(errors or []),
    )
    # built here from floats and None: not validated again row by row (17,280 rows for a day at 5 s)
    ns.power_trace = traces.power_trace()
    return ns


def _device_agg(dev_id: str, series: DeviceSeries, cols: Columns, st: Optional[DeviceStatic], *,
                policy: str, traces: _Traces, gpu_idle: IdleRule = DEFAULT_RULE) -> DeviceAgg:
    """One device's sums over its intervals (whole and job energy with provenance, statistics,
    seconds measured), interval by interval; adds its attributed power to the node's traces."""
    cls = series[-1][1].device_class
    whole = series_from_readings(series)
    by_t = dict(series)  # t -> Reading, O(1) look-ups per interval
    flags: set[str] = set(whole.flags)
    clamps: dict[str, float] = {}
    job, methods = _job_series(cls, whole, series, by_t, cols, st, policy, flags, clamps)
    method = worst_method(methods) if job.total_j is not None else Method.UNAVAILABLE
    # statistics over intervals: attributed power and utilisation
    p_stats = _weighted_stats((iv.energy_j / iv.duration_s, iv.duration_s) for iv in job.intervals
                              if iv.energy_j is not None and iv.duration_s > 0)
    utils = utilisation(cls, whole.intervals, cols, by_t, clamps)
    u_stats = _weighted_stats((u, iv.duration_s) for u, iv in zip(utils, whole.intervals))
    _add_traces(traces, cls, job.intervals)
    traces.series.append((cls, method, [(iv.t0, iv.t1, iv.energy_j) for iv in job.intervals]))
    idle = None
    if cls == "gpu":
        job_j = {(iv.t0, iv.t1): iv.energy_j for iv in job.intervals}
        idle = idle_sums(((iv.t0, iv.t1, iv.energy_j, job_j.get((iv.t0, iv.t1)), u)
                          for iv, u in zip(whole.intervals, utils)), gpu_idle, st.rated_power_w if st else None)
    return DeviceAgg(cls, dev_id, methods, job.total_j, whole.total_j, job.measured_s, power=p_stats, util=u_stats,
                     wraps=whole.wraps, resets=whole.resets, dropped=whole.dropped, flags=flags | set(job.flags),
                     clamps=clamps, idle=idle)


def _job_series(cls: str, whole: Any, series: DeviceSeries, by_t: dict[float, Reading], cols: Columns,
                st: Optional[DeviceStatic], policy: str, flags: set[str],
                clamps: dict[str, float]) -> tuple[Any, set[Method]]:
    """The job's part of the device's energy series under ``policy``, and the methods behind it."""
    shares: list[Optional[float]] = []
    for iv in whole.intervals:
        i0, i1 = cols.index.get(iv.t0), cols.index.get(iv.t1)
        shares.append(share(cls, i0, i1, cols, by_t.get(iv.t1), flags, clamps))
    if cls in ("cpu", "ram") and all(v is None for v in cols.job_cpu):
        flags.add(Flag.JOB_NEVER_OBSERVED.value)
    kind, frac = _share_fraction(series)
    if frac is not None:  # a slice of a card measured whole: the card's energy x the slice's fraction
        shares = [None if s is None else s * frac for s in shares]
        flags.add(f"{kind}{frac:.4g}")
    methods = {rd.how for _, rd in series}
    if FLAG_COUNTER_INCONSISTENT in whole.flags:  # stuck/runaway intervals were charged by power integration
        methods = methods | {Method.POWER_INTEGRATION}
        if not any(iv.energy_j is not None and FLAG_COUNTER_INCONSISTENT not in iv.flags for iv in whole.intervals):
            methods = methods - {Method.COUNTER}  # no interval kept its counter
    if policy == "utilisation_weighted":
        job = utilisation_weighted(cls, whole, st, cols, by_t)
        return job, ({Method.TDP_ESTIMATE} if job.total_j is not None else methods)
    return (attribution.attribute_series(whole, shares, policy) if whole.intervals else whole), methods


def _add_traces(traces: _Traces, cls: str, intervals: list[Interval]) -> None:
    """The job's energy per UTC hour and its attributed power per class at each interval's end."""
    col = {"cpu": 0, "gpu": 1, "ram": 2}.get(cls)
    for iv in intervals:
        if iv.energy_j is None:
            continue
        for h, e in split_interval_by_hour(iv.t0, iv.t1, iv.energy_j).items():
            traces.hourly[h] = traces.hourly.get(h, 0.0) + e
        if iv.duration_s > 0:
            i = traces.index[iv.t1]
            traces.present[i] = True
            if col is not None:
                cur = traces.watts[col][i]
                traces.watts[col][i] = (0.0 if cur != cur else cur) + iv.energy_j / iv.duration_s


def _index(st: Optional[DeviceStatic]) -> Optional[int]:
    """The device's number from its inventory (a GPU's minor number), if the reader gave one."""
    v = (st.extra or {}).get("minor") if st else None
    return v if isinstance(v, int) else None


def _device_key(dc: DeviceColumns, static_by_id: dict[str, DeviceStatic]) -> tuple[Any, ...]:
    """Numeric device order (:func:`slurm_energy.natsort.device_sort_key`) by the device's last reading's class."""
    return _device_key_of(str(dc.static[-1].get("device_class")), dc.device_id, static_by_id)


def _device_key_of(cls: str, dev_id: str, static_by_id: dict[str, DeviceStatic]) -> tuple[Any, ...]:
    return device_sort_key(cls, dev_id, _index(static_by_id.get(dev_id)))


def _windows(series: list[Any], marks: Optional[Marks], start: float, end: float,
             interval_s: float) -> tuple[list[WindowEnergy], list[str]]:
    """The marked phases' windows and the marks' flags; a failure here costs the phases (flagged
    ``phases_not_computed``), never the node's summary."""
    if not marks:
        return [], []
    try:
        series = [s() if callable(s) else s for s in series]
        return phases.node_windows(series, marks, start, end, interval_s), list(marks.flags)
    except Exception as e:  # noqa: BLE001 - user data must not lose the record
        return [], list(marks.flags) + [f"phases_not_computed:{type(e).__name__}"]


#: Flags saying a device is a share of a card that the reader measured whole: a MIG slice (NVML),
#: an AMD compute partition or an Intel tile (hwmon); the card's energy x fraction is the device's.
SHARE_FLAGS = ("mig_fraction:", "partition_fraction:", "tile_fraction:", "package_fraction:")


def _share_fraction(samples: DeviceSeries) -> tuple[str, Optional[float]]:
    """(flag prefix, fraction) of the device's readings' share of a card (``Reading.mig_fraction``,
    else the first share flag), else ("", None)."""
    for _, rd in samples:
        if rd.mig_fraction is not None:
            return "mig_fraction:", rd.mig_fraction
        for f in rd.flags or []:
            if isinstance(f, str) and f.startswith(SHARE_FLAGS):
                kind, _, v = f.partition(":")
                try:
                    return kind + ":", float(v)
                except ValueError:
                    return "", None
    return "", None


def _covers(cls: str, dev_id: str, method: Method, policy: str, st: Optional[DeviceStatic]) -> str:
    share = {"cpu": "job share by cgroup CPU time / node busy CPU time",
             "ram": "job share by job memory / node used memory",
             "gpu": "GPU allocated to the job (or share by per-process utilisation)"}.get(cls, "")
    if policy == "exclusive_whole_node":
        share = "whole device charged to the job (exclusive_whole_node)"
    what = dev_id if not st or not st.model else f"{dev_id} ({st.model})"
    return f"{what}; {method.value}; {share}"
