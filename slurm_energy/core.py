"""The stdlib-only half of the data model: what the hooks, readers and sampler need (no pydantic).

* :class:`Method` -- how an energy number was obtained (str-valued: old JSON stays readable).
* :class:`Status` -- status of a node summary or job record.
* :class:`Flag` -- the named anomalies and labels carried in ``flags`` lists (str-valued; a
  detailed flag is ``"<flag>:<detail>"``, see :meth:`Flag.detail`).
* :class:`JobMeta` -- the job's identity and owner, one type shared by the spool's job context
  (:class:`slurm_energy.slurm.context.JobContext` extends it) and the stored
  :class:`slurm_energy.model.JobRecord` (same field names; ``JobRecord.from_meta``).
* :class:`Reading` -- one device at one instant, as a reader returns it.
* :class:`DeviceStatic` -- static facts about one device (device information collector).

:mod:`slurm_energy.model` (pydantic records) re-exports all of them, so callers import from one
place; modules on the Prolog/Epilog path import this module to stay light.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any

from slurm_energy.jobmeta import JobIdentity, dataclass_of

# text a user controls: stdlib-only helpers (the Prolog/Epilog's log uses them without this module)
from slurm_energy.textsafe import decode_text, has_surrogates, one_line, shown_text, text_bytes  # noqa: F401

#: Device classes of the method (E = PUE x sum_i n_i u_i P_i t_i over i in CPU, GPU, RAM).
DEVICE_CLASSES = ("cpu", "gpu", "ram")


class _StrEnum(str, enum.Enum):
    """A str-valued enum that hashes and prints as its value: ``{Flag.WRAP, "wrap"}`` has one
    element, ``f"{Method.COUNTER}"`` is ``"counter"``, JSON writes the value."""

    def __hash__(self) -> int:
        return hash(self.value)

    def __str__(self) -> str:
        return str(self.value)


class Method(_StrEnum):
    """How an energy number was obtained, best first."""

    COUNTER = "counter"  # hardware energy counter deltas (RAPL energy_uj, NVML total energy)
    POWER_INTEGRATION = "power_integration"  # trapezoidal integral of sampled power (W x s)
    TDP_ESTIMATE = "tdp_estimate"  # rated power (TDP, W/GB) x utilisation x time: a model
    UNAVAILABLE = "unavailable"  # not measured; energy is None

    @classmethod
    def parse(cls, value: Any) -> Method:
        """``Method(value)``; an unknown or missing value is :attr:`UNAVAILABLE` (newer files).
        A dict lookup, not the Enum call (every reading of every sample passes here)."""
        try:
            return _METHOD_BY_VALUE.get(value, cls.UNAVAILABLE)
        except TypeError:  # unhashable (a damaged file)
            return cls.UNAVAILABLE


#: value -> Method (a Method hashes and compares as its value: it finds itself too)
_METHOD_BY_VALUE: dict[Any, Method] = {m.value: m for m in Method}

#: Rank used when a class aggregates devices measured differently: the worst method wins.
METHOD_RANK = {Method.COUNTER: 0, Method.POWER_INTEGRATION: 1, Method.TDP_ESTIMATE: 2, Method.UNAVAILABLE: 3}


def worst_method(methods: Iterable[Method | str]) -> Method:
    """Return the least exact of ``methods`` (iterable of :class:`Method`); UNAVAILABLE if empty."""
    ms = [Method(m) for m in methods]
    if not ms:
        return Method.UNAVAILABLE
    return max(ms, key=lambda m: METHOD_RANK[m])


class Status(_StrEnum):
    """Status of a node summary or job record."""

    RUNNING = "running"  # interim: the sampler's periodic flush while the job runs
    COMPLETE = "complete"  # every node reported and was measured
    PARTIAL = "partial"  # some nodes never reported, or a sampler died early
    FAILED = "failed"  # the hooks failed; see ``errors``
    NO_DATA = "no_data"  # the job ran but nothing was measured (spool unusable, no sampler); ``errors`` say why


#: Qualifiers of a ``complete`` status, derived from the record (never stored; ``-s complete`` matches
#: them all): ``partial-coverage`` = some device unmeasured (``n/a``) or measured for under 95 % of the
#: job (the totals are a lower bound); ``estimated`` = every device class with energy has method
#: ``tdp_estimate`` (the Method column: the worst method over the class's devices), i.e. the totals
#: are the model's rated power x utilisation x time, not a counter or power reading.
PARTIAL_COVERAGE = "partial-coverage"
ESTIMATED = "estimated"


#: a node's rest-of-node method: ``node_meter:<source>`` (measured by the node meter) or
#: ``estimate:site_w`` (the site's per-node estimate); anything else (``not_metered``) is neither
REST_METERED, REST_ESTIMATED = "node_meter:", "estimate:"


def metered_rest(rec: Any) -> bool:
    """The record (a JobRecord, or a store's summary row) holds energy of its nodes' rest that a node
    meter measured (``rest_of_node_j`` not None, a :data:`REST_METERED` method on some node)."""
    return getattr(rec, "rest_of_node_j", None) is not None and REST_METERED in (getattr(rec, "rest_of_node_method", "") or "")


def all_estimated(methods: dict[str, Any], energy_it_j: dict[str, float | None], metered_rest: bool = False) -> bool:
    """True when every device class with energy (``energy_it_j`` value not None, J) has method
    ``tdp_estimate`` in ``methods`` (class -> Method or its value) and no node meter measured the
    rest of the node (``metered_rest``, :func:`metered_rest`: a measured part of the IT energy);
    False when no class has energy (nothing was estimated: that is unmeasured, shown as ``n/a``)."""
    with_energy = [c for c, j in energy_it_j.items() if j is not None]
    return (bool(with_energy) and not metered_rest
            and all(Method.parse(methods.get(c)) == Method.TDP_ESTIMATE for c in with_energy))


def status_text(status: Any, coverage_complete: bool, methods: dict[str, Any],
                energy_it_j: dict[str, float | None], metered_rest: bool = False) -> str:
    """The measurement status as jobenergy, ``-l``, the report and the rollup show it: the
    :class:`Status` value, and for ``complete`` its qualifiers in parentheses --
    ``complete(partial-coverage)``, ``complete(estimated)``, ``complete(partial-coverage,estimated)``
    (see :data:`PARTIAL_COVERAGE`, :data:`ESTIMATED`). Unmeasured classes are never hidden by
    ``estimated``: they keep ``partial-coverage``. Raises ValueError for an unknown status."""
    s = Status(status).value
    if s != Status.COMPLETE.value:
        return s
    quals = ([] if coverage_complete else [PARTIAL_COVERAGE]) + (
        [ESTIMATED] if all_estimated(methods, energy_it_j, metered_rest) else [])
    return f"{s}({','.join(quals)})" if quals else s


class Flag(_StrEnum):
    """Named flags on readings, intervals and device energies. Str-valued: ``Flag.X == "x"``, and
    lists of flags serialise as plain strings (records written before this enum stay readable)."""

    # counters and integration (accounting.integrate)
    WRAP = "wrap"  # counter wrapped once and was unwrapped with the zone's range
    MULTIPLE_WRAP = "possible_multiple_wrap"  # gap longer than range / max power: may have wrapped >1x
    RESET = "reset"  # counter went backwards and its range is not known: interval skipped
    RANGE_UNREADABLE = "range_unreadable"  # went backwards, range file unreadable: dropped
    MISSING = "missing_reading"  # an endpoint reading was None (unreadable at that instant)
    BAD_TIME = "non_increasing_time"  # t_k <= t_{k-1}: interval dropped
    METHOD_CHANGED = "method_changed"  # endpoints measured by different methods: dropped
    UNAVAILABLE = "unavailable"  # the device had no energy source in this interval
    COUNTER_INCONSISTENT = "counter_inconsistent"  # counter disagreed with power: power integration used
    COUNTER_STUCK = "counter_stuck"  # counter did not move while power was high: interval by power
    COUNTER_RUNAWAY = "counter_runaway"  # counter above the device's power limit: interval by power
    POWER_DISAGREES = "power_disagrees"  # counter moved, averaged power disagreed: counter kept
    # attribution
    SHARE_UNKNOWN = "share_unknown"  # the job's share of this interval could not be computed
    GPU_IDLE_UTIL_ONLY = "gpu_idle_util_only"  # no power bound known: a GPU's idle judged by utilisation alone
    GPU_IDLE_SPANS_JOINED = "gpu_idle_spans_joined"  # more idle stretches than kept: the last ones joined
    SHARED_GPU = "shared_gpu_by_process_util"  # GPU shared: job share by per-process utilisation
    JOB_NEVER_OBSERVED = "job_never_observed"  # the job's processes were never seen on the node
    TAIL_FROM_SLURM_TOTALCPU = "tail_from_slurm_totalcpu"  # unobserved last stretch charged from the job's true CPU time
    TAIL_ESTIMATED = "tail_estimated"  # unobserved last stretch: share estimated (last observed share, else CPUs)
    NOT_EXCLUSIVE = "not_exclusive:shared_policy_used"  # exclusive_whole_node site, job not exclusive
    MIG_FRACTION = "mig_fraction"  # detailed: "mig_fraction:<f>", a MIG slice's share of its parent
    # a physically bounded ratio came out above 1 (or below 0): clamped, raw value in DeviceEnergy.unclamped
    UTIL_CLAMPED = "util_clamped"  # CPU time / (allocated CPUs x wall) > 1, GPU util > 100 %, memory > node
    SHARE_CLAMPED = "share_clamped"  # job CPU time / node busy > 1, job memory / node used > 1
    COVERAGE_CLAMPED = "coverage_clamped"  # measured seconds > the job's elapsed seconds
    NODE_BUSY_RAW = "node_busy_raw"  # detailed: "node_busy_raw:<f>", the TDP model's clamped node busy fraction
    # readers
    EACCES = "eacces"  # RAPL energy_uj root-only (Linux >= 5.10) and we are not root
    EACCES_FALLBACK = "eacces_fallback"  # RAPL unreadable: CPU estimated from TDP instead
    TDP_FALLBACK_PER_CORE = "tdp_fallback_per_core"  # unknown CPU model: 12 W/core default
    UTIL_FROM_NODE_COUNTERS = "util_from_node_counters"  # CPU utilisation from /proc/stat deltas
    MIG_ESTIMATED = "mig_estimated"  # MIG slice: parent's energy x slice fraction (an estimate)
    MIG_FRACTION_UNKNOWN = "mig_fraction_unknown"  # MIG slice whose fraction could not be read
    NVML_INIT_FAILED = "nvml_init_failed"
    NVML_ERROR = "nvml_error"  # detailed: "nvml_error:<NVMLError class>"
    GPU_FALLBACK_W = "gpu_fallback_w"  # GPU rated power from the site's fallback
    UTIL_UNKNOWN_ASSUMED_1 = "util_unknown_assumed_1"
    NAME_UNREADABLE = "name_unreadable"
    PSYS = "psys"
    READ_ERROR = "read_error"
    READER_ERROR = "reader_error"  # detailed: "reader_error:<exception class>"
    PROC_STAT = "proc_stat"  # detailed: "proc_stat:<errno>"

    def detail(self, detail: object) -> str:
        """The flag with a detail: ``Flag.NVML_ERROR.detail("NVMLError_GpuIsLost")`` ->
        ``"nvml_error:NVMLError_GpuIsLost"``."""
        return f"{self.value}:{detail}"


if TYPE_CHECKING:
    _JobMetaFields = JobIdentity
else:
    _JobMetaFields = dataclass_of(JobIdentity)


class JobMeta(_JobMetaFields):
    """Who ran which job: the identity and owner of one job attempt, from Slurm (or ``run``): the
    dataclass of :class:`slurm_energy.jobmeta.JobIdentity`, where the fields are defined.

    Shared by the spool's job context and the stored record (same names, same meaning).
    """


@dataclass
class Reading:
    """One device at one instant (see :mod:`slurm_energy.sampling.readers.base` for ``method``).

    ``method`` is coerced to :class:`Method` (readers may pass its string value).
    ``mig_fraction``: for a MIG slice, its compute slices / the parent GPU's, in (0, 1]; the
    slice's energy is the parent's x this fraction. ``None`` for a whole device.
    """

    device_class: str  # "cpu" | "gpu" | "ram"
    device_id: str  # stable key: RAPL zone path ("intel-rapl:0"), GPU UUID, "cpu-tdp", "ram-model"
    # counter | power_integration | tdp_estimate | unavailable; a str value is coerced to Method
    method: Method | str
    energy_uj: int | None = None  # cumulative counter, uJ
    max_energy_range_uj: int | None = None  # counter range (wraps to 0 past it), uJ; None = no wrap
    max_power_w: float | None = None  # zone/device max power, W (for the multiple-wrap check)
    power_w: float | None = None  # instantaneous power, W (beside a counter: for the cross-check)
    energy_resolution_uj: int | None = None  # the counter's quantum, uJ (NVML: 1000, it counts mJ)
    power_accuracy_w: float | None = None  # accuracy of power_w, W (NVML power.draw: +/- 5 W)
    mean_power_w: float | None = None  # modelled mean power since the previous read, W
    util: float | None = None  # device utilisation in [0, 1]
    mem_bytes: int | None = None  # device memory in use, bytes
    # per-process GPU utilisation {pid: sm_util 0..1}, for sharing a GPU between jobs
    proc_util: dict[Any, float] | None = None
    flags: list[str] = field(default_factory=list)  # Flag values, e.g. ["eacces", "range_unreadable"]
    mig_fraction: float | None = None  # MIG slice / parent compute slices, (0, 1]

    def __post_init__(self) -> None:
        self.method = Method.parse(self.method)

    def to_dict(self) -> dict[str, Any]:
        """Compact dict for the sample file (None fields and empty flags dropped; enums as values)."""
        # the fields by hand, not dataclasses.asdict (its recursive deep copy was half of a
        # sample's CPU time); containers are still copied
        d: dict[str, Any] = {}
        for k in _READING_FIELDS:
            v = getattr(self, k)
            if v is None or v == []:
                continue
            d[k] = list(v) if isinstance(v, list) else dict(v) if isinstance(v, dict) else v
        d["method"] = Method.parse(self.method).value
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Reading:
        """Inverse of :meth:`to_dict`; unknown keys are ignored (newer sample files). A sample
        file from before ``mig_fraction`` was a field carries it as flag ``mig_fraction:<f>``."""
        known = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        known.setdefault("method", Method.UNAVAILABLE)
        rd = cls(**known)
        if rd.mig_fraction is None:
            rd.mig_fraction = _legacy_mig_fraction(rd.flags)
        return rd


def _legacy_mig_fraction(flags: list[str]) -> float | None:
    prefix = Flag.MIG_FRACTION.value + ":"
    for f in flags or []:
        if isinstance(f, str) and f.startswith(prefix):
            try:
                return float(f[len(prefix):])
            except ValueError:
                return None
    return None


_READING_FIELDS = tuple(f.name for f in fields(Reading))  # Reading.to_dict's keys, in order


@dataclass
class DeviceStatic:
    """Static facts about one device, for the device information collector and the report."""

    device_class: str
    device_id: str
    model: str = ""
    count: int = 1  # e.g. cores covered by a per-core TDP model
    rated_power_w: float | None = None  # TDP / enforced power limit, W
    rated_power_source: str = ""  # "RAPL max_power_uw", "NVML enforced limit", "table: TDP_cpu.csv", ...
    extra: dict[str, Any] = field(default_factory=dict)  # vendor facts: memory size, MIG slice, minor...


@dataclass(slots=True)
class JobUsage:
    """The job's usage at one sample: cumulative CPU time (s), memory now and its peak (bytes), its
    PIDs, and where the numbers came from (``cgroup-v1``, ``cgroup-v2``, ``psutil``, ``procfs``,
    ``rusage``, ""). A probe keeps one and updates it in place at each poll (the sampler's
    :class:`~slurm_energy.sampling.sampler.UsageProbe`)."""

    cpu_time_s: float | None = None
    mem_bytes: int | None = None
    max_mem_bytes: int | None = None
    pids: list[int] = field(default_factory=list)
    source: str = ""


@dataclass(slots=True)
class NodeUsage:
    """The node's counters at one sample: busy and total CPU time summed over logical CPUs since
    boot (s), logical CPUs, memory used (total - available) and total (bytes). None = not read."""

    cpu_busy_s: float | None = None
    cpu_total_s: float | None = None
    ncpu: int | None = None
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None


def _known(cls: Any, d: Any) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k in cls.__dataclass_fields__} if isinstance(d, dict) else {}


@dataclass
class Sample:
    """One line of the sample file (:mod:`slurm_energy.sampling.samplefile`), typed.

    ``t``: epoch s; ``kind``: ``prolog``, ``start``, ``sample``, ``cgroup_gone``, ``final`` or
    ``epilog``; ``job``: None when the job was not observed at that instant (a hook's own reading);
    ``readings``: one per device. :meth:`from_dict` reads every sample file written so far (unknown
    keys ignored, missing ones None).
    """

    t: float
    kind: str = "sample"
    job: JobUsage | None = None
    node: NodeUsage = field(default_factory=NodeUsage)
    readings: list[Reading] = field(default_factory=list)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Sample:
        """A sample from its JSON object. Raises KeyError/TypeError/ValueError without a numeric ``t``."""
        job = d.get("job")
        return cls(t=float(d["t"]), kind=str(d.get("kind") or "sample"),
                   job=JobUsage(**_known(JobUsage, job)) if isinstance(job, dict) else None,
                   node=NodeUsage(**_known(NodeUsage, d.get("node"))),
                   readings=[Reading.from_dict(r) for r in d.get("readings") or [] if isinstance(r, dict)])

    def to_dict(self) -> dict[str, Any]:
        """The JSON object written to the sample file (the shape :meth:`from_dict` reads)."""
        return {"t": self.t, "kind": self.kind, "job": asdict(self.job) if self.job else None,
                "node": {k: v for k, v in asdict(self.node).items() if v is not None},
                "readings": [r.to_dict() for r in self.readings]}

