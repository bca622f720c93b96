"""Columns and output formats for ``jobenergy`` (sacct-like tables, parsable, JSON, long view).

Energy cells: ``n/a`` = unmeasured (None), never 0; ``-`` = the job had no device of that class
(e.g. GPU_kWh of a CPU-only job). kWh are printed with 4 significant figures, kgCO2e likewise.
``State`` is Slurm's job state (from the Epilog's exit code), ``Status`` the measurement's.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypedDict

from slurm_energy.cli.jobenergy_select import job_state
from slurm_energy.core import REST_ESTIMATED, REST_METERED, Method, all_estimated, metered_rest, status_text
from slurm_energy.jobid import display_id
from slurm_energy.natsort import ordered_record
from slurm_energy.reporting.scale import format_duration, plain
from slurm_energy.slurm.clients.formats import format_energy, format_memory
from slurm_energy.units import J_PER_KWH, sum_known

if TYPE_CHECKING:  # records, or the store's summary rows (store.select.JobRow) for SUMMARY_FIELDS
    from slurm_energy.model import DeviceEnergy, JobRecord


#: The default table, about 90 characters wide like sacct's default (JobID,JobName,Partition,Account,
#: AllocCPUS,State,ExitCode: 76): each class's job-share kWh, the CO2e, Slurm's state and the
#: measurement's status (which says ``estimated`` / ``partial-coverage``). Account, Partition,
#: NNodes, IT_kWh, Facility_kWh and Method are a ``-o`` away (``--long`` has the methods per device).
DEFAULT_FIELDS = ["JobID", "User", "Elapsed", "CPU_kWh", "GPU_kWh", "RAM_kWh", "kgCO2e", "State",
                  "Status"]  # fmt: skip
LONG_FIELDS = ["JobID", "Node", "Class", "DeviceID", "Model", "Count", "Method", "Energy_kWh",
               "Device_kWh", "Coverage", "Wraps", "Resets", "Dropped", "ReqMem", "MaxRSS", "Covers"]  # fmt: skip
#: ``-l``'s aligned table without ``-o``: the columns that fit 120 characters for realistic records
#: (JobID 11, a 10-character node name, power_integration, 4-figure kWh...: 112 at most); the long
#: texts (DeviceID -- an NVML UUID is 40 characters --, Model, Covers, and Wraps/Resets/Dropped when
#: not 0) go to a note under each row (:func:`long_note`). ``-l -p/-P`` and ``-l -o`` have every field.
LONG_TABLE_FIELDS = ["JobID", "Node", "Class", "Count", "Method", "Energy_kWh", "Device_kWh", "Coverage",
                     "ReqMem", "MaxRSS"]  # fmt: skip


class RowOptions(TypedDict, total=False):
    """What an output row's cells take beside its record (:data:`FIELDS`): set per row by
    ``jobenergy`` (``_rows``: a requeued job's sum row and its attempts; ``tz`` for every row)."""

    jobid_override: str  # an attempt of a requeued job: ``<job id>#<restart count>``
    elapsed_s: float  # the sum row: the attempts' elapsed times summed, s
    is_sum: bool  # the sum row of a requeued job (not an attempt: left out of --json, --seff, --cite)
    tz: str  # the site's IANA time zone for Start/End


def fmt_num(v: float | None) -> str:
    """4 significant figures in plain decimal notation (``0.00001021``, never ``1.021e-05``: the
    columns are fixed-unit, kWh / kgCO2e, like sacct's); ``n/a`` for None (unmeasured)."""
    return "n/a" if v is None else plain(v, 4)


def _req_mem(r: JobRecord) -> str:
    """Requested memory per node (sacct ReqMem style); nodes that differ are listed."""
    vals = list(dict.fromkeys(format_memory(n.req_mem_bytes) for n in r.nodes))
    return ",".join(vals) if any(vals) else ""


def _max_rss(r: JobRecord) -> str:
    """Peak memory used on the busiest node (sacct's MaxRSS is the largest over tasks)."""
    vals = [n.max_mem_bytes for n in r.nodes if n.max_mem_bytes is not None]
    return format_memory(max(vals)) if vals else ""


def fmt_time(ts: float, tz: str = "UTC") -> str:
    """sacct's Start/End: ``YYYY-MM-DDTHH:MM:SS`` in the site time zone."""
    from zoneinfo import ZoneInfo

    return dt.datetime.fromtimestamp(ts, ZoneInfo(tz)).strftime("%Y-%m-%dT%H:%M:%S")


def _alpha(rec: JobRecord) -> float:
    """The record's offset factor alpha (a summary row's column; 1.0 where a row stored before has none)."""
    a = rec.carbon.alpha if hasattr(rec, "model_copy") else getattr(rec, "alpha", None)
    return 1.0 if a is None else float(a)


def default_fields(recs: list[JobRecord]) -> list[str]:
    """The default table's field keys: :data:`DEFAULT_FIELDS`, with ``Net_kgCO2e`` after ``kgCO2e``
    when some record's alpha is not 1 (a site with alpha 1 sees one CO2e number), then
    ``Embodied_kgCO2e`` when some record has embodied CO2e and ``Cost`` when some has a cost."""
    out = [f.lower() for f in DEFAULT_FIELDS]
    at = out.index("kgco2e") + 1
    extra = [k for k, show in (("net_kgco2e", any(_alpha(r) != 1 for r in recs)),
                               ("embodied_kgco2e", any(r.embodied_kg is not None for r in recs)),
                               ("cost", any(r.cost is not None for r in recs))) if show]
    return out[:at] + extra + out[at:]


def _methods(rec: JobRecord) -> str:
    """``cpu=tdp_estimate,ram=tdp_estimate`` and, where some node's rest was metered or estimated,
    ``rest_of_node=node_meter:acpi_power_meter`` (its share is in IT_kWh: the method says how)."""
    text = rec.method_summary if rec.methods else Method.UNAVAILABLE.value
    rest = getattr(rec, "rest_of_node_method", "") or ""
    if getattr(rec, "rest_of_node_j", None) is not None and (REST_METERED in rest or REST_ESTIMATED in rest):
        text += f",rest_of_node={rest}"
    return text


def _class_kwh(rec: JobRecord, cls: str) -> str:
    if cls not in rec.energy_it_j:
        return "-"
    v = rec.energy_it_j[cls]
    return fmt_num(None if v is None else v / J_PER_KWH)


def _status(rec: JobRecord) -> str:
    """Measurement status (:func:`slurm_energy.core.status_text`, the same for a record and a summary
    row): ``complete(partial-coverage)``: every node reported but some device is unmeasured or covered
    under 95 % of the job (formulas.COVERAGE_COMPLETE): totals are a lower bound; ``complete(estimated)``:
    every class with energy was estimated by the TDP model."""
    s = status_text(rec.status, rec.coverage_complete, rec.methods, rec.energy_it_j, metered_rest(rec))
    if rec.report_error:  # the user looks for energy-<id>.html: say why, in short (-l has the text)
        s += f" (no report: {report_code(rec.report_error)})"
    return s


#: Short codes for why the report was not written (``Status`` column), first match in the text of
#: :func:`slurm_energy.outputs.report.report_problem`; the full text is in ``-l`` and ``-o ReportError``.
_REPORT_CODES = (("ermission denied", "permission_denied"), ("errno 13", "permission_denied"),
                 ("not writable", "permission_denied"), ("Read-only", "read_only_fs"),
                 ("No space", "disk_full"), ("Disk quota", "quota_exceeded"),
                 ("No such file", "no_work_dir"), ("is empty", "no_work_dir"),
                 ("rendering failed", "render_failed"), ("writer stopped", "writer_stopped"),
                 ("the job's user is root", "user_is_root"), ("not to the job's user", "not_users_dir"))


def report_code(text: str) -> str:
    """A one-word reason (``permission_denied``, ``read_only_fs``, ``disk_full``, ``quota_exceeded``,
    ``no_work_dir``, ``render_failed``, ``writer_stopped``, ``user_is_root``, ``not_users_dir``, else
    ``write_failed``) for a record's ``report_error``."""
    return next((code for needle, code in _REPORT_CODES if needle in text), "write_failed")


#: -o fields by header (sacct-like names; -o matches them case-insensitively): the cell of a record or summary row
_COLUMNS: dict[str, Callable[[JobRecord, RowOptions], str]] = {
    "JobID": lambda r, o: o.get("jobid_override") or display_id(r),
    "JobIDRaw": lambda r, o: r.job_id,
    "Cluster": lambda r, o: r.cluster,
    "JobName": lambda r, o: r.job_name,
    "User": lambda r, o: r.user,
    "UID": lambda r, o: "" if r.uid is None else str(r.uid),
    "Account": lambda r, o: r.account,
    "Partition": lambda r, o: r.partition,
    "NNodes": lambda r, o: str(r.n_nodes or 0) if hasattr(r, "n_nodes") else str(len(r.expected_nodes) or len(r.nodes)),
    "NodeList": lambda r, o: ",".join(r.expected_nodes or [n.node for n in r.nodes]),
    "Elapsed": lambda r, o: format_duration(o.get("elapsed_s", r.elapsed_s)),
    "Start": lambda r, o: fmt_time(r.start_time, o.get("tz", "UTC")),
    "End": lambda r, o: fmt_time(r.end_time, o.get("tz", "UTC")),
    "RestartCount": lambda r, o: str(r.restart_count),
    "SLUID": lambda r, o: getattr(r, "sluid", ""),
    "ArrayJobID": lambda r, o: r.array_job_id or "",
    "ArrayTaskID": lambda r, o: r.array_task_id or "",
    "HetJobID": lambda r, o: r.het_job_id or "",
    "HetJobOffset": lambda r, o: r.het_job_offset or "",
    "CPU_kWh": lambda r, o: _class_kwh(r, "cpu"),
    "GPU_kWh": lambda r, o: _class_kwh(r, "gpu"),
    "RAM_kWh": lambda r, o: _class_kwh(r, "ram"),
    "IT_kWh": lambda r, o: fmt_num(r.it_kwh),
    "Facility_kWh": lambda r, o: fmt_num(r.facility_kwh),
    # location-based (E x CI, offsets excluded); Net_kgCO2e x alpha (the default table adds it only
    # when some row's alpha is not 1: default_fields)
    "kgCO2e": lambda r, o: fmt_num(r.co2e_gross_kg),
    "Net_kgCO2e": lambda r, o: fmt_num(r.co2e_kg),
    "Alpha": lambda r, o: f"{_alpha(r):g}",
    "Embodied_kgCO2e": lambda r, o: fmt_num(r.embodied_kg),
    "Cost": lambda r, o: "n/a" if r.cost is None else f"{plain(r.cost, 4)} {r.cost_currency}",
    "PUE": lambda r, o: f"{r.carbon.pue:g}",
    "CI_g_per_kWh": lambda r, o: f"{r.carbon.ci_g_per_kwh:g}",
    "Method": lambda r, o: _methods(r),
    "Coverage": lambda r, o: "complete" if r.coverage_complete else "partial",
    "State": lambda r, o: job_state(r),
    "Status": lambda r, o: _status(r),
    "ExitCode": lambda r, o: r.exit_code,
    "Errors": lambda r, o: "; ".join(r.errors),
    "ReportError": lambda r, o: r.report_error,
    "ReqMem": lambda r, o: _req_mem(r),
    "MaxRSS": lambda r, o: _max_rss(r),
    # Slurm's own ConsumedEnergy in its own format (``12.34K`` J); ``n/a`` when Slurm has none
    "SlurmEnergy": lambda r, o: "n/a" if r.slurm_energy_j is None else format_energy(r.slurm_energy_j),
    "SlurmEnergyRaw": lambda r, o: "" if r.slurm_energy_j is None else f"{r.slurm_energy_j:.0f}",
}
#: fields that need the full record (nodes, errors, Slurm's energy): read from job_json, not the summary row
FULL_FIELDS = frozenset({"nodelist", "sluid", "errors", "reqmem", "maxrss", "slurmenergy", "slurmenergyraw"})
FIELDS = {h.lower(): f for h, f in _COLUMNS.items()}  # by canonical lower-case key
_HEADER = {h.lower(): h for h in _COLUMNS}


def parse_format(spec: str, long: bool = False) -> tuple[list[str], list[int | None]]:
    """``-o "JobID,User,CPU_kWh"`` -> (canonical lower-case field keys (sacct: case-insensitive), their
    widths); with ``long`` (``-l -o JobID,Node,DeviceID,Covers``) the :data:`LONG_FIELDS` chosen, as their
    header names. A field may end in sacct's ``%N``; its width is None (no ``%``: as wide as the widest
    value), N (exactly N characters, right-justified) or -N (left-justified). In the aligned table a longer
    value is cut to N with ``+`` as its last character, as sacct does; ``-p``/``-P``/``--json`` always
    print the full value.

    Raises ValueError naming the unknown field (listing the valid ones) or the bad width.
    """
    names = {f.lower(): f for f in LONG_FIELDS} if long else {k: header(k) for k in FIELDS}
    fields: list[str] = []
    widths: list[int | None] = []
    for name in [x.strip() for x in spec.split(",") if x.strip()]:
        key, pct, width = name.lower().partition("%")
        if key not in names:
            raise ValueError(f"--format{' with --long' if long else ''}: unknown field {name!r}; "
                             f"valid fields: {', '.join(names.values())}")
        if width and not re.fullmatch(r"-?[1-9][0-9]{0,3}", width):
            raise ValueError(f"--format: bad width in {name!r}: write {names[key]}%N with N a width in characters "
                             f"(1-9999; %-N left-justifies), e.g. {names[key]}%60, as in sacct")
        fields.append(names[key] if long else key)
        widths.append(int(width) if pct and width else None)
    return fields, widths


def long_note(row: list[str]) -> str:
    """The note under a ``-l`` row of the aligned table (:data:`LONG_TABLE_FIELDS`): what the row's
    other fields say in words -- ``DeviceID (Model): Covers; wraps N, resets N, N dropped samples``
    (the counts only when not 0; parts that are empty left out). ``row``: a :data:`LONG_FIELDS` row."""
    d = dict(zip(LONG_FIELDS, row))
    what = d["DeviceID"] + (f" ({d['Model']})" if d["Model"] else "")
    counts = ", ".join(f"{name.lower()} {d[name]}" for name in ("Wraps", "Resets") if d[name] not in ("", "0"))
    if d["Dropped"] not in ("", "0"):
        counts += (", " if counts else "") + f"{d['Dropped']} dropped sample{'' if d['Dropped'] == '1' else 's'}"
    text = "; ".join(p for p in (d["Covers"], counts) if p)
    return f"{what}: {text}" if what and text else (what or text)


def header(key: str) -> str:
    """The column header of a field key (``cpu_kwh`` -> ``CPU_kWh``)."""
    return _HEADER.get(key, key)


#: Free-text columns capped in the aligned table when ``-o`` gives them no ``%N``: one long error
#: would otherwise widen every row. Cut to this many characters, the last one ``…``;
#: ``-p``/``-P``/``--json``/``-l`` keep the full text.
TEXT_CAP = 40
TEXT_FIELDS = frozenset({"errors", "reporterror"})


def long_rows(rec: JobRecord, jobid: str, short: bool = False, every_device: bool = False) -> list[list[str]]:
    """``-l`` rows (:data:`LONG_FIELDS`): one per (node, device) (method, coverage, counter anomalies) --
    for a job of more than :data:`~slurm_energy.reporting.device_groups.DEVICE_ROWS_UP_TO_NODES` nodes
    one per (node, class) unless ``every_device`` (``--devices``) --, then
    Node ``-`` rows: idle GPUs (per GPU, or the job's total when summarised), phases and stages,
    predicted vs measured (``long_rows`` of
    :mod:`slurm_energy.reporting` ``gpu_idle``, ``phases``, ``prediction_check``), :func:`caveat_rows`, a
    ``report`` row with why no report was written and an ``error`` row per error (DeviceID its number)."""
    from slurm_energy.reporting.device_groups import shown_devices, summarise_devices
    from slurm_energy.reporting.gpu_idle import long_rows as idle_long_rows
    from slurm_energy.reporting.gpu_idle import summary_line
    from slurm_energy.reporting.phases import long_rows as phase_long_rows
    from slurm_energy.reporting.prediction_check import check
    from slurm_energy.reporting.prediction_check import long_rows as check_long_rows

    rows = []
    grouped = summarise_devices(rec) and not every_device
    for ns, devices in shown_devices(ordered_record(rec), every_device):  # numeric order: n2 before n10
        for d in devices:
            rows.append([
                jobid, ns.node, d.device_class, d.device_id, d.model, str(d.count), Method(d.method).value,
                fmt_num(None if d.energy_j is None else d.energy_j / J_PER_KWH),
                fmt_num(None if d.device_energy_j is None else d.device_energy_j / J_PER_KWH),
                f"{d.coverage:.3f}", str(d.wraps), str(d.resets), str(d.dropped_samples),
                format_memory(ns.req_mem_bytes), format_memory(ns.max_mem_bytes), _covers_flags(d, short),
            ])  # fmt: skip
        r = ns.rest_of_node
        if r is not None:  # the node beyond its components (node meter), kept apart from the devices
            rows.append([
                jobid, ns.node, "rest_of_node", r.method, "", "1", Method(r.meter_method).value,
                fmt_num(None if r.energy_j is None else r.energy_j / J_PER_KWH),
                fmt_num(None if r.node_rest_j is None else r.node_rest_j / J_PER_KWH),
                f"{min(1.0, r.metered_s / ns.elapsed_s) if ns.elapsed_s else 0.0:.3f}", "0", "0", "0",
                format_memory(ns.req_mem_bytes), format_memory(ns.max_mem_bytes),
                r.covers + (f" [{', '.join(r.flags)}]" if r.flags else ""),
            ])  # fmt: skip
    chk = check(rec)
    if grouped:  # the job's idle GPUs in one row; each GPU's with --devices
        idle = summary_line(rec)
        extra = [] if idle is None else [_note(jobid, "gpu_idle", "all GPUs", idle + "; each GPU: -l --devices")]
    else:
        extra = idle_long_rows(rec, jobid, fmt_num)
    extra += phase_long_rows(rec, jobid, fmt_num)
    extra += [] if chk is None else check_long_rows(chk, jobid)
    extra += caveat_rows(rec, jobid)
    from slurm_energy.reporting.footprint import text_lines

    # the carbon figures apart, each with its method and source (location-based, net, embodied, cost, SCI for AI)
    extra += [_note(jobid, "carbon", line.split(":", 1)[0], line.split(":", 1)[1].strip())
              for line in text_lines(rec, brief=True)]
    if rec.report_error:  # the table's Status has only the code
        extra.append(_note(jobid, "report", "not written", f"{report_code(rec.report_error)}: {rec.report_error}"))
    # why a record is partial / what was degraded: the table's Status does not say
    extra += [_note(jobid, "error", str(k), e) for k, e in enumerate(rec.errors, 1)]
    return rows + [_widen(r) for r in extra]


def _note(jobid: str, cls: str, what: str, covers: str, model: str = "", method: str = "", kwh: str = "") -> list[str]:
    """A Node ``-`` row of ``-l`` in the columns before ReqMem/MaxRSS (:func:`_widen`): Class ``cls``,
    DeviceID ``what``, the text in Covers."""
    return [jobid, "-", cls, what, model, "", method, kwh, "", "", "", "", "", covers]


def caveat_rows(rec: JobRecord, jobid: str) -> list[list[str]]:
    """``-l`` rows (:func:`_note`) for what the device rows do not say, each only when it applies:
    Class ``status`` when every class with energy was estimated (``complete(estimated)``, its IT kWh in
    Energy_kWh, which holds IT energy only, never facility energy:
    :func:`slurm_energy.core.status_text`); Class ``pue`` / ``ci`` when that value is the documented
    default (``CarbonFacts.defaults_used``: the site config sets none), with the value used, the
    facility kWh or kgCO2e it gave, its source and where to set it."""
    rows = []
    if all_estimated(rec.methods, rec.energy_it_j, metered_rest(rec)):
        rows.append(_note(jobid, "status", rec.status_text, "every class with energy estimated: rated power x "
                          "utilisation x time, no counter or power reading", method=Method.TDP_ESTIMATE.value,
                          kwh=fmt_num(rec.it_kwh)))
    c = rec.carbon
    if "pue" in c.defaults_used:
        # Energy_kWh holds IT (job-share) energy in every row: the facility kWh goes in the text
        rows.append(_note(jobid, "pue", f"{c.pue:g}", f"facility kWh {fmt_num(rec.facility_kwh)} = IT x PUE "
                          f"{c.pue:g}; " + _with_fix(c.pue_source, "set pue in site.yaml"), model="default"))
    if "ci" in c.defaults_used:
        rows.append(_note(jobid, "ci", f"{c.ci_g_per_kwh:g} gCO2e/kWh", f"kgCO2e {fmt_num(rec.co2e_kg)} = facility kWh x "
                          "CI; " + _with_fix(c.ci_source, "set location.country or carbon_intensity in site.yaml"),
                          model="default"))
    return rows


def _with_fix(source: str, fix: str) -> str:
    """``source`` without its ``DEFAULT: `` lead (the row's Model column says default), then ``; fix``
    unless ``source`` already says where to set the value (config/carbon.py's default CI source ends
    "-- set location.country or datacenters.<name>.carbon_intensity in site.yaml"): the hint once."""
    source = source.removeprefix("DEFAULT: ")
    return source if "in site.yaml" in source else f"{source}; {fix}"


def _widen(row: list[str]) -> list[str]:
    """A row built for the columns before ReqMem/MaxRSS (phases, prediction) with those two empty."""
    if len(row) == len(LONG_FIELDS) - 2:
        return row[:-1] + ["", ""] + row[-1:]
    return row


def _covers_flags(d: DeviceEnergy, short: bool = False) -> str:
    """What the number covers, with its flags (counter_inconsistent, util_clamped + raw value...).
    ``short`` (the aligned ``-l`` table): without the parts the row's DeviceID, Model and Method
    columns already show (``accounting.summary`` writes ``"<id> (<model>); <method>; <share>"``)."""
    extra = list(d.flags)
    extra += [f"{k}={v:.3g}" for k, v in sorted(d.unclamped.items())]
    covers: str = d.covers
    if short:
        known = {d.device_id, f"{d.device_id} ({d.model})", Method(d.method).value}
        covers = "; ".join(p for p in covers.split("; ") if p not in known)
    return covers + (f" [{', '.join(extra)}]" if extra else "")


def sum_attempts(attempts: list[JobRecord]) -> tuple[JobRecord, float]:
    """A requeued job's total: energies summed over attempts (None stays None only if every
    attempt is unmeasured). Returns (synthetic record for display, summed elapsed s)."""

    last = attempts[-1]
    classes = {c for a in attempts for c in a.energy_it_j}
    total = _copy(last,
        dict(
            energy_it_j={c: sum_known([a.energy_it_j.get(c) for a in attempts]) for c in classes},
            it_kwh=sum_known([a.it_kwh for a in attempts]),
            facility_kwh=sum_known([a.facility_kwh for a in attempts]),
            co2e_kg=sum_known([a.co2e_kg for a in attempts]),
            co2e_gross_kg=sum_known([a.co2e_gross_kg for a in attempts]),
            embodied_kg=sum_known([a.embodied_kg for a in attempts]),
            cost=sum_known([a.cost for a in attempts]),
            coverage_complete=all(a.coverage_complete for a in attempts),
            start_time=attempts[0].start_time,
        )
    )
    return total, sum(a.elapsed_s for a in attempts)


def _copy(rec: JobRecord, update: dict[str, Any]) -> JobRecord:
    """A copy of a record (pydantic ``model_copy``) or a summary row with ``update`` applied."""
    if hasattr(rec, "model_copy"):
        return rec.model_copy(update=update)
    import copy

    out = copy.copy(rec)
    for k, v in update.items():
        setattr(out, k, v)
    return out


def to_json(items: list[tuple[str, JobRecord]]) -> str:
    """``--json``: ``{"jobs": [{"jobid": display id, "record": JobRecord}, ...]}``, plus
    ``"prediction_check"`` (:func:`slurm_energy.accounting.calibration.check_job`) for a job that
    declared its FLOPs."""
    from slurm_energy.reporting.prediction_check import check

    def one(jid: str, r: JobRecord) -> str:
        # the record as pydantic writes it (every field: the store's JSON leaves defaults out; nodes in
        # numeric order), not parsed and dumped again: Python's indenting encoder took 3 s for a
        # 1,024-node record
        parts = [f'"jobid": {json.dumps(jid)}',
                 '"record": ' + ordered_record(r).model_dump_json(indent=1, context={"full": True})]
        chk = check(r)
        if chk is not None:  # the job declared its FLOPs: predicted vs measured
            parts.append('"prediction_check": ' + json.dumps(chk, indent=1))
        from slurm_energy.reporting.gpu_idle import json_block

        idle = json_block(r)
        if idle is not None:  # GPUs allocated but idle, labelled
            parts.append('"gpu_idle": ' + json.dumps(idle, indent=1))
        from slurm_energy.reporting.footprint import json_block as footprint_block

        # location-based, net, embodied, SCI total, cost, SCI for AI
        parts.append('"footprint": ' + json.dumps(footprint_block(r), indent=1))
        return "{" + ",\n".join(parts) + "}"

    return '{"jobs": [' + ",\n".join(one(jid, r) for jid, r in items) + "]}"
