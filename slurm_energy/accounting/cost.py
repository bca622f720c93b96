"""A job's energy cost: its facility energy in each UTC hour x that hour's price (docs/CARBON.md).

    cost = sum over hours h of E_facility,h (kWh) x price_h (currency per kWh)

``price_h`` is the hour's imported price (a time-of-use tariff, ``slurm-energy price-import``), else
the site's flat ``tariff.price_per_kwh``. The hours are the job's own (the nodes' hourly IT
energy, x PUE), the same split the hourly carbon intensity uses; a job without hourly energy is
charged its facility kWh at the flat price.
"""

from __future__ import annotations

from typing import Any

from slurm_energy.model import JobRecord


def job_cost(rec: JobRecord, tariff: Any, hourly_price: dict[str, float] | None = None) -> tuple[float | None, str]:
    """``(cost in tariff.currency, how)``; ``(None, why)`` when an hour has no price (no flat price
    and no imported one) or the job has no facility energy."""
    from slurm_energy.accounting.time_split import hourly_it_j
    from slurm_energy.carbon.hourly import facility_kwh_by_hour

    flat = tariff.price_per_kwh
    label = "site.yaml tariff" + (f": {tariff.source}" if tariff.source else "")
    if rec.facility_kwh is None:
        return None, "no facility energy"
    hours = facility_kwh_by_hour(hourly_it_j(rec), rec.carbon.pue)
    prices = hourly_price or {}
    if not hours or not prices:
        if flat is None:
            return None, f"{label}: no flat price_per_kwh and no hourly prices for the job's hours"
        return rec.facility_kwh * flat, f"facility kWh x flat {flat:g} {tariff.currency}/kWh ({label})"
    missing = [h for h in hours if h not in prices]
    if missing and flat is None:
        return None, f"{label}: no price for {len(missing)} hour(s) of the job, first {sorted(missing)[0]}"
    total = sum(kwh * prices.get(h, flat or 0.0) for h, kwh in hours.items())
    how = f"sum over hours of facility kWh x the hour's price ({len(hours) - len(missing)} hourly"
    how += f", {len(missing)} at the flat {flat:g} {tariff.currency}/kWh)" if missing else ")"
    return total, f"{how} ({label})"
