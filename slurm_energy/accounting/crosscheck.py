"""The counter-vs-power rule: one device's energy counter checked against the power read beside it.

Written once here; :func:`slurm_energy.accounting.integrate.series_from_readings` (the general path)
and :mod:`slurm_energy.accounting.fast_device` (the array path, which only asks "does every interval
agree?") both call :func:`interval_verdicts`. The README's method table states the same rule.

Why a moving counter wins over a power reading that disagrees: the power beside a counter is an
*average*, not an instant. ``nvmlDeviceGetPowerUsage`` / nvidia-smi ``power.draw`` is "a 1 second
average" on Ampere and newer (nvidia-smi ``--help-query-gpu``: ``power.draw.average`` vs
``power.draw.instant``; the NVML field ``NVML_FI_DEV_POWER_INSTANT`` is the instant one), amdgpu's
``power1_average`` is the SMU's average over its own window (ROCm/ROC-smi#89: "the average power
consumed by the GPU in the last sample window"), while ``nvmlDeviceGetTotalEnergyConsumption`` counts
every mJ "since the driver was last reloaded" (NVML API reference). Two averaged samples cannot
contradict an integral that moved: on a load that changes faster than the averaging window the
trapezoid of averages is the one that is wrong.

Per interval with a counter delta ``e_c`` and a trapezoid of power ``e_p`` (both J):

* **agree** -- ``|e_c - e_p| <= tolerance`` (:func:`cross_check_tolerance_j`): the counter.
* **disagree, counter moving** -- the counter is kept; the interval and the device are flagged
  ``power_disagrees`` (information, not a correction).
* **stuck** -- the counter did not move (``e_c`` within one quantum of 0) while power says the
  device drew more than the tolerance: the counter is not trusted for that interval, which is
  charged by power integration, flagged ``counter_stuck`` and ``counter_inconsistent`` (the device's
  method then includes ``power_integration``). A counter that updates late and catches up in the
  next interval (the two together agree) is trusted.
* **runaway** -- the counter claims more than the device can draw: mean power over the interval
  above its power limit (``Reading.max_power_w``; NVML: the enforced power limit) x (1 + margin) +
  the power accuracy. Charged by power integration, flagged ``counter_runaway`` and
  ``counter_inconsistent``.
* **reset / backwards step** (driver reload: the NVML counter restarts from 0) -- that interval
  only is skipped (energy ``None``, flag ``reset``, counted in ``resets``); the rest of the device's
  counter stands. Never replaced by power integration for the whole device.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from slurm_energy.core import Reading
from slurm_energy.accounting.integrate import (
    FLAG_COUNTER_INCONSISTENT, Interval, SeriesEnergy, power_series, summarise_intervals,
)

#: Margin on top of the counter's resolution and the power reading's error before a counter is
#: called inconsistent, as a fraction of the larger of the two energies. Not a physical constant:
#: a chosen allowance for power varying between two samples in ways the endpoints do not show.
CROSS_CHECK_MARGIN = 0.10

FLAG_POWER_DISAGREES = "power_disagrees"  # counter moved, averaged power disagreed: counter kept
FLAG_COUNTER_STUCK = "counter_stuck"  # counter did not move while power was high: interval by power
FLAG_COUNTER_RUNAWAY = "counter_runaway"  # counter above the device's power limit: interval by power

#: Verdicts of :func:`interval_verdicts`.
NO_CHECK, AGREE, DISAGREE, STUCK, RUNAWAY = -1, 0, 1, 2, 3


def cross_check_tolerance_j(dt_s: Any, p0_w: Any, p1_w: Any, e_counter_j: Any, e_power_j: Any, *,
                            resolution_j: float = 1e-6, power_accuracy_w: float = 0.0,
                            margin: float = CROSS_CHECK_MARGIN) -> Any:
    """How far (J) a counter delta may be from the trapezoid of power over one interval and still agree.

    tolerance = resolution_j                      (the counter's quantum: a delta of two truncated
                                                   readings is off by less than one quantum)
              + power_accuracy_w x dt             (each power reading is within +/- accuracy)
              + |p1 - p0| / 2 x dt                (sampling error of the trapezoid: the power's path
                                                   between the two samples is unknown; the left and
                                                   right Riemann sums bracket it)
              + margin x max(e_counter, e_power)  (:data:`CROSS_CHECK_MARGIN`)

    Args: ``dt_s`` interval in s; ``p0_w``, ``p1_w`` power at its ends in W; the two energies in J
    (scalars or numpy arrays of one shape); ``resolution_j`` the counter's quantum in J (NVML: 1 mJ);
    ``power_accuracy_w`` the power reading's accuracy in W (NVML: 5 W, nvidia-smi
    ``--help-query-gpu`` power.draw).
    Returns: the tolerance in J (>= 0), of the inputs' shape.
    """
    return (abs(resolution_j) + abs(power_accuracy_w) * dt_s + abs(p1_w - p0_w) / 2.0 * dt_s
            + margin * np.maximum(abs(e_counter_j), abs(e_power_j)))


def interval_verdicts(e_counter_j: np.ndarray, p0_w: np.ndarray, p1_w: np.ndarray, dt_s: np.ndarray, *,
                      resolution_j: float = 1e-6, power_accuracy_w: float = 0.0,
                      max_power_w: Optional[float] = None, margin: float = CROSS_CHECK_MARGIN) -> np.ndarray:
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


def cross_check_counter(counter: SeriesEnergy, power_points: list[tuple[float, Optional[float]]], *,
                        resolution_j: float = 1e-6, power_accuracy_w: float = 0.0,
                        max_power_w: Optional[float] = None,
                        margin: float = CROSS_CHECK_MARGIN) -> tuple[SeriesEnergy, list[int]]:
    """Apply the counter-vs-power rule (module docstring) to one device's counter series.

    Shared by every reader that has a counter and a power reading for one device (NVML, AMD SMI,
    amdgpu/xe/i915 hwmon): the reader puts ``power_w`` beside ``energy_uj`` in a ``counter`` reading,
    and :func:`slurm_energy.accounting.integrate.series_from_readings` calls this.

    Args:
        counter: the counter's series (:func:`counter_series`), ``n - 1`` intervals.
        power_points: ``[(t, power_w), ...]``, the same ``n`` sample times; ``power_w`` W or None.
        resolution_j, power_accuracy_w, margin: see :func:`cross_check_tolerance_j`.
        max_power_w: the device's power limit, W (runaway check), or None.

    Returns:
        ``(series, replaced)``: the counter's series with stuck/runaway intervals charged by power
        integration (flagged ``counter_inconsistent`` and ``counter_stuck``/``counter_runaway``),
        disagreeing moving intervals kept and flagged ``power_disagrees``, resets left skipped; and
        the indices of the replaced intervals (``[]``: the counter stands everywhere).

    Raises:
        ValueError: the two series do not have the same sample times (names both lengths).
    """
    if len(power_points) != len(counter.intervals) + 1 and counter.intervals:
        raise ValueError(f"power_points: {len(power_points)} samples for {len(counter.intervals)} counter "
                         "intervals; pass the power read at the counter's sample times")
    if not counter.intervals:
        return counter, []
    nan = float("nan")
    power = power_series(list(power_points))
    ec = np.array([nan if iv.energy_j is None else iv.energy_j for iv in counter.intervals])
    pw = np.array([nan if p is None else p for _, p in power_points], dtype=float)
    dt = np.array([iv.duration_s for iv in counter.intervals])
    kw = {"resolution_j": resolution_j, "power_accuracy_w": power_accuracy_w, "margin": margin}
    verdict = interval_verdicts(ec, pw[:-1], pw[1:], dt, max_power_w=max_power_w, **kw)
    ep = (pw[:-1] + pw[1:]) / 2.0 * dt
    tol = cross_check_tolerance_j(dt, pw[:-1], pw[1:], ec, ep, **kw)
    n = len(verdict)
    k = 0
    while k < n:  # a counter that updates late is short in one interval and catches up in the next
        if verdict[k] in (DISAGREE, STUCK) and k + 1 < n and verdict[k + 1] in (AGREE, DISAGREE):
            if abs(ec[k] + ec[k + 1] - ep[k] - ep[k + 1]) <= tol[k] + tol[k + 1]:
                verdict[k] = verdict[k + 1] = AGREE
                k += 2
                continue
        k += 1
    ivs: list[Interval] = []
    replaced: list[int] = []
    for k, (ic, ip) in enumerate(zip(counter.intervals, power.intervals)):
        v = verdict[k]
        if v in (STUCK, RUNAWAY):
            why = FLAG_COUNTER_STUCK if v == STUCK else FLAG_COUNTER_RUNAWAY
            ivs.append(Interval(ic.t0, ic.t1, ip.energy_j, sorted(set(ic.flags) | {why, FLAG_COUNTER_INCONSISTENT})))
            replaced.append(k)
        elif v == DISAGREE:
            ivs.append(Interval(ic.t0, ic.t1, ic.energy_j, sorted(set(ic.flags) | {FLAG_POWER_DISAGREES})))
        else:
            ivs.append(ic)
    if not replaced and all(v != DISAGREE for v in verdict):
        return counter, []
    out = summarise_intervals(ivs, wraps=counter.wraps, resets=counter.resets)
    out.flags = sorted(set(out.flags) | set(counter.flags))
    return out, replaced


def checked_counter(s: SeriesEnergy, run: Sequence[tuple[float, Reading]]) -> SeriesEnergy:
    """A counter run whose readings also carry power: the rule applied (:func:`cross_check_counter`)."""
    res = [r.energy_resolution_uj for _, r in run if r.energy_resolution_uj]
    acc = [r.power_accuracy_w for _, r in run if r.power_accuracy_w is not None]
    cap = [r.max_power_w for _, r in run if r.max_power_w is not None and r.max_energy_range_uj is None]
    checked, _ = cross_check_counter(s, [(t, r.power_w) for t, r in run],
                                     resolution_j=(max(res) if res else 1) / 1e6,
                                     power_accuracy_w=max(acc) if acc else 0.0,
                                     max_power_w=max(cap) if cap else None)
    return checked


def counter_agrees_everywhere(e_counter_j: np.ndarray, p_w: np.ndarray, dt_s: np.ndarray, st: dict[str, Any]) -> bool:
    """For the array path: True when every interval's verdict is :data:`AGREE` (so the general
    path would leave the counter as it is, unflagged). ``p_w`` has one more entry than the rest;
    ``st``: the readings' shared fields (``energy_resolution_uj``, ``power_accuracy_w``, ``max_power_w``)."""
    cap = st.get("max_power_w") if st.get("max_energy_range_uj") is None else None
    v = interval_verdicts(e_counter_j, p_w[:-1], p_w[1:], dt_s,
                          resolution_j=(st.get("energy_resolution_uj") or 1) / 1e6,
                          power_accuracy_w=st.get("power_accuracy_w") or 0.0, max_power_w=cap)
    return bool((v == AGREE).all())
