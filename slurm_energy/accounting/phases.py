"""Phases and stages marked by the training script -> energy per time window (pure; no files).

The script (``slurm_energy.track``) leaves marks: JSON objects with a time and a name, parsed here
from already-read text lines (:func:`parse_marks`); nothing in them is executed or followed.

* ``{"t": s, "ev": "begin", "id": n, "name": "epoch 3"}`` / ``{"t": s, "ev": "end", "id": n}``:
  a phase (phases may nest or leave gaps);
* ``{"t": s, "ev": "stage", "frac": 0.6}``: 60 % of training done at time t;
* ``{"t": s, "ev": "tag", "tags": {"flops": 1.2e18, "model_params": 1.1e8, "tokens": 2e9}}``
  (numbers, or a short word such as ``"precision": "bf16"``).

A window's energy is computed from the job's attributed per-device intervals (the same ones summed
into the job's totals): an interval ``(t0, t1]`` with energy E overlapping a window by ``o`` seconds
contributes ``E x o / (t1 - t0)`` (its mean power over the overlap). So the energy of the phases'
union plus the energy outside every phase equals the job's energy, and nested phases are counted
once in the union (never more than the job).

Bad marks never lose the record: they are ignored and named in flags (``marks_*``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from slurm_energy.model import DEVICE_CLASSES, JobRecord, Method, WindowEnergy, worst_method
from slurm_energy.units import J_PER_KWH, sum_known

#: Bounds on what a job's marks may hold (the file is user data, read by root).
MAX_MARKS = 10_000
MAX_NAME = 200
MAX_TAGS = 32
#: Phases and stages kept per node: each becomes a window the finalizer integrates, a
#: row of the record, the report and the plot, so a job's user must not be able to make the
#: finalizer's work (and the stored record) grow with their marks file. More are ignored, flagged
#: ``marks_truncated_phases:<n>`` / ``marks_truncated_stages:<n>``.
MAX_PHASES = 500
MAX_STAGES = 1000
_NAME_OK = re.compile(r"[^\x00-\x1f\x7f]+")
_TAG_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
#: A string tag value (e.g. ``precision="bf16"``): a short word, nothing else.
TAG_WORD = re.compile(r"^[A-Za-z0-9_.+-]{1,32}$")


def tag_value(v: Any) -> float | str | None:
    """A tag value as stored: a finite number as float, a short word (:data:`TAG_WORD`) as str,
    else None (ignored)."""
    if isinstance(v, str):
        return v if TAG_WORD.match(v) else None
    return _num(v)


@dataclass
class Marks:
    """Parsed marks: phases ``(name, begin_s, end_s or None, depth)``, stages ``(fraction, t_s)``,
    tags ``{key: number}`` and flags naming what was ignored."""

    phases: list[tuple[str, float, float | None, int]] = field(default_factory=list)
    stages: list[tuple[float, float]] = field(default_factory=list)
    tags: dict[str, Any] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    try:
        v = float(v)
    except OverflowError:  # an int beyond 1e308
        return None
    return v if math.isfinite(v) else None


def parse_marks(lines: Iterable[str]) -> Marks:
    """Parse mark lines (see module doc). Never raises: a garbled line, an ``end`` without its
    ``begin``, a stage outside 0..1, a non-numeric tag or more than :data:`MAX_MARKS` marks is
    ignored and counted in ``flags`` (e.g. ``marks_garbled:3``); a phase never closed keeps
    ``end_s`` None (closed at the job's end by :func:`node_windows`, flagged there)."""
    m = Marks()
    bad: dict[str, int] = {}
    open_: dict[int, int] = {}  # id -> index in m.phases
    n = 0
    for line in lines:
        line = line.strip()
        if not line:
            continue
        n += 1
        if n > MAX_MARKS:
            bad["marks_truncated_after"] = MAX_MARKS
            break
        try:
            d = json.loads(line)
        except (ValueError, RecursionError):  # garbled, or nested deeper than the parser's stack
            d = None
        t = _num(d.get("t")) if isinstance(d, dict) else None
        ev = d.get("ev") if isinstance(d, dict) else None
        if t is None or ev not in ("begin", "end", "stage", "tag"):
            bad["marks_garbled"] = bad.get("marks_garbled", 0) + 1
            continue
        _one(m, d, t, ev, open_, bad)
    m.flags = [f"{k}:{v}" for k, v in bad.items()]
    return m


def _one(m: Marks, d: dict[str, Any], t: float, ev: str, open_: dict[Any, Any], bad: dict[str, int]) -> None:
    def flag(k: str) -> None:
        bad[k] = bad.get(k, 0) + 1

    if ev == "begin":
        name, pid = d.get("name"), d.get("id")
        if not isinstance(name, str) or not _NAME_OK.fullmatch(name[:MAX_NAME]) or not isinstance(pid, int):
            return flag("marks_bad_phase")
        if pid in open_:
            return flag("marks_duplicate_id")
        if len(m.phases) >= MAX_PHASES:
            bad["marks_truncated_phases"] = MAX_PHASES
            return None
        open_[pid] = len(m.phases)
        m.phases.append((name[:MAX_NAME], t, None, len(open_) - 1))
    elif ev == "end":
        i = open_.pop(d.get("id"), None) if isinstance(d.get("id"), int) else None
        if i is None:
            return flag("marks_end_without_begin")
        name, t0, _, depth = m.phases[i]
        m.phases[i] = (name, t0, max(t, t0), depth)
    elif ev == "stage":
        f = _num(d.get("frac"))
        if f is None or not 0.0 <= f <= 1.0:
            return flag("marks_stage_out_of_range")
        if len(m.stages) >= MAX_STAGES:
            bad["marks_truncated_stages"] = MAX_STAGES
            return None
        m.stages.append((f, t))
    else:
        tags = d.get("tags")
        if not isinstance(tags, dict):
            return flag("marks_bad_tag")
        for k, v in tags.items():
            if not (isinstance(k, str) and _TAG_KEY.match(k)) or tag_value(v) is None or (
                    k not in m.tags and len(m.tags) >= MAX_TAGS):
                flag("marks_bad_tag")
                continue
            m.tags[k] = tag_value(v)
    return None


#: One device's attributed intervals: (device class, method, [(t0, t1, energy J or None)]).
DeviceSeries = tuple[str, Method, Sequence[tuple[float, float, float | None]]]


def union(windows: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """Disjoint, sorted union of ``(a, b)`` windows (s); empty windows dropped."""
    out: list[list[float]] = []
    for a, b in sorted((a, b) for a, b in windows if b > a):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def complement(windows: list[tuple[float, float]], start: float, end: float) -> list[tuple[float, float]]:
    """The parts of ``[start, end]`` outside the disjoint sorted ``windows``."""
    out, cur = [], start
    for a, b in windows:
        if a > cur:
            out.append((cur, min(a, end)))
        cur = max(cur, b)
    if cur < end:
        out.append((cur, end))
    return [(a, b) for a, b in out if b > a]


class _Cumulative:
    """One device's attributed intervals as two piecewise-linear functions of time: the energy (J)
    and the measured seconds up to ``x``. An interval ``(t0, t1]`` with energy E adds slope
    ``E / (t1 - t0)`` between its ends, so ``at(b) - at(a)`` is exactly the sum over intervals of
    ``E x overlap / (t1 - t0)`` (:func:`windows_energy`'s rule), for overlapping intervals too. Built
    once per device in O(n log n); each window then costs two bisections, whatever its length or
    the job's: a job's user, who decides how many windows there are (up to :data:`MAX_PHASES` +
    :data:`MAX_STAGES`), cannot make the finalizer's work grow as windows x intervals."""

    __slots__ = ("fe", "fm", "se", "sm", "xs")

    def __init__(self, ivs: Iterable[tuple[float, float, float | None]]):
        ev: dict[float, list[float]] = {}
        for t0, t1, ej in ivs:
            d = t1 - t0
            if ej is None or d <= 0:
                continue
            for x, sign in ((t0, 1.0), (t1, -1.0)):
                e = ev.setdefault(x, [0.0, 0.0, 0.0])
                e[0] += sign * ej / d
                e[1] += sign
                e[2] += sign
        self.xs = sorted(ev)
        self.fe: list[float] = []
        self.fm: list[float] = []
        self.se: list[float] = []
        self.sm: list[float] = []
        f = m = slope_e = slope_m = 0.0
        n_open, prev = 0.0, None
        for x in self.xs:
            if prev is not None:
                f += slope_e * (x - prev)
                m += slope_m * (x - prev)
            self.fe.append(f)
            self.fm.append(m)
            de, dm, dn = ev[x]
            slope_e, slope_m, n_open = slope_e + de, slope_m + dm, n_open + dn
            if n_open == 0:  # no interval open: no rounding left over between intervals
                slope_e = slope_m = 0.0
            self.se.append(slope_e)
            self.sm.append(slope_m)
            prev = x

    def at(self, x: float) -> tuple[float, float]:
        """(energy J, measured s) from the first interval's start up to ``x``."""
        import bisect

        k = bisect.bisect_right(self.xs, x) - 1
        if k < 0:
            return 0.0, 0.0
        d = x - self.xs[k]
        return self.fe[k] + self.se[k] * d, self.fm[k] + self.sm[k] * d


#: Device series whose intervals were read into :class:`_Cumulative` (:func:`_prepared`).
_Prepared = list[tuple[str, Method, _Cumulative]]


def _prepared(series: Sequence[DeviceSeries] | _Prepared) -> _Prepared:
    return [(cls, method, ivs if isinstance(ivs, _Cumulative) else _Cumulative(ivs)) for cls, method, ivs in series]


def windows_energy(series: Sequence[DeviceSeries] | _Prepared, windows: list[tuple[float, float]]
                   ) -> tuple[dict[str, float | None], dict[str, Method], float]:
    """Energy of the job over the disjoint ``windows``, per device class.

    Returns ``(energy_it_j, methods, coverage)``: class -> J (None = no measured second in the
    windows), class -> worst method of the devices measured there, and the lowest per-device
    fraction of the windows' seconds that was measured (1.0 for zero-length windows). Each
    device's intervals are read through :class:`_Cumulative` (built here, or once by the caller).
    """
    span = sum(b - a for a, b in windows)
    per_cls: dict[str, list[float | None]] = {}
    meth: dict[str, list[Method]] = {}
    cov = 1.0
    for cls, method, cum in _prepared(series):
        e, measured = 0.0, 0.0
        for a, b in windows:
            if b > a:
                (ea, ma), (eb, mb) = cum.at(a), cum.at(b)
                e += eb - ea
                measured += mb - ma
        ok = span <= 0 or measured > 0
        per_cls.setdefault(cls, []).append(e if ok else None)
        if ok:
            meth.setdefault(cls, []).append(method)
        if span > 0:
            cov = min(cov, measured / span)
    order = [c for c in DEVICE_CLASSES if c in per_cls] + sorted(set(per_cls) - set(DEVICE_CLASSES))
    energy = {c: sum_known(per_cls[c]) for c in order}
    methods = {c: worst_method(meth.get(c, [])) for c in order}
    return energy, methods, (cov if series else 0.0)


def _window(kind: str, name: str, a: float, b: float, series: Sequence[DeviceSeries] | _Prepared,
            parts: list[tuple[float, float]] | None = None, **kw: Any) -> WindowEnergy:
    energy, methods, cov = windows_energy(series, parts if parts is not None else [(a, b)])
    return WindowEnergy(kind=kind, name=name, start_time=a, end_time=b, energy_it_j=energy, methods=methods,
                        it_j=sum_known(list(energy.values())), coverage=min(1.0, cov), **kw)


#: A window edge within this many seconds of a sample row is read there (``track()`` takes a row at
#: each phase boundary; the row follows the mark by the sampler's wake-up, a few ms); farther, the
#: edge falls inside a sampling interval and the window's energy there is cut from that interval.
EDGE_READ_TOLERANCE_S = 0.1


def _cut(edges: Sequence[float], rows: Sequence[float]) -> bool:
    """Whether any of ``edges`` lies more than :data:`EDGE_READ_TOLERANCE_S` from every row time
    in ``rows`` (sorted)."""
    import bisect

    for x in edges:
        i = bisect.bisect_left(rows, x)
        near = [rows[j] for j in (i - 1, i) if 0 <= j < len(rows)]
        if not near or min(abs(x - r) for r in near) > EDGE_READ_TOLERANCE_S:
            return True
    return False


def node_windows(series: Sequence[DeviceSeries], marks: Marks, start: float, end: float,
                 interval_s: float) -> list[WindowEnergy]:
    """One node's phase, stage and phase-total windows (see :class:`WindowEnergy`).

    A phase never closed ends at ``end`` (flag ``never_closed``); times outside the job's
    ``[start, end]`` are clipped (flag ``clipped_to_job``). A window with an edge inside a sampling
    interval (no row within :data:`EDGE_READ_TOLERANCE_S`) is flagged ``interval_cut``: its energy
    there is the straddling interval's mean power times its seconds, so two identical phases can
    differ by what the intervals around them held; such a phase shorter than one sampling interval
    is also flagged ``shorter_than_interval``. Stage windows run from ``start`` to the stage's time.
    """
    out: list[WindowEnergy] = []
    spans = []
    rows = sorted({x for _, _, ivs in series for t0, t1, _ in ivs for x in (t0, t1)})
    ts = [x for _, _, ivs in series for t0, t1, _ in ivs for x in (t0, t1)]
    prep = _prepared(series)  # once: each window below is then two bisections per device
    for name, t0, t1, depth in marks.phases:
        flags = [] if t1 is not None else ["never_closed"]
        t1 = end if t1 is None else t1
        a, b = min(max(t0, start), end), min(max(t1, start), end)
        if (a, b) != (t0, t1):
            flags.append("clipped_to_job")
        if _cut((a, b), rows):
            flags.append("interval_cut")
            if b - a < interval_s:
                flags.append("shorter_than_interval")
        spans.append((a, b))
        out.append(_window("phase", name, a, b, prep, depth=depth, flags=flags))
    for frac, t in marks.stages:
        b = min(max(t, start), end)
        flags = ["clipped_to_job"] if b != t else []
        out.append(_window("stage", f"{frac * 100:.4g}%", start, b, prep, fraction=frac,
                           flags=flags + (["interval_cut"] if _cut((b,), rows) else [])))
    if marks.phases:
        # "outside" spans every measured second, also a last sample taken after the Epilog's time
        # (the sampler's final sample on TERM): union + outside = the node's energy, exactly
        lo, hi = min([start] + ts), max([end] + ts)
        # bounds shown: the union from the first phase's start to the last one's end (not the job);
        # "outside" within the job's [start, end] (its energy still counts that last sample)
        u = union(spans)
        a, b = (u[0][0], u[-1][1]) if u else (start, start)
        out.append(_window("in_phases", "all phases (nested counted once)", a, b, prep, parts=u))
        out.append(_window("outside", "outside any phase", start, end, prep, parts=complement(u, lo, hi)))
    return out


def _key(w: WindowEnergy, seen: dict[tuple[Any, ...], int]) -> tuple[Any, ...]:
    base = (w.kind, w.name if w.kind != "stage" else w.fraction)
    seen[base] = seen.get(base, -1) + 1
    return base + (seen[base],)


def job_windows(rec: JobRecord) -> JobRecord:
    """Fill ``rec.phases``, ``rec.stages``, ``rec.phase_totals`` and ``rec.marks_flags`` from the
    nodes' windows (in place; returns ``rec``): the same window on several nodes (the k-th phase
    of a name, a stage's fraction) is summed over nodes (known values only; coverage the lowest;
    method the worst). CO2e of a window = job CO2e x window IT J / job IT J (consistent with an
    hourly intensity too). Requires ``rec.it_kwh``/``rec.co2e_kg`` already set."""
    merged: dict[tuple[Any, ...], WindowEnergy] = {}
    for node in rec.nodes:
        seen: dict[tuple[Any, ...], int] = {}
        for w in node.windows:
            k = _key(w, seen)
            merged[k] = _add(merged[k], w) if k in merged else w.model_copy(deep=True)
    job_it = None if rec.it_kwh is None else rec.it_kwh * J_PER_KWH
    for w in merged.values():
        if w.it_j is not None and job_it and rec.co2e_kg is not None:
            w.co2e_kg = rec.co2e_kg * w.it_j / job_it
        if w.it_j is not None and job_it and rec.co2e_gross_kg is not None:
            w.co2e_gross_kg = rec.co2e_gross_kg * w.it_j / job_it
    ws = list(merged.values())
    rec.phases = sorted((w for w in ws if w.kind == "phase"), key=lambda w: (w.start_time, w.depth))
    rec.stages = sorted((w for w in ws if w.kind == "stage"), key=lambda w: (w.fraction or 0.0, w.end_time))
    rec.phase_totals = [w for w in ws if w.kind in ("in_phases", "outside")]
    rec.marks_flags = sorted({f"{n.node}:{f}" for n in rec.nodes for f in n.marks_flags})
    return rec


def _add(a: WindowEnergy, b: WindowEnergy) -> WindowEnergy:
    classes = list(dict.fromkeys(list(a.energy_it_j) + list(b.energy_it_j)))
    energy = {c: sum_known([a.energy_it_j.get(c), b.energy_it_j.get(c)]) for c in classes}
    methods = {c: worst_method([m for m in (a.methods.get(c), b.methods.get(c)) if m is not None]) for c in classes}
    return a.model_copy(update=dict(
        start_time=min(a.start_time, b.start_time), end_time=max(a.end_time, b.end_time), energy_it_j=energy,
        methods=methods, it_j=sum_known(list(energy.values())), coverage=min(a.coverage, b.coverage),
        flags=sorted(set(a.flags) | set(b.flags))))
