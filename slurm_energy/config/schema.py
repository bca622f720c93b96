"""The site configuration's schema: pydantic models only (how the file is found, loaded and
resolved for a job: :mod:`slurm_energy.config`; every key's documented example:
``site_config/site.yaml``)."""

from __future__ import annotations

import os
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from slurm_energy import units
from slurm_energy.carbon import tables as _tables
from slurm_energy.carbon.units import to_g_per_kwh

ENV_VAR = "SLURM_ENERGY_CONFIG"
DEFAULT_PATH = "/etc/slurm-energy/site.yaml"

# Documented defaults, defined once in slurm_energy.units (re-exported here for callers).
DEFAULT_PUE = units.DEFAULT_PUE
DEFAULT_RAM_W_PER_GB = units.RAM_W_PER_GB
DEFAULT_CPU_W_PER_CORE = units.CPU_W_PER_CORE
DEFAULT_GEO_URL = "https://get.geojs.io/v1/ip/geo.json"


class _Strict(BaseModel):
    """Every section of the site config: unknown keys refused, and frozen once validated -- every
    process reads one resolved config and none changes it under another part (a changed copy is
    ``model_copy(update=...)``: collect's ``--store``, a report's settings)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class CarbonIntensity(_Strict):
    """A grid carbon intensity as written by the admin: ``{value, unit}``; stored in gCO2e/kWh.

    Accepted units: gCO2e/kWh, kgCO2e/kWh (x1000), kgCO2e/MWh (x1), tCO2e/MWh (x1000),
    gCO2e/MWh (x0.001). After conversion, above 2000 gCO2e/kWh or below 1 gCO2e/kWh is rejected as
    a unit mistake (0.056 written for 56); 0 only with ``allow_zero: true`` (the site says so
    explicitly: a supply it counts as emitting nothing). ``check-config`` warns about 1-5 gCO2e/kWh.
    """

    value: float
    unit: str = "gCO2e/kWh"
    allow_zero: bool = False

    @model_validator(mode="after")
    def _check(self) -> CarbonIntensity:
        to_g_per_kwh(self.value, self.unit, field="carbon_intensity", allow_zero=self.allow_zero,
                     zero_ok="allow_zero: true in this mapping ({value: 0, unit: gCO2e/kWh, allow_zero: true})")
        return self

    @property
    def g_per_kwh(self) -> float:
        """The intensity in gCO2e/kWh."""
        return to_g_per_kwh(self.value, self.unit, allow_zero=self.allow_zero)


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

    pue: float | None = Field(default=None, ge=1.0, le=4.0)
    pue_source: str = ""
    carbon_intensity: CarbonIntensity | None = None
    alpha: float = Field(default=1.0, ge=0.0, le=1.0)  # fraction of emissions counted (1 = no offset)
    alpha_source: str = ""
    location: Location | None = None
    basis: Literal["lifecycle", "direct", ""] = ""
    source: str = ""
    year: int | None = Field(default=None, ge=1990, le=2100)
    partitions: list[str] = Field(default_factory=list)
    nodes: list[str] = Field(default_factory=list)  # fnmatch patterns, e.g. "gpu[0-9]*", "cn*"


#: Below this a rated power (W) is a unit mistake (kW written for W: 0.125 for 125), not hardware.
MIN_RATED_W = 1.0


def _not_kw(w: float | None, what: str) -> float | None:
    """``w`` (W) unless it is below :data:`MIN_RATED_W`: then ValueError with the likely fix."""
    if w is not None and 0 < float(w) < MIN_RATED_W:
        raise ValueError(f"{what} is {w:g} W, below {MIN_RATED_W:g} W: watts written as kW? "
                         f"Did you mean {float(w) * 1000:g} W?")
    return w


class GpuOverride(_Strict):
    """Admin's rated power (W) and dense FLOP/s for a GPU model (NVML name or part of it)."""

    rated_w: float | None = Field(default=None, gt=0, le=5000)

    @field_validator("rated_w")
    @classmethod
    def _rated(cls, v: float | None) -> float | None:
        return _not_kw(v, "the GPU's rated power")

    fp32_flops: float | None = Field(default=None, gt=0)
    tf32_flops: float | None = Field(default=None, gt=0)
    bf16_flops: float | None = Field(default=None, gt=0)


class Hardware(_Strict):
    """Rated-power overrides and fallbacks for the TDP estimate (W)."""

    cpu_tdp_w: dict[str, float] = Field(default_factory=dict)  # model string -> W per socket
    cpu_tdp_default_w: float | None = Field(default=None, gt=0, le=2000)  # W per socket, unknown model
    cpu_w_per_core: float = Field(default=DEFAULT_CPU_W_PER_CORE, gt=0, le=100)
    ram_w_per_gb: float = Field(default=DEFAULT_RAM_W_PER_GB, gt=0, le=10)
    gpu: dict[str, GpuOverride] = Field(default_factory=dict)
    gpu_fallback_w: float | None = Field(default=None, gt=0, le=5000)
    rapl_root: str = "/sys/class/powercap"
    drm_root: str = "/sys/class/drm"  # AMD/Intel GPUs: DRM nodes, each card's hwmon files
    kfd_root: str = "/sys/class/kfd/kfd/topology/nodes"  # AMD compute partitions (one KFD node each)

    @field_validator("cpu_tdp_w")
    @classmethod
    def _tdps(cls, v: dict[str, float]) -> dict[str, float]:
        for k, w in v.items():
            if not (0 < float(w) <= 2000):
                raise ValueError(f"TDP for {k!r} is {w} W; a CPU socket TDP is in (0, 2000] W")
            _not_kw(w, f"the TDP of {k!r}")
        return v

    @field_validator("cpu_tdp_default_w", "gpu_fallback_w")
    @classmethod
    def _fallbacks(cls, v: float | None, info) -> float | None:
        return _not_kw(v, "the default CPU TDP" if info.field_name == "cpu_tdp_default_w" else "the GPU fallback power")


class Sampling(_Strict):
    """Sampler settings."""

    interval_s: float = Field(default=5.0, gt=0, le=3600)
    interim_s: float = Field(default=60.0, ge=5, le=86400)  # running jobs: energy so far stored this often
    # a node whose Epilog never finished (killed by its time guard, slurmd restarted): the sampler
    # waits this long after the job's end for it, then finishes the node itself (finalizer started)
    epilog_wait_s: float = Field(default=60.0, ge=1, le=3600)
    # who samples a job: one process for every job of the node (``node``, the default: one reading
    # of the node's counters per interval for all its jobs, docs/admins/node-sampler.md), or a
    # process of its own per job (``job``: what slurm-energy did before)
    sampler: Literal["job", "node"] = "node"


class GpuIdle(_Strict):
    """What counts as a GPU allocated but idle (:mod:`slurm_energy.accounting.idle_gpu`, where the
    defaults' sources are): utilisation at most ``util_max`` (fraction; Job Defense Shield's 0 %) and
    mean power at most ``power_max_w`` W, or, unset, ``power_max_fraction`` x the card's rated power."""

    util_max: float = Field(default=0.0, ge=0.0, le=1.0)
    power_max_fraction: float = Field(default=0.25, gt=0.0, le=1.0)
    power_max_w: float | None = Field(default=None, gt=0.0, le=5000.0)


class Attribution(_Strict):
    """How a shared node's energy is split between jobs, and when an allocated GPU is idle."""

    policy: Literal["shared", "exclusive_whole_node", "utilisation_weighted"] = "shared"
    gpu_idle: GpuIdle = Field(default_factory=GpuIdle)
    # which imported hourly intensity the job's CO2e uses: the grid's average (default) or its
    # marginal (e.g. MOER) series; the other is shown beside it (docs/CARBON.md says why)
    intensity: Literal["average", "marginal"] = "average"


class DcmiMeter(_Strict):
    """IPMI DCMI through FreeIPMI's ``ipmi-dcmi`` or ``ipmitool``: in-band (``/dev/ipmi0``) unless
    ``host`` names a BMC (then ipmitool over lanplus, the password in root-only ``password_file``)."""

    tool: Literal["auto", "freeipmi", "ipmitool"] = "auto"
    host: str = ""
    port: int = Field(default=623, ge=1, le=65535)
    cipher_suite: int | None = Field(default=None, ge=0, le=17)  # ipmitool -C (None: asked of the BMC)
    user: str = ""
    password_file: str = ""
    timeout_s: float = Field(default=5.0, gt=0, le=60)


class RedfishMeter(_Strict):
    """A BMC's Redfish service: ``url`` (https://bmc), ``credentials_file`` (root-only, one line
    ``user:password``), ``ca_file`` (the site CA; else the system's), ``insecure`` (no TLS check: only
    when written here), ``chassis`` (its id; "" = the first with power)."""

    url: str = ""
    chassis: str = ""
    credentials_file: str = "/etc/slurm-energy/redfish-credentials"
    ca_file: str = ""
    insecure: bool = False
    timeout_s: float = Field(default=5.0, gt=0, le=60)


class NodeMeter(_Strict):
    """The node's own power meter (docs/NODE_METER.md): which ``source``; ``auto`` looks for
    in-band ones only (ACPI power meter, HPE pm_counters, DCMI through /dev/ipmi0) and never a
    network BMC; ``interval_s`` the per-node meter process' cadence; ``rest_of_node`` how the part
    of the meter the components do not explain is shared between a node's jobs (``allocation``:
    by the job's share of allocated CPUs, GPUs and memory; ``component_energy``: by its share of
    the measured components); ``estimate_w``: opt-in, W per node charged where no meter exists
    (labelled as an estimate); ``frozen_after_s``: a power reading unchanged this long is frozen."""

    source: Literal["auto", "acpi_power_meter", "pm_counters", "ipmi_dcmi", "redfish", "slurm", "none"] = "auto"
    interval_s: float = Field(default=10.0, ge=1, le=3600)
    rest_of_node: Literal["allocation", "component_energy"] = "allocation"
    estimate_w: float | None = Field(default=None, gt=0, le=100000)
    frozen_after_s: float = Field(default=300.0, ge=10, le=86400)
    pm_counters_root: str = "/sys/cray/pm_counters"
    acpi_root: str = "/sys/class/hwmon"  # where ACPI power meters are looked for (the test cluster: a fake tree)
    ipmi_dcmi: DcmiMeter = Field(default_factory=DcmiMeter)
    redfish: RedfishMeter = Field(default_factory=RedfishMeter)

    @model_validator(mode="after")
    def _redfish_url(self) -> NodeMeter:
        if self.source == "redfish" and not self.redfish.url.startswith(("https://", "http://")):
            raise ValueError("node_meter.source is redfish but node_meter.redfish.url is not set; "
                             "write the BMC's https:// address")
        return self


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
    hourly_price_dir: str = ""  # default <spool_dir>/prices (price-import writes here)
    geo_cache_dir: str = ""  # default <spool_dir>/geo (one JSON file per node)

    @model_validator(mode="after")
    def _derive(self) -> Paths:
        sp = self.spool_dir.rstrip("/") or "/"
        if not self.results_dir:
            object.__setattr__(self, "results_dir", os.path.join(sp, "results"))
        if not self.store_url:
            object.__setattr__(self, "store_url", "sqlite:///" + DEFAULT_STORE_PATH)
        if not self.hourly_ci_dir:
            object.__setattr__(self, "hourly_ci_dir", os.path.join(sp, "carbon-intensity"))
        if not self.hourly_price_dir:
            object.__setattr__(self, "hourly_price_dir", os.path.join(sp, "prices"))
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


TOP_FACTS = ("cluster_name", "timezone", "location", "pue", "datacenters", "hardware", "sampling",
              "attribution", "paths", "geolocation", "offline", "admins", "outputs")


class EmbodiedFactorConfig(_Strict):
    """A site's embodied-emission factor (docs/CARBON.md): TE in kgCO2e per unit (a GPU, a CPU
    socket, a GB of DRAM, a server chassis), optionally the unit's lifetime in years and the source."""

    kgco2e: float = Field(ge=0, le=100000)
    lifetime_years: float | None = Field(default=None, gt=0, le=30)
    source: str = ""


class Embodied(_Strict):
    """Embodied emissions (SCI's M): factors by component and model (a part of the model name, or
    ``"*"`` for any model), each replacing a bundled one; lifetimes in years by component."""

    gpu: dict[str, EmbodiedFactorConfig] = Field(default_factory=dict)
    cpu: dict[str, EmbodiedFactorConfig] = Field(default_factory=dict)  # per socket
    ram: dict[str, EmbodiedFactorConfig] = Field(default_factory=dict)  # per GB of DRAM
    chassis: dict[str, EmbodiedFactorConfig] = Field(default_factory=dict)  # per server
    lifetime_years: dict[Literal["gpu", "cpu", "ram", "chassis"], float] = Field(default_factory=dict)

    @field_validator("lifetime_years")
    @classmethod
    def _life(cls, v: dict[str, float]) -> dict[str, float]:
        for k, y in v.items():
            if not 0 < y <= 30:
                raise ValueError(f"embodied.lifetime_years.{k} is {y}: give the expected lifetime in years, 0 < y <= 30")
        return v

    def factors(self) -> tuple:
        """The bundled factors then the site's (a site factor wins: :func:`slurm_energy.carbon.embodied.find_factor`)."""
        from slurm_energy.carbon.embodied import EmbodiedFactor, bundled_factors

        site = tuple(EmbodiedFactor(c, model, f.kgco2e, f.lifetime_years, f"site.yaml embodied.{c}: {f.source or model}")
                     for c in ("gpu", "cpu", "ram", "chassis") for model, f in getattr(self, c).items())
        return bundled_factors() + site


class Tariff(_Strict):
    """The site's electricity tariff (docs/CARBON.md): a flat ``price_per_kwh``, or hourly prices
    imported with ``slurm-energy price-import`` (time of use; hours without one use the flat price)."""

    currency: str = Field(min_length=1, max_length=8)  # e.g. EUR, USD, GBP
    price_per_kwh: float | None = Field(default=None, ge=0, le=100)
    zone: str = ""  # the stored hourly price series (price-import --zone)
    source: str = ""


class SiteConfig(_Strict):
    """The whole site configuration. Build with :func:`load_site_config` (or directly in tests)."""

    cluster_name: str = ""
    timezone: str = "UTC"
    location: Location | None = None  # the site's country (used when no datacenter matches)
    pue: float | None = Field(default=None, ge=1.0, le=4.0)  # site-wide PUE, below datacenter's
    datacenters: dict[str, Datacenter] = Field(default_factory=dict)
    hardware: Hardware = Field(default_factory=Hardware)
    sampling: Sampling = Field(default_factory=Sampling)
    attribution: Attribution = Field(default_factory=Attribution)
    paths: Paths = Field(default_factory=Paths)
    geolocation: Geolocation = Field(default_factory=Geolocation)
    outputs: Outputs = Field(default_factory=Outputs)
    embodied: Embodied = Field(default_factory=Embodied)
    tariff: Tariff | None = None
    node_meter: NodeMeter = Field(default_factory=NodeMeter)
    offline: bool = False
    admins: list[str] = Field(default_factory=list)
    defaults_used: list[str] = Field(default_factory=list)
    source_path: str = ""  # file it was loaded from ("" = documented defaults)

    @model_validator(mode="before")
    @classmethod
    def _record_defaults(cls, data: Any) -> Any:
        if isinstance(data, dict) and "defaults_used" not in data:
            data = dict(data)
            data["defaults_used"] = [k for k in TOP_FACTS if k not in data]
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
    def _partitions_unique(self) -> SiteConfig:
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

