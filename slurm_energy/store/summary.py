"""A JobRecord's summary columns and hourly rows (store schema v2), computed once when it is stored.

:func:`summary_columns` gives what ``jobenergy``'s default columns and the rollup read instead of the
record JSON; :func:`hour_rows` the job's energy per UTC hour (``job_hours``), from which a month's
share of a job is summed in SQL (:mod:`slurm_energy.store.rollup`), the same rule as
:mod:`slurm_energy.accounting.time_split` applies to whole records.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from slurm_energy.core import DEVICE_CLASSES, REST_ESTIMATED, REST_METERED, Method
from slurm_energy.units import J_PER_KWH, co2e_kg

if TYPE_CHECKING:
    from slurm_energy.model import JobRecord

_H = 3600.0
_MEASURED = (Method.COUNTER, Method.POWER_INTEGRATION)


def _state(rec: JobRecord) -> str:
    from slurm_energy.model import job_state_from_exit_code

    return rec.job_state or job_state_from_exit_code(rec.exit_code) or ""


def rest_of_node_split(rec: JobRecord) -> tuple[list[float], list[float]]:
    """The job's share of its nodes' rest (J), node by node: (metered by the node meter: measured,
    the site's ``estimate_w``: estimated); a node not metered adds to neither (unmeasured, never 0)."""
    meas: list[float] = []
    est: list[float] = []
    for n in rec.nodes:
        r = n.rest_of_node
        if r is None or r.energy_j is None:
            continue
        if r.method.startswith(REST_METERED):
            meas.append(r.energy_j)
        elif r.method.startswith(REST_ESTIMATED):
            est.append(r.energy_j)
    return meas, est


def _kwh(parts: list[float]) -> float | None:
    return sum(parts) / J_PER_KWH if parts else None


def hour_start(key: str) -> int:
    """``"2026-11-01T05:00:00Z"`` -> epoch s of that UTC hour."""
    return int(datetime.strptime(key, "%Y-%m-%dT%H:00:00Z").replace(tzinfo=timezone.utc).timestamp())


def hour_rows(rec: JobRecord, hourly_ci: dict[str, float] | None = None) -> list[dict[str, Any]]:
    """The ``job_hours`` rows of a record (without ``job_row_id``): per UTC hour, ``hour_start``
    (epoch s), ``it_kwh`` (the job's IT energy in it), ``facility_kwh`` (x PUE) and ``co2e_kg``
    (facility kWh x the hour's gCO2e/kWh x alpha / 1000: the hour's CI from ``hourly_ci``
    ({hour key: gCO2e/kWh}) when the record's CO2e was computed hourly (``carbon.hourly``), hours
    missing from it and every other record at the record's one CI, as
    :func:`slurm_energy.carbon.hourly.co2e_kg_hourly`)."""
    from slurm_energy.accounting.time_split import hourly_it_j
    from slurm_energy.carbon.hourly import facility_kwh_by_hour

    c = rec.carbon
    ci = hourly_ci if c.hourly and hourly_ci else {}
    it = hourly_it_j(rec)
    fac = facility_kwh_by_hour(it, c.pue)
    return [{"hour_start": hour_start(h), "it_kwh": j / J_PER_KWH, "facility_kwh": fac[h],
             "co2e_kg": co2e_kg(fac[h], ci.get(h, c.ci_g_per_kwh), c.alpha)} for h, j in it.items()]


def summary_columns(rec: JobRecord, hours: list[dict[str, Any]]) -> dict[str, Any]:
    """The v2 summary columns of ``rec`` (:func:`slurm_energy.store.schema._summary_columns`);
    ``hours``: its :func:`hour_rows` (their totals, and whether any lies outside the job's times)."""
    e = rec.energy_it_j
    meas = [j for c, j in e.items() if j is not None and rec.methods.get(c) in _MEASURED]
    est = [j for c, j in e.items() if j is not None and rec.methods.get(c) == Method.TDP_ESTIMATE]
    rest_meas, rest_est = rest_of_node_split(rec)
    meas += rest_meas
    est += rest_est
    cpu_times = [n.cpu_time_s for n in rec.nodes if n.cpu_time_s is not None]
    gpus = sum(d.count for n in rec.nodes for d in n.devices if d.device_class == "gpu")
    s, t = rec.start_time, rec.end_time
    row: dict[str, Any] = {
        "job_name": rec.job_name, "job_state": _state(rec), "exit_code": rec.exit_code,
        "n_nodes": len(rec.expected_nodes) or len(rec.nodes), "elapsed_s": rec.elapsed_s,
        "cpu_time_s": sum(cpu_times) if cpu_times else None, "n_gpus": gpus,
        "classes": ",".join(e),
        "methods": rec.method_summary,
        "measured_it_kwh": _kwh(meas), "estimated_it_kwh": _kwh(est),
        "coverage_complete": rec.coverage_complete, "report_error": rec.report_error,
        "pue": rec.carbon.pue, "ci_g_per_kwh": rec.carbon.ci_g_per_kwh, "alpha": rec.carbon.alpha,
        "hourly_it_kwh": sum(h["it_kwh"] for h in hours) if hours else None,
        "hourly_co2e_kg": sum(h["co2e_kg"] for h in hours) if hours else None,
        # time_split: an hour whose span [max(h, start), min(h + 1 h, end)] is empty counts whole
        "gpu_idle_s": rec.gpu_idle_s,
        "gpu_idle_kwh": None if rec.gpu_idle_energy_j is None else rec.gpu_idle_energy_j / J_PER_KWH,
        "gpu_idle_method": rec.gpu_idle_method or None,
        "rest_of_node_kwh": None if rec.rest_of_node_j is None else rec.rest_of_node_j / J_PER_KWH,
        "rest_of_node_method": rec.rest_of_node_method or None,
        "hours_outside": any(min(h["hour_start"] + _H, t) < max(h["hour_start"], s) for h in hours),
    }  # fmt: skip
    for c in DEVICE_CLASSES:
        v = e.get(c)
        row[f"{c}_kwh"] = None if v is None else v / J_PER_KWH
    return row


def site_hourly_ci():
    """``record -> {hour key: gCO2e/kWh} | None``: the hourly intensity imported for the record's
    zone (``slurm-energy ci-import``), from the site config; None for a record whose CO2e was not
    computed hourly, when no site config or file is there, or the file is unreadable (then the
    record's one CI splits its CO2e by energy, as ``time_split`` does). Cached per zone facts."""
    cache: dict = {}

    def load(rec: JobRecord) -> dict[str, float] | None:
        if not rec.carbon.hourly:
            return None
        key = (rec.carbon.datacenter, rec.carbon.ci_source)
        if key not in cache:
            try:
                from slurm_energy.config import load_site_config
                from slurm_energy.config.carbon import hourly_intensity_for

                cache[key] = hourly_intensity_for(load_site_config(), rec.carbon)
            except Exception:  # no or bad site config / file: split by energy
                cache[key] = None
        return cache[key]

    return load
