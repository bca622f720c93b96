"""The job's energy report: HTML (jinja2) and CSV, written into the job's working directory.

Numbers come from a finalised :class:`~slurm_energy.model.JobRecord` (totals filled by
``accounting.formulas.finalise_record``); this module only aggregates per device class for display
and never turns an unmeasured value (``None``) into 0: the HTML shows "n/a — not measured", the
CSV leaves the cell empty.

The method (E_IT = sum_i n_i u_i P_i t_i over CPU, GPU, RAM; facility = E_IT x PUE;
CO2e = facility x CI x alpha) is shown with the values used.
"""

from __future__ import annotations

import csv
import datetime as _dt
import io
import os
from dataclasses import dataclass, field
from typing import Optional

from slurm_energy.model import DEVICE_CLASSES, DeviceEnergy, JobRecord, Method, worst_method
from slurm_energy.reporting.safe_write import write_file_as_user

J_PER_KWH = 3.6e6  # 1 kWh = 1000 W x 3600 s = 3.6e6 J

#: CSV columns, units in the names. ``energy_it_kWh`` is the job's share; ``device_energy_kWh``
#: the whole devices over the job's time; ``mean_power_W`` = job-share energy / elapsed time.
CSV_COLUMNS = (
    "job_id", "device_class", "n_devices", "method", "coverage",
    "energy_it_kWh", "device_energy_kWh", "mean_power_W", "elapsed_s",
    "pue", "facility_kWh", "ci_gCO2e_per_kWh", "alpha", "kgCO2e",
)


@dataclass
class ClassRow:
    """One device class (or the total) of one job, for the report tables and CSV.

    Energies in J (``None`` = unmeasured or no such device), powers in W, time in s, coverage in
    [0, 1] (``None`` = no device of this class).
    """

    device_class: str
    n_devices: int = 0
    method: Method = Method.UNAVAILABLE
    coverage: Optional[float] = None
    energy_it_j: Optional[float] = None
    device_energy_j: Optional[float] = None
    mean_power_w: Optional[float] = None
    rated_power_w: list[float] = field(default_factory=list)  # distinct P_i, W
    mean_util: Optional[float] = None  # count-weighted mean u_i
    duration_s: Optional[float] = None  # longest t_i
    facility_kwh: Optional[float] = None
    co2e_kg: Optional[float] = None
    models: list[str] = field(default_factory=list)

    @property
    def energy_it_kwh(self) -> Optional[float]:
        return None if self.energy_it_j is None else self.energy_it_j / J_PER_KWH

    @property
    def device_energy_kwh(self) -> Optional[float]:
        return None if self.device_energy_j is None else self.device_energy_j / J_PER_KWH


def _devices(record: JobRecord, cls: str) -> list[DeviceEnergy]:
    return [d for n in record.nodes for d in n.devices if d.device_class == cls]


def _mean_or_none(values, weights) -> Optional[float]:
    pairs = [(v, w) for v, w in zip(values, weights) if v is not None]
    tw = sum(w for _, w in pairs)
    return sum(v * w for v, w in pairs) / tw if pairs and tw > 0 else None


def class_rows(record: JobRecord) -> list[ClassRow]:
    """Per device class the job had (cpu, gpu, ram, in that order) then a ``total`` row.

    Energies are the record's totals (``record.energy_it_j`` / ``record.device_energy_j``, J);
    coverage is the lowest device coverage in the class (a class is only as covered as its
    least-covered device); ``mean_power_w`` = job-share energy / job elapsed time (W, summed over
    nodes). Facility kWh = IT kWh x PUE. kgCO2e per class is the record's ``co2e_kg`` split in
    proportion to IT energy, which equals facility x CI x alpha / 1000 for a flat intensity and
    stays consistent with the total when the record used hourly intensity.

    The total row's method is the worst over the classes its energy sums; its coverage the lowest
    over every class with devices (an unmeasured class makes it 0). The total row's energy is ``record.it_kwh`` (partial totals are flagged by
    ``record.coverage_complete``, never padded); its device energy is ``None`` unless every class
    with devices has one.
    """
    elapsed = record.elapsed_s
    it_total_j = None if record.it_kwh is None else record.it_kwh * J_PER_KWH
    rows: list[ClassRow] = []
    for cls in DEVICE_CLASSES:
        devs = _devices(record, cls)
        if not devs and cls not in record.energy_it_j:
            continue  # the job had no device of this class (e.g. no GPU): no row, not "unavailable"
        e = record.energy_it_j.get(cls)
        row = ClassRow(
            device_class=cls,
            n_devices=sum(d.count for d in devs),
            method=Method(record.methods.get(cls, worst_method(d.method for d in devs))),
            coverage=min((d.coverage for d in devs), default=None),
            energy_it_j=e,
            device_energy_j=record.device_energy_j.get(cls),
            mean_power_w=(e / elapsed) if (e is not None and elapsed > 0) else None,
            rated_power_w=sorted({d.rated_power_w for d in devs if d.rated_power_w is not None}),
            mean_util=_mean_or_none([d.mean_util for d in devs], [d.count for d in devs]),
            duration_s=max((d.duration_s for d in devs), default=None),
            models=sorted({d.model for d in devs if d.model}),
        )
        if e is not None:
            row.facility_kwh = e / J_PER_KWH * record.carbon.pue
            if record.co2e_kg is not None and it_total_j:
                row.co2e_kg = record.co2e_kg * e / it_total_j
        rows.append(row)

    with_devices = [r for r in rows if r.n_devices > 0 or r.energy_it_j is not None]
    dev_parts = [r.device_energy_j for r in with_devices]
    total = ClassRow(
        device_class="total",
        n_devices=sum(r.n_devices for r in rows),
        # the method of the total number: worst over the classes it sums (unmeasured ones are
        # excluded from the sum and show up in coverage and record.coverage_complete instead)
        method=worst_method(r.method for r in with_devices if r.energy_it_j is not None),
        coverage=min((r.coverage for r in with_devices if r.coverage is not None), default=None),
        energy_it_j=it_total_j,
        device_energy_j=sum(dev_parts) if dev_parts and None not in dev_parts else None,
        mean_power_w=(it_total_j / elapsed) if (it_total_j is not None and elapsed > 0) else None,
        facility_kwh=record.facility_kwh,
        co2e_kg=record.co2e_kg,
    )
    rows.append(total)
    return rows


# ---------------------------------------------------------------------------------------- CSV


def _cell(v) -> str:
    """CSV cell: ``None`` -> empty (unmeasured), floats with up to 9 significant digits."""
    if v is None:
        return ""
    if isinstance(v, Method):
        return v.value
    if isinstance(v, float):
        return f"{v:.9g}"
    return str(v)


def render_csv(record: JobRecord) -> str:
    """CSV text: a header (:data:`CSV_COLUMNS`, units in the names), one row per device class
    (cpu, gpu, ram) and a ``total`` row. Unmeasured values are empty cells, never 0.

    Raises nothing for a well-formed record; see :func:`class_rows` for how each value is derived.
    """
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    c = record.carbon
    for r in class_rows(record):
        w.writerow([_cell(v) for v in (
            record.job_id, r.device_class, r.n_devices, r.method, r.coverage,
            r.energy_it_kwh, r.device_energy_kwh, r.mean_power_w, record.elapsed_s,
            c.pue, r.facility_kwh, c.ci_g_per_kwh, c.alpha, r.co2e_kg,
        )])
    return buf.getvalue()


# --------------------------------------------------------------------------------------- HTML


def _fmt_num(v: Optional[float], digits: int = 4, unit: str = "") -> str:
    if v is None:
        return "n/a — not measured"
    s = f"{v:.{digits}g}"
    return f"{s} {unit}".rstrip()


def _fmt_time(t: Optional[float]) -> str:
    if not t:
        return "n/a"
    return _dt.datetime.fromtimestamp(t, tz=_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _fmt_duration(s: float) -> str:
    s = int(round(s))
    d, rem = divmod(s, 86400)
    h, rem = divmod(rem, 3600)
    m, sec = divmod(rem, 60)
    return (f"{d}-" if d else "") + f"{h:02d}:{m:02d}:{sec:02d}"


def _fmt_static_value(key: str, v) -> str:
    if v is None or v == "":
        return "n/a"
    if key.endswith("_bytes") and isinstance(v, (int, float)):
        return f"{v / 2**30:.1f} GiB"
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, (list, tuple)):
        return ", ".join(_fmt_static_value(key, x) for x in v) or "none"
    if isinstance(v, dict):
        return ", ".join(f"{_static_label(str(k))}: {_fmt_static_value(str(k), x)}" for k, x in v.items())
    return str(v)


def _static_label(key: str) -> str:
    """``"ram_total_bytes"`` -> ``"ram total"`` (the unit is in the formatted value)."""
    for suffix in ("_bytes",):
        if key.endswith(suffix):
            key = key[: -len(suffix)]
    return key.replace("_", " ")


#: Static keys shown first, in this order; ``host``/``pid`` are not hardware facts (the node name is
#: shown) and ``devices`` gets its own table.
_STATIC_ORDER = ("cpu_model", "sockets", "cores_per_socket", "logical_cpus", "ram_total_bytes",
                 "gpu_models", "os", "kernel", "python")
_STATIC_SKIP = {"host", "pid", "devices"}


def _static_devices(static: dict) -> list[dict]:
    """``static["devices"]`` (``DeviceStatic`` dicts) as display rows, without per-node ids."""
    out = []
    for d in static.get("devices") or []:
        if not isinstance(d, dict):
            continue
        rated = d.get("rated_power_w")
        out.append({
            "device_class": str(d.get("device_class", "")).upper(),
            "model": d.get("model") or "n/a",
            "count": d.get("count", 1),
            "rated": "n/a" if rated is None else f"{rated:g} W",
            "source": d.get("rated_power_source") or "",
            "extra": _fmt_static_value("extra", {k: v for k, v in (d.get("extra") or {}).items()}),
        })
    return out


def _static_groups(record: JobRecord) -> list[dict]:
    """Nodes with identical static facts grouped (node name, pid and device ids ignored).

    Returns ``[{"nodes": [...], "items": [(label, text)], "devices": [row dicts]}]``.
    """
    groups: list[dict] = []
    for n in record.nodes:
        st = n.static
        keys = [k for k in _STATIC_ORDER if k in st] + sorted(k for k in st if k not in _STATIC_ORDER and k not in _STATIC_SKIP)
        items = [(_static_label(k), _fmt_static_value(k, st[k])) for k in keys]
        devices = _static_devices(st)
        for g in groups:
            if g["items"] == items and g["devices"] == devices:
                g["nodes"].append(n.node)
                break
        else:
            groups.append({"nodes": [n.node], "items": items, "devices": devices})
    return [g for g in groups if g["items"] or g["devices"]]


def _job_label(record: JobRecord) -> str:
    if record.array_job_id and record.array_task_id is not None:
        return f"{record.array_job_id}_{record.array_task_id} (job id {record.job_id})"
    if record.het_job_id and record.het_job_offset is not None:
        return f"{record.het_job_id}+{record.het_job_offset} (job id {record.job_id})"
    return record.job_id


def _formula_lines(rows: list[ClassRow], record: JobRecord) -> dict:
    """The method's formulas with this job's values, as display strings."""
    c = record.carbon
    per_class = []
    for r in rows[:-1]:
        if r.n_devices == 0 and r.energy_it_j is None:
            per_class.append(f"E_{r.device_class} = n/a (no {r.device_class.upper()} in the job)")
            continue
        e = _fmt_num(r.energy_it_kwh, 4, "kWh")
        if r.method == Method.TDP_ESTIMATE and r.rated_power_w and r.mean_util is not None and r.duration_s:
            p = " / ".join(f"{x:g}" for x in r.rated_power_w)
            per_class.append(
                f"E_{r.device_class} = n·u·P·t ≈ {r.n_devices} × {r.mean_util:.3g} × {p} W × "
                f"{r.duration_s:.0f} s = {e} (tdp_estimate)"
            )
        else:
            per_class.append(f"E_{r.device_class} = {e} ({r.method.value})")
    total = rows[-1]
    present = [r for r in rows[:-1] if r.n_devices or r.energy_it_j is not None]
    parts = " + ".join(f"{r.energy_it_kwh:.4g}" for r in present if r.energy_it_j is not None) or "n/a"
    unmeasured = [r.device_class.upper() for r in present if r.energy_it_j is None]
    it_line = f"E_IT = Σ n_i u_i P_i t_i = {parts} = {_fmt_num(total.energy_it_kwh, 4, 'kWh')}"
    if unmeasured:
        it_line += f"  (partial: {', '.join(unmeasured)} not measured, not counted as 0)"
    fac_line = (
        f"E_facility = E_IT × PUE = {_fmt_num(record.it_kwh, 4, 'kWh')} × {c.pue:g} = "
        f"{_fmt_num(record.facility_kwh, 4, 'kWh')}"
    )
    ci = f"{c.ci_g_per_kwh:g} gCO2e/kWh" + (" (hourly-weighted)" if c.hourly else "")
    co2_line = (
        f"CO2e = E_facility × CI × α = {_fmt_num(record.facility_kwh, 4, 'kWh')} × {ci} × {c.alpha:g} = "
        f"{_fmt_num(record.co2e_kg, 4, 'kgCO2e')}"
    )
    return {"per_class": per_class, "it": it_line, "facility": fac_line, "co2e": co2_line}


def _template_env():
    """jinja2 environment over the shipped templates (package ``slurm_energy.templates``).

    Installed (``pip install .``) the templates are package data of ``slurm_energy.templates``;
    in a source checkout that package is the repository's top-level ``templates/`` (pyproject
    ``package-dir``), found by path when the package is not importable.
    """
    import jinja2

    try:
        from importlib.resources import files

        root = files("slurm_energy.templates")
        loader = jinja2.FunctionLoader(lambda name: root.joinpath(name).read_text(encoding="utf-8"))
        root.joinpath("report.html.j2").read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError):
        here = os.path.dirname(os.path.abspath(__file__))
        loader = jinja2.FileSystemLoader(os.path.join(here, "..", "..", "templates"))
    return jinja2.Environment(loader=loader, autoescape=True, undefined=jinja2.StrictUndefined)


def render_html(record: JobRecord) -> str:
    """Self-contained HTML report (inline CSS and SVG plot) for one job; jinja2 with autoescape on.

    Shows the job's Slurm facts, static device info per node group, energy per device class (job
    share and full-device views, method, coverage), the method's formulas with the values used,
    PUE / carbon intensity with their sources, the power-over-time plot, and per-device provenance
    (counter wraps, resets, dropped samples, flags). Unmeasured values read "n/a — not measured".
    """
    from markupsafe import Markup

    from slurm_energy.reporting.plot import power_svg

    rows = class_rows(record)
    svg = power_svg(record.nodes, record.start_time)
    reported = [n.node for n in record.nodes]
    missing = [n for n in record.expected_nodes if n not in reported]
    ctx = {
        "r": record,
        "job_label": _job_label(record),
        "start": _fmt_time(record.start_time),
        "end": _fmt_time(record.end_time),
        "elapsed": _fmt_duration(record.elapsed_s),
        "nodes": reported,
        "missing_nodes": missing,
        "rows": rows,
        "static_groups": _static_groups(record),
        "formula": _formula_lines(rows, record),
        "plot_svg": Markup(svg) if svg else None,  # our own matplotlib output; text in it is escaped
        "fmt": _fmt_num,
        "J_PER_KWH": J_PER_KWH,
        "generated": _dt.datetime.now(tz=_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }
    return _template_env().get_template("report.html.j2").render(**ctx)


# ------------------------------------------------------------------------------------- files


def report_names(record: JobRecord) -> tuple[str, str]:
    """``("energy-<jobid>.html", "energy-<jobid>.csv")``; job id characters other than
    ``[A-Za-z0-9_.+-]`` become ``_`` (the job id is used in a file name)."""
    safe = "".join(ch if ch.isalnum() or ch in "_.+-" else "_" for ch in record.job_id) or "unknown"
    return f"energy-{safe}.html", f"energy-{safe}.csv"


def write_reports(record: JobRecord, work_dir: str, uid: int, gid: int) -> tuple[str, str]:
    """Render both reports and write them into ``work_dir`` as ``uid``/``gid``.

    Files: ``energy-<jobid>.html`` and ``energy-<jobid>.csv`` (see :func:`report_names`), each
    written by :func:`~slurm_energy.reporting.safe_write.write_file_as_user` (privilege-dropped,
    atomic, planted symlinks replaced not followed).

    Returns:
        ``(html_path, csv_path)``.

    Raises:
        ValueError: ``work_dir`` is empty (the job's ``SLURM_JOB_WORK_DIR`` / ``WorkDir`` is needed).
        SafeWriteError: a file could not be written (path and reason in the message).
    """
    if not work_dir:
        raise ValueError(f"work_dir={work_dir!r} is empty; pass the job's working directory (Slurm WorkDir)")
    html_name, csv_name = report_names(record)
    html_path = write_file_as_user(work_dir, html_name, render_html(record).encode("utf-8"), uid, gid)
    csv_path = write_file_as_user(work_dir, csv_name, render_csv(record).encode("utf-8"), uid, gid)
    return html_path, csv_path
