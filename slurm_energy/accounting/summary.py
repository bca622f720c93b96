"""Sample rows -> one node's :class:`~slurm_energy.model.NodeSummary` (pure; no files, no Slurm).

For every device in the sample rows:

1. its whole energy per interval, by its readings' method (:func:`integrate.series_from_readings`);
2. the job's share per interval (:mod:`attribution`): CPU by the job's CPU-time delta / the node's
   busy CPU-time delta; RAM by the job's memory / the node's used memory; a GPU allocated to the job
   is the job's (share 1) unless NVML per-process utilisation says it is shared; a MIG slice, an AMD
   compute partition or an Intel tile gets the card's energy x its fraction (flag
   ``mig_fraction:<f>`` / ``partition_fraction:<f>`` / ``tile_fraction:<f>`` on its readings);
3. job energy = sum_k energy_k x share_k; device energy = sum_k energy_k; coverage = seconds with a
   job energy / the node's elapsed time.

Per-class statistics (mean and variance of attributed power and of utilisation, time-weighted),
a power trace for the report and the job's energy per UTC hour (for hourly carbon intensity) come
from the same intervals.
"""

from __future__ import annotations

from typing import Iterable, Optional

from slurm_energy.accounting import attribution, phases
from slurm_energy.accounting.integrate import FLAG_COUNTER_INCONSISTENT, Interval, series_from_readings
from slurm_energy.accounting.phases import Marks
from slurm_energy.carbon.hourly import split_interval_by_hour
from slurm_energy.model import DeviceEnergy, Method, NodeSummary, Status, WindowEnergy, worst_method
from slurm_energy.natsort import device_sort_key
from slurm_energy.sampling.readers.base import DeviceStatic, Reading

_METHOD_OF = {"counter": Method.COUNTER, "power_integration": Method.POWER_INTEGRATION,
              "tdp_estimate": Method.TDP_ESTIMATE, "unavailable": Method.UNAVAILABLE}


def _job_cpu_at(rows: list[dict]) -> list[Optional[float]]:
    """Cumulative job CPU time per row: 0 before the job is first seen (it had just started), but
    None everywhere if it was never seen at all;
    carried forward once the job is known to have ended (a ``cgroup_gone`` or ``final`` row);
    None where the job was running but nobody looked (the sampler died): the job's share of such
    an interval is unknown, never 0."""
    out: list[Optional[float]] = []
    last: Optional[float] = None
    seen = ended = False
    for r in rows:
        v = (r.get("job") or {}).get("cpu_time_s")
        if v is not None and (seen or v > 0):  # a cgroup read at 0 ns: nothing of the job ran yet
            seen = True
            last = v if last is None else max(last, v)
            out.append(last)
        elif not seen:
            out.append(0.0)
        else:
            out.append(last if ended else None)
        if r.get("kind") in ("cgroup_gone", "final"):
            ended = True
    if not seen:  # the job ended before anyone saw it (shorter than the first poll): unknown, not 0
        return [None] * len(rows)
    return out


def _weighted_stats(values: Iterable[tuple[float, float]]) -> tuple[Optional[float], Optional[float]]:
    """Time-weighted mean and variance of [(value, weight_s)]; (None, None) if no weight."""
    vals = [(v, w) for v, w in values if v is not None and w > 0]
    wsum = sum(w for _, w in vals)
    if wsum <= 0:
        return None, None
    mean = sum(v * w for v, w in vals) / wsum
    var = sum(w * (v - mean) ** 2 for v, w in vals) / wsum
    return mean, var


def summarise_node(rows: list[dict], *, job_id: str, node: str, start_time: float, end_time: float,
                   statics: list[DeviceStatic] = (), cpus_alloc: Optional[int] = None, policy: str = "shared",
                   interval_s: float = 5.0, status: Status = Status.COMPLETE,
                   errors: Optional[list[str]] = None, span_known: bool = True,
                   marks: Optional[Marks] = None) -> NodeSummary:
    """Build a node summary from sample rows (see :mod:`slurm_energy.sampling.samplefile`).

    Args:
        rows: sample rows in time order (Prolog start, samples, final, Epilog reading).
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
    Returns:
        NodeSummary; a device never read gets method ``unavailable`` and energy None.
    Raises:
        ValueError: unknown policy.
    """
    if policy not in attribution.POLICIES:
        raise ValueError(f"attribution.policy: {policy!r} is not one of {attribution.POLICIES}")
    rows = sorted(rows, key=lambda r: r["t"])
    elapsed = max(0.0, end_time - start_time)
    node_flags: list[str] = []
    if policy == "exclusive_whole_node":
        ncpu = next(((r.get("node") or {}).get("ncpu") for r in rows if (r.get("node") or {}).get("ncpu")), None)
        if not (cpus_alloc and ncpu and cpus_alloc >= ncpu):
            policy = "shared"  # only a job holding every CPU of the node is charged the whole node
            node_flags.append("not_exclusive:shared_policy_used")
    times = [r["t"] for r in rows]
    job_cpu = _job_cpu_at(rows)
    node_busy = [(r.get("node") or {}).get("cpu_busy_s") for r in rows]
    node_mem = [(r.get("node") or {}).get("mem_used_bytes") for r in rows]
    job_mem = [(r.get("job") or {}).get("mem_bytes") for r in rows]
    job_pids: set[int] = set()
    for r in rows:
        job_pids.update((r.get("job") or {}).get("pids") or [])
    row_index = {t: i for i, t in enumerate(times)}
    static_by_id = {s.device_id: s for s in statics}

    # device_id -> [(t, Reading)]
    per_device: dict[str, list[tuple[float, Reading]]] = {}
    for r in rows:
        for d in r.get("readings") or []:
            rd = Reading.from_dict(d)
            per_device.setdefault(rd.device_id, []).append((r["t"], rd))

    for dev_id, samples in per_device.items():
        _fill_tdp_cpu_power(samples, rows, row_index, static_by_id.get(dev_id))

    devices: list[DeviceEnergy] = []
    series: list[phases.DeviceSeries] = []  # attributed intervals per device, for phase windows
    trace: dict[float, list[Optional[float]]] = {}
    hourly: dict[str, float] = {}
    cls_col = {"cpu": 1, "gpu": 2, "ram": 3}
    for dev_id, samples in sorted(per_device.items(), key=lambda kv: _device_key(kv, static_by_id)):
        cls = samples[-1][1].device_class
        whole = series_from_readings(samples)
        by_t = dict(samples)  # t -> Reading, O(1) look-ups per interval
        shares: list[Optional[float]] = []
        flags = set(whole.flags)
        clamps: dict[str, float] = {}
        for iv in whole.intervals:
            i0, i1 = row_index.get(iv.t0), row_index.get(iv.t1)
            shares.append(_share(cls, i0, i1, job_cpu, node_busy, job_mem, node_mem, job_pids,
                                 by_t.get(iv.t1), flags, clamps))
        if cls in ("cpu", "ram") and all(v is None for v in job_cpu):
            flags.add("job_never_observed")
        kind, mig = _share_fraction(samples)
        if mig is not None:
            shares = [None if s is None else s * mig for s in shares]
            flags.add(f"{kind}{mig:.4g}")
        st = static_by_id.get(dev_id)
        methods = {_METHOD_OF.get(rd.method, Method.UNAVAILABLE) for _, rd in samples}
        if FLAG_COUNTER_INCONSISTENT in whole.flags:  # the counter lied: its power integration was used
            methods = {Method.POWER_INTEGRATION if m == Method.COUNTER else m for m in methods}
        if policy == "utilisation_weighted":
            job = _utilisation_weighted(cls, whole, st, rows, row_index, job_cpu, job_mem, samples, cpus_alloc)
            methods = {Method.TDP_ESTIMATE} if job.total_j is not None else methods
        else:
            job = attribution.attribute_series(whole, shares, policy) if whole.intervals else whole
        job_total = job.total_j
        method = worst_method(methods) if job_total is not None else Method.UNAVAILABLE
        known = methods - {Method.UNAVAILABLE}
        if job_total is None and elapsed == 0 and known and span_known:  # zero-length job: 0 J, no division by 0
            job_total, method = 0.0, worst_method(known)
        series.append((cls, method, [(iv.t0, iv.t1, iv.energy_j) for iv in job.intervals]))
        # statistics over intervals: attributed power and utilisation
        p_stats = _weighted_stats((iv.energy_j / iv.duration_s, iv.duration_s) for iv in job.intervals
                                  if iv.energy_j is not None and iv.duration_s > 0)
        utils = _utilisation(cls, whole.intervals, row_index, job_cpu, job_mem, rows, by_t, cpus_alloc, clamps)
        u_stats = _weighted_stats((u, iv.duration_s) for u, iv in zip(utils, whole.intervals))
        for iv in job.intervals:
            if iv.energy_j is None:
                continue
            for h, e in split_interval_by_hour(iv.t0, iv.t1, iv.energy_j).items():
                hourly[h] = hourly.get(h, 0.0) + e
            if iv.duration_s > 0:
                row = trace.setdefault(iv.t1, [iv.t1, None, None, None])
                c = cls_col.get(cls)
                if c:
                    row[c] = (row[c] or 0.0) + iv.energy_j / iv.duration_s
        coverage = 1.0 if elapsed == 0 else attribution.clamp_ratio(job.measured_s / elapsed, "coverage", clamps)
        flags |= _clamp_flags(clamps)
        devices.append(DeviceEnergy(
            device_class=cls, device_id=dev_id, node=node, model=st.model if st else "",
            count=st.count if st else 1, index=_index(st), method=method, energy_j=job_total,
            device_energy_j=whole.total_j, rated_power_w=st.rated_power_w if st else None,
            mean_power_w=p_stats[0], var_power_w2=p_stats[1], mean_util=u_stats[0], var_util=u_stats[1],
            duration_s=elapsed, coverage=coverage, wraps=whole.wraps, resets=whole.resets,
            dropped_samples=whole.dropped, covers=_covers(cls, dev_id, method, policy, st),
            flags=sorted(flags | set(job.flags) | set(node_flags)), unclamped=clamps,
        ))
    windows, marks_flags = _windows(series, marks, start_time, end_time, interval_s)
    cpu_times = [v for v in job_cpu if v is not None]
    mems = [m for m in job_mem if m is not None]
    max_mems = [(r.get("job") or {}).get("max_mem_bytes") for r in rows]
    max_mems = [m for m in max_mems if m is not None]
    src = next(((r.get("job") or {}).get("source") for r in reversed(rows) if (r.get("job") or {}).get("source")), "")
    return NodeSummary(
        node=node, job_id=job_id, start_time=start_time, end_time=end_time,
        cpu_time_s=max(cpu_times) if src and cpu_times else None,
        max_mem_bytes=max(max_mems + mems) if (max_mems or mems) else None,
        mean_mem_bytes=sum(mems) / len(mems) if mems else None,
        n_samples=len(rows), interval_s=interval_s, cpu_time_source=src, devices=devices,
        power_trace=[trace[t] for t in sorted(trace)], hourly_energy_j=hourly,
        windows=windows, marks_flags=marks_flags,
        status=status, errors=list(errors or []),
    )


def _index(st: Optional[DeviceStatic]) -> Optional[int]:
    """The device's number from its inventory (a GPU's minor number), if the reader gave one."""
    v = (st.extra or {}).get("minor") if st else None
    return v if isinstance(v, int) else None


def _device_key(item, static_by_id) -> tuple:
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


def _fill_tdp_cpu_power(samples, rows, row_index, st: Optional[DeviceStatic]) -> None:
    """A modelled CPU reading without its mean power (the first read of a reader in a new process:
    the Prolog's, the sampler's first, the Epilog's) gets it from the rows' node counters:
    TDP_total x busy CPU-time delta / all CPU-time delta since the device's previous reading."""
    if not st or not st.rated_power_w:
        return
    for k in range(1, len(samples)):
        t, rd = samples[k]
        if rd.device_class != "cpu" or rd.method != "tdp_estimate" or rd.mean_power_w is not None:
            continue
        a = (rows[row_index[samples[k - 1][0]]].get("node") or {})
        b = (rows[row_index[t]].get("node") or {})
        try:
            d_total = b["cpu_total_s"] - a["cpu_total_s"]
            d_busy = b["cpu_busy_s"] - a["cpu_busy_s"]
        except (KeyError, TypeError):
            continue
        if d_total > 0:
            raw = d_busy / d_total
            busy = attribution.clamp_ratio(raw)
            rd.mean_power_w = st.rated_power_w * busy
            rd.flags = list(rd.flags or []) + ["util_from_node_counters"]
            if busy != raw:  # clamped: flagged, the raw node busy fraction kept in the flag
                rd.flags += [attribution.FLAG_UTIL_CLAMPED, f"node_busy_raw:{raw:.4g}"]


def _reading_at(samples, t: float) -> Optional[Reading]:
    """The device's reading at sample time ``t`` (``samples`` is a {t: Reading} dict)."""
    return samples.get(t)


#: Flags saying a device is a share of a card that the reader measured whole: a MIG slice (NVML),
#: an AMD compute partition or an Intel tile (hwmon); the card's energy x fraction is the device's.
SHARE_FLAGS = ("mig_fraction:", "partition_fraction:", "tile_fraction:")


def _share_fraction(samples: list[tuple[float, Reading]]) -> tuple[str, Optional[float]]:
    """(flag prefix, fraction) of the first share flag on the device's readings, else ("", None)."""
    for _, rd in samples:
        for f in rd.flags or []:
            if isinstance(f, str) and f.startswith(SHARE_FLAGS):
                kind, _, v = f.partition(":")
                try:
                    return kind + ":", float(v)
                except ValueError:
                    return "", None
    return "", None


def _clamp_flags(clamps: dict) -> set[str]:
    """Flags for the ratios that were clamped (keys of ``clamps``: ``*_util``, ``*_share``, ``coverage``)."""
    out = set()
    for k in clamps:
        out.add(attribution.FLAG_COVERAGE_CLAMPED if k == "coverage" else
                attribution.FLAG_SHARE_CLAMPED if k.endswith("_share") else attribution.FLAG_UTIL_CLAMPED)
    return out


def _share(cls, i0, i1, job_cpu, node_busy, job_mem, node_mem, job_pids, reading, flags,
           clamps: Optional[dict] = None) -> Optional[float]:
    if i0 is None or i1 is None:
        return None
    if cls == "cpu":
        jc = None if job_cpu[i1] is None or job_cpu[i0] is None else job_cpu[i1] - job_cpu[i0]
        nb = None if node_busy[i1] is None or node_busy[i0] is None else node_busy[i1] - node_busy[i0]
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
            s = attribution.gpu_process_share(job_pids, {int(k): v for k, v in reading.proc_util.items()})
            if s is not None:
                flags.add("shared_gpu_by_process_util")
                return s
        return 1.0  # a GPU Slurm allocated to the job: the whole GPU is the job's
    return None


def _utilisation(cls, intervals: list[Interval], row_index, job_cpu, job_mem, rows, samples, cpus_alloc,
                 clamps: Optional[dict] = None):
    """The job's utilisation u in [0, 1] per interval (aligned with ``intervals``; None = unknown):
    CPU = job CPU-time delta / (interval x allocated CPUs); RAM = job memory / node memory;
    GPU = NVML utilisation of the device. Values outside [0, 1] (hyperthreads, accounting jitter)
    are clamped, the raw extreme kept in ``clamps`` as ``<class>_util``."""
    out: list[Optional[float]] = []
    for iv in intervals:
        i0, i1 = row_index.get(iv.t0), row_index.get(iv.t1)
        d = iv.duration_s
        u = None
        if i0 is not None and i1 is not None and d > 0:
            if cls == "cpu":
                n = cpus_alloc or (rows[i1].get("node") or {}).get("ncpu") or 1
                if job_cpu[i1] is not None and job_cpu[i0] is not None:
                    u = (job_cpu[i1] - job_cpu[i0]) / (d * n)
            elif cls == "ram":
                tot = (rows[i1].get("node") or {}).get("mem_total_bytes")
                if job_mem[i1] is not None and tot:
                    u = job_mem[i1] / tot
            else:
                rd = _reading_at(samples, iv.t1)
                if rd is not None and rd.util is not None:
                    u = rd.util
        out.append(attribution.clamp_ratio(u, f"{cls}_util", clamps))
    return out


def _utilisation_weighted(cls, whole, st, rows, row_index, job_cpu, job_mem, samples, cpus_alloc):
    """Policy ``utilisation_weighted``: per interval n x u x P x t with P the rated power (TDP) of
    the job's part of the device; needs the device's rated power, else every interval is dropped."""
    from slurm_energy.accounting.integrate import summarise_intervals

    ivs = []
    utils = _utilisation(cls, whole.intervals, row_index, job_cpu, job_mem, rows, dict(samples), cpus_alloc)
    for iv, u in zip(whole.intervals, utils):
        p = st.rated_power_w if st else None
        if cls == "cpu" and p is not None:
            ncpu = (rows[row_index[iv.t1]].get("node") or {}).get("ncpu") or 1
            p = p * min(1.0, (cpus_alloc or ncpu) / ncpu)  # rated power of the allocated CPUs
        if u is None or p is None:
            ivs.append(Interval(iv.t0, iv.t1, None, ["share_unknown"]))
        else:
            ivs.append(Interval(iv.t0, iv.t1, attribution.utilisation_weighted_j(1, u, p, iv.duration_s), []))
    return summarise_intervals(ivs)


def _covers(cls: str, dev_id: str, method: Method, policy: str, st: Optional[DeviceStatic]) -> str:
    share = {"cpu": "job share by cgroup CPU time / node busy CPU time",
             "ram": "job share by job memory / node used memory",
             "gpu": "GPU allocated to the job (or share by per-process utilisation)"}.get(cls, "")
    if policy == "exclusive_whole_node":
        share = "whole device charged to the job (exclusive_whole_node)"
    what = dev_id if not st or not st.model else f"{dev_id} ({st.model})"
    return f"{what}; {method.value}; {share}"
