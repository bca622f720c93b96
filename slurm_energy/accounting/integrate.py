"""Per-device sample series -> per-interval energies, with provenance, on arrays (pure functions).

Input is one device's readings over time (see :mod:`slurm_energy.sampling.readers.base`); output
is a :class:`SeriesEnergy`: one interval per pair of consecutive sample times ``(t_{k-1}, t_k]``,
each with its energy in J or NaN when that interval could not be measured, and the flags of each
interval as boolean masks. Intervals are aligned with sample times so that a job's share in the
same interval (CPU-time delta, memory, GPU process utilisation; see
:mod:`slurm_energy.accounting.summary`) can be applied interval by interval, as array products.

Three ways to turn readings into energy, named after ``Reading.method``:

* ``counter`` (:func:`counter_series`): deltas of a cumulative counter in uJ, unwrapped with the
  counter's own range (RAPL ``max_energy_range_uj``; Linux kernel Documentation/power/powercap:
  "energy_uj ... wraps around at max_energy_range_uj").
* ``power_integration`` (:func:`power_series`): trapezoidal rule over instantaneous power in W,
  E = (P_{k-1} + P_k) / 2 x (t_k - t_{k-1}).
* ``tdp_estimate`` (:func:`power_series` with ``mean``): a modelled mean power over the interval ending at
  t_k, E = P_mean(t_k) x (t_k - t_{k-1}).

Unmeasured is NaN/``None``, never 0: an interval with an unreadable endpoint is *dropped* (counted
in ``dropped``, flagged), a counter that went backwards with no known range is a *reset* (skipped,
counted in ``resets``), and a delta is never negative.

The counter-vs-power rule (a counter checked against the power read beside it) is
:func:`cross_check_counter`. Why a moving counter wins over a power reading that disagrees: the
power beside a counter is an *average*, not an instant. ``nvmlDeviceGetPowerUsage`` / nvidia-smi
``power.draw`` is "a 1 second average" on Ampere and newer (nvidia-smi ``--help-query-gpu``:
``power.draw.average`` vs ``power.draw.instant``), amdgpu's ``power1_average`` is the SMU's average
over its own window (ROCm/ROC-smi#89: "the average power consumed by the GPU in the last sample
window"), while ``nvmlDeviceGetTotalEnergyConsumption`` counts every mJ "since the driver was last
reloaded" (NVML API reference). Per interval with a counter delta ``e_c`` and a trapezoid of power
``e_p`` (both J):

* **agree** -- ``|e_c - e_p| <= tolerance`` (:func:`cross_check_tolerance_j`): the counter.
* **disagree, counter moving** -- the counter is kept; flagged ``power_disagrees``.
* **stuck** -- the counter did not move (``e_c`` within one quantum of 0) while power says the
  device drew more than the tolerance: charged by power integration, flagged ``counter_stuck`` and
  ``counter_inconsistent``. A counter that updates late and catches up in the next interval (the two
  together agree) is trusted.
* **runaway** -- mean power over the interval above the device's power limit
  (``Reading.max_power_w``) x (1 + margin) + the power accuracy: charged by power integration,
  flagged ``counter_runaway`` and ``counter_inconsistent``.
* **reset / backwards step** (driver reload) -- that interval only is skipped (flag ``reset``).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from slurm_energy.core import Flag, Method
from slurm_energy.sampling.sampletable import DeviceColumns

Arr = npt.NDArray[np.float64]
Mask = npt.NDArray[np.bool_]

#: Margin on top of the counter's resolution and the power reading's error before a counter is
#: called inconsistent, as a fraction of the larger of the two energies. Not a physical constant:
#: a chosen allowance for power varying between two samples in ways the endpoints do not show.
CROSS_CHECK_MARGIN = 0.10

#: Verdicts of :func:`interval_verdicts`.
NO_CHECK, AGREE, DISAGREE, STUCK, RUNAWAY = -1, 0, 1, 2, 3


def floats(values: Sequence[Any]) -> Arr:
    """``values`` as a float array, NaN for None."""
    if None not in values:
        return np.array(values, dtype=np.float64)
    return np.array([np.nan if v is None else v for v in values], dtype=np.float64)


def _empty() -> Arr:
    return np.zeros(0, dtype=np.float64)


@dataclass
class SeriesEnergy:
    """One device's energy over a sample series, interval by interval, as arrays.

    ``t0``/``t1``: each interval's ends (epoch s); ``energy``: J, NaN = not measured; ``masks``:
    flag -> which intervals carry it; ``extra``: the series' flags not tied to an interval (its
    readings' flags); ``wraps``: counter wrap-arounds unwrapped; ``resets``: backwards steps with no
    known range (interval skipped).
    """

    t0: Arr = field(default_factory=_empty)
    t1: Arr = field(default_factory=_empty)
    energy: Arr = field(default_factory=_empty)
    masks: dict[str, Mask] = field(default_factory=dict)
    wraps: int = 0
    resets: int = 0
    extra: set[str] = field(default_factory=set)

    @property
    def dt(self) -> Arr:
        """Interval lengths, s."""
        return self.t1 - self.t0

    @property
    def measured(self) -> Mask:
        """Intervals with an energy."""
        return ~np.isnan(self.energy)

    @property
    def flags(self) -> list[str]:
        """Sorted union of the intervals' flags and the series' own."""
        return sorted({f for f, m in self.masks.items() if m.any()} | self.extra)

    @property
    def dropped(self) -> int:
        """Intervals whose energy is not known, for any reason (resets included)."""
        return int(np.isnan(self.energy).sum())

    @property
    def total_j(self) -> float | None:
        """Sum of the measured intervals' energy in J (in interval order); ``None`` if none was measured."""
        vals = self.energy[self.measured].tolist()
        return sum(vals) if vals else None

    @property
    def measured_s(self) -> float:
        """Seconds covered by measured intervals."""
        return float(sum(self.dt[self.measured].tolist()))

    def flag(self, name: str, mask: Mask) -> None:
        """Add flag ``name`` to the intervals in ``mask``."""
        if mask.any():
            old = self.masks.get(name)
            self.masks[name] = mask.copy() if old is None else old | mask


def concat(parts: Sequence[SeriesEnergy]) -> SeriesEnergy:
    """The series one after the other (wraps, resets and flags added up)."""
    if len(parts) == 1:
        return parts[0]
    out = SeriesEnergy(np.concatenate([p.t0 for p in parts] or [_empty()]),
                       np.concatenate([p.t1 for p in parts] or [_empty()]),
                       np.concatenate([p.energy for p in parts] or [_empty()]),
                       wraps=sum(p.wraps for p in parts), resets=sum(p.resets for p in parts),
                       extra=set().union(*(p.extra for p in parts)))
    for name in {n for p in parts for n in p.masks}:
        out.masks[name] = np.concatenate([p.masks.get(name, np.zeros(len(p.t0), dtype=bool)) for p in parts])
    return out


def _timed(t: Arr) -> SeriesEnergy:
    """Intervals between ``t``, energies NaN, those not increasing flagged ``non_increasing_time``."""
    s = SeriesEnergy(t[:-1], t[1:], np.full(max(0, len(t) - 1), np.nan))
    s.flag(Flag.BAD_TIME.value, s.dt <= 0)
    return s


def counter_series(t: Arr, values: Sequence[int | None], max_range_uj: int | None,
                   max_power_w: float | None = None, range_unreadable: bool = False) -> SeriesEnergy:
    """Energy per interval from a cumulative energy counter.

    Args:
        t: sample times, epoch s (float array, sample order).
        values: the cumulative counter in uJ at each time, ``None`` where it could not be read.
        max_range_uj: the counter's range in uJ (RAPL ``max_energy_range_uj``): a counter that
            goes backwards wrapped once, delta = cur + range - prev. ``None`` = the counter does not
            wrap (NVML's 64-bit mJ counter) or its range is unknown: going backwards is a reset.
        max_power_w: the zone's maximum power in W (RAPL ``constraint_*_max_power_uw``). When the
            gap exceeds range / max_power (the fastest the counter can wrap), the interval is
            flagged ``possible_multiple_wrap`` (its energy is the single-wrap delta, a lower bound).
        range_unreadable: the zone's range file exists but could not be read; a backwards step
            then drops the interval with flag ``range_unreadable`` (instead of a reset).

    Returns:
        :class:`SeriesEnergy` with ``len(t) - 1`` intervals, energies in J (uJ / 1e6).

    Raises:
        ValueError: ``max_range_uj`` not positive.
    """
    if max_range_uj is not None and max_range_uj <= 0:
        raise ValueError(
            f"max_range_uj: must be a positive counter range in uJ or None, got {max_range_uj!r}; "
            "pass None when the counter's range is unknown"
        )
    s = _timed(t)
    if len(t) < 2:
        return s
    missing = np.array([v is None for v in values])
    e = np.array([0 if v is None else v for v in values])  # int64 (exact deltas), else object ints
    if e.dtype.kind not in "iuf":
        e = e.astype(object)
    d = np.diff(e)
    ok = ~s.masks.get(Flag.BAD_TIME.value, np.zeros(len(d), dtype=bool))
    s.flag(Flag.MISSING.value, ok & (missing[:-1] | missing[1:]))
    ok &= ~(missing[:-1] | missing[1:])
    if max_range_uj is not None and max_power_w is not None and max_power_w > 0:
        s.flag(Flag.MULTIPLE_WRAP.value, ok & (s.dt > (max_range_uj / 1e6) / max_power_w))  # J / W = s
    back = ok & (d < 0)
    if back.any():
        if max_range_uj is not None:
            d = np.where(back, d + max_range_uj, d)
            reset = back & (d < 0)  # a reading above the declared range: not a wrap we can trust
            s.flag(Flag.WRAP.value, back & ~reset)
            s.wraps = int((back & ~reset).sum())
        elif range_unreadable:
            reset = np.zeros_like(back)
            s.flag(Flag.RANGE_UNREADABLE.value, back)
        else:
            reset = back
        s.flag(Flag.RESET.value, reset)
        s.resets = int(reset.sum())
        ok &= ~back | (max_range_uj is not None) & ~reset
    s.energy = np.where(ok, (np.where(ok, d, 0) / 1e6).astype(np.float64), np.nan)
    return s


def power_series(t: Arr, values: Sequence[float | None], mean: bool = False) -> SeriesEnergy:
    """Energy per interval from power samples (W at the times ``t``, epoch s; ``None`` = unread).

    By the trapezoidal rule over instantaneous power, interval k = (P_{k-1} + P_k) / 2 x (t_k -
    t_{k-1}) J; with ``mean`` (the TDP model) ``values[k]`` is the modelled mean power over
    ``(t_{k-1}, t_k]`` and interval k = P_k x (t_k - t_{k-1}) J (the first value is not used). An
    interval with a ``None`` endpoint it uses is dropped (``missing_reading``).

    Raises:
        ValueError: a power is negative (names the first one).
    """
    p = floats(values)
    bad = np.flatnonzero(p[int(mean):] < 0) + int(mean)
    if len(p) > 1 and len(bad):
        what = "mean_power_w: must" if mean else "power_w: power must"
        raise ValueError(f"points[{bad[0]}].{what} be >= 0 W, got {values[bad[0]]!r}")
    s = _timed(t)
    if len(t) < 2:
        return s
    ok = s.dt > 0
    s.flag(Flag.MISSING.value, ok & (np.isnan(p[1:]) | (np.isnan(p[:-1]) & (not mean))))
    s.energy = np.where(ok, (p[1:] if mean else (p[:-1] + p[1:]) / 2.0) * s.dt, np.nan)
    return s


def unavailable_series(t: Arr) -> SeriesEnergy:
    """A series with every interval between the times ``t`` (epoch s) dropped and flagged unavailable."""
    s = SeriesEnergy(t[:-1], t[1:], np.full(max(0, len(t) - 1), np.nan))
    s.flag(Flag.UNAVAILABLE.value, np.ones(len(s.t0), dtype=bool))
    return s


def _last(statics: Sequence[dict[str, Any]], key: str) -> Any:
    return next((s[key] for s in reversed(statics) if s.get(key) is not None), None)


def unique(statics: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The readings' static fields without consecutive repeats, in order (readings of one schema
    line share one dict; an old JSON-lines file gives equal ones)."""
    if not statics or statics.count(statics[0]) == len(statics):  # a C-level compare
        return list(statics[:1])
    out = [statics[0]]
    for s in statics[1:]:
        if s is not out[-1] and s != out[-1]:
            out.append(s)
    return out


def device_series(t: Arr, dc: DeviceColumns, mean_power_w: list[Any] | None = None,
                  kinds: list[dict[str, Any]] | None = None) -> SeriesEnergy:
    """One device's readings (columns, ``t``: the times of its rows) -> :class:`SeriesEnergy`.

    Consecutive readings with the same method form a run (counter range and max power from the
    run's last reading that has them; a reading flagged ``range_unreadable`` makes the run's
    backwards steps drops, not resets). The interval between two runs of different methods is
    dropped and flagged ``method_changed`` (e.g. RAPL turning EACCES mid-job). Reading flags
    (``eacces``...) are the series' too. A counter run whose readings also carry ``power_w`` goes
    through the counter-vs-power rule (:func:`cross_check_counter`). ``mean_power_w``: the modelled
    powers to use instead of the columns' (filled by the summary where a reading lacked one);
    ``kinds``: :func:`unique` of the readings' static fields, if the caller has them.
    """
    n = len(dc)
    if n < 2:
        return SeriesEnergy()
    st = dc.static
    kinds = unique(st) if kinds is None else kinds
    if len(kinds) == 1:
        bounds = [0, n]
    else:
        meth = [Method.parse(s.get("method")) for s in st]
        bounds = [0] + [i for i in range(1, n) if meth[i] != meth[i - 1]] + [n]
    parts: list[SeriesEnergy] = []
    extra: set[str] = set()
    for a, b in itertools.pairwise(bounds):
        run = st[a:b]
        run_kinds = kinds if len(bounds) == 2 else unique(run)
        for s in run_kinds:
            extra.update(s.get("flags") or [])
        if b - a > 1:
            parts.append(_run(t[a:b], dc, a, b, Method.parse(run[0].get("method")), run_kinds, mean_power_w))
        if b < n:
            gap = SeriesEnergy(t[b - 1:b], t[b:b + 1], np.full(1, np.nan))
            gap.flag(Flag.METHOD_CHANGED.value, np.ones(1, dtype=bool))
            parts.append(gap)
    out = concat(parts) if parts else SeriesEnergy()
    out.extra = out.extra | extra
    return out


def _run(t: Arr, dc: DeviceColumns, a: int, b: int, method: Method, kinds: list[dict[str, Any]],
         mean_power_w: list[Any] | None) -> SeriesEnergy:
    """One run of readings of one method, readings ``a`` to ``b - 1``."""
    if method == Method.COUNTER:
        s = counter_series(t, dc.vals["energy_uj"][a:b], _last(kinds, "max_energy_range_uj"), _last(kinds, "max_power_w"),
                        any(Flag.RANGE_UNREADABLE.value in (k.get("flags") or []) for k in kinds))
        pw = dc.vals["power_w"][a:b]
        if len(pw) - pw.count(None) >= 2:
            res = [k["energy_resolution_uj"] for k in kinds if k.get("energy_resolution_uj")]
            acc = [k["power_accuracy_w"] for k in kinds if k.get("power_accuracy_w") is not None]
            cap = [k["max_power_w"] for k in kinds if k.get("max_power_w") is not None
                   and k.get("max_energy_range_uj") is None]
            s, _ = cross_check_counter(s, floats(pw), resolution_j=(max(res) if res else 1) / 1e6,
                           power_accuracy_w=max(acc) if acc else 0.0, max_power_w=max(cap) if cap else None)
        return s
    if method == Method.POWER_INTEGRATION:
        return power_series(t, dc.vals["power_w"][a:b])
    if method == Method.TDP_ESTIMATE:
        return power_series(t, (dc.vals["mean_power_w"] if mean_power_w is None else mean_power_w)[a:b], mean=True)
    return unavailable_series(t)


def cross_check_tolerance_j(dt_s: Any, p0_w: Any, p1_w: Any, e_counter_j: Any, e_power_j: Any, *,
                            resolution_j: float = 1e-6, power_accuracy_w: float = 0.0,
                            margin: float = CROSS_CHECK_MARGIN) -> Any:
    """How far (J) a counter delta may be from the trapezoid of power over one interval and still agree.

    tolerance = resolution_j                      (the counter's quantum: a delta of two truncated
                                                   readings is off by less than one quantum)
              + power_accuracy_w x dt             (each power reading is within +/- accuracy)
              + |p1 - p0| / 2 x dt                (sampling error of the trapezoid: the left and
                                                   right Riemann sums bracket the power's path)
              + margin x max(e_counter, e_power)  (:data:`CROSS_CHECK_MARGIN`)

    Args: ``dt_s`` interval in s; ``p0_w``, ``p1_w`` power at its ends in W; the two energies in J
    (scalars or numpy arrays of one shape); ``resolution_j`` the counter's quantum in J (NVML: 1 mJ);
    ``power_accuracy_w`` the power reading's accuracy in W (NVML: 5 W, nvidia-smi
    ``--help-query-gpu`` power.draw).
    Returns: the tolerance in J (>= 0), of the inputs' shape.
    """
    return (abs(resolution_j) + abs(power_accuracy_w) * dt_s + abs(p1_w - p0_w) / 2.0 * dt_s
            + margin * np.maximum(abs(e_counter_j), abs(e_power_j)))


def interval_verdicts(e_counter_j: Arr, p0_w: Arr, p1_w: Arr, dt_s: Arr, *, resolution_j: float = 1e-6,
                      power_accuracy_w: float = 0.0, max_power_w: float | None = None,
                      margin: float = CROSS_CHECK_MARGIN) -> npt.NDArray[np.int_]:
    """The rule (module docstring), interval by interval, on arrays of one length n.

    Args:
        e_counter_j: counter delta per interval, J (NaN: not measured, e.g. a reset).
        p0_w, p1_w: power at each interval's ends, W (NaN: not read).
        dt_s: interval lengths, s (> 0).
        resolution_j, power_accuracy_w, margin: see :func:`cross_check_tolerance_j`.
        max_power_w: the device's power limit in W, or None (no runaway check).

    Returns:
        int array of n verdicts: :data:`NO_CHECK` (a value missing), :data:`AGREE`,
        :data:`DISAGREE` (counter moving, kept), :data:`STUCK`, :data:`RUNAWAY`. The late-update
        settling of a stuck interval is sequential and done by :func:`cross_check_counter`.
    """
    ec = np.asarray(e_counter_j, dtype=float)
    p0, p1, dt = (np.asarray(x, dtype=float) for x in (p0_w, p1_w, dt_s))
    ep = (p0 + p1) / 2.0 * dt
    with np.errstate(invalid="ignore"):
        tol = cross_check_tolerance_j(dt, p0, p1, ec, ep, resolution_j=resolution_j,
                                      power_accuracy_w=power_accuracy_w, margin=margin)
        out = np.where(np.abs(ec - ep) > tol, DISAGREE, AGREE)
        out = np.where((out == DISAGREE) & (ec <= abs(resolution_j)), STUCK, out)
        if max_power_w is not None and max_power_w > 0:
            cap_j = (max_power_w * (1.0 + margin) + abs(power_accuracy_w)) * dt + abs(resolution_j)
            out = np.where((out == DISAGREE) & (ec > cap_j), RUNAWAY, out)
        out = np.where(np.isnan(ec) | np.isnan(ep), NO_CHECK, out)
    return out.astype(int)


def cross_check_counter(counter: SeriesEnergy, pw: Arr, *, resolution_j: float = 1e-6,
                        power_accuracy_w: float = 0.0, max_power_w: float | None = None,
                        margin: float = CROSS_CHECK_MARGIN) -> tuple[SeriesEnergy, list[int]]:
    """Apply the counter-vs-power rule (module docstring) to one device's counter series.

    Shared by every reader that has a counter and a power reading for one device (NVML, AMD SMI,
    amdgpu/xe/i915 hwmon): the reader puts ``power_w`` beside ``energy_uj`` in a ``counter`` reading.

    Args:
        counter: the counter's series (:func:`counter_series`), ``n - 1`` intervals.
        pw: the power at the same ``n`` sample times, W (NaN = unread).
        resolution_j, power_accuracy_w, margin: see :func:`cross_check_tolerance_j`.
        max_power_w: the device's power limit, W (runaway check), or None.

    Returns:
        ``(series, replaced)``: the counter's series with stuck/runaway intervals charged by power
        integration (flagged ``counter_inconsistent`` and ``counter_stuck``/``counter_runaway``),
        disagreeing moving intervals kept and flagged ``power_disagrees``, resets left skipped; and
        the indices of the replaced intervals (``[]``: the counter stands everywhere).

    Raises:
        ValueError: ``pw`` is not one power per sample time (names both lengths), or a power is negative.
    """
    if len(counter.t0) and len(pw) != len(counter.t0) + 1:
        raise ValueError(f"power: {len(pw)} samples for {len(counter.t0)} counter intervals; "
                         "pass the power read at the counter's sample times")
    if not len(counter.t0):
        return counter, []
    power = power_series(np.concatenate([counter.t0[:1], counter.t1]), [None if p != p else p for p in pw.tolist()])
    ec, dt = counter.energy, counter.dt
    kw: dict[str, Any] = {"resolution_j": resolution_j, "power_accuracy_w": power_accuracy_w, "margin": margin}
    verdict = interval_verdicts(ec, pw[:-1], pw[1:], dt, max_power_w=max_power_w, **kw)
    if not (verdict > AGREE).any():
        return counter, []
    ep = (pw[:-1] + pw[1:]) / 2.0 * dt
    tol = cross_check_tolerance_j(dt, pw[:-1], pw[1:], ec, ep, **kw)
    n = len(verdict)
    skip = -1
    for k in np.flatnonzero((verdict == DISAGREE) | (verdict == STUCK)).tolist():
        # a counter that updates late is short in one interval and catches up in the next
        if k <= skip or k + 1 >= n or verdict[k] not in (DISAGREE, STUCK) or verdict[k + 1] not in (AGREE, DISAGREE):
            continue
        if abs(ec[k] + ec[k + 1] - ep[k] - ep[k + 1]) <= tol[k] + tol[k + 1]:
            verdict[k] = verdict[k + 1] = AGREE
            skip = k + 1
    stuck, runaway = verdict == STUCK, verdict == RUNAWAY
    out = SeriesEnergy(counter.t0, counter.t1, np.where(stuck | runaway, power.energy, ec), dict(counter.masks),
                       counter.wraps, counter.resets, set(counter.extra))
    out.flag(Flag.COUNTER_STUCK.value, stuck)
    out.flag(Flag.COUNTER_RUNAWAY.value, runaway)
    out.flag(Flag.COUNTER_INCONSISTENT.value, stuck | runaway)
    out.flag(Flag.POWER_DISAGREES.value, verdict == DISAGREE)
    return out, np.flatnonzero(stuck | runaway).tolist()
