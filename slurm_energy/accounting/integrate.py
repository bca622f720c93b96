"""Per-device sample series -> per-interval energies, with provenance (pure functions).

Input is one device's readings over time (see :mod:`slurm_energy.sampling.readers.base`); output
is a :class:`SeriesEnergy`: one :class:`Interval` per pair of consecutive sample times
``(t_{k-1}, t_k]``, each with its energy in J or ``None`` when that interval could not be measured.
Intervals are aligned with sample times so that a job's share in the same interval (CPU-time
delta, memory, GPU process utilisation; see :mod:`slurm_energy.accounting.attribution`) can be
applied interval by interval.

Three ways to turn readings into energy, named after ``Reading.method``:

* ``counter`` (:func:`counter_series`): deltas of a cumulative counter in uJ, unwrapped with the
  counter's own range (RAPL ``max_energy_range_uj``; Linux kernel Documentation/power/powercap:
  "energy_uj ... wraps around at max_energy_range_uj").
* ``power_integration`` (:func:`power_series`): trapezoidal rule over instantaneous power in W,
  E = (P_{k-1} + P_k) / 2 x (t_k - t_{k-1}).
* ``tdp_estimate`` (:func:`mean_power_series`): a modelled mean power over the interval ending at
  t_k, E = P_mean(t_k) x (t_k - t_{k-1}).

Unmeasured is ``None``, never 0: an interval with an unreadable endpoint is *dropped* (energy
``None``, counted in ``dropped``, flagged), a counter that went backwards with no known range is a
*reset* (skipped, counted in ``resets``), and a delta is never negative.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from slurm_energy.core import Flag, Reading

#: Flags an interval (and the series) may carry.
FLAG_WRAP = "wrap"  # counter wrapped once and was unwrapped with the zone's range
FLAG_MULTIPLE_WRAP = "possible_multiple_wrap"  # gap longer than range / max power: may have wrapped >1x
FLAG_RESET = "reset"  # counter went backwards and its range is not known: interval skipped
FLAG_RANGE_UNREADABLE = "range_unreadable"  # counter went backwards, range file unreadable: dropped
FLAG_MISSING = "missing_reading"  # an endpoint reading was None (unreadable at that instant)
FLAG_BAD_TIME = "non_increasing_time"  # t_k <= t_{k-1}: interval dropped
FLAG_METHOD_CHANGED = "method_changed"  # endpoints measured by different methods: dropped
FLAG_UNAVAILABLE = "unavailable"  # the device had no energy source in this interval
FLAG_COUNTER_INCONSISTENT = Flag.COUNTER_INCONSISTENT.value  # a stuck/runaway counter interval: charged by power integration

METHODS = ("counter", "power_integration", "tdp_estimate", "unavailable")


@dataclass
class Interval:
    """Energy of one device over ``(t0, t1]`` (epoch s).

    ``energy_j`` is J, or ``None`` when the interval was dropped (unmeasured); ``flags`` name any
    anomaly (see the ``FLAG_*`` constants of this module).
    """

    t0: float
    t1: float
    energy_j: Optional[float]
    flags: list[str] = field(default_factory=list)

    @property
    def duration_s(self) -> float:
        """``t1 - t0`` in s."""
        return self.t1 - self.t0


@dataclass
class SeriesEnergy:
    """One device's energy over a sample series, interval by interval, with counter anomalies.

    ``wraps``: counter wrap-arounds unwrapped; ``resets``: backwards steps with no known range
    (interval skipped); ``dropped``: intervals whose energy is ``None`` for any reason (resets
    included); ``flags``: sorted union of interval flags.
    """

    intervals: list[Interval] = field(default_factory=list)
    wraps: int = 0
    resets: int = 0
    dropped: int = 0
    flags: list[str] = field(default_factory=list)

    @property
    def total_j(self) -> Optional[float]:
        """Sum of the measured intervals' energy in J; ``None`` if no interval was measured."""
        vals = [iv.energy_j for iv in self.intervals if iv.energy_j is not None]
        return sum(vals) if vals else None

    @property
    def measured_s(self) -> float:
        """Seconds covered by measured intervals (``energy_j`` not ``None``)."""
        return sum(iv.t1 - iv.t0 for iv in self.intervals if iv.energy_j is not None)

    @property
    def span_s(self) -> float:
        """Seconds from the first interval's start to the last interval's end (0 if empty)."""
        if not self.intervals:
            return 0.0
        return self.intervals[-1].t1 - self.intervals[0].t0

    def coverage(self, duration_s: Optional[float] = None) -> float:
        """Measured fraction in [0, 1] of ``duration_s`` (default: the series' own span).

        Returns 0.0 for an empty span. ``duration_s`` is typically the job's elapsed time on the
        node, so time before the first and after the last sample also counts as unmeasured.
        """
        d = self.span_s if duration_s is None else duration_s
        if d <= 0:
            return 0.0
        return max(0.0, min(1.0, self.measured_s / d))


def summarise_intervals(intervals: list[Interval], wraps: int = 0, resets: int = 0) -> SeriesEnergy:
    """Wrap ``intervals`` in a :class:`SeriesEnergy`, counting dropped ones and collecting flags."""
    flags = sorted({f for iv in intervals for f in iv.flags})
    dropped = sum(1 for iv in intervals if iv.energy_j is None)
    return SeriesEnergy(intervals=intervals, wraps=wraps, resets=resets, dropped=dropped, flags=flags)


def _check_points(points: Sequence[tuple[float, Optional[float]]], name: str) -> None:
    if not isinstance(points, (list, tuple)):
        raise TypeError(f"{name}: expected a list of (t, value) pairs, got {type(points).__name__}")
    for i, p in enumerate(points):
        if len(p) != 2:
            raise ValueError(f"{name}[{i}]: expected a (t, value) pair, got {p!r}")


def counter_series(
    points: list[tuple[float, Optional[int]]],
    max_range_uj: Optional[int],
    max_power_w: Optional[float] = None,
    range_unreadable: bool = False,
) -> SeriesEnergy:
    """Energy per interval from a cumulative energy counter.

    Args:
        points: ``[(t, energy_uj), ...]`` in sample order; ``t`` epoch s, ``energy_uj`` the
            cumulative counter in uJ or ``None`` if it could not be read at ``t``.
        max_range_uj: the counter's range in uJ (RAPL ``max_energy_range_uj``): a counter that
            goes backwards wrapped once, delta = cur + range - prev. ``None`` = the counter does not
            wrap (NVML's 64-bit mJ counter) or its range is unknown: going backwards is a reset.
        max_power_w: the zone's maximum power in W (RAPL ``constraint_*_max_power_uw``). When the
            gap t_k - t_{k-1} exceeds range / max_power (the fastest the counter can wrap), the
            interval is flagged ``possible_multiple_wrap`` (its energy is still the single-wrap
            delta, a lower bound).
        range_unreadable: the zone's range file exists but could not be read; a backwards step
            then drops the interval with flag ``range_unreadable`` (instead of a reset).

    Returns:
        :class:`SeriesEnergy` with ``len(points) - 1`` intervals, energies in J (uJ / 1e6).

    Raises:
        ValueError: ``max_range_uj`` not positive, or a point is not a pair.
    """
    _check_points(points, "points")
    if max_range_uj is not None and max_range_uj <= 0:
        raise ValueError(
            f"max_range_uj: must be a positive counter range in uJ or None, got {max_range_uj!r}; "
            "pass None when the counter's range is unknown"
        )
    wrap_period_s = None
    if max_range_uj is not None and max_power_w is not None and max_power_w > 0:
        wrap_period_s = (max_range_uj / 1e6) / max_power_w  # J / W = s
    intervals: list[Interval] = []
    wraps = resets = 0
    for (t0, e0), (t1, e1) in zip(points, points[1:]):
        flags: list[str] = []
        if t1 <= t0:
            intervals.append(Interval(t0, t1, None, [FLAG_BAD_TIME]))
            continue
        if e0 is None or e1 is None:
            intervals.append(Interval(t0, t1, None, [FLAG_MISSING]))
            continue
        if wrap_period_s is not None and (t1 - t0) > wrap_period_s:
            flags.append(FLAG_MULTIPLE_WRAP)
        if e1 >= e0:
            delta_uj = e1 - e0
        elif max_range_uj is not None:
            delta_uj = e1 + max_range_uj - e0
            if delta_uj < 0:  # reading above the declared range: not a wrap we can trust
                intervals.append(Interval(t0, t1, None, flags + [FLAG_RESET]))
                resets += 1
                continue
            wraps += 1
            flags.append(FLAG_WRAP)
        elif range_unreadable:
            intervals.append(Interval(t0, t1, None, flags + [FLAG_RANGE_UNREADABLE]))
            continue
        else:
            intervals.append(Interval(t0, t1, None, flags + [FLAG_RESET]))
            resets += 1
            continue
        intervals.append(Interval(t0, t1, delta_uj / 1e6, flags))
    return summarise_intervals(intervals, wraps=wraps, resets=resets)


def power_series(points: list[tuple[float, Optional[float]]]) -> SeriesEnergy:
    """Energy per interval by the trapezoidal rule over instantaneous power samples.

    Args:
        points: ``[(t, power_w), ...]``; ``t`` epoch s, ``power_w`` W or ``None`` if unread.

    Returns:
        :class:`SeriesEnergy`; interval k energy = (P_{k-1} + P_k) / 2 x (t_k - t_{k-1}) in J.
        An interval with a ``None`` endpoint is dropped (``missing_reading``).

    Raises:
        ValueError: a power sample is negative (field ``power_w``), or a point is not a pair.
    """
    _check_points(points, "points")
    intervals: list[Interval] = []
    for i, ((t0, p0), (t1, p1)) in enumerate(zip(points, points[1:])):
        for j, p in ((i, p0), (i + 1, p1)):
            if p is not None and p < 0:
                raise ValueError(f"points[{j}].power_w: power must be >= 0 W, got {p!r}")
        if t1 <= t0:
            intervals.append(Interval(t0, t1, None, [FLAG_BAD_TIME]))
        elif p0 is None or p1 is None:
            intervals.append(Interval(t0, t1, None, [FLAG_MISSING]))
        else:
            intervals.append(Interval(t0, t1, (p0 + p1) / 2.0 * (t1 - t0), []))
    return summarise_intervals(intervals)


def mean_power_series(points: list[tuple[float, Optional[float]]]) -> SeriesEnergy:
    """Energy per interval from modelled mean power (the TDP model).

    Args:
        points: ``[(t, mean_power_w), ...]``; ``mean_power_w`` at ``t_k`` is the model's mean
            power in W over ``(t_{k-1}, t_k]`` (so the first point's value is not used).

    Returns:
        :class:`SeriesEnergy`; interval k energy = mean_power_w(t_k) x (t_k - t_{k-1}) in J.

    Raises:
        ValueError: a mean power is negative, or a point is not a pair.
    """
    _check_points(points, "points")
    intervals: list[Interval] = []
    for i, ((t0, _), (t1, p1)) in enumerate(zip(points, points[1:])):
        if p1 is not None and p1 < 0:
            raise ValueError(f"points[{i + 1}].mean_power_w: must be >= 0 W, got {p1!r}")
        if t1 <= t0:
            intervals.append(Interval(t0, t1, None, [FLAG_BAD_TIME]))
        elif p1 is None:
            intervals.append(Interval(t0, t1, None, [FLAG_MISSING]))
        else:
            intervals.append(Interval(t0, t1, p1 * (t1 - t0), []))
    return summarise_intervals(intervals)


def unavailable_series(times: Sequence[float]) -> SeriesEnergy:
    """A series with every interval between ``times`` (epoch s) dropped and flagged unavailable."""
    ivs = [Interval(t0, t1, None, [FLAG_UNAVAILABLE]) for t0, t1 in zip(times, times[1:])]
    return summarise_intervals(ivs)


def series_for(method: str, points: list[Any], **kw: Any) -> SeriesEnergy:
    """Dispatch on ``Reading.method``.

    ``"counter"`` -> :func:`counter_series` (``kw``: ``max_range_uj``, ``max_power_w``,
    ``range_unreadable``; ``max_range_uj`` defaults to ``None``); ``"power_integration"`` ->
    :func:`power_series`; ``"tdp_estimate"`` -> :func:`mean_power_series`; ``"unavailable"`` ->
    :func:`unavailable_series` over the points' times.

    Raises:
        ValueError: unknown ``method`` (the message lists the known ones).
    """
    if method == "counter":
        return counter_series(points, kw.pop("max_range_uj", None), **kw)
    if method == "power_integration":
        return power_series(points)
    if method == "tdp_estimate":
        return mean_power_series(points)
    if method == "unavailable":
        return unavailable_series([p[0] for p in points])
    raise ValueError(f"method: unknown energy method {method!r}; expected one of {METHODS}")


def _value_for(reading: Reading) -> Optional[float]:
    m = reading.method
    if m == "counter":
        return reading.energy_uj
    if m == "power_integration":
        return reading.power_w
    if m == "tdp_estimate":
        return reading.mean_power_w
    return None


def series_from_readings(samples: Sequence[tuple[float, Reading]]) -> SeriesEnergy:
    """One device's ``[(t, Reading), ...]`` -> :class:`SeriesEnergy`, method by method.

    Consecutive readings with the same ``method`` form a run integrated with :func:`series_for`
    (counter range and max power from the run's last reading that has them; a reading flagged
    ``range_unreadable`` makes the run's backwards steps drops, not resets). The interval between
    two runs of different methods is dropped and flagged ``method_changed``: e.g. RAPL turning
    EACCES mid-job. Reading flags (``eacces``...) are added to the series flags. A counter run whose
    readings also carry ``power_w`` goes through the counter-vs-power rule
    (:mod:`slurm_energy.accounting.crosscheck`): a moving counter is kept over an averaged power that
    disagrees (flag ``power_disagrees``); a stuck or runaway interval is charged by power integration
    (``counter_stuck``/``counter_runaway``, ``counter_inconsistent``); a reset skips that interval only.

    Returns:
        :class:`SeriesEnergy` with ``len(samples) - 1`` intervals in sample order.
    """
    samples = list(samples)
    if len(samples) < 2:
        return summarise_intervals([])
    intervals: list[Interval] = []
    wraps = resets = 0
    extra_flags: set[str] = set()
    start = 0
    while start < len(samples):
        end = start
        method = samples[start][1].method
        while end + 1 < len(samples) and samples[end + 1][1].method == method:
            end += 1
        run = samples[start : end + 1]
        for _, r in run:
            extra_flags.update(r.flags or [])
        if len(run) > 1:
            kw = {}
            if method == "counter":
                rng = [r.max_energy_range_uj for _, r in run if r.max_energy_range_uj is not None]
                pw = [r.max_power_w for _, r in run if r.max_power_w is not None]
                kw = {
                    "max_range_uj": rng[-1] if rng else None,
                    "max_power_w": pw[-1] if pw else None,
                    "range_unreadable": any(FLAG_RANGE_UNREADABLE in (r.flags or []) for _, r in run),
                }
            s = series_for(method, [(t, _value_for(r)) for t, r in run], **kw)
            if method == "counter" and sum(r.power_w is not None for _, r in run) >= 2:
                from slurm_energy.accounting.crosscheck import checked_counter

                s = checked_counter(s, run)
            intervals.extend(s.intervals)
            wraps += s.wraps
            resets += s.resets
        if end + 1 < len(samples):
            intervals.append(Interval(samples[end][0], samples[end + 1][0], None, [FLAG_METHOD_CHANGED]))
        start = end + 1
    out = summarise_intervals(intervals, wraps=wraps, resets=resets)
    out.flags = sorted(set(out.flags) | extra_flags)
    return out


_CROSS_CHECK_NAMES = ("CROSS_CHECK_MARGIN", "cross_check_counter", "cross_check_tolerance_j", "interval_verdicts")


def __getattr__(name: str) -> Any:
    """``integrate.cross_check_counter`` etc.: the counter-vs-power cross-check lives in
    :mod:`slurm_energy.accounting.crosscheck` (imported lazily: it builds on this module)."""
    if name in _CROSS_CHECK_NAMES:
        from slurm_energy.accounting import crosscheck

        return getattr(crosscheck, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
