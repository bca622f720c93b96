"""The method's formulas, as pure functions, and the one place PUE, CI and alpha are applied.

    E_IT       = sum_i n_i x u_i x P_i x t_i      over device classes i in {CPU, GPU, RAM}
    E_facility = E_IT x PUE
    CO2e_gross = E_facility x CI              location-based, offsets excluded (SCI's O = E x I)
    CO2e       = E_facility x CI x alpha      net of the datacenter's offset factor alpha

n_i: device count; u_i: utilisation in [0, 1]; P_i: average (or rated) power per device, W;
t_i: running time, s. CI: grid carbon intensity, gCO2e/kWh; alpha: datacenter carbon offset factor
(1.0 = no offset). PUE: datacenter power usage effectiveness (facility / IT energy), >= 1.
The measured path replaces n_i u_i P_i t_i by the job's attributed share of counter or integrated
power energy; the sum, PUE, CI and alpha are the same.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from slurm_energy.model import DEVICE_CLASSES, CarbonFacts, JobRecord, Method, Status, worst_method
from slurm_energy.units import J_PER_KWH, co2e_kg, sum_known

#: A device counts as fully measured when intervals with energy cover this fraction of the job's
#: time (the sampler starts ~0.3 s after the Prolog: a short job never reaches 100 %).
COVERAGE_COMPLETE = 0.95


def class_energy_j(n: Any, u: Any, p_w: Any, t_s: Any) -> Any:
    """E = n x u x P x t for one device class, in J (W x s): ``n`` devices (or cores), ``u`` the
    utilisation in [0, 1], ``P`` the power per device in W (rated: TDP / power limit, for the
    ``utilisation_weighted`` policy), ``t`` s. Floats, or numpy arrays of one shape (NaN = unknown:
    NaN out). Source: Green Algorithms (Lannelongue, Grealey & Inouye 2021, Adv. Sci. 8:2100707).

    Raises:
        ValueError: a negative n, P or t, or u outside [0, 1] (names the field).
    """
    for name, v, ok in (("count", n, np.asarray(n) >= 0), ("util", u, (np.asarray(u) >= 0) & (np.asarray(u) <= 1)),
                        ("rated_power_w", p_w, np.asarray(p_w) >= 0), ("duration_s", t_s, np.asarray(t_s) >= 0)):
        if not np.all(ok | np.isnan(np.asarray(v, dtype=float))):
            raise ValueError(f"{name}: got {v!r}; need n >= 0, 0 <= u <= 1, P >= 0 W, t >= 0 s")
    return n * u * p_w * t_s


def facility_kwh(it_kwh: float, pue: float) -> float:
    """E_facility = E_IT x PUE, kWh. Raises ValueError if PUE < 1 (a PUE below 1 is not physical)."""
    if pue < 1:
        raise ValueError(f"PUE must be >= 1, got {pue}: fix datacenters.<name>.pue in the site config")
    return it_kwh * pue


def net_co2e_kg(gross_kg: float | None, alpha: float) -> float | None:
    """Net CO2e = location-based CO2e x alpha (the datacenter's offset factor, [0, 1]), kg; None
    stays None. alpha is one constant per job, so per-hour sums and the product commute."""
    if gross_kg is None:
        return None
    if alpha < 0:
        raise ValueError(f"alpha must be >= 0, got {alpha}: fix datacenters.<name>.alpha in the site config")
    return gross_kg * alpha


def finalise_record(record: JobRecord, carbon: CarbonFacts, hourly_ci: dict[str, float] | None = None, *,
                    embodied: tuple[Any, ...] | None = None, lifetimes: dict[str, float] | None = None,
                    tariff: Any = None, hourly_price: dict[str, float] | None = None,
                    marginal_ci: dict[str, float] | None = None, intensity: str = "average") -> JobRecord:
    """Fill a merged record's totals once: per-class IT energy, facility kWh, kgCO2e.

    Args:
        record: merged JobRecord (nodes filled; totals ignored and recomputed).
        carbon: PUE, CI, alpha and their sources (from the site config's resolution).
        hourly_ci: optional {ISO hour UTC: gCO2e/kWh}; when it covers every hour with energy, CO2e is
            sum over hours of facility energy in that hour x that hour's CI x alpha.
        embodied: the embodied-emission factors (:class:`slurm_energy.carbon.embodied.EmbodiedFactor`;
            None = embodied not computed), ``lifetimes`` the site's lifetimes by component, years.
        tariff: the site's :class:`slurm_energy.config.schema.Tariff` (None = no cost), with its
            ``hourly_price`` {ISO hour UTC: price per kWh} when imported.
        marginal_ci: the imported hourly marginal intensity {ISO hour UTC: gCO2e/kWh} (e.g. MOER):
            ``co2e_marginal_kg`` when it covers every hour with energy; ``intensity="marginal"``
            makes it the job's CO2e (``co2e_gross_kg``), the average one staying beside it.
    Returns:
        A new JobRecord (the input is not modified). A class whose every device is unmeasured has
        energy None; a class with some unmeasured devices sums the measured ones and sets
        ``coverage_complete`` False. Classes with no device on any node (e.g. no GPU allocated) are
        absent from ``energy_it_j``.
    """
    rec = record.model_copy(deep=True)
    per_class: dict[str, list[float | None]] = {}
    per_class_dev: dict[str, list[float | None]] = {}
    methods: dict[str, list[Method]] = {}
    complete = True
    for node in rec.nodes:
        for d in node.devices:
            per_class.setdefault(d.device_class, []).append(d.energy_j)
            per_class_dev.setdefault(d.device_class, []).append(d.device_energy_j)
            methods.setdefault(d.device_class, []).append(d.method)
            if d.energy_j is None or d.coverage < COVERAGE_COMPLETE:
                complete = False
    order = [c for c in DEVICE_CLASSES if c in per_class] + sorted(set(per_class) - set(DEVICE_CLASSES))
    rec.energy_it_j = {c: sum_known(per_class[c]) for c in order}
    rec.device_energy_j = {c: sum_known(per_class_dev[c]) for c in order}
    rec.methods = {c: worst_method(methods[c]) for c in order}
    from slurm_energy.accounting.idle_gpu import job_totals

    rec.gpu_idle_s, rec.gpu_idle_energy_j, rec.gpu_idle_method = job_totals(d for n in rec.nodes for d in n.devices)
    reported = {n.node for n in rec.nodes}
    missing = [n for n in rec.expected_nodes if n not in reported]
    rec.coverage_complete = complete and bool(rec.nodes) and not missing
    rests = [n.rest_of_node for n in rec.nodes if n.rest_of_node is not None]
    rec.rest_of_node_j = sum_known([r.energy_j for r in rests]) if rests else None
    rec.rest_of_node_method = "+".join(sorted({r.method for r in rests}))
    it_j = sum_known(list(rec.energy_it_j.values()))
    if it_j is not None and rec.rest_of_node_j is not None:
        it_j += rec.rest_of_node_j  # the node meter's part beyond the components (docs/NODE_METER.md)
    rec.carbon = carbon
    if it_j is None:
        rec.it_kwh = rec.facility_kwh = rec.co2e_kg = rec.co2e_gross_kg = None
        rec.co2e_average_kg = rec.co2e_marginal_kg = None
    else:
        rec.it_kwh = it_j / J_PER_KWH
        rec.facility_kwh = facility_kwh(rec.it_kwh, carbon.pue)
        rec.co2e_gross_kg = co2e_kg(rec.facility_kwh, carbon.ci_g_per_kwh)
        from slurm_energy.accounting.time_split import hourly_it_j

        hourly = hourly_it_j(rec)
        if hourly_ci and hourly:
            from slurm_energy.carbon.hourly import co2e_kg_hourly, facility_kwh_by_hour

            # hours without an imported intensity use the annual CI (recorded: hourly stays per-hour)
            rec.co2e_gross_kg = co2e_kg_hourly(facility_kwh_by_hour(hourly, carbon.pue), hourly_ci, 1.0,
                                               fallback_g_per_kwh=carbon.ci_g_per_kwh)
            rec.carbon = carbon.model_copy(update={"hourly": True})
        rec.co2e_average_kg = rec.co2e_gross_kg
        rec.co2e_marginal_kg = None
        if marginal_ci and hourly and all(h in marginal_ci for h in hourly):
            from slurm_energy.carbon.hourly import co2e_kg_hourly, facility_kwh_by_hour

            rec.co2e_marginal_kg = co2e_kg_hourly(facility_kwh_by_hour(hourly, carbon.pue), marginal_ci, 1.0)
        if intensity == "marginal" and rec.co2e_marginal_kg is not None:
            rec.co2e_gross_kg = rec.co2e_marginal_kg
            rec.carbon = rec.carbon.model_copy(update={"intensity_kind": "marginal"})
        rec.co2e_kg = net_co2e_kg(rec.co2e_gross_kg, carbon.alpha)
    if embodied is not None:
        from slurm_energy.accounting.embodied import job_embodied

        rec.embodied, notes = job_embodied(rec, embodied, lifetimes)
        rec.embodied_kg = sum_known([e.kg for e in rec.embodied])
        rec.embodied_note = "; ".join(notes)
    if tariff is not None and rec.it_kwh is not None:
        from slurm_energy.accounting.cost import job_cost

        rec.cost, rec.cost_source = job_cost(rec, tariff, hourly_price)
        rec.cost_currency = tariff.currency
    if rec.status == Status.COMPLETE and not rec.nodes:
        rec.status = Status.PARTIAL
    from slurm_energy.accounting.phases import job_windows

    return job_windows(rec)
