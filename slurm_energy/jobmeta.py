"""The job's identity fields, defined once: :class:`JobIdentity` (names, types, defaults).

Everything that carries a job's identity derives from it: :class:`slurm_energy.core.JobMeta` (its
dataclass, :func:`dataclass_of`) and so :class:`slurm_energy.slurm.context.JobContext`;
:class:`slurm_energy.model.JobRecord` (pydantic takes a base class's annotated fields); the hook
path's light context (:data:`slurm_energy.slurm.context.CONTEXT_DEFAULTS`, read through
``JobFacts``); the store's identity columns (:data:`slurm_energy.store.schema.IDENTITY_COLUMNS`)
and so ``store.select.JobRow``. A new job field is one line here (plus a store migration if it
becomes a column).

No imports at run time (the Prolog/Epilog read :data:`IDENTITY`; ``dataclasses`` alone costs a hook
~14 ms of CPU): the class is plain here, and a dataclass only where :func:`dataclass_of` builds one.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # type checkers see the dataclass that dataclass_of builds at run time
    from dataclasses import dataclass
else:
    def dataclass(cls):
        return cls


@dataclass
class JobIdentity:
    """Who ran which job: the identity and owner of one job attempt, from Slurm (or ``run``)."""

    job_id: str = ""  # Slurm's raw job id (SLURM_JOB_ID), or "run-<pid>" / "pid-<pid>"
    cluster: str = ""  # SLURM_CLUSTER_NAME
    array_job_id: str | None = None  # SLURM_ARRAY_JOB_ID
    array_task_id: str | None = None  # SLURM_ARRAY_TASK_ID
    het_job_id: str | None = None  # SLURM_HET_JOB_ID
    het_job_offset: str | None = None  # SLURM_HET_JOB_OFFSET
    job_name: str = ""  # slurmctld's, else SLURM_JOB_NAME
    user: str = ""  # SLURM_JOB_USER
    uid: int | None = None  # SLURM_JOB_UID
    gid: int | None = None  # SLURM_JOB_GID
    account: str = ""  # SLURM_JOB_ACCOUNT (only with accounting storage)
    partition: str = ""  # SLURM_JOB_PARTITION
    work_dir: str = ""  # SLURM_JOB_WORK_DIR
    restart_count: int = 0  # SLURM_JOB_RESTART_COUNT: attempts of a requeued job
    sluid: str = ""  # SLURM_JOB_SLUID (Slurm >= 25.11): one per run of a job, new on requeue
    slurm_start_time: float | None = None  # SLURM_JOB_START_TIME (Slurm >= 23.11): the run's start, epoch s


def field_defaults(cls: type) -> dict:
    """``{name: default}`` of every annotated field of ``cls`` and its bases, bases first."""
    names: dict = {}
    for c in reversed(cls.__mro__):
        names.update(dict.fromkeys(c.__dict__.get("__annotations__", {})))  # noqa: RUF063 -- hook path: no inspect import
    return {k: getattr(cls, k) for k in names}


#: every identity field with its default, in declaration order
IDENTITY: dict = field_defaults(JobIdentity)


def dataclass_of(light: type, base: type | None = None) -> type:
    """The dataclass of a plain annotated class (``light``, its bases' fields included, unless
    ``base``, a dataclass, has them already): same name, fields, defaults; a list default becomes a
    fresh list per instance. Imports ``dataclasses`` (not for the hook path)."""
    import dataclasses

    have = {f.name for f in dataclasses.fields(base)} if base is not None else set()
    ann: dict = {}
    ns: dict = {"__module__": light.__module__, "__qualname__": light.__qualname__, "__doc__": light.__doc__}
    for c in reversed(light.__mro__):
        for k, t in c.__dict__.get("__annotations__", {}).items():  # noqa: RUF063 -- hook path: no inspect import
            if k not in have:
                ann[k] = t
    for k in ann:
        d = getattr(light, k)
        ns[k] = dataclasses.field(default_factory=list) if isinstance(d, list) else d
    ns["__annotations__"] = ann
    return dataclasses.dataclass(type(light.__name__, (base,) if base is not None else (), ns))


#: Node records (and stored rows) of one run overlap in time: every node's Prolog runs before the
#: job ends and every Epilog after it. Clock skew between nodes allowed for, s.
RUN_OVERLAP_SLACK_S = 2.0


class RunKey:
    """Which run of a job something belongs to: the one run identity, compared by :func:`same_run`
    (a node record, a stored record, a spool's context, an sacct line, a Prolog's environment).

    Every field may be unknown (None; "" for the SLUID): an unknown field is never compared.
    ``nodes``: the run's node list as the source writes it (expanded and sorted for records;
    Slurm's compressed list for a hook's context: compare like with like). ``start``/``end``:
    the span the source saw, epoch s (``end`` None: the moment ``start``)."""

    __slots__ = ("cluster", "end", "job_id", "nodes", "restart_count", "sluid", "slurm_start_time", "start")

    def __init__(self, job_id: str | None = None, *, cluster: str | None = None, restart_count: int | None = None,
                 sluid: str = "", slurm_start_time: float | None = None, nodes: tuple[str, ...] | None = None,
                 start: float | None = None, end: float | None = None) -> None:
        self.job_id, self.cluster, self.restart_count = job_id, cluster, restart_count
        self.sluid, self.slurm_start_time, self.nodes = sluid or "", slurm_start_time or None, nodes
        self.start, self.end = start, end

    @classmethod
    def of_record(cls, r: object, *, nodes: bool = True, restart: bool = True) -> RunKey:
        """A JobRecord's (or a store summary row's) run: its span covers its node summaries'.
        ``nodes``/``restart`` False: those left unknown (a merged record widens its node list; an
        sacct line knows no restart count)."""
        summaries = getattr(r, "nodes", None) or ()
        starts = [float(getattr(r, "start_time", 0.0))] + [float(ns.start_time) for ns in summaries]
        ends = [float(getattr(r, "end_time", 0.0))] + [float(ns.end_time) for ns in summaries]
        expected = getattr(r, "expected_nodes", None)
        return cls(str(getattr(r, "job_id", "")), cluster=getattr(r, "cluster", None),
                   restart_count=int(getattr(r, "restart_count", 0) or 0) if restart else None,
                   sluid=getattr(r, "sluid", "") or "", slurm_start_time=getattr(r, "slurm_start_time", None),
                   nodes=tuple(sorted(expected)) if nodes and expected is not None else None,
                   start=min(starts), end=max(ends))

    @classmethod
    def of_context(cls, ctx: dict[str, object], *, restart: bool = True) -> RunKey:
        """A hook's context (the spool's ``context-<node>.json`` as a dict, or a Prolog's
        environment): ``nodes`` is Slurm's compressed node list, ``start`` the Prolog's time."""
        def num(k: str) -> float | None:
            v = ctx.get(k)
            return float(v) if isinstance(v, (int, float)) and v else None
        rc = ctx.get("restart_count")
        nl = ctx.get("nodelist")
        return cls(str(ctx["job_id"]) if ctx.get("job_id") is not None else None,
                   cluster=str(ctx["cluster"]) if ctx.get("cluster") else None,
                   restart_count=int(rc) if restart and isinstance(rc, int) else None,
                   sluid=str(ctx.get("sluid") or ""), slurm_start_time=num("slurm_start_time"),
                   nodes=(str(nl),) if nl else None, start=num("prolog_time"))

    def __repr__(self) -> str:
        return (f"RunKey({self.cluster}/{self.job_id} #{self.restart_count} sluid={self.sluid!r} "
                f"slurm_start={self.slurm_start_time} nodes={self.nodes} span={self.start}..{self.end})")


def same_run(a: RunKey, b: RunKey, slack_s: float = RUN_OVERLAP_SLACK_S) -> bool | None:
    """The one rule for "same run of a job?": True, False, or None when nothing both sides know
    tells (then the caller decides: a spool's context without a SLUID or start time).

    Cluster, job id and restart count differ: another run. Else what Slurm says decides: the SLUID
    (Slurm >= 25.11), else Slurm's start time (>= 23.11), when both know it. Without it (Slurm
    22.05), another node list is another run, and the spans decide: one run's records overlap in
    time (within ``slack_s`` of clock skew), a reused job id's runs follow one another."""
    for x, y in ((a.cluster, b.cluster), (a.job_id, b.job_id), (a.restart_count, b.restart_count)):
        if x is not None and y is not None and x != y:
            return False
    if a.sluid and b.sluid:
        return a.sluid == b.sluid
    if a.slurm_start_time and b.slurm_start_time:
        return float(a.slurm_start_time) == float(b.slurm_start_time)
    if a.nodes is not None and b.nodes is not None and a.nodes != b.nodes:
        return False
    if a.start is None or b.start is None:
        return None
    a_end = a.start if a.end is None else a.end
    b_end = b.start if b.end is None else b.end
    return b.start <= a_end + slack_s and a.start <= b_end + slack_s
