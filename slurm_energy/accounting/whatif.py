"""Carbon-aware what-if: the job's own measured power profile started at each hour of a window, over
the imported hourly carbon intensity (and forecast, when imported): when would it have emitted least?

    CO2e(s) = sum over the profile's pieces p of E_facility,p x CI(hour of s + offset_p) / 1000   (kg)

The profile is the job's facility energy over its time: its shape from the nodes' power trace
(summed over nodes; each interval's energy = its mean power x seconds), else from its hourly energy
(even within each hour), else even over the job; its size is the job's facility kWh (IT x PUE), so
the what-if moves the record's own energy in time and changes nothing else. Candidate starts are
the job's start shifted by whole hours (the profile keeps its place within the hour); a start is
kept only when every hour it touches has an intensity. The figures are location-based (no alpha).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import pairwise

from slurm_energy.carbon.hourly import hour_key, split_interval_by_hour
from slurm_energy.model import JobRecord
from slurm_energy.units import co2e_kg

#: default window: this many days either side of the job's start (clipped to the intensity data)
WINDOW_DAYS = 7.0


@dataclass(frozen=True)
class Piece:
    """Facility energy ``kwh`` spent evenly over [offset_s, offset_s + dur_s) from the job's start."""

    offset_s: float
    dur_s: float
    kwh: float


@dataclass(frozen=True)
class WhatIf:
    """The what-if's answer: kg are location-based CO2e of the same profile (``profile_source``)."""

    actual_start: float
    actual_kg: float | None  # the profile at its real start (None: an hour of it has no intensity)
    best_start: float
    best_kg: float
    worst_kg: float
    saving_kg: float | None  # actual - best
    candidates: int
    window: tuple[float, float]  # the starts considered, epoch s (clipped to the data)
    profile_source: str
    forecast_hours: int  # hours of the best start's run after ``now`` (from an imported forecast)


def profile(rec: JobRecord) -> tuple[list[Piece], str]:
    """The job's facility-energy profile and how it was obtained (see the module docstring)."""
    if rec.facility_kwh is None or rec.facility_kwh <= 0:
        return [], "no facility energy"
    t0, total = rec.start_time, rec.facility_kwh
    raw: list[tuple[float, float, float]] = []  # (offset, dur, weight)
    for n in rec.nodes:
        rows = [r for r in (getattr(n, "power_trace", None) or []) if r and r[0] is not None]
        for a, b in pairwise(rows):
            dt = b[0] - a[0]
            w = [x for x in (b[1:] or []) if x is not None]
            if dt > 0 and w:
                raw.append((a[0] - t0, dt, sum(w) * dt))
    source = "power trace"
    if not raw or sum(r[2] for r in raw) <= 0:
        hourly: dict[str, float] = {}
        for n in rec.nodes:
            for h, e in n.hourly_energy_j.items():
                hourly[h] = hourly.get(h, 0.0) + e
        raw = []
        for h, e in hourly.items():
            hs = math.floor(_epoch(h))
            a, b = max(hs, rec.start_time), min(hs + 3600.0, rec.end_time)
            if b > a and e > 0:
                raw.append((a - t0, b - a, e))
        source = "hourly energy"
    if not raw or sum(r[2] for r in raw) <= 0:
        return [Piece(0.0, max(rec.elapsed_s, 1.0), total)], "even over the job (no trace or hourly energy)"
    s = sum(r[2] for r in raw)
    return [Piece(o, d, total * w / s) for o, d, w in raw], source


def _epoch(key: str) -> float:
    from datetime import datetime, timezone

    return datetime.strptime(key, "%Y-%m-%dT%H:00:00Z").replace(tzinfo=timezone.utc).timestamp()


def co2e_at(pieces: list[Piece], start: float, ci: dict[str, float]) -> float | None:
    """CO2e (kg, location-based) of ``pieces`` started at ``start``; None if an hour lacks an intensity."""
    total = 0.0
    for p in pieces:
        for h, kwh in split_interval_by_hour(start + p.offset_s, start + p.offset_s + p.dur_s, p.kwh).items():
            if h not in ci:
                return None
            total += co2e_kg(kwh, ci[h])
    return total


def what_if(rec: JobRecord, ci: dict[str, float], *, window_days: float = WINDOW_DAYS,
            now: float | None = None) -> WhatIf | None:
    """The best start of ``rec``'s profile within ``window_days`` either side of its start, over ``ci``
    ({hour key: gCO2e/kWh}); None when no start has an intensity for every hour it touches."""
    pieces, source = profile(rec)
    if not pieces or not ci:
        return None
    hours = sorted(_epoch(h) for h in ci)
    span = max(p.offset_s + p.dur_s for p in pieces)
    lo = max(rec.start_time - window_days * 86400.0, hours[0])
    hi = min(rec.start_time + window_days * 86400.0, hours[-1] + 3600.0 - span)
    k0, k1 = math.ceil((lo - rec.start_time) / 3600.0), math.floor((hi - rec.start_time) / 3600.0)
    found: list[tuple[float, float]] = []
    for k in range(k0, k1 + 1):
        s = rec.start_time + k * 3600.0
        kg = co2e_at(pieces, s, ci)
        if kg is not None:
            found.append((kg, s))
    if not found:
        return None
    # equal CO2e (to 1e-9 kg: sums of the same terms in another order) -> the start nearest the job's
    best_kg, best_s = min(found, key=lambda x: (round(x[0], 9), abs(x[1] - rec.start_time)))
    actual = co2e_at(pieces, rec.start_time, ci)
    t_now = now if now is not None else rec.end_time
    fc = len({hour_key(t) for t in _hours_touched(best_s, span) if t >= t_now})
    return WhatIf(actual_start=rec.start_time, actual_kg=actual, best_start=best_s, best_kg=best_kg,
                  worst_kg=max(kg for kg, _ in found), saving_kg=None if actual is None else actual - best_kg,
                  candidates=len(found), window=(min(s for _, s in found), max(s for _, s in found)),
                  profile_source=source, forecast_hours=fc)


def _hours_touched(start: float, span: float) -> list[float]:
    h = math.floor(start / 3600.0) * 3600.0
    out = []
    while h < start + span:
        out.append(h)
        h += 3600.0
    return out


def best_windows(pieces: list[Piece], ci: dict[str, float], after: float, *, top: int = 3,
                 horizon_days: float = WINDOW_DAYS) -> list[tuple[float, float]]:
    """For a job not yet run (``predict``): the ``top`` hour-aligned starts at or after ``after``
    within ``horizon_days`` with the least CO2e of ``pieces``, as [(start epoch s, kg)], least first."""
    span = max(p.offset_s + p.dur_s for p in pieces)
    h0 = math.ceil(after / 3600.0) * 3600.0
    out = []
    for k in range(int(horizon_days * 24) + 1):
        s = h0 + k * 3600.0
        kg = co2e_at(pieces, s, ci)
        if kg is not None:
            out.append((s, kg))
        if s + span > h0 + horizon_days * 86400.0:
            break
    return sorted(out, key=lambda x: (round(x[1], 9), x[0]))[:top]  # equal CO2e (to 1e-9 kg): the earlier


def flat_profile(hours: float, kw: float) -> list[Piece]:
    """A job not yet run: ``kw`` facility power for ``hours`` (``predict``'s estimate)."""
    return [Piece(0.0, hours * 3600.0, kw * hours)]


