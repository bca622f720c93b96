"""Phases and stages of a job for display: the report's phase table, its CSV, the plot's bands and
``jobenergy -l`` rows. Numbers come from the record's windows (``JobRecord.phases``, ``.stages``,
``.phase_totals``, filled by :mod:`slurm_energy.accounting.phases`); nothing is computed here but
unit conversions. Unmeasured stays ``None`` (HTML "n/a — not measured", CSV empty cell).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from dataclasses import dataclass

from slurm_energy.accounting.phases import union
from slurm_energy.jobid import display_id
from slurm_energy.model import DEVICE_CLASSES, JobRecord, Method, WindowEnergy, worst_method
from slurm_energy.reporting.csvsafe import cell
from slurm_energy.units import J_PER_KWH

#: Columns of ``energy-<jobid>.phases.csv``; times in s since the job's start, energies in kWh;
#: ``job_id`` as in the report's name (:func:`slurm_energy.jobid.display_id`: ``715219_23``...).
PHASE_CSV_COLUMNS = ("job_id", "kind", "name", "depth", "fraction", "start_s", "end_s", "duration_s",
                     "cpu_kWh", "gpu_kWh", "ram_kWh", "energy_it_kWh", "method", "coverage", "kgCO2e", "flags")


@dataclass
class PhaseRow:
    """One window for display: kind (phase / stage / in_phases / outside), times in s since the
    job's start, energies in kWh (None = not measured)."""

    kind: str
    name: str
    depth: int
    fraction: float | None
    start_s: float
    end_s: float
    class_kwh: dict[str, float | None]
    it_kwh: float | None
    method: Method
    coverage: float
    co2e_kg: float | None
    flags: list[str]
    seconds: float | None = None  # seconds the window covers when not end - start (union, outside)

    @property
    def duration_s(self) -> float:
        """Seconds inside the window: ``seconds`` for the phases' union and the time outside any
        phase (not one span), else ``end_s - start_s``."""
        return self.seconds if self.seconds is not None else max(0.0, self.end_s - self.start_s)


def _row(w: WindowEnergy, t0: float) -> PhaseRow:
    measured = [m for c, m in w.methods.items() if w.energy_it_j.get(c) is not None]
    return PhaseRow(
        kind=w.kind, name=w.name, depth=w.depth, fraction=w.fraction, start_s=w.start_time - t0,
        end_s=w.end_time - t0,
        class_kwh={c: (None if v is None else v / J_PER_KWH) for c, v in w.energy_it_j.items()},
        it_kwh=None if w.it_j is None else w.it_j / J_PER_KWH, method=worst_method(measured),
        coverage=w.coverage, co2e_kg=w.co2e_kg, flags=list(w.flags))


def phase_rows(record: JobRecord) -> list[PhaseRow]:
    """Phases (in start order), then the phases' union and the time outside any phase, then the
    stages (by fraction). Empty when the job marked nothing.

    Every window is shown within the job, ``[0, elapsed]`` s since its start. The union ("all
    phases") spans the first phase's start to the last phase's end and lasts the seconds inside any
    phase; "outside any phase" spans the job and lasts the rest (elapsed - union seconds). Records
    stored before the windows were bounded so are shown the same way (from their phases).
    """
    t0, elapsed = record.start_time, record.elapsed_s
    spans = union([(_clip(w.start_time - t0, elapsed), _clip(w.end_time - t0, elapsed)) for w in record.phases])
    inside = sum(b - a for a, b in spans)
    rows = []
    for w in [*record.phases, *record.phase_totals, *record.stages]:
        r = _row(w, t0)
        r.start_s, r.end_s = _clip(r.start_s, elapsed), _clip(r.end_s, elapsed)
        if w.kind == "in_phases" and spans:
            r.start_s, r.end_s, r.seconds = spans[0][0], spans[-1][1], inside
        elif w.kind == "outside":
            r.start_s, r.end_s, r.seconds = 0.0, elapsed, max(0.0, elapsed - inside)
        rows.append(r)
    return rows


def _clip(t: float, elapsed: float) -> float:
    return min(max(t, 0.0), max(elapsed, 0.0))


def render_phases_csv(record: JobRecord) -> str:
    """CSV text (:data:`PHASE_CSV_COLUMNS`) of :func:`phase_rows`; '' when the job has none."""
    rows = phase_rows(record)
    if not rows:
        return ""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(PHASE_CSV_COLUMNS)
    for r in rows:
        w.writerow([cell(v) for v in (
            display_id(record), r.kind, r.name, r.depth, r.fraction, r.start_s, r.end_s, r.duration_s,
            *(r.class_kwh.get(c) for c in DEVICE_CLASSES), r.it_kwh, r.method.value, r.coverage, r.co2e_kg,
            ";".join(r.flags))])
    return buf.getvalue()


def long_rows(record: JobRecord, jobid: str, fmt_num: Callable[[float | None], str]) -> list[list[str]]:
    """``jobenergy -l`` rows (its LONG_FIELDS) for each window: Node ``-``, Class ``phase`` /
    ``stage`` / ``in_phases`` / ``outside``, DeviceID the name, Energy_kWh the IT energy, Covers
    the window in s since the job's start."""
    out = []
    for r in phase_rows(record):
        covers = f"{r.start_s:.1f}-{r.end_s:.1f} s since start"
        if r.depth:
            covers += f", nested (depth {r.depth})"
        if r.flags:
            covers += "; " + ",".join(r.flags)
        out.append([jobid, "-", r.kind, r.name, "", "", r.method.value, fmt_num(r.it_kwh), "",
                    f"{r.coverage:.3f}", "", "", "", covers])
    return out


def plot_marks(record: JobRecord) -> tuple[list[tuple[float, float, str]], list[tuple[float, str]]]:
    """For the power plot: outermost phases ``(start_min, end_min, name)`` and stages
    ``(t_min, "60%")``, in minutes since the job's start."""
    t0 = record.start_time
    bands = [((w.start_time - t0) / 60, (w.end_time - t0) / 60, w.name) for w in record.phases if w.depth == 0]
    stages = [((w.end_time - t0) / 60, w.name) for w in record.stages]
    return bands, stages
