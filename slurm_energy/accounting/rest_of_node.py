"""The rest of the node: what the node meter measured beyond the components measured on it, and
the job's share of it (pure; docs/NODE_METER.md).

Per meter interval [m_k, m_k+1] clipped to the job's span on the node:

* metered_j = the meter's energy (trapezoid of its power readings, or its counter's delta);
* components_j = the measured components' whole-device energy in the same interval (CPU packages,
  DRAM, GPUs in the node's sample file: each sample interval's energy prorated by its overlap);
* rest_j = metered_j - components_j, never negative. Where components_j exceeds the meter by more
  than :data:`ABOVE_METER_TOLERANCE` the meter is not believed in that interval
  (``components_above_meter``): no rest is charged there and the interval counts as not metered.
  An interval without a valid meter reading, or with a component unmeasured, is not metered.

The job's share of the node's rest is set by ``node_meter.rest_of_node``:

* ``allocation`` (default): the mean of the job's fractions of the node's CPUs, GPUs (where the
  node's GPU count is known) and memory (where the request and the node's memory are known);
* ``component_energy``: the job's share of the node's measured component energy (sum of the job's
  shares over the sum of the whole devices').
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from slurm_energy.accounting.integrate import SeriesEnergy, counter_series, device_series, power_series
from slurm_energy.core import REST_ESTIMATED, REST_METERED, Method, Reading

#: components above the meter by more than this fraction of the meter (its accuracy, a few %; DCMI
#: readings are whole watts) make the interval's meter reading not believed
ABOVE_METER_TOLERANCE = 0.05
RULES = ("allocation", "component_energy")


@dataclass
class NodeRest:
    """The node's rest over the job's span: J; ``metered_s`` the seconds with a believed meter
    reading and every component measured; ``flags`` why some were not."""

    metered_j: float = 0.0
    components_j: float = 0.0
    rest_j: float = 0.0
    metered_s: float = 0.0
    span_s: float = 0.0
    flags: list[str] = field(default_factory=list)


def meter_series(rows: Sequence[tuple[float, Reading]], max_gap_s: float | None = None) -> tuple[SeriesEnergy, Method]:
    """The meter's energy per interval between its rows ``(t, reading)`` (time order), and how it
    was read: the counter's deltas where every row is a counter (pm_counters, Slurm), else the
    trapezoid of the power readings; an ``unavailable`` row leaves its intervals unmeasured. Power
    intervals longer than ``max_gap_s`` (the meter process was not running: no job on the node)
    are unmeasured too, flagged ``meter_gap``: two readings hours apart measure nothing between
    (a counter's delta does, and is kept)."""
    t = np.array([r[0] for r in rows], dtype=np.float64)
    if len(rows) < 2:
        return SeriesEnergy(), Method.UNAVAILABLE
    readings = [r[1] for r in rows]
    if all(Method.parse(r.method) in (Method.COUNTER, Method.UNAVAILABLE) and
           (r.energy_uj is not None or Method.parse(r.method) == Method.UNAVAILABLE) for r in readings) and \
            any(r.energy_uj is not None for r in readings):
        vals = [r.energy_uj if Method.parse(r.method) == Method.COUNTER else None for r in readings]
        return counter_series(t, vals, None), Method.COUNTER
    vals_w = [r.power_w if Method.parse(r.method) != Method.UNAVAILABLE else None for r in readings]
    s = power_series(t, vals_w)
    if max_gap_s is not None:
        gap = s.dt > max_gap_s
        s.energy = np.where(gap, np.nan, s.energy)
        s.flag("meter_gap", gap)
    return s, Method.POWER_INTEGRATION


def component_series(table: Any) -> list[SeriesEnergy]:
    """Each measured component's whole-device energy per sample interval (the node's sample table)."""
    t = np.array(table.t, dtype=np.float64)
    return [device_series(t, dc) for dc in table.devices.values()]


def _prorated(s: SeriesEnergy, a: float, b: float) -> float | None:
    """``s``'s energy inside [a, b], each interval's prorated by its overlap; None when an
    overlapping interval is unmeasured or nothing of ``s`` covers [a, b]."""
    if not len(s.t0):
        return None
    lo = np.maximum(s.t0, a)
    hi = np.minimum(s.t1, b)
    ov = np.clip(hi - lo, 0.0, None)
    hit = ov > 0
    if not hit.any() or float(ov[hit].sum()) < (b - a) * 0.999:
        return None
    if np.isnan(s.energy[hit]).any():
        return None
    frac = ov[hit] / np.maximum(s.dt[hit], 1e-9)
    return float((s.energy[hit] * frac).sum())


def node_rest(meter: SeriesEnergy, components: Sequence[SeriesEnergy], t0: float, t1: float) -> NodeRest:
    """The node's rest over [t0, t1] (module docstring)."""
    out = NodeRest(span_s=max(0.0, t1 - t0))
    flags: set[str] = set()
    for a0, b0, e in zip(meter.t0.tolist(), meter.t1.tolist(), meter.energy.tolist(), strict=True):
        a, b = max(a0, t0), min(b0, t1)
        if b <= a:
            continue
        if e != e:  # NaN: no believed meter reading at an end of this interval
            flags.add("meter_unavailable")
            continue
        m = e * (b - a) / (b0 - a0)
        parts = [_prorated(c, a, b) for c in components]
        if any(p is None for p in parts):
            flags.add("component_unmeasured")
            continue
        c = sum(p for p in parts if p is not None)
        if c > m * (1.0 + ABOVE_METER_TOLERANCE):
            flags.add("components_above_meter")
            continue
        out.metered_j += m
        out.components_j += c
        out.rest_j += max(0.0, m - c)
        out.metered_s += b - a
    if out.metered_s < out.span_s * 0.999:
        flags.add("rest_partly_metered")
    out.flags = sorted(flags)
    return out


def allocation_share(cpus_alloc: int | None, cpus_node: int | None, gpus_alloc: int | None = None,
                     gpus_node: int | None = None, mem_alloc_bytes: float | None = None,
                     mem_node_bytes: float | None = None) -> tuple[float | None, str]:
    """The job's share of the node by allocation: the mean of its fractions of the node's CPUs,
    GPUs and memory, each where both numbers are known (GPUs only on a node that has some); and a
    text saying which. ``(None, why)`` where not even the CPUs are known."""
    parts: list[tuple[str, float]] = []
    if cpus_alloc and cpus_node:
        parts.append((f"CPUs {cpus_alloc}/{cpus_node}", min(1.0, cpus_alloc / cpus_node)))
    if gpus_node:
        parts.append((f"GPUs {gpus_alloc or 0}/{gpus_node}", min(1.0, (gpus_alloc or 0) / gpus_node)))
    if mem_alloc_bytes and mem_node_bytes:
        parts.append((f"memory {mem_alloc_bytes / 2**30:.1f}/{mem_node_bytes / 2**30:.1f} GiB",
                      min(1.0, mem_alloc_bytes / mem_node_bytes)))
    if not parts or not parts[0][0].startswith("CPUs"):
        return None, "the job's allocated CPUs or the node's CPU count are unknown"
    return sum(p for _, p in parts) / len(parts), "mean of " + ", ".join(n for n, _ in parts)


def component_share(job_j: float | None, node_components_j: float | None) -> tuple[float | None, str]:
    """The job's share of the node's measured component energy over its span."""
    if job_j is None or not node_components_j:
        return None, "the job's or the node's component energy is unknown"
    return min(1.0, job_j / node_components_j), f"component energy {job_j:.0f}/{node_components_j:.0f} J"


def _spread_hourly(hourly: dict[str, float], t0: float, t1: float, energy_j: float) -> None:
    """Add ``energy_j`` to ``hourly`` (UTC hour -> J) uniformly over [t0, t1]."""
    from slurm_energy.carbon.hourly import split_interval_by_hour

    for k, v in split_interval_by_hour(t0, max(t0, t1), energy_j).items():
        hourly[k] = hourly.get(k, 0.0) + v


def rest_for_node(summary: Any, table: Any, meter_rows: Sequence[tuple[float, Reading]] | None, source: str,
                  cfg: Any, *, cpus_alloc: int | None, mem_alloc_bytes: float | None = None,
                  gpus_node: int | None = None, note: str = "") -> Any:
    """The node's :class:`~slurm_energy.model.RestOfNode` for the job, its energy added to the
    summary's hourly energy. ``meter_rows``: the node meter's rows over the job's span (None or
    empty: no meter); ``source``: its ``node_meter.source``; ``cfg``: site.yaml's ``node_meter``;
    ``note``: why there are no rows (said in ``covers`` where the rest is not metered)."""
    from slurm_energy.model import RestOfNode

    t0, t1 = summary.start_time, summary.end_time
    span = max(0.0, t1 - t0)
    if not meter_rows:
        if cfg.estimate_w:
            e = cfg.estimate_w * span
            cpus_node = max((n for n in table.node.get("ncpu", []) if n), default=None)
            share, basis = allocation_share(cpus_alloc, cpus_node, None, gpus_node, mem_alloc_bytes,
                                            _mem_node(table))
            if share is None:
                return RestOfNode(covers="rest of node: not metered (" + basis + ")", flags=["share_unknown"])
            _spread_hourly(summary.hourly_energy_j, t0, t1, e * share)
            return RestOfNode(method=f"{REST_ESTIMATED}site_w", energy_j=e * share, node_rest_j=e, share=share,
                              rule="allocation", share_basis=basis, metered_s=0.0,
                              covers=f"rest of node: ESTIMATE, node_meter.estimate_w = {cfg.estimate_w:g} W per node "
                                     "(site.yaml), not measured")
        return RestOfNode(covers="rest of node: not metered" + (f" ({note})" if note else ""))
    meter, how = meter_series(list(meter_rows), max_gap_s=3 * float(cfg.interval_s))
    rest = node_rest(meter, component_series(table), t0, t1)
    flags = list(rest.flags)
    if any(Method.parse(d.method) == Method.TDP_ESTIMATE for d in summary.devices):
        flags.append("components_estimated")  # the rest is the meter minus a model: as good as the model
    gpus_job = sum(1 for d in summary.devices if d.device_class == "gpu")
    if gpus_node is not None and gpus_job < gpus_node:
        # GPUs of other jobs draw inside the meter but are not in this job's samples: the rest
        # would hold them; not metered rather than charged (the node meter process reads no GPU)
        return RestOfNode(method=f"{REST_METERED}{source}", meter_method=how, rule=cfg.rest_of_node,
                          flags=sorted({*flags, "other_gpus_unmeasured"}),
                          covers=f"rest of node: not metered (the node has {gpus_node} GPUs, the job's samples "
                                 f"measure {gpus_job}: the others' energy is inside the meter)")
    if cfg.rest_of_node == "component_energy":
        job_j = sum(d.energy_j for d in summary.devices if d.energy_j is not None)
        node_j = sum(d.device_energy_j for d in summary.devices if d.device_energy_j is not None)
        share, basis = component_share(job_j, node_j)
    else:
        cpus_node = max((n for n in table.node.get("ncpu", []) if n), default=None)
        share, basis = allocation_share(cpus_alloc, cpus_node, gpus_job, gpus_node, mem_alloc_bytes, _mem_node(table))
    method = f"{REST_METERED}{source}"
    covers = (f"rest of node: node meter ({source}) minus the measured components (CPU packages, DRAM, GPUs), "
              f"{rest.metered_s:.0f} of {rest.span_s:.0f} s metered; job share by {cfg.rest_of_node} ({basis})")
    if rest.metered_s <= 0 or share is None:
        if share is None:
            flags.append("share_unknown")
        return RestOfNode(method=method, meter_method=how, node_metered_j=None, flags=sorted(set(flags)),
                          rule=cfg.rest_of_node, share_basis=basis,
                          covers="rest of node: not metered (" + (", ".join(flags) or "no meter interval") + ")")
    job = rest.rest_j * share
    _spread_hourly(summary.hourly_energy_j, t0, t1, job)
    return RestOfNode(method=method, meter_method=how, energy_j=job, node_metered_j=rest.metered_j,
                      node_components_j=rest.components_j, node_rest_j=rest.rest_j, share=share,
                      rule=cfg.rest_of_node, share_basis=basis, metered_s=rest.metered_s, flags=flags, covers=covers)


def _mem_node(table: Any) -> float | None:
    return max((m for m in table.node.get("mem_total_bytes", []) if m), default=None)
