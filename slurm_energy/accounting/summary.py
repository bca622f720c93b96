"""Samples -> one node's :class:`~slurm_energy.model.NodeSummary` (pure; no files, no Slurm).

For every device in the sample rows:

1. its whole energy per interval, by its readings' method (:func:`integrate.series_from_readings`);
2. the job's share per interval (:mod:`attribution`): CPU by the job's CPU-time delta / the node's
   busy CPU-time delta; RAM by the job's memory / the node's used memory; a GPU allocated to the job
   is the job's (share 1) unless NVML per-process utilisation says it is shared; a MIG slice, an AMD
   compute partition or an Intel tile gets the card's energy x its fraction (``Reading.mig_fraction``,
   flags ``partition_fraction:<f>`` / ``tile_fraction:<f>`` on its readings; the device is flagged alike);
3. job energy = sum_k energy_k x share_k; device energy = sum_k energy_k; coverage = seconds with a
   job energy / the node's elapsed time.

Per-class statistics (mean and variance of attributed power and of utilisation, time-weighted),
a power trace for the report and the job's energy per UTC hour (for hourly carbon intensity) come
from the same intervals.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Optional, Sequence, Union

from slurm_energy.accounting import attribution, phases
from slurm_energy.accounting.integrate import FLAG_COUNTER_INCONSISTENT, Interval, series_from_readings
from slurm_energy.accounting.node_series import (Columns, DeviceSeries, columns, fill_cpu_tail, fill_tdp_cpu_power,
                                                 per_device, share, typed_samples, utilisation, utilisation_weighted)
from slurm_energy.accounting.phases import Marks
from slurm_energy.carbon.hourly import split_interval_by_hour
from slurm_energy.core import DeviceStatic, Flag, Reading, Sample
from slurm_energy.model import DeviceEnergy, Method, NodeSummary, Status, WindowEnergy, worst_method
from slurm_energy.natsort import device_sort_key


@dataclass
class _Traces:
    """Accumulated over devices: power trace rows {t: [t, cpu_w, gpu_w, ram_w]}, energy per UTC hour,
    and each device's attributed intervals (for the job's phase windows)."""

    power: dict[float, list[Optional[float]]] = field(default_factory=dict)
    hourly: dict[str, float] = field(default_factory=dict)
    series: list[phases.DeviceSeries] = field(default_factory=list)


def _weighted_stats(values: Iterable[tuple[Optional[float], float]]) -> tuple[Optional[float], Optional[float]]:
    """Time-weighted mean and variance of [(value, weight_s)]; (None, None) if no weight."""
    vals = [(v, w) for v, w in values if v is not None and w > 0]
    wsum = sum(w for _, w in vals)
    if wsum <= 0:
        return None, None
    mean = sum(v * w for v, w in vals) / wsum
    var = sum(w * (v - mean) ** 2 for v, w in vals) / wsum
    return mean, var


def _effective_policy(policy: str, samples: list[Sample], cpus_alloc: Optional[int]) -> tuple[str, list[str]]:
    """``exclusive_whole_node`` only for a job holding every CPU of the node; else ``shared``, flagged."""
    if policy != "exclusive_whole_node":
        return policy, []
    ncpu = next((r.node.ncpu for r in samples if r.node.ncpu), None)
    if cpus_alloc and ncpu and cpus_alloc >= ncpu:
        return policy, []
    return "shared", [Flag.NOT_EXCLUSIVE.value]


def summarise_node(rows: Sequence[Union[Sample, dict[str, Any]]], *, job_id: str, node: str, start_time: float,
                   end_time: float, statics: Sequence[DeviceStatic] = (), cpus_alloc: Optional[int] = None,
                   policy: str = "shared", interval_s: float = 5.0, status: Status = Status.COMPLETE,
                   errors: Optional[list[str]] = None, span_known: bool = True,
                   marks: Optional[Marks] = None, job_cpu_total_s: Optional[float] = None) -> NodeSummary:
    """Build a node summary from the node's samples (see :mod:`slurm_energy.sampling.samplefile`).

    Args:
        rows: :class:`~slurm_energy.core.Sample` s (or their JSON objects) -- Prolog start,
            samples, final, Epilog reading; sorted by time here.
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
    Returns:
        NodeSummary; a device never read gets method ``unavailable`` and energy None.
    Raises:
        ValueError: unknown policy.
    """
    if policy not in attribution.POLICIES:
        raise ValueError(f"attribution.policy: {policy!r} is not one of {attribution.POLICIES}")
    samples = typed_samples(rows)
    elapsed = max(0.0, end_time - start_time)
    policy, node_flags = _effective_policy(policy, samples, cpus_alloc)
    cols = columns(samples, cpus_alloc)
    if policy == "shared":
        tail_flag = fill_cpu_tail(cols, job_cpu_total_s)
    else:
        tail_flag = None
    static_by_id = {s.device_id: s for s in statics}
    by_device = per_device(samples)
    for dev_id, series in by_device.items():
        fill_tdp_cpu_power(series, cols, static_by_id.get(dev_id))
    traces = _Traces()
    ordered = sorted(by_device.items(), key=lambda kv: _device_key(kv, static_by_id))
    devices = [_device_energy(dev_id, series, cols, static_by_id.get(dev_id), policy=policy, elapsed=elapsed,
                              span_known=span_known, node=node, traces=traces,
                              node_flags=node_flags + ([tail_flag] if tail_flag and _is_cpu(series) else []))
               for dev_id, series in ordered]
    return _node_summary(cols, devices, traces, job_id=job_id, node=node, start_time=start_time,
                         end_time=end_time, interval_s=interval_s, status=status, errors=errors, marks=marks)


def _is_cpu(series: DeviceSeries) -> bool:
    return bool(series) and series[-1][1].device_class == "cpu"


def _node_summary(cols: Columns, devices: list[DeviceEnergy], traces: _Traces, *, job_id: str, node: str,
                  start_time: float, end_time: float, interval_s: float, status: Status,
                  errors: Optional[list[str]], marks: Optional[Marks]) -> NodeSummary:
    """The node's summary around its devices: the job's CPU time and memory over the samples, and
    the marked phases' windows."""
    windows, marks_flags = _windows(traces.series, marks, start_time, end_time, interval_s)
    cpu_times = [v for v in cols.job_cpu if v is not None]
    mems = [m for m in cols.job_mem if m is not None]
    max_mems = [r.job.max_mem_bytes for r in cols.samples if r.job and r.job.max_mem_bytes is not None]
    src = next((r.job.source for r in reversed(cols.samples) if r.job and r.job.source), "")
    return NodeSummary(
        node=node, job_id=job_id, start_time=start_time, end_time=end_time,
        cpu_time_s=max(cpu_times) if src and cpu_times else None,
        max_mem_bytes=max(max_mems + mems) if (max_mems or mems) else None,
        mean_mem_bytes=sum(mems) / len(mems) if mems else None,
        n_samples=len(cols.samples), interval_s=interval_s, cpu_time_source=src, devices=devices,
        power_trace=[traces.power[t] for t in sorted(traces.power)], hourly_energy_j=traces.hourly,
        windows=windows, marks_flags=marks_flags,
        status=status, errors=list(errors or []),
    )


def _device_energy(dev_id: str, series: DeviceSeries, cols: Columns, st: Optional[DeviceStatic], *,
                   policy: str, elapsed: float, span_known: bool, node: str, node_flags: list[str],
                   traces: _Traces) -> DeviceEnergy:
    """One device's whole and job energy with provenance, statistics and coverage; adds its
    attributed power to the node's traces."""
    cls = series[-1][1].device_class
    whole = series_from_readings(series)
    by_t = dict(series)  # t -> Reading, O(1) look-ups per interval
    flags: set[str] = set(whole.flags)
    clamps: dict[str, float] = {}
    job, methods = _job_series(cls, whole, series, by_t, cols, st, policy, flags, clamps)
    job_total = job.total_j
    method = worst_method(methods) if job_total is not None else Method.UNAVAILABLE
    known = methods - {Method.UNAVAILABLE}
    if job_total is None and elapsed == 0 and known and span_known:  # zero-length job: 0 J, no division by 0
        job_total, method = 0.0, worst_method(known)
    # statistics over intervals: attributed power and utilisation
    p_stats = _weighted_stats((iv.energy_j / iv.duration_s, iv.duration_s) for iv in job.intervals
                              if iv.energy_j is not None and iv.duration_s > 0)
    utils = utilisation(cls, whole.intervals, cols, by_t, clamps)
    u_stats = _weighted_stats((u, iv.duration_s) for u, iv in zip(utils, whole.intervals))
    _add_traces(traces, cls, job.intervals)
    traces.series.append((cls, method, [(iv.t0, iv.t1, iv.energy_j) for iv in job.intervals]))
    coverage = 1.0 if elapsed == 0 else attribution.clamp_ratio(job.measured_s / elapsed, "coverage", clamps)
    flags |= _clamp_flags(clamps)
    return DeviceEnergy(
        device_class=cls, device_id=dev_id, node=node, model=st.model if st else "",
        count=st.count if st else 1, index=_index(st), method=method, energy_j=job_total,
        device_energy_j=whole.total_j, rated_power_w=st.rated_power_w if st else None,
        mean_power_w=p_stats[0], var_power_w2=p_stats[1], mean_util=u_stats[0], var_util=u_stats[1],
        duration_s=elapsed, coverage=coverage, wraps=whole.wraps, resets=whole.resets,
        dropped_samples=whole.dropped, covers=_covers(cls, dev_id, method, policy, st),
        flags=sorted(flags | set(job.flags) | set(node_flags)), unclamped=clamps,
    )


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
    if FLAG_COUNTER_INCONSISTENT in whole.flags:  # the counter lied: its power integration was used
        methods = {Method.POWER_INTEGRATION if m == Method.COUNTER else m for m in methods}
    if policy == "utilisation_weighted":
        job = utilisation_weighted(cls, whole, st, cols, by_t)
        return job, ({Method.TDP_ESTIMATE} if job.total_j is not None else methods)
    return (attribution.attribute_series(whole, shares, policy) if whole.intervals else whole), methods


def _add_traces(traces: _Traces, cls: str, intervals: list[Interval]) -> None:
    """The job's energy per UTC hour and its attributed power per class at each interval's end."""
    col = {"cpu": 1, "gpu": 2, "ram": 3}.get(cls)
    for iv in intervals:
        if iv.energy_j is None:
            continue
        for h, e in split_interval_by_hour(iv.t0, iv.t1, iv.energy_j).items():
            traces.hourly[h] = traces.hourly.get(h, 0.0) + e
        if iv.duration_s > 0:
            row = traces.power.setdefault(iv.t1, [iv.t1, None, None, None])
            if col:
                row[col] = (row[col] or 0.0) + iv.energy_j / iv.duration_s


def _index(st: Optional[DeviceStatic]) -> Optional[int]:
    """The device's number from its inventory (a GPU's minor number), if the reader gave one."""
    v = (st.extra or {}).get("minor") if st else None
    return v if isinstance(v, int) else None


def _device_key(item: tuple[str, DeviceSeries], static_by_id: dict[str, DeviceStatic]) -> tuple[Any, ...]:
    """Numeric device order (:func:`slurm_energy.natsort.device_sort_key`) for (device_id, samples)."""
    dev_id, samples = item
    return device_sort_key(samples[-1][1].device_class, dev_id, _index(static_by_id.get(dev_id)))


def _windows(series: list[phases.DeviceSeries], marks: Optional[Marks], start: float, end: float,
             interval_s: float) -> tuple[list[WindowEnergy], list[str]]:
    """The marked phases' windows and the marks' flags; a failure here costs the phases (flagged
    ``phases_not_computed``), never the node's summary."""
    if not marks:
        return [], []
    try:
        return phases.node_windows(series, marks, start, end, interval_s), list(marks.flags)
    except Exception as e:  # noqa: BLE001 - user data must not lose the record
        return [], list(marks.flags) + [f"phases_not_computed:{type(e).__name__}"]


#: Flags saying a device is a share of a card that the reader measured whole: a MIG slice (NVML),
#: an AMD compute partition or an Intel tile (hwmon); the card's energy x fraction is the device's.
SHARE_FLAGS = ("mig_fraction:", "partition_fraction:", "tile_fraction:")


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


def _clamp_flags(clamps: dict[str, float]) -> set[str]:
    """Flags for the ratios that were clamped (keys of ``clamps``: ``*_util``, ``*_share``, ``coverage``)."""
    out = set()
    for k in clamps:
        out.add(attribution.FLAG_COVERAGE_CLAMPED if k == "coverage" else
                attribution.FLAG_SHARE_CLAMPED if k.endswith("_share") else attribution.FLAG_UTIL_CLAMPED)
    return out


def _covers(cls: str, dev_id: str, method: Method, policy: str, st: Optional[DeviceStatic]) -> str:
    share = {"cpu": "job share by cgroup CPU time / node busy CPU time",
             "ram": "job share by job memory / node used memory",
             "gpu": "GPU allocated to the job (or share by per-process utilisation)"}.get(cls, "")
    if policy == "exclusive_whole_node":
        share = "whole device charged to the job (exclusive_whole_node)"
    what = dev_id if not st or not st.model else f"{dev_id} ({st.model})"
    return f"{what}; {method.value}; {share}"
