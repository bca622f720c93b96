"""The integration's array functions (slurm_energy.accounting.integrate) called the way a test
writes a series by hand: ``[(t, value), ...]`` pairs, or ``[(t, Reading), ...]`` for one device;
and a series read back interval by interval (:func:`intervals`)."""

from dataclasses import dataclass, field

from slurm_energy.accounting import integrate
from slurm_energy.accounting.integrate import floats
from slurm_energy.sampling.sampletable import DYNAMIC, DeviceColumns


def _split(points):
    return floats([p[0] for p in points]), [p[1] for p in points]


def counter_series(points, max_range_uj, max_power_w=None, range_unreadable=False):
    return integrate.counter_series(*_split(points), max_range_uj, max_power_w, range_unreadable)


def power_series(points):
    return integrate.power_series(*_split(points))


def mean_power_series(points):
    return integrate.power_series(*_split(points), mean=True)


def cross_check_counter(counter, power_points, **kw):
    return integrate.cross_check_counter(counter, floats([p for _, p in power_points]), **kw)


def series_from_readings(samples):
    """One device's ``[(t, Reading), ...]`` as the summary reads it: columns, then device_series."""
    dc = DeviceColumns(samples[0][1].device_id if samples else "")
    for i, (_, r) in enumerate(samples):
        d = r.to_dict()
        dc.rows.append(i)
        dc.static.append({k: v for k, v in d.items() if k not in DYNAMIC})
        for k in DYNAMIC:
            dc.vals[k].append(d.get(k))
    return integrate.device_series(floats([t for t, _ in samples]), dc)


@dataclass
class Interval:
    """Energy of one device over ``(t0, t1]`` (epoch s): ``energy_j`` J, or ``None`` when the
    interval was dropped (unmeasured); ``flags`` name its anomalies (sorted)."""

    t0: float
    t1: float
    energy_j: float | None
    flags: list[str] = field(default_factory=list)


def intervals(s):
    """A :class:`~slurm_energy.accounting.integrate.SeriesEnergy` as :class:`Interval` objects."""
    names = sorted(s.masks)
    rows = [s.masks[n].tolist() for n in names]
    return [Interval(a, b, None if e != e else e, [n for n, r in zip(names, rows) if r[k]])
            for k, (a, b, e) in enumerate(zip(s.t0.tolist(), s.t1.tolist(), s.energy.tolist()))]
