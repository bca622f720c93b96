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
import functools
import io
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from slurm_energy.core import all_estimated, metered_rest
from slurm_energy.jobid import display_id
from slurm_energy.model import JobRecord
from slurm_energy.natsort import ordered_record, sort_static_devices
from slurm_energy.reporting import explain, prediction_check
from slurm_energy.reporting.csvsafe import cell
from slurm_energy.reporting.job_facts import memory_rows, ran_outside_slurm, share_fallbacks, util_label
from slurm_energy.reporting.rows import MEAN_POWER_NOTE_BELOW, ClassRow, class_rows
from slurm_energy.reporting.safe_write import SafeWriteError, write_files_as_user
from slurm_energy.reporting.scale import co2e_text, energy_text, format_duration, kwh_energy_text, plain
from slurm_energy.units import J_PER_KWH

if TYPE_CHECKING:
    import jinja2

#: CSV columns, units in the names (a new column goes last: the others keep their places). ``job_id``:
#: the id Slurm users know (:func:`slurm_energy.jobid.display_id`: ``715219_23`` for an array task,
#: ``1234+1`` for a het job component), ``job_id_raw`` the job's own (SLURM_JOB_ID). ``energy_it_kWh``:
#: the job's share; ``device_energy_kWh`` the whole devices over the job's time; ``mean_power_W`` =
#: job-share energy / measured time (coverage x elapsed), over the fraction ``mean_power_coverage`` of
#: the job. ``status`` as jobenergy shows it (:func:`slurm_energy.core.status_text`); ``pue_default`` /
#: ``ci_default``: ``true`` when PUE / CI are the documented defaults (``CarbonFacts.defaults_used``).
CSV_COLUMNS = (
    "job_id", "device_class", "n_devices", "method", "coverage",
    "energy_it_kWh", "device_energy_kWh", "mean_power_W", "elapsed_s",
    "pue", "facility_kWh", "ci_gCO2e_per_kWh", "alpha", "kgCO2e", "mean_power_coverage",
    "status", "pue_default", "ci_default", "job_id_raw", "kgCO2e_location_based", "embodied_kgCO2e",
)


def render_csv(record: JobRecord) -> str:
    """CSV text: a header (:data:`CSV_COLUMNS`, fixed units in the names -- kWh, W, s, kgCO2e -- so
    columns stay comparable across jobs, unlike the HTML's scaled units), one row per device class
    (cpu, gpu, ram) and a ``total`` row. Unmeasured values are empty cells, never 0. One table only
    (``pandas.read_csv`` reads it): phases are in :func:`phases_csv_name`'s file, predicted vs
    measured in :func:`prediction_csv_name`'s.

    Raises nothing for a well-formed record; see :func:`class_rows` for how each value is derived.
    """
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    c = record.carbon
    defaults = ["true" if k in c.defaults_used else "false" for k in ("pue", "ci")]
    job = display_id(record)
    for r in class_rows(record):
        w.writerow([cell(v) for v in (
            job, r.device_class, r.n_devices, r.method, r.coverage,
            r.energy_it_kwh, r.device_energy_kwh, r.mean_power_w, record.elapsed_s,
            c.pue, r.facility_kwh, c.ci_g_per_kwh, c.alpha, r.co2e_kg, r.mean_power_coverage,
            record.status_text, *defaults, record.job_id, r.co2e_gross_kg,
            record.embodied_kg if r.device_class == "total" else None,
        )])
    return buf.getvalue()


def render_prediction_csv(record: JobRecord) -> str:
    """CSV text of predicted vs measured for a job that declared its FLOPs (``tags``): header
    :data:`slurm_energy.reporting.prediction_check.HEADER` lower-cased, one row per quantity, its
    unit in the ``unit`` column; '' for a job that declared none."""
    chk = prediction_check.check(record)
    if chk is None:
        return ""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([h.lower() for h in prediction_check.HEADER])
    w.writerows(prediction_check.rows(chk, display_id(record)))
    return buf.getvalue()


# --------------------------------------------------------------------------------------- HTML


def _fmt_num(v: float | None, digits: int = 4, unit: str = "") -> str:
    return "n/a — not measured" if v is None else f"{v:.{digits}g} {unit}".rstrip()


def _fmt_time(t: float | None) -> str:
    if not t:
        return "n/a"
    return _dt.datetime.fromtimestamp(t, tz=_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _fmt_static_value(key: str, v: object) -> str:
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
    return key.removesuffix("_bytes").replace("_", " ")


#: Static keys shown first, in this order; ``host``/``pid`` are not hardware facts (the node name is
#: shown) and ``devices`` gets its own table.
_STATIC_ORDER = ("cpu_model", "sockets", "cores_per_socket", "logical_cpus", "ram_total_bytes",
                 "gpu_models", "os", "kernel", "python")
_STATIC_SKIP = {"host", "pid", "devices"}


def _static_devices(static: Mapping[str, object]) -> list[dict[str, Any]]:
    """``static["devices"]`` (``DeviceStatic`` dicts) as display rows, without per-node ids."""
    out: list[dict[str, Any]] = []
    devices = static.get("devices")
    for d in sort_static_devices(devices if isinstance(devices, list) else []):
        if not isinstance(d, dict):
            continue
        rated = d.get("rated_power_w")
        out.append({
            "device_class": str(d.get("device_class", "")).upper(),
            "model": d.get("model") or "n/a",
            "count": d.get("count", 1),
            "rated": "n/a" if rated is None else f"{rated:g} W",
            "source": d.get("rated_power_source") or "",
            "extra": _fmt_static_value("extra", dict((d.get("extra") or {}).items())),
        })
    return out


def _static_groups(record: JobRecord) -> list[dict[str, Any]]:
    """Nodes with identical static facts grouped (node name, pid and device ids ignored).

    Returns ``[{"nodes": [...], "items": [(label, text)], "devices": [row dicts]}]``.
    """
    groups: list[dict[str, Any]] = []
    for n in record.nodes:
        st: dict[str, object] = dict(n.static)
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
    """``715219_23 (job id 715242)`` for an array task or het job component, else the job id."""
    shown = display_id(record)
    return shown if shown == record.job_id else f"{shown} (job id {record.job_id})"


def _formula_lines(rows: list[ClassRow], record: JobRecord) -> dict[str, Any]:
    """The method's formulas with this job's values, as display strings; every line is an identity
    whose printed numbers multiply (or add) out to its printed result (see :mod:`.explain`)."""
    c = record.carbon
    per_class = []
    for r in rows[:-1]:
        devs = [(d, n) for n in record.nodes for d in n.devices if d.device_class == r.device_class]
        name = f"E_{r.device_class}"
        if len(devs) == 1:
            d, n = devs[0]
            per_class.append(explain.device_line(d, n.cpu_time_s, n.cpu_time_source))
        else:
            per_class.append(explain.measured_line(name, r.device_class, r.method, r.energy_it_j, len(devs)))
    total = rows[-1]
    present = [r for r in rows[:-1] if r.n_devices or r.energy_it_j is not None]
    measured = [r for r in present if r.energy_it_j is not None]
    unmeasured = [r.device_class.upper() for r in present if r.energy_it_j is None]
    label = "Σ E_i = " + " + ".join(f"E_{r.device_class}" for r in measured) if measured else "Σ E_i"
    if total.energy_it_j is None or not measured:
        it_line = f"E_IT = {label} = n/a — not measured"
    else:
        it_line = explain.sum_line("E_IT", [e for r in measured if (e := r.energy_it_j) is not None], total.energy_it_j,
                                   label)
    if unmeasured:
        it_line += f"  (partial: {', '.join(unmeasured)} not measured, not counted as 0)"
    if record.it_kwh is None or record.facility_kwh is None:
        fac_line = "E_facility = E_IT × PUE = n/a — not measured"
    else:
        fac_line = explain.facility_line(record.it_kwh, c.pue, record.facility_kwh)
    if record.facility_kwh is None or record.co2e_kg is None:
        co2_line = "CO2e = E_facility × CI × α = n/a — not measured"
    else:
        co2_line = explain.co2e_line(record.facility_kwh, c.ci_g_per_kwh, c.alpha, record.co2e_kg, c.hourly)
    from slurm_energy.reporting.footprint import formula_lines

    return {"per_class": per_class, "it": it_line, "facility": fac_line, "co2e": co2_line,
            "footprint": formula_lines(record)}


def _full_device_captions(rows: list[ClassRow]) -> list[str]:
    """"CPU (tdp_estimate): TDP model: ..." per class row, saying what its "Full devices" number is."""
    return [f"{r.device_class.upper()} ({r.method.value}): {explain.full_device_caption(r.device_class, r.method)}"
            for r in rows[:-1]]


def _default_flags(record: JobRecord) -> dict[str, str]:
    """``{"pue": " (default)", "ci": "", "alpha": ...}``: the suffix for each carbon fact on the
    summary cards, from ``record.carbon.defaults_used``."""
    used = set(record.carbon.defaults_used)
    return {k: (" (default)" if k in used else "") for k in ("pue", "ci", "alpha")}


@functools.lru_cache(maxsize=1)
def template_env() -> jinja2.Environment:
    """jinja2 environment over the shipped templates (package ``slurm_energy.templates``).

    Installed (``pip install .``) the templates are package data of ``slurm_energy.templates``;
    in a source checkout that package is the repository's top-level ``templates/`` (pyproject
    ``package-dir``), found by path when the package is not importable.
    """
    import jinja2

    try:
        from importlib.resources import files

        root = files("slurm_energy.templates")
        loader: jinja2.BaseLoader = jinja2.FunctionLoader(lambda name: root.joinpath(name).read_text(encoding="utf-8"))
        root.joinpath("report.html.j2").read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError):
        here = os.path.dirname(os.path.abspath(__file__))
        loader = jinja2.FileSystemLoader(os.path.join(here, "..", "..", "templates"))
    return jinja2.Environment(loader=loader, autoescape=True, undefined=jinja2.StrictUndefined)


def render_html(record: JobRecord, whatif: Any = None) -> str:
    """Self-contained HTML report (inline CSS and SVG plot) for one job; jinja2 with autoescape on.

    Shows the job's Slurm facts, static device info per node group, energy per device class (job
    share and full-device views, method, coverage), the method's formulas with the values used,
    PUE / carbon intensity with their sources, the power-over-time plot, and per-device provenance
    (counter wraps, resets, dropped samples, flags). Unmeasured values read "n/a — not measured".
    """
    from markupsafe import Markup

    from slurm_energy.reporting.device_groups import shown_devices, summarise_devices
    from slurm_energy.reporting.footprint import sci_total_kg, whatif_lines
    from slurm_energy.reporting.phases import phase_rows, plot_marks
    from slurm_energy.reporting.plot import power_svg

    record = ordered_record(record)  # nodes n2 before n10, devices intel-rapl:2 before intel-rapl:10
    rows = class_rows(record)
    from slurm_energy.reporting import gpu_idle

    svg = power_svg(record.nodes, record.start_time, plot_marks(record), gpu_idle.plot_spans(record), record.job_trace)
    reported = [n.node for n in record.nodes]
    missing = [n for n in record.expected_nodes if n not in reported]
    ctx = {
        "r": record,
        "job_label": _job_label(record),
        "noun": "run" if ran_outside_slurm(record) else "job",  # a laptop run is no Slurm job
        "job_id": display_id(record),
        "start": _fmt_time(record.start_time),
        "end": _fmt_time(record.end_time),
        "elapsed": format_duration(record.elapsed_s),
        "nodes": reported,
        "missing_nodes": missing,
        "share_fallbacks": share_fallbacks(record),
        "rows": rows,
        "phase_rows": phase_rows(record),
        "static_groups": _static_groups(record),
        "prov_rows": shown_devices(record),
        "prov_grouped": summarise_devices(record),
        "memory_rows": memory_rows(record),
        "slurm_energy": energy_text(record.slurm_energy_j),
        "formula": _formula_lines(rows, record),
        "full_captions": _full_device_captions(rows),
        "default_flag": _default_flags(record),
        "estimated": all_estimated(record.methods, record.energy_it_j, metered_rest(record)),
        "power_note_below": MEAN_POWER_NOTE_BELOW,
        "check": prediction_check.check(record),
        "gpu_idle": gpu_idle.summary_line(record),
        "sci_total": sci_total_kg(record),
        "whatif": None if whatif is None else whatif_lines(whatif, _fmt_time),
        "gpu_idle_rule": gpu_idle.rule_text(record),
        "check_rows": prediction_check.rows,
        "plot_svg": Markup(svg) if svg else None,  # our own matplotlib output; text in it is escaped
        "fmt": _fmt_num,
        "plain": plain,
        "kwh_energy_text": kwh_energy_text,
        "co2e_text": co2e_text,
        "util_label": util_label,
        "J_PER_KWH": J_PER_KWH,
        "generated": _dt.datetime.now(tz=_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }
    html: str = template_env().get_template("report.html.j2").render(**ctx)
    return html


# ------------------------------------------------------------------------------------- files


def report_names(record: JobRecord) -> tuple[str, str]:
    """``("energy-<jobid>.html", "energy-<jobid>.csv")``. ``<jobid>`` is the id Slurm users know
    (:func:`slurm_energy.jobid.display_id`): ``energy-715219_23.html`` for task 23 of array 715219
    (sbatch's ``%A_%a``), ``energy-1234+1.html`` for component 1 of het job 1234, else the job id.
    Characters other than ``[A-Za-z0-9_.+-]`` become ``_`` (the id is used in a file name). A job
    that marked phases or stages also gets ``energy-<jobid>.phases.csv`` (:func:`phases_csv_name`),
    one that declared its FLOPs ``energy-<jobid>.prediction.csv`` (:func:`prediction_csv_name`)."""
    safe = "".join(ch if ch.isalnum() or ch in "_.+-" else "_" for ch in display_id(record)) or "unknown"
    return f"energy-{safe}.html", f"energy-{safe}.csv"


def phases_csv_name(record: JobRecord) -> str:
    """``energy-<jobid>.phases.csv``: the phase table (:mod:`slurm_energy.reporting.phases`)."""
    return report_names(record)[1][: -len(".csv")] + ".phases.csv"


def prediction_csv_name(record: JobRecord) -> str:
    """``energy-<jobid>.prediction.csv``: predicted vs measured (:func:`render_prediction_csv`)."""
    return report_names(record)[1][: -len(".csv")] + ".prediction.csv"


class ReportWriteError(SafeWriteError):
    """One or both report files could not be written; the others were.

    Attributes: ``failures`` -- ``[(path, reason)]`` for each file not written; ``written`` --
    paths that were written. ``path`` / ``reason`` (from :class:`SafeWriteError`) name the first
    failure; the message lists all of them.
    """

    def __init__(self, failures: list[tuple[str, str]], written: list[str]):
        self.failures = list(failures)
        self.written = list(written)
        OSError.__init__(self, "report files not written: " + "; ".join(f"{p!r}: {r}" for p, r in failures)
                         + (f" (written: {', '.join(written)})" if written else " (nothing written)"))
        self.path, self.reason = failures[0]


def write_reports(record: JobRecord, work_dir: str, uid: int, gid: int, umask: int | None = None,
                  whatif: Any = None) -> tuple[str, str]:
    """Render both reports and write them into ``work_dir`` as ``uid``/``gid``, each independently.

    Files: ``energy-<jobid>.html`` and ``energy-<jobid>.csv`` (see :func:`report_names`), and
    ``energy-<jobid>.phases.csv`` when the job marked phases or stages, ``energy-<jobid>.prediction.csv``
    when it declared its FLOPs (neither in the return value), each
    written by :func:`~slurm_energy.reporting.safe_write.write_files_as_user` (one privilege-dropped
    child for all of them, killed after :data:`~slurm_energy.reporting.safe_write.REPORT_TIMEOUT_S`;
    atomic, planted symlinks replaced not followed; mode ``0666 & ~umask``, ``umask`` the user's:
    their SLURM_UMASK, unknown: 077). A file that cannot be rendered or written (e.g. a directory
    named ``energy-<jobid>.html``) does not stop the others from being written. The same child
    removes a ``.phases.csv`` / ``.prediction.csv`` of the same name that this record does not have
    (an earlier run's, replaced by ``overwrite=True`` / ``--overwrite``): a label's files describe one run.

    Returns:
        ``(html_path, csv_path)``.

    Raises:
        ValueError: ``work_dir`` is empty (the job's ``SLURM_JOB_WORK_DIR`` / ``WorkDir`` is needed).
        ReportWriteError: after writing what could be written, when any file failed; lists each
            failed path with its reason (a :class:`SafeWriteError`, so existing handlers still catch it).
    """
    if not work_dir:
        raise ValueError(f"work_dir={work_dir!r} is empty; pass the job's working directory (Slurm WorkDir)")
    from slurm_energy.reporting.phases import render_phases_csv

    html_name, csv_name = report_names(record)
    written: list[str] = []
    failures: list[tuple[str, str]] = []
    files: list[tuple[str, Callable[[JobRecord], str]]] = [
        (html_name, functools.partial(render_html, whatif=whatif)), (csv_name, render_csv)]
    stale: list[str] = []  # a label's files describe one run: an earlier run's companions go
    if record.phases or record.stages:
        files.append((phases_csv_name(record), render_phases_csv))
    else:
        stale.append(phases_csv_name(record))
    if prediction_check.check(record) is not None:
        files.append((prediction_csv_name(record), render_prediction_csv))
    else:
        stale.append(prediction_csv_name(record))
    rendered: list[tuple[str, bytes]] = []
    for name, render in files:
        path = os.path.join(work_dir, name)
        try:
            rendered.append((name, render(record).encode("utf-8", "backslashreplace")))
        except Exception as e:  # a rendering bug must not cost the other file
            failures.append((path, f"rendering failed: {type(e).__name__}: {e}"))
    ok, bad = write_files_as_user(work_dir, rendered, uid, gid, umask=umask, remove=stale)
    written += ok
    failures += bad
    if failures:
        raise ReportWriteError(failures, written)
    return written[0], written[1]
