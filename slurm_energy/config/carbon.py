"""The carbon facts (PUE, carbon intensity, alpha) of one job, resolved from the site config (here,
beside the config it reads: the carbon package below holds the tables, geolocation and hourly data).

Resolution of the carbon facts of a job (:func:`resolve_carbon`), recorded in the ``*_source``
strings of :class:`slurm_energy.model.CarbonFacts`:

1. the datacenter of the job's partition, else of its node (``fnmatch`` patterns), else the one
   datacenter with neither partitions nor nodes (catch-all);
2. the site's ``location.country`` (bundled table);
3. opt-in geolocation of the node's public IP (geojs; off by default, cached per node, never with
   ``offline``);
4. the world average 475 gCO2e/kWh, labelled ``DEFAULT``.

Never silently another country: an unknown zone falls back only to its own datacenter's country.
Hourly intensity imported with ``slurm-energy ci-import``: :func:`hourly_intensity_for`.
"""

from __future__ import annotations

import fnmatch
from typing import Any

from slurm_energy import units
from slurm_energy.carbon import tables as _tables
from slurm_energy.config.schema import Datacenter, Location, SiteConfig
from slurm_energy.model import CarbonFacts


def datacenter_for(site: SiteConfig, partition: str = "", node: str = "") -> tuple[str, Datacenter] | None:
    """The ``(name, Datacenter)`` of a job: by partition, then node pattern, then catch-all.

    Returns None when no datacenter applies. Pure (no I/O).
    """
    if partition:
        for name, dc in site.datacenters.items():
            if partition in dc.partitions:
                return name, dc
    if node:
        for name, dc in site.datacenters.items():
            if any(fnmatch.fnmatchcase(node, pat) for pat in dc.nodes):
                return name, dc
    for name, dc in site.datacenters.items():
        if not dc.partitions and not dc.nodes:
            return name, dc
    return None

def resolve_carbon(site: SiteConfig, partition: str = "", node: str = "", *,
                   offline: bool | None = None) -> CarbonFacts:
    """PUE, carbon intensity (gCO2e/kWh) and alpha for a job on ``partition``/``node``.

    Order: datacenter > site country (bundled table) > geolocation (opt-in, cached per node,
    skipped when ``offline`` -- argument, else ``site.offline``) > world average 475 g/kWh
    (IEA 2019) labelled ``DEFAULT``. PUE: datacenter > site ``pue`` > 1.58 (Uptime 2023),
    labelled. Each ``*_source`` says where the value came from; ``defaults_used`` lists the
    facts (``pue``, ``ci``, ``alpha``) that are defaults. Never raises for network problems.
    """
    off = site.offline if offline is None else offline
    facts: dict[str, Any] = {"defaults_used": []}
    found = datacenter_for(site, partition, node)
    dc_name, dc = found if found else ("", None)
    facts["datacenter"] = dc_name

    # PUE
    if dc is not None and dc.pue is not None:
        facts["pue"] = dc.pue
        facts["pue_source"] = f"datacenter {dc_name}: " + (dc.pue_source or "site config")
    elif site.pue is not None:
        facts["pue"] = site.pue
        facts["pue_source"] = "site config: pue"
    else:
        facts["pue"] = units.DEFAULT_PUE
        facts["pue_source"] = units.DEFAULT_PUE_SOURCE
        facts["defaults_used"].append("pue")

    # alpha
    if dc is not None and "alpha" in dc.model_fields_set:
        facts["alpha"] = dc.alpha
        facts["alpha_source"] = f"datacenter {dc_name}: " + (dc.alpha_source or "site config")
    else:
        facts["alpha"] = 1.0
        facts["alpha_source"] = units.DEFAULT_ALPHA_SOURCE
        facts["defaults_used"].append("alpha")

    # carbon intensity
    ci = _ci_for(site, dc_name, dc, node, off)
    facts.update(ci)
    if ci.pop("_default", False):
        facts["defaults_used"].append("ci")
    facts.pop("_default", None)
    return CarbonFacts(**facts)

def _ci_for(site: SiteConfig, dc_name: str, dc: Datacenter | None, node: str, offline: bool) -> dict:
    if dc is not None and dc.carbon_intensity is not None:
        c = dc.carbon_intensity
        src = dc.source or "site config"
        unit = "" if c.unit == "gCO2e/kWh" else f" (given as {c.value:g} {c.unit})"
        return {"ci_g_per_kwh": c.g_per_kwh, "ci_basis": dc.basis, "ci_year": dc.year,
                "ci_source": f"datacenter {dc_name}: {src}{unit}"}
    if dc is not None and dc.location is not None:
        from slurm_energy.config.overrides import GIVEN_DATACENTER

        # a place given as an argument (track(country=), run --country) where the site has no datacenter
        what = "given location" if dc_name == GIVEN_DATACENTER else f"datacenter {dc_name} location"
        return _from_location(dc.location, what, dc.basis)
    if site.location is not None:
        return _from_location(site.location, "site location", "")
    if site.geolocation.enabled:
        from slurm_energy.carbon import geo

        res = geo.locate(node or _hostname(), url=site.geolocation.url,
                         timeout_s=site.geolocation.timeout_s,
                         cache_dir=site.paths.geo_cache_dir, offline=offline)
        if res.country:
            row = _tables.lookup_country(res.country)
            if row is not None:
                return {"ci_g_per_kwh": row.g_per_kwh, "ci_basis": row.basis, "ci_year": row.year,
                        "ci_source": f"geolocation ({res.how}) country {res.country}: {row.describe()}"}
            why = f"geolocated country {res.country!r} is not in the bundled table"
        else:
            why = f"geolocation gave no country ({res.error})"
    else:
        why = "no datacenter, site location or geolocation configured"
    return {"ci_g_per_kwh": _tables.WORLD_AVERAGE_G_PER_KWH, "ci_basis": "", "ci_year": 2019,
            "ci_source": f"DEFAULT: {units.DEFAULT_CI_TEXT}; "
                         f"{why} -- set location.country or datacenters.<name>.carbon_intensity "
                         f"in site.yaml", "_default": True}

def hourly_zones_for(site: SiteConfig, facts: CarbonFacts) -> list[str]:
    """Zone names to look up hourly intensity for a job: its datacenter's region then country
    (the site's location when no datacenter applies). Empty when no location is known."""
    dc = site.datacenters.get(facts.datacenter) if facts.datacenter else None
    loc = dc.location if dc is not None else site.location
    if loc is None:
        return []
    return [z for z in (loc.region, loc.country) if z]

def hourly_intensity_for(site: SiteConfig, facts: CarbonFacts, kind: str = "average") -> dict[str, float] | None:
    """Hourly intensity ``{ISO hour UTC "YYYY-MM-DDTHH:00:00Z": gCO2e/kWh}`` imported with
    ``slurm-energy ci-import`` for the job's zone (datacenter region, else country), or None
    when no file was imported for it. See :mod:`slurm_energy.carbon.hourly`.

    :raises slurm_energy.carbon.hourly.HourlyDataError: the stored file is corrupt.
    """

    got = hourly_series_for(site, facts, kind)
    return None if got is None else got[0]


def hourly_series_for(site: SiteConfig, facts: CarbonFacts, kind: str = "average") -> tuple[dict[str, float], str] | None:
    """``(series, label)`` of the job's zone's imported ``kind`` series (``average`` or ``marginal``):
    the label names the zone, the kind, its source and its age (when it was imported, its newest
    hour). None when none was imported. :raises HourlyDataError: a corrupt stored file."""
    import datetime as dt

    from slurm_energy.carbon import hourly

    store = hourly.series_dir(site.paths.hourly_ci_dir, kind)
    for zone in hourly_zones_for(site, facts):
        data = hourly.load_zone(store, zone)
        if data is not None:
            meta = hourly.read_meta(store, zone)
            when = meta.get("imported_at")
            imported = ("" if not isinstance(when, (int, float)) else
                        f", imported {dt.datetime.fromtimestamp(when, dt.timezone.utc):%Y-%m-%dT%H:%MZ}")
            label = (f"zone {zone} hourly {kind} intensity ({len(data)} h, {min(data)} .. {max(data)}{imported}; "
                     f"source: {meta.get('source') or 'not recorded'})")
            return data, label
    return None

def _from_location(loc: Location, what: str, basis: str) -> dict:
    if loc.region:
        try:
            row = _tables.lookup_zone(loc.region)
        except FileNotFoundError:
            row = None
        if row is not None:
            return {"ci_g_per_kwh": row.g_per_kwh, "ci_basis": basis or row.basis, "ci_year": row.year,
                    "ci_source": f"{what} region {loc.region}: {row.describe()}"}
    row = _tables.lookup_country(loc.country)
    if row is None:  # only when the table is missing: validation checked the code
        return {"ci_g_per_kwh": _tables.WORLD_AVERAGE_G_PER_KWH, "ci_basis": "", "ci_year": 2019,
                "ci_source": f"DEFAULT: world average 475 gCO2e/kWh; {what} country {loc.country} "
                             f"not in bundled table", "_default": True}
    note = f" (region {loc.region!r} not in bundled table; its country used)" if loc.region else ""
    return {"ci_g_per_kwh": row.g_per_kwh, "ci_basis": basis or row.basis, "ci_year": row.year,
            "ci_source": f"{what} country {loc.country}{note}: {row.describe()}"}


def _hostname() -> str:
    import socket

    return socket.gethostname().split(".")[0]

