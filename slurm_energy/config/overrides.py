"""Carbon facts given as arguments (``track(pue=1.1, country="FR")``, ``slurm-energy run --pue 1.1
--country FR``) instead of, or on top of, ``site.yaml``.

:func:`with_carbon_overrides` returns a copy of the site config whose one datacenter (a catch-all) is
the datacenter that applied to the job, with the given facts replacing its own, so
:func:`slurm_energy.config.carbon.resolve_carbon` (the one resolution rule) labels each given fact
``given: <who>`` and keeps the file's value for every fact not given. :func:`default_facts_warning`
is the line a measurement outside Slurm prints when PUE or CI are still the documented defaults.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from slurm_energy.config.schema import CarbonIntensity, Datacenter, Location, SiteConfig
from slurm_energy.errors import ConfigError

if TYPE_CHECKING:
    from slurm_energy.model import CarbonFacts

#: The name of the datacenter built from the arguments when site.yaml has none for the job.
GIVEN_DATACENTER = "given"


def with_carbon_overrides(site: SiteConfig, *, country: str | None = None, zone: str | None = None,
                          pue: float | None = None, ci: float | None = None, alpha: float | None = None,
                          given_by: str = "track()", partition: str = "", node: str = "") -> SiteConfig:
    """``site`` with the given carbon facts overriding it (labelled ``datacenter <name>: <given_by>
    pue=1.1`` etc. in the record's ``*_source``) for a job on ``partition``/``node``.

    Args:
        country: ISO 3166 country (``FR``, ``FRA``): its grid's intensity from the bundled table.
        zone: grid zone or cloud region (``US-CA``, ``europe-west1``); with no ``country``, a zone
            ``XX-...`` names its country ``XX``.
        pue: facility energy / IT energy, 1.0..4.0 (a workstation or laptop: 1.0).
        ci: grid carbon intensity, gCO2e/kWh (1..2000; beats ``country``/``zone``).
        alpha: fraction of emissions counted, 0..1 (1 = no offset).
        given_by: who gave them, for the ``*_source`` labels (``track()``, ``slurm-energy run``).
    Returns:
        ``site`` itself when nothing is given, else a copy with one catch-all datacenter.
    Raises:
        ConfigError: a value out of range or an unknown country; the message names the argument
            and the fix.
    """
    if all(v is None for v in (country, zone, pue, ci, alpha)):
        return site
    from slurm_energy.config.carbon import datacenter_for

    found = datacenter_for(site, partition, node)
    name, base = found if found else (GIVEN_DATACENTER, Datacenter())
    fields = base.model_dump(exclude_unset=True)
    fields.update(partitions=[], nodes=[])
    try:
        if pue is not None:
            fields.update(pue=float(pue), pue_source=f"{given_by} pue={float(pue):g}")
        if alpha is not None:
            fields.update(alpha=float(alpha), alpha_source=f"{given_by} alpha={float(alpha):g}")
        if country is not None or zone is not None:
            cc = country or _country_of_zone(zone or "")
            fields["location"] = Location(country=cc, region=zone or "").model_dump()
            fields.pop("carbon_intensity", None)  # the given place beats the file's number
            fields.pop("source", None)
        if ci is not None:
            try:
                fields["carbon_intensity"] = CarbonIntensity(value=float(ci)).model_dump()
            except ValidationError as e:
                raise ConfigError(f"{given_by}: ci={ci!r}: {_msg(e.errors()[0])}") from None
            fields["source"] = f"{given_by} ci={float(ci):g} gCO2e/kWh"
        dc = Datacenter(**fields)
    except ValidationError as e:
        err = e.errors()[0]
        what = ".".join(str(x) for x in err.get("loc", ())) or "value"
        arg = _arg_name(what)
        given = {"country": country, "zone": zone, "pue": pue, "ci": ci, "alpha": alpha}.get(arg)
        named = f"{arg}={given!r}" if given is not None else arg  # the value as given, so the fix is plain
        raise ConfigError(f"{given_by}: {named}: {_msg(err)}; {_fix(what)}") from None
    except ConfigError:
        raise
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{given_by}: {e}; give numbers, e.g. pue=1.1, ci=56, alpha=1") from None
    return site.model_copy(update={"datacenters": {name: dc}})


def _msg(err: Any) -> str:
    m = str(err.get("msg", ""))
    return m[len("Value error, "):] if m.startswith("Value error, ") else m


def _country_of_zone(zone: str) -> str:
    head = zone.strip().upper().split("-")[0]
    if len(head) == 2 and head.isalpha():
        return head
    raise ConfigError(f"zone={zone!r}: name its country too (country='BE' with zone='europe-west1'); "
                      "a zone 'XX-...' (US-CA) names its country XX")


def _arg_name(loc: str) -> str:
    return {"carbon_intensity": "ci", "carbon_intensity.value": "ci", "location": "country",
            "location.country": "country", "location.region": "zone"}.get(loc, loc)


def _fix(loc: str) -> str:
    from slurm_energy.config.load import documented_example

    arg = _arg_name(loc)
    return {"pue": "a PUE is facility / IT energy, 1.0 (a workstation) to 4.0",
            "alpha": "alpha is the fraction of emissions counted, 0 to 1",
            "ci": "give the intensity in gCO2e/kWh, e.g. ci=56 (France 2023)",
            "country": "give an ISO 3166 code, e.g. country='FR'"}.get(arg, f"see {documented_example()}")


def default_facts_warning(carbon: CarbonFacts, *, pue_arg: str = "pue=1.0", ci_arg: str = "country='FR'") -> str:
    """One line saying which carbon facts of a record are the documented defaults (PUE 1.58 is a
    datacenter industry average, CI 475 gCO2e/kWh the world average) and how to give them, for a
    measurement outside Slurm; empty when neither is a default."""
    used = set(carbon.defaults_used)
    parts = []
    if "pue" in used:
        parts.append(f"PUE {carbon.pue:g} is the DEFAULT datacenter industry average (Uptime Institute 2023), "
                     f"not this machine's (a workstation's is about 1.0): give {pue_arg}")
    if "ci" in used:
        parts.append(f"carbon intensity {carbon.ci_g_per_kwh:g} gCO2e/kWh is the DEFAULT world average "
                     f"(IEA 2019): give your grid's, e.g. {ci_arg}")
    if not parts:
        return ""
    return "slurm-energy: " + "; ".join(parts) + " (or set them in site.yaml)"
