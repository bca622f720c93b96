"""The one data model that flows through the sampler, accounting, store, report and CLI.

Shapes (all pydantic v2 models, JSON round-trippable with ``model_dump_json`` /
``model_validate_json``):

* :class:`DeviceEnergy` -- one device (or device class aggregate) on one node over one job:
  energy in J with its provenance (:class:`Method`), coverage and counter anomalies.
* :class:`NodeSummary` -- what one node's Epilog (or interim sampler flush) knows about the job.
* :class:`CarbonFacts` -- PUE, carbon intensity, alpha and where each came from.
* :class:`JobRecord` -- the merged job: Slurm facts + node summaries + carbon facts + totals.

Units are in the field names: ``_j`` joules, ``_w`` watts, ``_s`` seconds, ``_kwh`` kilowatt-hours,
``_g_per_kwh`` gCO2e/kWh, ``_kg`` kgCO2e, ``_bytes`` bytes. Times are Unix epoch seconds (UTC).

"Unmeasured" is ``None`` everywhere, never 0: a device whose energy could not be obtained has
``method=Method.UNAVAILABLE`` and ``energy_j=None``; totals over a set containing such a device are
flagged partial by :attr:`JobRecord.coverage_complete`, never silently summed as 0.
"""

from __future__ import annotations

import json
from typing import Any, cast

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
    with_config,
)
from typing_extensions import TypedDict

from slurm_energy import units
from slurm_energy.core import (
    DEVICE_CLASSES,
    METHOD_RANK,
    DeviceStatic,
    Flag,
    JobMeta,
    Method,
    Reading,
    Status,
    status_text,
    worst_method,
)
from slurm_energy.jobmeta import IDENTITY, JobIdentity

SCHEMA_VERSION = 1

__all__ = [
    "DEVICE_CLASSES", "METHOD_RANK", "SCHEMA_VERSION", "CarbonFacts", "DeviceEnergy", "DeviceStatic", "Flag",
    "JobMeta", "JobRecord", "JobTrace", "Method", "NodeStatic", "NodeSummary", "Reading", "Status", "job_state_from_exit_code",
    "text_safe", "worst_method",
]


class DeviceEnergy(BaseModel):
    """Energy of one device (or one device class on one node) over the job.

    Two attribution views are kept apart:

    * ``device_energy_j``: the whole physical device(s) over the job's time (full device, idle
      and other jobs included), as measured/estimated.
    * ``energy_j``: the job's share -- the number that is summed into the job's IT energy. For
      ``tdp_estimate`` it is the method's utilisation-weighted n x u x P x t.
    """

    device_class: str  # one of DEVICE_CLASSES
    device_id: str  # e.g. "rapl:intel-rapl:0", GPU UUID, "cpu-tdp", "ram"
    node: str = ""
    model: str = ""  # CPU/GPU model name as reported by the OS/NVML
    count: int = 1  # n_i: number of devices (cores for a per-core TDP model) this entry covers
    index: int | None = None  # the device's number where its id has none (a GPU's minor number): for ordering
    method: Method = Method.UNAVAILABLE
    energy_j: float | None = None  # the job's share, J; None = unmeasured
    device_energy_j: float | None = None  # the whole device(s) over the job's time, J
    rated_power_w: float | None = None  # P_i: TDP / rated power per device, W
    mean_power_w: float | None = None  # job's attributed mean power, W
    var_power_w2: float | None = None  # variance of the attributed power, W^2
    mean_util: float | None = None  # u_i in [0, 1]
    var_util: float | None = None
    duration_s: float = 0.0  # t_i: time this entry covers, s
    coverage: float = 0.0  # fraction of the job's time that was measured, [0, 1]
    wraps: int = 0  # counter wrap-arounds unwrapped
    resets: int = 0  # counter resets (went backwards with no known range): interval skipped
    dropped_samples: int = 0  # intervals dropped (unreadable, implausible)
    covers: str = ""  # human text: what this number covers ("package-0 + dram-0, job share by CPU time")
    flags: list[str] = Field(default_factory=list)  # e.g. "possible_multiple_wrap", "eacces_fallback"
    # raw value of each bounded ratio that came out of [0, 1] and was clamped (flags util_clamped,
    # share_clamped, coverage_clamped): e.g. {"cpu_util": 1.07} -- the most extreme value seen
    unclamped: dict[str, float] = Field(default_factory=dict)
    # a GPU allocated to the job but idle (accounting.idle_gpu): seconds with utilisation and power at
    # the card's idle state, and the job's energy drawn in them, J (measured by ``method``, as
    # energy_j); None = not a GPU, or not measured
    idle_s: float | None = None
    idle_energy_j: float | None = None
    idle_spans: list[list[float]] = Field(default_factory=list)  # [[t0, t1], ...] epoch s: the report's band
    idle_bound_w: float | None = None  # the idle-draw bound applied (site's, or fraction x rated), W

    @model_serializer(mode="wrap")
    def _compact(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> dict[str, Any]:
        """As JSON (node files, the store), the fields of :data:`OMITTED_AT_DEFAULT` at their
        default (no GPU idle judgement, no clamp, no counter anomaly) are left out: reading fills
        them back. ``context={"full": True}`` (``jobenergy --json``) writes every field."""
        out: dict[str, Any] = handler(self)
        if info.mode_is_json() and not (info.context or {}).get("full"):
            for k in OMITTED_AT_DEFAULT:
                if k in out and out[k] == _DEVICE_DEFAULTS[k]:
                    del out[k]
        return out


#: DeviceEnergy fields a JSON dump leaves out at their default (a 1,024-node job's record holds
#: 12,288 devices: these empty values were 1.2 kB of its 11 kB per node).
OMITTED_AT_DEFAULT = ("index", "wraps", "resets", "dropped_samples", "unclamped", "idle_s", "idle_energy_j",
                      "idle_spans", "idle_bound_w")
_DEVICE_DEFAULTS = {k: DeviceEnergy.model_fields[k].get_default(call_default_factory=True) for k in OMITTED_AT_DEFAULT}


class WindowEnergy(BaseModel):
    """The job's energy inside one time window: a phase (``t.phase("epoch 3")``), a stage (energy
    from the job's start to ``t.stage(0.6)``), the time outside every phase, or the union of phases.

    Computed from the same attributed intervals as the job's totals
    (:mod:`slurm_energy.accounting.phases`): an interval that straddles a window edge counts in
    proportion to its overlap (its mean power times the seconds inside). ``None`` = unmeasured.
    """

    kind: str  # "phase" | "stage" | "outside" (no phase open) | "in_phases" (union of phases)
    name: str
    start_time: float  # epoch s
    end_time: float  # epoch s
    depth: int = 0  # nesting level of a phase (0 = outermost)
    fraction: float | None = None  # a stage's training progress in [0, 1]
    energy_it_j: dict[str, float | None] = Field(default_factory=dict)  # class -> job share J
    methods: dict[str, Method] = Field(default_factory=dict)  # class -> worst method
    it_j: float | None = None  # sum over classes, J (None if no class was measured)
    coverage: float = 0.0  # lowest per-class fraction of the window's seconds that was measured
    co2e_kg: float | None = None  # filled by finalise_record: job CO2e (net, x alpha) x it_j / job IT J
    co2e_gross_kg: float | None = None  # the same share of the job's location-based CO2e (no alpha)
    flags: list[str] = Field(default_factory=list)  # e.g. "never_closed", "shorter_than_interval"

    @property
    def duration_s(self) -> float:
        return max(0.0, self.end_time - self.start_time)


@with_config(ConfigDict(extra="allow"))
class NodeStatic(TypedDict, total=False):
    """Device information collector's facts about one node (:func:`slurm_energy.devices.info.collect_static`).

    A typed dict: the keys below are validated when a record is built or read; keys not listed
    (added by newer collectors) are kept as they are.
    """

    host: str
    cpu_model: str
    sockets: int
    cores_per_socket: int
    logical_cpus: int
    ram_total_bytes: int
    os: str
    kernel: str
    python: str
    pid: int
    devices: list[dict[str, Any]]  # DeviceStatic fields (device_class, device_id, model, rated_power_w, ...)
    reader_notes: list[str]  # why a reader was or was not used ("rapl: eacces -> tdp")


#: A node's own static facts (not the hardware's): kept per node when its inventory is written as
#: the same as another node's.
STATIC_OWN = ("host", "pid")


class RestOfNode(BaseModel):
    """The node beyond its measured components (PSU loss, fans, NICs, disks, the BMC) and the job's
    share of it (:mod:`slurm_energy.accounting.rest_of_node`; docs/NODE_METER.md).

    ``method``: ``node_meter:<source>`` (metered: ``acpi_power_meter``, ``pm_counters``, ``ipmi_dcmi``,
    ``redfish``, ``slurm``), ``estimate:site_w`` (opt-in ``node_meter.estimate_w``, an estimate), or
    ``not_metered`` (``energy_j`` None: never 0). ``node_*_j``: the whole node over the metered
    seconds of the job's span (J); ``energy_j`` the job's share (J), included in its IT energy."""

    method: str = "not_metered"
    meter_method: Method = Method.UNAVAILABLE  # how the meter was read: counter / power_integration
    energy_j: float | None = None
    node_metered_j: float | None = None
    node_components_j: float | None = None
    node_rest_j: float | None = None
    share: float | None = None
    rule: str = ""  # allocation | component_energy
    share_basis: str = ""  # e.g. "mean of CPUs 4/16, memory 32.0/128.0 GiB"
    metered_s: float = 0.0
    flags: list[str] = Field(default_factory=list)
    covers: str = ""


class NodeSummary(BaseModel):
    """One node's view of the job, written by its Epilog (or interim by its sampler)."""

    node: str
    job_id: str
    start_time: float  # Prolog time, epoch s
    end_time: float  # Epilog time (or now for interim), epoch s
    cpu_time_s: float | None = None  # job's CPU time on this node (cgroup or psutil), s
    max_mem_bytes: int | None = None  # peak memory used by the job on this node (cgroup max usage), bytes
    req_mem_bytes: int | None = None  # memory the job requested on this node (--mem, --mem-per-cpu x CPUs), bytes
    req_mem_source: str = ""  # how req_mem_bytes was found, e.g. "per node 4000M (scontrol MinMemoryNode)"
    mean_mem_bytes: float | None = None
    n_samples: int = 0
    interval_s: float = 5.0
    cpu_time_source: str = ""  # "cgroup-v1", "cgroup-v2", "psutil", "procfs", "rusage", ""
    devices: list[DeviceEnergy] = Field(default_factory=list)
    static: NodeStatic = Field(default_factory=NodeStatic)  # device info: CPU model, cores, GPUs, OS, RAM
    # rows [t, cpu_w, gpu_w, ram_w] (None allowed), at most accounting.trace.TRACE_POINTS (bucket means)
    power_trace: list[list[float | None]] = Field(default_factory=list)
    hourly_energy_j: dict[str, float] = Field(default_factory=dict)  # ISO hour (UTC) -> job IT energy J
    # phases/stages marked by the job (slurm_energy.track) on this node; see accounting.phases
    windows: list[WindowEnergy] = Field(default_factory=list)
    marks_flags: list[str] = Field(default_factory=list)  # bad marks ignored, e.g. "marks_truncated"
    # the node beyond its components (node meter); None = not computed (interim views, older records)
    rest_of_node: RestOfNode | None = None
    status: Status = Status.COMPLETE
    errors: list[str] = Field(default_factory=list)

    @property
    def elapsed_s(self) -> float:
        return max(0.0, self.end_time - self.start_time)

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> NodeSummary:
        """A deep copy whose power trace (rows of floats: 17,280 for a day at 5 s) is copied row by
        row, not object by object through ``copy.deepcopy`` (merging and finalising copy records)."""
        trace = self.__dict__["power_trace"]
        self.__dict__["power_trace"] = []
        try:
            out = super().__deepcopy__(memo)
        finally:
            self.__dict__["power_trace"] = trace
        out.__dict__["power_trace"] = [list(r) for r in trace]
        return out


class CarbonFacts(BaseModel):
    """The site facts applied to IT energy, each with where it came from."""

    pue: float = units.DEFAULT_PUE
    pue_source: str = units.DEFAULT_PUE_SOURCE
    ci_g_per_kwh: float = units.DEFAULT_CI_G_PER_KWH
    ci_source: str = units.DEFAULT_CI_SOURCE
    ci_basis: str = ""  # "lifecycle" / "direct" / ""
    ci_year: int | None = None
    alpha: float = units.DEFAULT_ALPHA
    alpha_source: str = units.DEFAULT_ALPHA_SOURCE
    datacenter: str = ""
    defaults_used: list[str] = Field(default_factory=list)  # names of facts that are defaults
    hourly: bool = False  # CO2e computed from hourly intensity
    hourly_source: str = ""  # the hourly average series used: zone, source, age (config.carbon.hourly_series_for)
    marginal_source: str = ""  # the hourly marginal series (e.g. MOER) beside it, "" = none imported
    intensity_kind: str = "average"  # which one the job's CO2e uses (attribution.intensity)


class EmbodiedShare(BaseModel):
    """One hardware component's embodied emissions charged to a job, by the Green Software
    Foundation's SCI (ISO/IEC 21031:2024): M = TE x (TS / EL) x RS.

    TE: the component's total embodied emissions (manufacture, transport, end of life), kgCO2e per
    unit (a GPU, a CPU socket, one GB of DRAM, one server chassis); TS: the job's time on it, s; EL:
    its expected lifetime, s (years x 365 x 24 x 3600, 8760 h a year); RS: the job's share of the
    units (``units`` x ``share``: 2 GPUs = 2 x 1; 16 of 64 cores on 2 sockets = 2 x 0.25).
    """

    node: str
    component: str  # "gpu" | "cpu" | "ram" | "chassis"
    model: str = ""  # the factor's key (e.g. "NVIDIA H100 SXM5 80GB", "default")
    units: float  # devices, sockets, GB of DRAM, chassis
    share: float  # fraction of each unit reserved for the job, [0, 1]
    te_kg: float  # TE per unit, kgCO2e
    lifetime_years: float  # EL
    time_s: float  # TS
    kg: float  # M, kgCO2e
    source: str  # where TE and EL came from (bundled data with its reference, or site.yaml)


class JobTrace(BaseModel):
    """The whole job's power over time, for the report's plot of a job of several nodes: bounded
    (at most :data:`slurm_energy.accounting.trace.TRACE_POINTS` buckets, whatever the job's nodes
    and samples; :func:`slurm_energy.accounting.trace.job_trace`). Drawn only: the job's energies
    are summed from its devices, never from here."""

    t: list[float] = Field(default_factory=list)  # each bucket's end, epoch s
    bucket_s: float = 0.0  # the buckets' width, s
    # rows [cpu_w, gpu_w, ram_w] summed over the nodes; None = no node measured the class in the bucket
    sum_w: list[list[float | None]] = Field(default_factory=list)
    node_min_w: list[float] = Field(default_factory=list)  # the lowest node's total power in the bucket, W
    node_max_w: list[float] = Field(default_factory=list)  # the highest node's, W
    nodes_n: list[int] = Field(default_factory=list)  # nodes with a value in the bucket
    nodes: int = 0  # nodes with a trace
    shown_nodes: list[str] = Field(default_factory=list)  # nodes whose own power_trace the record keeps


class JobRecord(BaseModel, JobIdentity):
    """A job (one attempt) as stored and reported: the job's identity (the fields of
    :class:`slurm_energy.jobmeta.JobIdentity`: job_id, cluster, array and het ids, user, uid,
    account, partition, restart_count, sluid, slurm_start_time...) and its energy.

    Key: (cluster, job_id, start_time). ``job_id`` is Slurm's raw job id as a string.
    """

    schema_version: int = SCHEMA_VERSION
    # Slurm's own energy for the job (acct_gather_energy, sacct ConsumedEnergyRaw), beside ours; None =
    # Slurm collected none (AcctGatherEnergyType none/unknown, 0, or slurmdbd has no record)
    slurm_energy_j: float | None = None
    slurm_energy_source: str = ""  # where it came from / why it is unavailable
    exit_code: str = ""  # Slurm's "exit:signal" from the Epilog (SLURM_JOB_EXIT_CODE2), e.g. "3:0"
    # Slurm-like job state derived from exit_code (the Epilog sees no JobState): COMPLETED (0:0),
    # FAILED (exit != 0), CANCELLED (killed by a signal: scancel, time limit, OOM), "" = unknown.
    job_state: str = ""
    expected_nodes: list[str] = Field(default_factory=list)
    start_time: float
    end_time: float
    nodes: list[NodeSummary] = Field(default_factory=list)
    # a job of several nodes: its power summed and the nodes' band (bounded); the nodes' own traces are
    # kept for JobTrace.shown_nodes only. None: one node (its trace is the job's), or a record from
    # before this field (every node's full trace kept)
    job_trace: JobTrace | None = None
    carbon: CarbonFacts = Field(default_factory=CarbonFacts)
    # totals (filled by accounting.formulas.finalise_record)
    energy_it_j: dict[str, float | None] = Field(default_factory=dict)  # class -> job share J (None=unmeasured)
    device_energy_j: dict[str, float | None] = Field(default_factory=dict)  # class -> full-device J
    methods: dict[str, Method] = Field(default_factory=dict)  # class -> worst method over nodes
    it_kwh: float | None = None  # components' job shares + rest_of_node_j where metered
    facility_kwh: float | None = None
    # Net operational CO2e = E_facility x CI x alpha (alpha: the datacenter's offset factor, carbon.alpha
    # with carbon.alpha_source); the figure the method has always computed
    co2e_kg: float | None = None
    # Location-based (gross) operational CO2e = E_facility x CI, offsets excluded: what SCI
    # (ISO/IEC 21031:2024) and GHG Protocol Scope 2 location-based count. None = not computed
    # (records stored before it existed: see _gross_from_net)
    co2e_gross_kg: float | None = None
    # The location-based CO2e by each kind of intensity, side by side: the grid's average (hourly
    # where imported, else the annual CI) and its marginal one (hourly, e.g. MOER; None unless an
    # imported marginal series covers every hour with energy). co2e_gross_kg is the one the site
    # attributes by (carbon.intensity_kind; average by default)
    co2e_average_kg: float | None = None
    co2e_marginal_kg: float | None = None
    # Embodied emissions of the hardware reserved for the job (SCI's M, per component in ``embodied``;
    # accounting.embodied). None = not computed (no factor for any component, or a record made before)
    embodied_kg: float | None = None
    embodied: list[EmbodiedShare] = Field(default_factory=list)
    embodied_note: str = ""  # the units reserved that had no factor (not counted in embodied_kg)
    # Energy cost = facility kWh in each hour x that hour's price (accounting.cost), in
    # ``cost_currency``; None = the site set no tariff
    cost: float | None = None
    cost_currency: str = ""
    cost_source: str = ""
    # the job's share of its nodes' rest (node meter minus components), J; None = not metered on any
    # node; rest_of_node_method: the nodes' RestOfNode.method values, "+"-joined ("" = not computed)
    rest_of_node_j: float | None = None
    rest_of_node_method: str = ""
    # GPUs allocated but idle (accounting.idle_gpu.job_totals over the nodes' GPUs): GPU-seconds idle,
    # the job's energy in them (J) and its method; None / "" = no GPU, or none judged
    gpu_idle_s: float | None = None
    gpu_idle_energy_j: float | None = None
    gpu_idle_method: str = ""
    coverage_complete: bool = True
    status: Status = Status.COMPLETE
    errors: list[str] = Field(default_factory=list)
    # What the training script declared about its work (``t.tag(...)``): keys ``flops``
    # (total FLOPs of the job), ``model_params``, ``tokens``; values float or str. Empty = none
    # declared; records stored before this field existed read back with {}.
    tags: dict[str, float | str] = Field(default_factory=dict)
    # slurm_energy.track's phases, stages, the time outside any phase and the phases' union (all nodes
    # summed; filled by accounting.phases.job_windows in finalise_record)
    phases: list[WindowEnergy] = Field(default_factory=list)
    stages: list[WindowEnergy] = Field(default_factory=list)
    phase_totals: list[WindowEnergy] = Field(default_factory=list)  # kind "in_phases" and "outside"
    marks_flags: list[str] = Field(default_factory=list)
    # why the HTML/CSV report could not be written into work_dir ("" = written, or none due);
    # jobenergy shows a code beside the status (``complete (no report: permission_denied)``), the text in -l
    report_error: str = ""
    # The original bytes (hex) of every text that was not UTF-8: a top-level field by its name
    # (``job_name``, ``work_dir``), text deeper in the record (a phase name, an error) by
    # ``text:<shown text>``; the text itself shows each undecodable byte as ``\xNN``
    # (:func:`text_safe`). Empty for almost every job.
    raw_text: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _gross_from_net(self) -> JobRecord:
        """A record stored before the location-based figure existed carries only the net one
        (E x CI x alpha): its gross is net / alpha (exact: alpha is one constant per record); with
        alpha 0 it cannot be recovered and stays None (unknown, never 0)."""
        a = self.carbon.alpha
        if self.co2e_gross_kg is None and self.co2e_kg is not None and a > 0:
            self.co2e_gross_kg = self.co2e_kg / a
        for w in (*self.phases, *self.stages, *self.phase_totals):
            if w.co2e_gross_kg is None and w.co2e_kg is not None and a > 0:
                w.co2e_gross_kg = w.co2e_kg / a
        return self

    @model_serializer(mode="wrap")
    def _compact(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> dict[str, Any]:
        """As JSON, a node's device inventory (``static``) equal to an earlier node's but for its
        host and pid is written ``{"host", "pid", "same_as": <that node>}`` (a homogeneous 1,024-node
        job repeats 2.2 kB per node); :meth:`_expand_static` restores it on reading.
        ``context={"full": True}`` writes every node's in full."""
        out: dict[str, Any] = handler(self)
        if info.mode_is_json() and not (info.context or {}).get("full") and len(out.get("nodes") or ()) > 1:
            seen: dict[str, str] = {}
            for ns in out["nodes"]:
                st = ns.get("static") or {}
                if not st or "same_as" in st:
                    continue
                key = json.dumps({k: v for k, v in st.items() if k not in STATIC_OWN}, sort_keys=True, default=str)
                if key in seen:
                    ns["static"] = {**{k: st[k] for k in STATIC_OWN if k in st}, "same_as": seen[key]}
                else:
                    seen[key] = ns["node"]
        return out

    @model_validator(mode="after")
    def _expand_static(self) -> JobRecord:
        """A node's ``static`` written as ``same_as`` another node's (:meth:`_compact`), in full again."""
        by_node = {ns.node: ns for ns in self.nodes}
        for ns in self.nodes:
            ref = ns.static.get("same_as") if ns.static else None
            if isinstance(ref, str) and ref in by_node and "same_as" not in by_node[ref].static:
                full: dict[str, Any] = {k: v for k, v in by_node[ref].static.items() if k not in STATIC_OWN}
                full.update((k, v) for k, v in ns.static.items() if k != "same_as")
                ns.static = cast(NodeStatic, full)
        return self

    def raw(self, field: str) -> str:
        """Field ``field`` as the OS spelled it (undecodable bytes as surrogates: what ``os.open``
        wants for the job's work dir), from :attr:`raw_text` where the field was not UTF-8."""
        from slurm_energy.core import decode_text

        h = self.raw_text.get(field)
        return decode_text(bytes.fromhex(h)) if h else getattr(self, field)

    @property
    def elapsed_s(self) -> float:
        return max(0.0, self.end_time - self.start_time)

    @classmethod
    def from_meta(cls, meta: JobIdentity, **fields: Any) -> JobRecord:
        """A record for the job ``meta`` describes (a ``JobMeta`` or ``JobContext``), with ``fields``
        (start_time, end_time, nodes, ...). Raises pydantic's ValidationError on bad fields."""
        return cls(**{k: getattr(meta, k) for k in IDENTITY}, **fields)

    @property
    def status_text(self) -> str:
        """The status as shown: ``complete``, ``complete(partial-coverage)``, ``complete(estimated)``,
        ``partial``... (:func:`slurm_energy.core.status_text`)."""
        from slurm_energy.core import metered_rest

        return status_text(self.status, self.coverage_complete, dict(self.methods), self.energy_it_j, metered_rest(self))

    @property
    def method_summary(self) -> str:
        """e.g. ``cpu=tdp_estimate,ram=tdp_estimate,gpu=unavailable``."""
        return ",".join(f"{k}={Method(v).value}" for k, v in sorted(self.methods.items()))


def _safe_tree(value: Any, path: str, raw: dict[str, str]) -> Any:
    from slurm_energy.core import has_surrogates, shown_text, text_bytes

    if isinstance(value, str):
        if has_surrogates(value):
            shown = shown_text(value)
            # a top-level field by its name (exact: ``JobRecord.raw``); text deeper in the record
            # (a phase name, an error) by its shown text: the key survives merges and reordering
            raw.setdefault(path if "." not in path and path else f"text:{shown}", text_bytes(value).hex())
            return shown
        return value
    if isinstance(value, dict):
        return {_safe_tree(k, f"{path}.<key>", raw): _safe_tree(v, f"{path}.{k}" if path else str(k), raw)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_safe_tree(v, f"{path}.{i}", raw) for i, v in enumerate(value)]
    return value


def text_safe(record: JobRecord) -> JobRecord:
    """``record`` with every text UTF-8-safe (storable as JSON/SQL, shown in HTML and mail).

    Text a user controls (job name, comment, work dir, phase names, an error quoting them) reaches
    the record from the environment, /proc, Slurm's output and the marks file decoded with
    ``surrogateescape`` (lossless, see :mod:`slurm_energy.core`); such a string makes pydantic's JSON
    fail. Here each undecodable byte is shown as ``\\xNN`` and the field's original bytes go to
    ``raw_text`` (hex; a top-level field keyed by its name, ``job_name``, ``work_dir``; text deeper
    in the record, a phase name or an error, by ``text:<shown text>``). Changes
    ``record`` in place (callers keep their object) and returns it; the cost when its text is
    already UTF-8: one JSON dump.
    """
    try:
        record.model_dump_json()
        return record
    except ValueError:  # PydanticSerializationError (a ValueError): a surrogate somewhere
        pass
    raw: dict[str, str] = {}
    data = _safe_tree(record.model_dump(), "", raw)
    data["raw_text"] = {**record.raw_text, **{k: v for k, v in raw.items() if not k.startswith("raw_text")}}
    safe = JobRecord.model_validate(data)
    for name in type(record).model_fields:
        setattr(record, name, getattr(safe, name))
    return record


def job_state_from_exit_code(exit_code: str) -> str:
    """Slurm-like state from SLURM_JOB_EXIT_CODE2 ("exit:signal"): "0:0" -> COMPLETED, "3:0" -> FAILED,
    "0:15" -> CANCELLED (a signal ended it: scancel, time limit, OOM kill); "" if unparsable."""
    code, _, sig = (exit_code or "").partition(":")
    try:
        code_i, sig_i = int(code), int(sig or 0)
    except ValueError:
        return ""
    if sig_i:
        return "CANCELLED"
    return "FAILED" if code_i else "COMPLETED"
