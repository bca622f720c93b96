"""Bounded power traces for the report's plot (pure; numpy only).

A record's size must not grow with the job's samples: a day at 5 s is 17,280 sample rows per node,
a week 120,960. What the record keeps of the job's power over time is therefore bounded:

* each node's ``power_trace`` (:func:`bucket_trace`): at most :data:`TRACE_POINTS` rows
  ``[t, cpu_w, gpu_w, ram_w]``, each the time-weighted mean attributed power of the sample rows in
  one equal-time bucket of the node's span (a trace with fewer rows is kept as it is). A bucket's
  mean x its measured seconds is the energy of its rows, so the drawn area is the job's energy;
* a job of several nodes: one :class:`~slurm_energy.model.JobTrace` (:func:`job_trace`) on the job's
  own grid of :data:`TRACE_POINTS` buckets -- the nodes' power summed per class, and the lowest and
  highest node's total power per bucket (the band the report draws) -- and the own traces of at
  most :data:`KEPT_NODE_TRACES` chosen nodes (:func:`chosen_nodes`); the other nodes' traces are
  left out of the merged record (each node's record in the results directory keeps its own).

Energies never come from these traces: they are summed from each device's intervals
(:mod:`slurm_energy.accounting.summary`). The traces are for drawing.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from slurm_energy.model import JobTrace, NodeSummary

#: Most rows of one node's power trace (24 h: one row per 6 min; 7 days: per 42 min).
TRACE_POINTS = 240
#: Most nodes of a multi-node job whose own trace the merged record keeps (the report draws them).
KEPT_NODE_TRACES = 4
#: Classes of a trace row after its time, in order.
TRACE_CLASSES = ("cpu", "gpu", "ram")


def _nan_rows(trace: Sequence[Sequence[float | None]]) -> tuple[np.ndarray, np.ndarray]:
    """A trace's times (s) and its (rows, 3) watts, NaN where ``None`` (or the row is short)."""
    t = np.array([r[0] for r in trace], dtype=np.float64)
    w = np.full((len(trace), 3), np.nan)
    for k, r in enumerate(trace):
        for c in range(3):
            v = r[c + 1] if len(r) > c + 1 else None
            if v is not None:
                w[k, c] = v
    return t, w


def _rows(t: Sequence[float] | np.ndarray, w: np.ndarray) -> list[list[float | None]]:
    """``[t, cpu_w, gpu_w, ram_w]`` rows, NaN back to ``None`` (unmeasured is not 0 W)."""
    cols = [[None if x != x else x for x in w[:, c].tolist()] for c in range(3)]
    return [[float(t[k]), cols[0][k], cols[1][k], cols[2][k]] for k in range(len(t))]


def bucket_means(t: np.ndarray, dt: np.ndarray, w: np.ndarray, lo: float, hi: float,
                 n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Time-weighted mean power per class in ``n`` equal buckets of ``[lo, hi]``.

    Args:
        t: row times, s (a row is the interval ending at it). dt: each row's seconds (weights).
        w: (rows, 3) power, W; NaN = no value of that class.
        lo, hi: the span cut into buckets, epoch s; a row at ``t`` goes to the bucket its
            interval ends in, ``(lo + k w, lo + (k + 1) w]`` (clipped to the first and last).

    Returns:
        (bucket index per row, (n, 3) mean W -- NaN for a bucket/class with no value --, each
        bucket's last row time, NaN for an empty bucket). The mean is sum(w x dt) / sum(dt) over
        the rows with a value: the bucket's energy over its measured seconds.
    """
    width = (hi - lo) / n if hi > lo else 1.0
    # a row ends its interval: one ending on a bucket's end is that bucket's
    b = np.clip(np.ceil((t - lo) / width).astype(np.int64) - 1, 0, n - 1)
    mean = np.full((n, 3), np.nan)
    for c in range(3):
        ok = ~np.isnan(w[:, c]) & (dt > 0)
        num = np.bincount(b[ok], weights=w[ok, c] * dt[ok], minlength=n)
        den = np.bincount(b[ok], weights=dt[ok], minlength=n)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean[:, c] = np.where(den > 0, num / den, np.nan)
    last = np.full(n, np.nan)
    np.fmax.at(last, b, t)
    return b, mean, last


def bucket_trace(t: Sequence[float] | np.ndarray, dt: Sequence[float] | np.ndarray, w: np.ndarray,
                 max_points: int = TRACE_POINTS) -> list[list[float | None]]:
    """A node's power trace, at most ``max_points`` rows ``[t, cpu_w, gpu_w, ram_w]``.

    Args:
        t: the rows' times (interval ends), epoch s, ascending. dt: each row's interval, s.
        w: (rows, 3) attributed power per class, W, NaN = no device of the class measured.

    Returns:
        The rows as they are when there are at most ``max_points``; else one row per non-empty
        equal-time bucket of ``[t[0] - dt[0], t[-1]]``: its last row's time and the time-weighted
        mean power of each class (:func:`bucket_means`), ``None`` where the bucket has none.
    """
    tt, dd = np.asarray(t, dtype=np.float64), np.asarray(dt, dtype=np.float64)
    if len(tt) <= max_points:
        return _rows(tt, w)
    _, mean, last = bucket_means(tt, dd, w, float(tt[0] - dd[0]), float(tt[-1]), max_points)
    keep = ~np.isnan(last)
    return _rows(last[keep], mean[keep])


def node_total_j(ns: NodeSummary) -> float | None:
    """The node's job share summed over its devices, J (None: nothing measured)."""
    vals = [d.energy_j for d in ns.devices if d.energy_j is not None]
    return sum(vals) if vals else None


def chosen_nodes(nodes: Sequence[NodeSummary], k: int = KEPT_NODE_TRACES) -> list[str]:
    """The names of at most ``k`` nodes (with a trace) whose own trace a many-node record keeps: the
    nodes of highest and lowest energy (:func:`node_total_j`), the median one, and the first in
    name order -- the band's edges, its middle, and a fixed reference. Every node when there are at
    most ``k``. In ``nodes``' order."""
    traced = [ns for ns in nodes if ns.power_trace]
    if len(traced) <= k:
        return [ns.node for ns in traced]
    ranked = sorted(traced, key=lambda ns: (node_total_j(ns) is None, node_total_j(ns) or 0.0))
    measured = [ns for ns in ranked if node_total_j(ns) is not None] or ranked
    picks = [measured[-1].node, measured[0].node, measured[len(measured) // 2].node, traced[0].node]
    for ns in traced:  # fill up to k in name order where picks coincide
        picks.append(ns.node)
    want = list(dict.fromkeys(picks))[:k]
    return [ns.node for ns in traced if ns.node in want]


def job_trace(nodes: Sequence[NodeSummary], start: float, end: float, n: int = TRACE_POINTS) -> JobTrace | None:
    """The whole job's power over ``n`` equal buckets of ``[start, end]`` from its nodes' traces.

    Each node's rows whose middle (a row is the node's mean over the time since its previous row;
    the first row's step is the median one) falls in a bucket give its time-weighted mean power per
    class there; summed over nodes per class (a class
    no node measured in the bucket: ``None``); each node's total (its classes with a value summed)
    gives the bucket's lowest and highest node (the band). ``None`` when no node has a trace.
    """
    traced = [ns for ns in nodes if ns.power_trace]
    if not traced or n < 1:
        return None
    total = np.zeros((n, 3))
    has = np.zeros((n, 3), dtype=bool)
    lo_w = np.full(n, np.inf)
    hi_w = np.full(n, -np.inf)
    count = np.zeros(n, dtype=np.int64)
    for ns in traced:
        t, w = _nan_rows(ns.power_trace)
        dt = np.diff(t, prepend=np.nan)
        dt[0] = float(np.median(dt[1:])) if len(t) > 1 else 1.0
        # a row is its node's mean over (t - dt, t]: placed by its middle, so a node whose bucket
        # ends a moment after the job's grid line (its samples' jitter) still lands in the same bucket
        _, mean, _ = bucket_means(t - dt / 2, dt, w, start, end, n)
        got = ~np.isnan(mean)
        total += np.where(got, mean, 0.0)
        has |= got
        node_w = np.where(got, mean, 0.0).sum(axis=1)
        any_c = got.any(axis=1)
        lo_w = np.where(any_c, np.minimum(lo_w, node_w), lo_w)
        hi_w = np.where(any_c, np.maximum(hi_w, node_w), hi_w)
        count += any_c
    keep = count > 0
    width = (end - start) / n if end > start else 0.0
    t_out = (start + width * (np.arange(n) + 1))[keep]  # each bucket's end
    sums = np.where(has, total, np.nan)[keep]
    return JobTrace(
        t=[float(x) for x in t_out], bucket_s=width,
        sum_w=[r[1:] for r in _rows(t_out, sums)],
        node_min_w=[float(x) for x in lo_w[keep]], node_max_w=[float(x) for x in hi_w[keep]],
        nodes_n=[int(x) for x in count[keep]], nodes=len(traced),
    )


def bound_traces(nodes: list[NodeSummary], start: float, end: float) -> JobTrace | None:
    """For a merged record of several nodes: the job's trace (:func:`job_trace`), and every node's
    own trace but the :func:`chosen_nodes`' emptied (in place; node records keep theirs). The
    chosen names go to ``shown_nodes``."""
    jt = job_trace(nodes, start, end)
    if jt is None:
        return None
    keep = set(chosen_nodes(nodes))
    for ns in nodes:
        if ns.node not in keep:
            ns.power_trace = []
    jt.shown_nodes = [ns.node for ns in nodes if ns.node in keep]
    return jt
