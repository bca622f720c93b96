"""Site configuration: one validated YAML file (``site.yaml``) with the facts only an admin knows.

Where the file is found (:func:`load_site_config`): the path given, else ``$SLURM_ENERGY_CONFIG``,
else ``/etc/slurm-energy/site.yaml``, else documented defaults (``defaults_used`` says which).
``site_config/site.yaml`` in the repository is the documented example of every key.

Resolution of the carbon facts of a job (:meth:`SiteConfig.carbon_for`), recorded in the
``*_source`` strings of :class:`slurm_energy.model.CarbonFacts`:

1. the datacenter of the job's partition, else of its node (``fnmatch`` patterns), else the one
   datacenter with neither partitions nor nodes (catch-all);
2. the site's ``location.country`` (bundled table);
3. opt-in geolocation of the node's public IP (geojs; off by default, cached per node, never with
   ``offline``);
4. the world average 475 gCO2e/kWh, labelled ``DEFAULT``.

Never silently another country: an unknown zone falls back only to its own datacenter's country.

Errors: :class:`ConfigError`, whose message names the field (dotted path), the bad value and the
fix. This module imports pydantic and yaml, not pandas.

The Slurm hooks use :func:`load_site_config_lenient` instead: it keeps every part of the file that
is valid (above all ``paths``, so a typo elsewhere never sends a job's record to the default store)
and returns the messages, which the hooks record on the job. Whether the paths are usable on disk
is a run-time check, :func:`slurm_energy.config_check.check_paths` (``slurm-energy check-config``).
They call it through :func:`load_site_config_for_hooks`, which also keeps ``<file>.last-good`` (the
last text that loaded without any problem) and loads that copy when the file cannot be read or
parsed at all, so a missing ``}`` never sends records to the default store. Apart from that copy,
loading never touches the disk beyond reading the file.

YAML is read with :class:`UniqueKeyLoader` (a ``yaml.SafeLoader``): a key given twice in one mapping
is an error naming the key and both lines, since PyYAML would silently keep only the last.
Every message of the lenient loaders says what is in force (the file minus named keys, the last
good copy, or the documented defaults).
"""

from __future__ import annotations

import fnmatch
import os
import re
from typing import Any, Literal, Optional

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from slurm_energy.carbon import tables as _tables
from slurm_energy.carbon.units import UNIT_FACTORS, to_g_per_kwh
from slurm_energy.model import CarbonFacts

ENV_VAR = "SLURM_ENERGY_CONFIG"
DEFAULT_PATH = "/etc/slurm-energy/site.yaml"

#: Industry-average PUE, Uptime Institute Global Data Center Survey 2023 (1.58).
DEFAULT_PUE = 1.58
DEFAULT_PUE_SOURCE = "DEFAULT: industry average PUE 1.58 (Uptime Institute Global Data Center Survey 2023)"
#: Green Algorithms (Lannelongue et al. 2021) memory power model: 0.3725 W per GB.
DEFAULT_RAM_W_PER_GB = 0.3725
#: Green Algorithms ``TDP_cpu.csv`` "Any" row: 12.0 W per core for an unknown CPU.
DEFAULT_CPU_W_PER_CORE = 12.0
DEFAULT_GEO_URL = "https://get.geojs.io/v1/ip/geo.json"


class ConfigError(ValueError):
    """Invalid site configuration; ``str()`` names field, value and fix, one problem per line."""


# --------------------------------------------------------------------------- models
class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class CarbonIntensity(_Strict):
    """A grid carbon intensity as written by the admin: ``{value, unit}``; stored in gCO2e/kWh.

    Accepted units: gCO2e/kWh, kgCO2e/kWh (x1000), kgCO2e/MWh (x1), tCO2e/MWh (x1000),
    gCO2e/MWh (x0.001). Above 2000 gCO2e/kWh after conversion is rejected as a unit mistake.
    """

    value: float
    unit: str = "gCO2e/kWh"

    @model_validator(mode="after")
    def _check(self) -> "CarbonIntensity":
        to_g_per_kwh(self.value, self.unit, field="carbon_intensity")
        return self

    @property
    def g_per_kwh(self) -> float:
        """The intensity in gCO2e/kWh."""
        return to_g_per_kwh(self.value, self.unit)


class Location(_Strict):
    """Where a datacenter (or the site) draws power: ISO 3166 country, optional grid zone.

    ``country``: alpha-2 (``FR``) or alpha-3 (``FRA``), checked against the bundled table.
    ``region``: sub-national grid zone (``US-CA``, ``CA-QC``) or cloud region (``europe-west1``);
    also the zone name of an hourly-intensity file imported with ``slurm-energy ci-import``.
    """

    country: str
    region: str = ""

    @field_validator("country")
    @classmethod
    def _country(cls, v: str) -> str:
        c = str(v).strip().upper()
        if not re.fullmatch(r"[A-Z]{2}|[A-Z]{3}", c):
            raise ValueError("must be an ISO 3166 country code, alpha-2 (FR) or alpha-3 (FRA)")
        try:
            row = _tables.lookup_country(c)
        except FileNotFoundError:  # table not built yet: format check only
            return c
        if row is None:
            raise ValueError("is not a country in the bundled intensity table; use an ISO 3166 "
                             "alpha-2/alpha-3 code, or give carbon_intensity explicitly")
        return row.iso_alpha2  # one spelling (alpha-2) for look-ups and hourly zone names


class Datacenter(_Strict):
    """One datacenter (or machine room): PUE, carbon intensity, alpha, and which jobs run there."""

    pue: Optional[float] = Field(default=None, ge=1.0, le=4.0)
    pue_source: str = ""
    carbon_intensity: Optional[CarbonIntensity] = None
    alpha: float = Field(default=1.0, ge=0.0, le=1.0)  # fraction of emissions counted (1 = no offset)
    alpha_source: str = ""
    location: Optional[Location] = None
    basis: Literal["lifecycle", "direct", ""] = ""
    source: str = ""
    year: Optional[int] = Field(default=None, ge=1990, le=2100)
    partitions: list[str] = Field(default_factory=list)
    nodes: list[str] = Field(default_factory=list)  # fnmatch patterns, e.g. "gpu[0-9]*", "cn*"


class GpuOverride(_Strict):
    """Admin's rated power (W) and dense FLOP/s for a GPU model (NVML name or part of it)."""

    rated_w: Optional[float] = Field(default=None, gt=0, le=5000)
    fp32_flops: Optional[float] = Field(default=None, gt=0)
    tf32_flops: Optional[float] = Field(default=None, gt=0)
    bf16_flops: Optional[float] = Field(default=None, gt=0)


class Hardware(_Strict):
    """Rated-power overrides and fallbacks for the TDP estimate (W)."""

    cpu_tdp_w: dict[str, float] = Field(default_factory=dict)  # model string -> W per socket
    cpu_tdp_default_w: Optional[float] = Field(default=None, gt=0, le=2000)  # W per socket, unknown model
    cpu_w_per_core: float = Field(default=DEFAULT_CPU_W_PER_CORE, gt=0, le=100)
    ram_w_per_gb: float = Field(default=DEFAULT_RAM_W_PER_GB, gt=0, le=10)
    gpu: dict[str, GpuOverride] = Field(default_factory=dict)
    gpu_fallback_w: Optional[float] = Field(default=None, gt=0, le=5000)
    rapl_root: str = "/sys/class/powercap"
    drm_root: str = "/sys/class/drm"  # AMD/Intel GPUs: DRM nodes, each card's hwmon files
    kfd_root: str = "/sys/class/kfd/kfd/topology/nodes"  # AMD compute partitions (one KFD node each)

    @field_validator("cpu_tdp_w")
    @classmethod
    def _tdps(cls, v: dict[str, float]) -> dict[str, float]:
        for k, w in v.items():
            if not (0 < float(w) <= 2000):
                raise ValueError(f"TDP for {k!r} is {w} W; a CPU socket TDP is in (0, 2000] W")
        return v


class Sampling(_Strict):
    """Sampler settings."""

    interval_s: float = Field(default=5.0, gt=0, le=3600)
    interim_s: float = Field(default=60.0, ge=5, le=86400)  # running jobs: energy so far stored this often


class Attribution(_Strict):
    """How a shared node's energy is split between jobs."""

    policy: Literal["shared", "exclusive_whole_node", "utilisation_weighted"] = "shared"


DEFAULT_STORE_PATH = "/var/lib/slurm-energy/jobs.db"


class Paths(_Strict):
    """Where files go. Empty derived paths are filled from ``spool_dir``."""

    spool_dir: str = "/var/spool/slurm-energy"
    # second spool on another filesystem (tmpfs /run): the hooks use it when spool_dir is full or
    # read-only, so the job is still measured; "" = none. collect and prune look in both.
    spool_fallback_dir: str = "/run/slurm-energy"
    results_dir: str = ""  # default <spool_dir>/results
    # default sqlite:////var/lib/slurm-energy/jobs.db: NOT under the spool, which is root-only
    # (0700), so that ordinary users can run jobenergy against it (the file is 0644, root-written)
    store_url: str = ""
    log_dir: str = "/var/log/slurm-energy"
    hourly_ci_dir: str = ""  # default <spool_dir>/carbon-intensity (ci-import writes here)
    geo_cache_dir: str = ""  # default <spool_dir>/geo (one JSON file per node)

    @model_validator(mode="after")
    def _derive(self) -> "Paths":
        sp = self.spool_dir.rstrip("/") or "/"
        if not self.results_dir:
            object.__setattr__(self, "results_dir", os.path.join(sp, "results"))
        if not self.store_url:
            object.__setattr__(self, "store_url", "sqlite:///" + DEFAULT_STORE_PATH)
        if not self.hourly_ci_dir:
            object.__setattr__(self, "hourly_ci_dir", os.path.join(sp, "carbon-intensity"))
        if not self.geo_cache_dir:
            object.__setattr__(self, "geo_cache_dir", os.path.join(sp, "geo"))
        return self


class Geolocation(_Strict):
    """Opt-in IP geolocation (geojs). Off by default; never used when ``offline``."""

    enabled: bool = False
    url: str = DEFAULT_GEO_URL
    timeout_s: float = Field(default=2.0, gt=0, le=30)


class PrometheusOutput(_Strict):
    """node_exporter textfile output (:mod:`slurm_energy.outputs.prometheus`)."""

    enabled: bool = True
    textfile_dir: str = "/var/lib/prometheus/node-exporter"  # Debian's prometheus-node-exporter default
    keep_finished_s: float = Field(default=3600.0, ge=0, le=30 * 86400)  # finished jobs leave after this
    max_jobs: int = Field(default=2000, ge=1, le=100000)  # hard cap on exported job attempts per node


class SlurmWriteback(_Strict):
    """What the finalizer writes back into Slurm's accounting (:mod:`slurm_energy.outputs.slurm_writeback`)."""

    admin_comment: bool = True  # `scontrol update JobId=N AdminComment=...` (our prefix only)
    admin_comment_max_chars: int = Field(default=240, ge=40, le=1000)  # our part, bounded
    foreign_markers: list[str] = Field(default_factory=lambda: ["JS1:", "{", "["])  # another tool owns the field
    # Slurm >= 25.11: `sacctmgr modify job ... set TRES=energy=J`. PERMANENT in slurmdbd: off by default
    tres_energy: bool = False


class MailOutput(_Strict):
    """``slurm-energy mail`` (MailProg wrapper)."""

    program: str = "/usr/bin/mail"  # the real mail program it calls after adding the energy block
    wait_s: float = Field(default=20.0, ge=0, le=300)  # wait this long for the job's final record


class Outputs(_Strict):
    """Where finished (and running) jobs' energy goes besides the store and the user's report."""

    prometheus: PrometheusOutput = Field(default_factory=PrometheusOutput)
    slurm: SlurmWriteback = Field(default_factory=SlurmWriteback)
    mail: MailOutput = Field(default_factory=MailOutput)


_TOP_FACTS = ("cluster_name", "timezone", "location", "pue", "datacenters", "hardware", "sampling",
              "attribution", "paths", "geolocation", "offline", "admins", "outputs")


class SiteConfig(_Strict):
    """The whole site configuration. Build with :func:`load_site_config` (or directly in tests)."""

    cluster_name: str = ""
    timezone: str = "UTC"
    location: Optional[Location] = None  # the site's country (used when no datacenter matches)
    pue: Optional[float] = Field(default=None, ge=1.0, le=4.0)  # site-wide PUE, below datacenter's
    datacenters: dict[str, Datacenter] = Field(default_factory=dict)
    hardware: Hardware = Field(default_factory=Hardware)
    sampling: Sampling = Field(default_factory=Sampling)
    attribution: Attribution = Field(default_factory=Attribution)
    paths: Paths = Field(default_factory=Paths)
    geolocation: Geolocation = Field(default_factory=Geolocation)
    outputs: Outputs = Field(default_factory=Outputs)
    offline: bool = False
    admins: list[str] = Field(default_factory=list)
    defaults_used: list[str] = Field(default_factory=list)
    source_path: str = ""  # file it was loaded from ("" = documented defaults)

    @model_validator(mode="before")
    @classmethod
    def _record_defaults(cls, data: Any) -> Any:
        if isinstance(data, dict) and "defaults_used" not in data:
            data = dict(data)
            data["defaults_used"] = [k for k in _TOP_FACTS if k not in data]
        return data

    @field_validator("timezone")
    @classmethod
    def _tz(cls, v: str) -> str:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(v)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError("is not an IANA time zone; write e.g. 'Europe/Paris' or 'UTC'") from None
        return v

    @model_validator(mode="after")
    def _partitions_unique(self) -> "SiteConfig":
        seen: dict[str, str] = {}
        catch_all = [n for n, d in self.datacenters.items() if not d.partitions and not d.nodes]
        if len(catch_all) > 1:
            raise ValueError(f"datacenters {catch_all} all have neither partitions nor nodes; at most "
                             f"one datacenter may be the catch-all, give the others partitions/nodes")
        for name, dc in self.datacenters.items():
            for p in dc.partitions:
                if p in seen:
                    raise ValueError(f"partition {p!r} is listed in datacenters {seen[p]!r} and "
                                     f"{name!r}; list each partition in one datacenter")
                seen[p] = name
        return self

    # ----------------------------------------------------------------- resolution
    def datacenter_for(self, partition: str = "", node: str = "") -> Optional[tuple[str, Datacenter]]:
        """The ``(name, Datacenter)`` of a job: by partition, then node pattern, then catch-all.

        Returns None when no datacenter applies. Pure (no I/O).
        """
        if partition:
            for name, dc in self.datacenters.items():
                if partition in dc.partitions:
                    return name, dc
        if node:
            for name, dc in self.datacenters.items():
                if any(fnmatch.fnmatchcase(node, pat) for pat in dc.nodes):
                    return name, dc
        for name, dc in self.datacenters.items():
            if not dc.partitions and not dc.nodes:
                return name, dc
        return None

    def carbon_for(self, partition: str = "", node: str = "", *, offline: Optional[bool] = None) -> CarbonFacts:
        """PUE, carbon intensity (gCO2e/kWh) and alpha for a job on ``partition``/``node``.

        Order: datacenter > site country (bundled table) > geolocation (opt-in, cached per node,
        skipped when ``offline`` -- argument, else ``self.offline``) > world average 475 g/kWh
        (IEA 2019) labelled ``DEFAULT``. PUE: datacenter > site ``pue`` > 1.58 (Uptime 2023),
        labelled. Each ``*_source`` says where the value came from; ``defaults_used`` lists the
        facts (``pue``, ``ci``, ``alpha``) that are defaults. Never raises for network problems.
        """
        off = self.offline if offline is None else offline
        facts: dict[str, Any] = {"defaults_used": []}
        found = self.datacenter_for(partition, node)
        dc_name, dc = found if found else ("", None)
        facts["datacenter"] = dc_name

        # PUE
        if dc is not None and dc.pue is not None:
            facts["pue"] = dc.pue
            facts["pue_source"] = f"datacenter {dc_name}: " + (dc.pue_source or "site config")
        elif self.pue is not None:
            facts["pue"] = self.pue
            facts["pue_source"] = "site config: pue"
        else:
            facts["pue"] = DEFAULT_PUE
            facts["pue_source"] = DEFAULT_PUE_SOURCE
            facts["defaults_used"].append("pue")

        # alpha
        if dc is not None and "alpha" in dc.model_fields_set:
            facts["alpha"] = dc.alpha
            facts["alpha_source"] = f"datacenter {dc_name}: " + (dc.alpha_source or "site config")
        else:
            facts["alpha"] = 1.0
            facts["alpha_source"] = "DEFAULT: no offset (alpha 1.0)"
            facts["defaults_used"].append("alpha")

        # carbon intensity
        ci = self._ci_for(dc_name, dc, node, off)
        facts.update(ci)
        if ci.pop("_default", False):
            facts["defaults_used"].append("ci")
        facts.pop("_default", None)
        return CarbonFacts(**facts)

    def _ci_for(self, dc_name: str, dc: Optional[Datacenter], node: str, offline: bool) -> dict:
        if dc is not None and dc.carbon_intensity is not None:
            c = dc.carbon_intensity
            src = dc.source or "site config"
            unit = "" if c.unit == "gCO2e/kWh" else f" (given as {c.value:g} {c.unit})"
            return {"ci_g_per_kwh": c.g_per_kwh, "ci_basis": dc.basis, "ci_year": dc.year,
                    "ci_source": f"datacenter {dc_name}: {src}{unit}"}
        if dc is not None and dc.location is not None:
            return _from_location(dc.location, f"datacenter {dc_name} location", dc.basis)
        if self.location is not None:
            return _from_location(self.location, "site location", "")
        if self.geolocation.enabled:
            from slurm_energy.carbon import geo

            res = geo.locate(node or _hostname(), url=self.geolocation.url,
                             timeout_s=self.geolocation.timeout_s,
                             cache_dir=self.paths.geo_cache_dir, offline=offline)
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
                "ci_source": f"DEFAULT: world average 475 gCO2e/kWh ({_tables.WORLD_AVERAGE_SOURCE}); "
                             f"{why} -- set location.country or datacenters.<name>.carbon_intensity "
                             f"in site.yaml", "_default": True}

    def hourly_zones_for(self, facts: CarbonFacts) -> list[str]:
        """Zone names to look up hourly intensity for a job: its datacenter's region then country
        (the site's location when no datacenter applies). Empty when no location is known."""
        dc = self.datacenters.get(facts.datacenter) if facts.datacenter else None
        loc = dc.location if dc is not None else self.location
        if loc is None:
            return []
        return [z for z in (loc.region, loc.country) if z]

    def hourly_intensity_for(self, facts: CarbonFacts) -> Optional[dict[str, float]]:
        """Hourly intensity ``{ISO hour UTC "YYYY-MM-DDTHH:00:00Z": gCO2e/kWh}`` imported with
        ``slurm-energy ci-import`` for the job's zone (datacenter region, else country), or None
        when no file was imported for it. See :mod:`slurm_energy.carbon.hourly`.

        :raises slurm_energy.carbon.hourly.HourlyDataError: the stored file is corrupt.
        """
        from slurm_energy.carbon import hourly

        for zone in self.hourly_zones_for(facts):
            data = hourly.load_zone(self.paths.hourly_ci_dir, zone)
            if data is not None:
                return data
        return None

    # ----------------------------------------------------------------- hardware
    def cpu_tdp(self, model_string: str, cores: int) -> tuple[float, float, str, bool]:
        """Rated power of a CPU: ``(W per socket, W per core, source, is_fallback)``.

        :param model_string: as the OS reports it (``/proc/cpuinfo`` model name).
        :param cores: physical cores per socket as seen on this node (>= 1); used for W per core
            when the table has no core count, and for the per-core fallback.
        Order: ``hardware.cpu_tdp_w`` (by normalized model) > bundled table > ``cpu_tdp_default_w``
        (flagged) > ``cpu_w_per_core`` x cores (flagged; default 12 W/core, Green Algorithms "Any").
        :raises ValueError: ``cores < 1``.
        """
        from slurm_energy.devices import hwtables

        if cores < 1:
            raise ValueError(f"cores: {cores!r} must be >= 1 (physical cores per socket)")
        key = hwtables.normalize_cpu_model(model_string)
        for m, w in self.hardware.cpu_tdp_w.items():
            if hwtables.normalize_cpu_model(m) == key:
                return float(w), float(w) / cores, f"site config hardware.cpu_tdp_w[{m!r}]", False
        try:
            row = hwtables.lookup_cpu(model_string)
        except FileNotFoundError:
            row = None
        if row is not None:
            n = row.n_cores or cores
            yr = f" {row.year}" if row.year else ""
            return row.tdp_w, row.tdp_w / n, f"table: {row.model}{yr}, {row.source} ({row.licence})", False
        if self.hardware.cpu_tdp_default_w is not None:
            w = self.hardware.cpu_tdp_default_w
            return w, w / cores, (f"fallback: unknown CPU model {model_string!r}; site config "
                                  f"hardware.cpu_tdp_default_w"), True
        w = self.hardware.cpu_w_per_core
        src = ("Green Algorithms TDP_cpu.csv 'Any' 12 W/core" if w == DEFAULT_CPU_W_PER_CORE
               else "site config hardware.cpu_w_per_core")
        return w * cores, w, f"fallback: unknown CPU model {model_string!r}; {w:g} W/core ({src})", True

    def gpu_rated(self, name: str) -> tuple[Optional[float], dict[str, Optional[float]], str, bool]:
        """GPU rated power and dense FLOP/s: ``(W or None, {"fp32","tf32","bf16": FLOP/s|None},
        source, is_fallback)``. Order: ``hardware.gpu`` override (key words all in the NVML name)
        > bundled table > ``hardware.gpu_fallback_w`` (flagged) > ``(None, ..., fallback)``.
        At run time NVML's enforced power limit should be preferred to any of these.
        """
        from slurm_energy.devices import hwtables

        key = hwtables.normalize_gpu_model(name)
        for m, o in self.hardware.gpu.items():
            mk = hwtables.normalize_gpu_model(m)
            if mk and set(mk.split()) <= set(key.split()):
                return o.rated_w, {"fp32": o.fp32_flops, "tf32": o.tf32_flops, "bf16": o.bf16_flops}, \
                    f"site config hardware.gpu[{m!r}]", False
        try:
            row = hwtables.lookup_gpu(name)
        except FileNotFoundError:
            row = None
        if row is not None and row.rated_w is not None:
            return row.rated_w, {"fp32": row.fp32_flops, "tf32": row.tf32_flops, "bf16": row.bf16_flops}, \
                f"table: {row.model}, {row.source} ({row.licence})", False
        none = {"fp32": None, "tf32": None, "bf16": None}
        if self.hardware.gpu_fallback_w is not None:
            return self.hardware.gpu_fallback_w, none, (f"fallback: unknown GPU {name!r}; site config "
                                                        f"hardware.gpu_fallback_w"), True
        return None, none, f"unavailable: unknown GPU {name!r} and no hardware.gpu_fallback_w", True


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


# --------------------------------------------------------------------------- loading
_HINTS = {
    "pue": "PUE = facility energy / IT energy: a number in [1.0, 4.0], typically 1.1-2.0",
    "alpha": "alpha is the fraction of emissions counted, in [0, 1] (1.0 = no offset)",
    "interval_s": "sampling interval in seconds, > 0 (e.g. 5)",
    "timeout_s": "timeout in seconds, in (0, 30]",
    "country": "an ISO 3166 code, alpha-2 (FR) or alpha-3 (FRA)",
    "policy": "one of shared, exclusive_whole_node, utilisation_weighted",
    "value": "a number >= 0 in the given unit",
    "unit": "one of " + ", ".join(UNIT_FACTORS),
    "basis": "one of lifecycle, direct (or leave it out)",
    "year": "a four-digit year",
    "cpu_w_per_core": "watts per core, in (0, 100] (default 12)",
    "ram_w_per_gb": "watts per GB of RAM, in (0, 10] (default 0.3725)",
    "timezone": "an IANA zone such as Europe/Paris",
    "carbon_intensity": "write {value: 233, unit: gCO2e/kWh} (at most 2000 gCO2e/kWh after conversion)",
}


def _format_error(e: ValidationError, origin: str) -> str:
    lines = []
    for err in e.errors():
        loc = [str(x) for x in err.get("loc", ()) if not str(x).startswith("function-")]
        path = ".".join(loc) or "(top level)"
        bad = err.get("input")
        msg = err.get("msg", "")
        if err.get("type") == "extra_forbidden":
            fix = "unknown key: fix its spelling or remove it (documented keys: site_config/site.yaml)"
        else:
            leaf = loc[-1] if loc else ""
            fix = _HINTS.get(leaf, "see site_config/site.yaml for the documented form")
        if isinstance(bad, dict) and len(bad) > 3:
            shown = "{" + ", ".join(map(str, bad)) + "}"
        else:
            shown = repr(bad)
        lines.append(f"{origin}: {path}: bad value {shown}: {msg}. Fix: {fix}")
    return "\n".join(lines)


def site_config_from_dict(data: Any, origin: str = "site config") -> SiteConfig:
    """Validate a parsed YAML mapping into a :class:`SiteConfig`.

    :raises ConfigError: not a mapping, or invalid; the message names the dotted field path, the
        bad value and the fix (one line per problem).
    """
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{origin}: top level must be a mapping of keys (cluster_name:, datacenters:, "
                          f"...), got {type(data).__name__}")
    try:
        return SiteConfig.model_validate(data)
    except ValidationError as e:
        raise ConfigError(_format_error(e, origin)) from None


def _config_path(path: "str | os.PathLike | None") -> Optional[str]:
    """The file to load: ``path``, else ``$SLURM_ENERGY_CONFIG``, else :data:`DEFAULT_PATH` if it
    exists, else None (documented defaults)."""
    if path is None:
        path = os.environ.get(ENV_VAR) or (DEFAULT_PATH if os.path.exists(DEFAULT_PATH) else None)
    return None if path is None else os.fspath(path)


def _defaults_without_file() -> SiteConfig:
    cfg = SiteConfig()
    cfg.defaults_used = ["config_file"] + cfg.defaults_used
    return cfg


class DuplicateKeyError(yaml.constructor.ConstructorError):
    """A mapping in the YAML text has the same key twice (PyYAML would keep only the last)."""


def _key_path(root: yaml.Node, target: yaml.Node) -> list[str]:
    """Dotted key path from ``root`` down to mapping node ``target`` (list of keys; [] = top level)."""
    stack: list[tuple[yaml.Node, list[str]]] = [(root, [])]
    while stack:
        node, path = stack.pop()
        if node is target:
            return path
        if isinstance(node, yaml.MappingNode):
            stack += [(v, path + [str(getattr(k, "value", "?"))]) for k, v in node.value]
        elif isinstance(node, yaml.SequenceNode):
            stack += [(v, path + [f"[{i}]"]) for i, v in enumerate(node.value)]
    return []


class UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that rejects a key given twice in one mapping, at any level.

    PyYAML (like most YAML parsers) silently keeps the last of two equal keys, so a second
    ``sampling:`` block would wipe out the first; YAML 1.2 (section 3.2.1.1) requires keys to be
    unique. Merge keys (``<<``) are left to PyYAML (overriding a merged key is allowed).
    :raises DuplicateKeyError: naming the dotted key and both line numbers (1-based).
    """

    def construct_document(self, node):  # noqa: D102 - remember the root to name nested keys
        self._se_root = node
        return super().construct_document(node)

    def construct_mapping(self, node, deep=False):  # noqa: D102
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.get(key)
                except TypeError:  # unhashable key: PyYAML's own error follows
                    continue
                line = key_node.start_mark.line + 1
                if first is not None:
                    parent = _key_path(getattr(self, "_se_root", node), node)
                    dotted = ".".join(parent + [str(key)])
                    raise DuplicateKeyError(
                        problem=f"duplicate key {dotted!r} at line {first} and again at line {line}; "
                                f"YAML keeps only the last, so the one at line {first} would be silently "
                                f"lost. Fix: merge the two into one {str(key)!r} entry")
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


def _read_text(p: str) -> str:
    """Text of file ``p``. :raises ConfigError: unreadable (message names path, reason and fix)."""
    try:
        with open(p, encoding="utf-8") as fh:
            return fh.read()
    except OSError as e:
        raise ConfigError(f"{p}: cannot read the site config ({e.strerror}); fix the path or set "
                          f"{ENV_VAR}") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{p}: cannot read the site config (not UTF-8 text: {e}); save it as "
                          f"UTF-8") from None


def parse_yaml_text(text: str, origin: str = "site config") -> Any:
    """Parse YAML ``text`` (safe loader, duplicate keys rejected, see :class:`UniqueKeyLoader`).

    :raises ConfigError: not YAML or a duplicate key; the message starts with ``origin`` and
        contains the exact YAML error (line and column).
    """
    loader = UniqueKeyLoader(text)
    loader.name = origin  # marks say 'in "/etc/slurm-energy/site.yaml", line 3' (not <unicode string>)
    try:
        return loader.get_single_data()
    except yaml.YAMLError as e:
        raise ConfigError(f"{origin}: not valid YAML: {str(e).strip()}") from None
    finally:
        loader.dispose()


def _read_yaml(p: str) -> Any:
    """Parsed YAML of file ``p``. :raises ConfigError: unreadable, not YAML, or a duplicate key."""
    return parse_yaml_text(_read_text(p), p)


def load_site_config(path: "str | os.PathLike | None" = None) -> SiteConfig:
    """Load and validate the site configuration.

    ``path`` None: ``$SLURM_ENERGY_CONFIG``, else ``/etc/slurm-energy/site.yaml`` if it exists,
    else documented defaults (``defaults_used`` then also contains ``"config_file"``).
    :raises ConfigError: file given but missing/unreadable, not YAML, or invalid (message names
        field, value and fix).
    """
    p = _config_path(path)
    if p is None:
        return _defaults_without_file()
    cfg = site_config_from_dict(_read_yaml(p), origin=p)
    cfg.source_path = p
    return cfg


# --------------------------------------------------------------------------- lenient loading
#: Sections whose keys are dropped one by one when invalid (``paths.log_dir`` alone falls back to
#: its default, ``datacenters.X`` alone is dropped). Any other bad key drops its whole top-level key.
_PER_KEY_SECTIONS = ("paths", "datacenters", "hardware", "sampling", "attribution", "geolocation")
#: Maps inside ``hardware`` whose entries are dropped one by one (one bad GPU override).
_PER_ENTRY_MAPS = (("hardware", "gpu"), ("hardware", "cpu_tdp_w"))


def _drop_target(loc: tuple) -> tuple:
    """The key path to drop for a pydantic error at ``loc`` (see :data:`_PER_KEY_SECTIONS`)."""
    if not loc:
        return ()
    if loc[0] in _PER_KEY_SECTIONS and len(loc) >= 2:
        return loc[:3] if loc[:2] in _PER_ENTRY_MAPS and len(loc) >= 3 else loc[:2]
    return loc[:1]


def _delete(data: dict, target: tuple) -> bool:
    """Delete ``data[t0][t1]...``; False when that key is not there (or a parent is no mapping)."""
    node: Any = data
    for k in target[:-1]:
        if not isinstance(node, dict) or k not in node:
            return False
        node = node[k]
    if isinstance(node, dict) and target and target[-1] in node:
        del node[target[-1]]
        return True
    return False


def _drop_conflicting_datacenters(data: dict) -> list[str]:
    """Model-level errors (a partition in two datacenters, two catch-alls): keep datacenters in file
    order while they validate together; returns the dotted names of those dropped."""
    dcs = data.get("datacenters")
    if not isinstance(dcs, dict):
        return []
    kept: dict = {}
    dropped = []
    for name, dc in dcs.items():
        trial = {**kept, name: dc}
        try:
            SiteConfig.model_validate({"datacenters": trial})
            kept = trial
        except ValidationError:
            dropped.append(f"datacenters.{name}")
    if dropped:
        data["datacenters"] = kept
    return dropped


def site_config_from_dict_lenient(data: Any, origin: str = "site config") -> tuple[SiteConfig, list[str]]:
    """Validate a parsed YAML mapping, dropping only what is invalid; never raises on bad values.

    Every top-level key that validates is kept; inside ``paths``, ``hardware``, ``sampling``,
    ``attribution``, ``geolocation`` only the bad keys are dropped (their defaults apply), inside
    ``datacenters`` only the bad datacenters, inside ``hardware.gpu``/``hardware.cpu_tdp_w`` only
    the bad entries. Returns ``(config, messages)``: one message per problem, worded as
    :class:`ConfigError` (``origin: dotted.field: bad value V: why. Fix: ...``), then one line
    listing what was ignored. The dropped dotted keys are appended to ``config.defaults_used``.
    Not a mapping: ``(SiteConfig(), [message])``.
    """
    import copy

    if data is None:
        data = {}
    if not isinstance(data, dict):
        return SiteConfig(), [f"{origin}: top level must be a mapping of keys (cluster_name:, datacenters:, "
                              f"...), got {type(data).__name__}; nothing from it is in force: "
                              f"{_defaults_in_force()}"]
    data = copy.deepcopy(data)
    messages: list[str] = []
    dropped: list[str] = []
    for _ in range(1000):  # each round drops at least one key, so this ends
        try:
            cfg = SiteConfig.model_validate(data)
            break
        except ValidationError as e:
            messages += [m for m in _format_error(e, origin).splitlines() if m not in messages]
            progress = False
            for err in e.errors():
                loc = tuple(x for x in err.get("loc", ()) if not str(x).startswith("function-"))
                target = _drop_target(loc)
                if target and (_delete(data, target) or _delete(data, target[:1])):
                    dropped.append(".".join(map(str, target)))
                    progress = True
            if not progress:
                gone = _drop_conflicting_datacenters(data)
                dropped += gone
                progress = bool(gone)
            if not progress:  # nothing left to single out: documented defaults
                cfg = SiteConfig()
                dropped.append("(everything)")
                break
    else:  # pragma: no cover - unreachable: every round drops a key
        cfg = SiteConfig()
    if dropped:
        seen = list(dict.fromkeys(dropped))
        messages.append(_in_force_message(cfg, seen, origin))
        cfg.defaults_used = cfg.defaults_used + [d for d in seen if d not in cfg.defaults_used]
    return cfg, messages


_MISSING = object()


def _value_at(cfg: SiteConfig, dotted: str) -> Any:
    """The value of ``dotted`` (``paths.log_dir``, ``datacenters.bad``) in ``cfg``, or _MISSING."""
    node: Any = cfg
    for k in dotted.split("."):
        if isinstance(node, BaseModel):
            node = getattr(node, k, _MISSING) if k in type(node).model_fields else _MISSING
        elif isinstance(node, dict):
            node = node.get(k, _MISSING)
        else:
            return _MISSING
        if node is _MISSING:
            return _MISSING
    return node


def _defaults_in_force() -> str:
    """One phrase naming the documented defaults that matter most when no config is in force."""
    d = SiteConfig()
    return (f"documented defaults are in force for every setting (store {d.paths.store_url}, logs "
            f"{d.paths.log_dir}, spool {d.paths.spool_dir}, PUE {DEFAULT_PUE:g}, carbon intensity "
            f"{_tables.WORLD_AVERAGE_G_PER_KWH:g} gCO2e/kWh world average)")


def _in_force_message(cfg: SiteConfig, dropped: list[str], origin: str) -> str:
    """What is in force after the lenient loader dropped the keys ``dropped`` (dotted)."""
    if "(everything)" in dropped:
        return f"{origin}: nothing from this file is in force: {_defaults_in_force()}"
    parts = []
    for d in dropped:
        v = _value_at(cfg, d)
        if v is _MISSING:
            parts.append(f"{d} not defined")
        elif v is None:
            parts.append(f"{d} unset (its documented fallback applies)")
        elif isinstance(v, BaseModel):
            parts.append(f"{d} = documented defaults {v.model_dump()}")
        else:
            parts.append(f"{d} = {v!r} (documented default)")
    return (f"{origin}: every other key of this file is in force; in place of the bad keys: "
            + "; ".join(parts))


def _load_lenient(p: str) -> tuple[SiteConfig, list[str], Optional[str], Optional[str]]:
    """``(config, messages, text, fatal)`` of file ``p``: ``fatal`` is the error text when the file
    cannot be read, is not YAML or its top level is no mapping (config = documented defaults),
    else None; ``text`` is the file's text when it was read."""
    try:
        text = _read_text(p)
    except ConfigError as e:
        return _defaults_without_file(), [], None, str(e)
    try:
        data = parse_yaml_text(text, p)
    except ConfigError as e:
        return _defaults_without_file(), [], text, str(e)
    if data is not None and not isinstance(data, dict):
        return _defaults_without_file(), [], text, (
            f"{p}: top level must be a mapping of keys (cluster_name:, datacenters:, ...), got "
            f"{type(data).__name__}")
    cfg, messages = site_config_from_dict_lenient(data, origin=p)
    cfg.source_path = p
    return cfg, messages, text, None


def load_site_config_lenient(path: "str | os.PathLike | None" = None) -> tuple[SiteConfig, list[str]]:
    """Load the site configuration keeping every part that is valid; for the Slurm hooks, where a
    typo must not send a job's record to the default store (``paths`` above all).

    File chosen as in :func:`load_site_config`. Returns ``(config, messages)``; ``messages`` is
    empty for a valid file (or no file: documented defaults, ``"config_file"`` in
    ``defaults_used``). A missing/unreadable/non-YAML file (duplicate keys included) or a top level
    that is no mapping gives ``(defaults, [message])``, the message ending in what is in force;
    invalid keys are dropped as in :func:`site_config_from_dict_lenient`. Never raises ConfigError.
    See :func:`load_site_config_for_hooks` for the variant that falls back to the last good copy.
    """
    p = _config_path(path)
    if p is None:
        return _defaults_without_file(), []
    cfg, messages, _text, fatal = _load_lenient(p)
    if fatal is not None:
        return cfg, [f"{fatal}\nNothing from {p} is in force: {_defaults_in_force()}"]
    return cfg, messages


# --------------------------------------------------------------------------- last good copy
#: Suffix of the copy of the last site config that loaded without any problem (same directory).
LAST_GOOD_SUFFIX = ".last-good"


def last_good_path(path: "str | os.PathLike") -> str:
    """``<path>.last-good``: where :func:`load_site_config_for_hooks` keeps the last good copy."""
    return os.fspath(path) + LAST_GOOD_SUFFIX


def save_last_good(path: "str | os.PathLike", text: str) -> bool:
    """Keep ``text`` (a site config that loaded with no problem) as ``<path>.last-good``.

    Written only when its content differs from the existing copy; atomically (a temporary file in
    the same directory, fsync, ``os.replace``), with the site config's own permission bits (0600
    if it cannot be read: the config may hold store credentials), so whoever may read site.yaml
    (jobenergy as an ordinary user) may read its last good copy.
    Returns True when the copy now holds ``text``, False when it could not be written; never raises
    (a failure is logged as a warning, since the hooks must go on).
    """
    import logging
    import tempfile

    lg = last_good_path(path)
    try:
        try:
            with open(lg, encoding="utf-8") as fh:
                if fh.read() == text:
                    return True
        except FileNotFoundError:
            pass
        fd, tmp = tempfile.mkstemp(prefix=os.path.basename(lg) + ".", suffix=".tmp",
                                   dir=os.path.dirname(os.path.abspath(lg)))
        try:
            try:
                mode = os.stat(path).st_mode & 0o644  # never group/other-writable or executable
            except OSError:
                mode = 0o600
            os.fchmod(fd, mode)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, lg)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
    except (OSError, UnicodeError) as e:
        logging.getLogger("slurm_energy.config").warning(
            "cannot keep the last good site config as %s: %s", lg, e)
        return False
    return True


def load_site_config_for_hooks(path: "str | os.PathLike | None" = None,
                               save: bool = True) -> tuple[SiteConfig, list[str]]:
    """Site config for the Slurm hooks: lenient, and an unparsable file falls back to the last good copy.

    File chosen as in :func:`load_site_config`. When the file loads leniently with no message, its
    text is kept as ``<path>.last-good`` (:func:`save_last_good`; never raises). When the file
    cannot be read, is not YAML (a missing ``}``, a duplicate key) or its top level is no mapping,
    ``<path>.last-good`` is loaded leniently instead and the first message says the site config is
    unparsable, gives the exact YAML error and the time (mtime, ISO 8601) of the copy now in force;
    ``config.source_path`` is then the copy's path. Without a readable copy: documented defaults,
    and the message says so. Invalid keys in a parsable file: as :func:`load_site_config_lenient`.

    ``save=False`` (readers such as jobenergy) never writes the copy, only falls back to it.

    :returns: ``(config, messages)``; messages empty when all is well. Never raises ConfigError.
    """
    from datetime import datetime

    p = _config_path(path)
    if p is None:
        return _defaults_without_file(), []
    cfg, messages, text, fatal = _load_lenient(p)
    if fatal is None:
        if save and not messages and text is not None:
            save_last_good(p, text)
        return cfg, messages
    what = "cannot be read" if text is None else "is unparsable"
    lg = last_good_path(p)
    try:
        mtime = datetime.fromtimestamp(os.stat(lg).st_mtime).astimezone().isoformat(timespec="seconds")
    except OSError as e:
        return cfg, [f"{fatal}\nThe site config {p} {what} and there is no last good copy "
                     f"({lg}: {e.strerror}): {_defaults_in_force()}. Fix {p} (check it with "
                     f"`slurm-energy check-config {p}`)"]
    good, good_msgs, _t, good_fatal = _load_lenient(lg)
    if good_fatal is not None:
        return good, [f"{fatal}\nThe site config {p} {what} and its last good copy cannot be used "
                      f"either ({good_fatal}): {_defaults_in_force()}. Fix {p}"]
    return good, [f"{fatal}\nThe site config {p} {what}; the last good copy {lg} from {mtime} is in "
                  f"force instead (every setting as it was then). Fix {p} (check it with "
                  f"`slurm-energy check-config {p}`)"] + good_msgs
