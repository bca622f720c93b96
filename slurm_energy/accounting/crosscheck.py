"""Cross-check of a device's energy counter against its power readings (pure functions).

A counter that sticks (0 J while the GPU draws 300 W), resets or runs away is reported on
NVML/DCGM and AMD SMI. Wherever one device has both a counter and a power reading, the reader
puts ``power_w`` beside ``energy_uj`` in its ``counter`` readings and
:func:`slurm_energy.accounting.integrate.series_from_readings` checks every interval here; a counter
that disagrees is replaced by power integration for the whole device, flagged
``counter_inconsistent``. Also importable from :mod:`slurm_energy.accounting.integrate`.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from slurm_energy.core import Reading
from slurm_energy.accounting.integrate import (
    FLAG_COUNTER_INCONSISTENT, FLAG_RANGE_UNREADABLE, FLAG_RESET, Interval, SeriesEnergy, power_series,
    summarise_intervals,
)

#: Margin on top of the counter's resolution and the power reading's error before a counter is
#: called inconsistent, as a fraction of the larger of the two energies. Not a physical constant:
#: a chosen allowance for power varying between two samples in ways the endpoints do not show.
CROSS_CHECK_MARGIN = 0.10


def cross_check_tolerance_j(dt_s: float, p0_w: float, p1_w: float, e_counter_j: float, e_power_j: float, *,
                            resolution_j: float = 1e-6, power_accuracy_w: float = 0.0,
                            margin: float = CROSS_CHECK_MARGIN) -> float:
    """How far (J) a counter delta may be from the trapezoid of power over one interval and still agree.

    tolerance = resolution_j                      (the counter's quantum: a delta of two truncated
                                                   readings is off by less than one quantum)
              + power_accuracy_w x dt             (each power reading is within +/- accuracy)
              + |p1 - p0| / 2 x dt                (sampling error of the trapezoid: the power's path
                                                   between the two samples is unknown; the left and
                                                   right Riemann sums bracket it)
              + margin x max(e_counter, e_power)  (:data:`CROSS_CHECK_MARGIN`)

    Args: ``dt_s`` interval in s; ``p0_w``, ``p1_w`` power at its ends in W; the two energies in J;
    ``resolution_j`` the counter's quantum in J (NVML: 1 mJ); ``power_accuracy_w`` the power
    reading's accuracy in W (NVML: 5 W, nvidia-smi ``--help-query-gpu`` power.draw).
    Returns: the tolerance in J (>= 0).
    """
    return (abs(resolution_j) + abs(power_accuracy_w) * dt_s + abs(p1_w - p0_w) / 2.0 * dt_s
            + margin * max(abs(e_counter_j), abs(e_power_j)))


def cross_check_counter(counter: SeriesEnergy, power_points: list[tuple[float, Optional[float]]], *,
                        resolution_j: float = 1e-6, power_accuracy_w: float = 0.0,
                        margin: float = CROSS_CHECK_MARGIN) -> tuple[SeriesEnergy, list[int]]:
    """Cross-check one device's energy counter against its power readings, interval by interval.

    For every interval where both are known, the counter delta is compared with the trapezoid of
    power (:func:`power_series`); they disagree when the difference exceeds
    :func:`cross_check_tolerance_j` and the next interval does not settle it (a counter that updates
    a little late, e.g. every 100 ms, is short in one interval and catches up in the next: the two
    intervals are then compared together). A counter that went backwards (``reset``/``range_unreadable``)
    while power was read also disagrees. One disagreeing interval is enough to distrust the counter
    for the whole device (a stuck, reset or runaway counter, as reported on NVML/DCGM): the device's
    energy is then the power integration in every interval (``None`` where power is missing), and
    the series and the disagreeing intervals carry :data:`FLAG_COUNTER_INCONSISTENT`.

    Shared by every reader that has a counter and a power reading for one device (NVML; AMD SMI and
    Intel Level Zero likewise): the reader puts ``power_w`` beside ``energy_uj`` in a ``counter``
    reading, and :func:`series_from_readings` calls this.

    Args:
        counter: the counter's series (:func:`counter_series`), ``n - 1`` intervals.
        power_points: ``[(t, power_w), ...]``, the same ``n`` sample times; ``power_w`` W or None.
        resolution_j, power_accuracy_w, margin: see :func:`cross_check_tolerance_j`.

    Returns:
        ``(series, bad)``: ``counter`` unchanged and ``[]`` when they agree; else the power series
        (flagged) and the indices of the disagreeing intervals.

    Raises:
        ValueError: the two series do not have the same sample times (names both lengths).
    """
    if len(power_points) != len(counter.intervals) + 1 and counter.intervals:
        raise ValueError(f"power_points: {len(power_points)} samples for {len(counter.intervals)} counter "
                         "intervals; pass the power read at the counter's sample times")
    if not counter.intervals:
        return counter, []
    power = power_series(list(power_points))
    bad: list[int] = []
    pending: list[Any] = []  # [first k, counter J, power J, tolerance J] of a disagreement not yet settled
    for k, (ic, ip) in enumerate(zip(counter.intervals, power.intervals)):
        if ip.energy_j is None:
            continue
        if ic.energy_j is None:
            if FLAG_RESET in ic.flags or FLAG_RANGE_UNREADABLE in ic.flags:
                bad.append(k)
            continue
        p0, p1 = power_points[k][1], power_points[k + 1][1]
        if p0 is None or p1 is None:  # no power on an end: nothing to check against
            continue
        tol = cross_check_tolerance_j(ip.duration_s, p0, p1, ic.energy_j,
                                      ip.energy_j, resolution_j=resolution_j, power_accuracy_w=power_accuracy_w,
                                      margin=margin)
        if pending:  # the interval after a disagreement: a counter that updates late catches up here
            pending[1:] = [pending[1] + ic.energy_j, pending[2] + ip.energy_j, pending[3] + tol]
            if abs(pending[1] - pending[2]) > pending[3]:
                bad.extend(range(pending[0], k + 1))
            pending = []
        elif abs(ic.energy_j - ip.energy_j) > tol:
            pending = [k, ic.energy_j, ip.energy_j, tol]
    if pending:  # a disagreement in the last interval: nothing left to settle it
        bad.append(pending[0])
    if not bad:
        return counter, []
    ivs = [Interval(ip.t0, ip.t1, ip.energy_j, sorted(set(ip.flags) | ({FLAG_COUNTER_INCONSISTENT} if k in bad else set())))
           for k, ip in enumerate(power.intervals)]
    out = summarise_intervals(ivs, wraps=counter.wraps, resets=counter.resets)
    out.flags = sorted(set(out.flags) | {FLAG_COUNTER_INCONSISTENT})
    return out, bad


def checked_counter(s: SeriesEnergy, run: Sequence[tuple[float, Reading]]) -> SeriesEnergy:
    """A counter run whose readings also carry power: cross-checked (:func:`cross_check_counter`)."""
    res = [r.energy_resolution_uj for _, r in run if r.energy_resolution_uj]
    acc = [r.power_accuracy_w for _, r in run if r.power_accuracy_w is not None]
    checked, _ = cross_check_counter(s, [(t, r.power_w) for t, r in run],
                                     resolution_j=(max(res) if res else 1) / 1e6,
                                     power_accuracy_w=max(acc) if acc else 0.0)
    return checked
