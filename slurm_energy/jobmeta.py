"""The job's identity fields, defined once: :class:`JobIdentity` (names, types, defaults).

Everything that carries a job's identity derives from it: :class:`slurm_energy.core.JobMeta` (its
dataclass, :func:`dataclass_of`) and so :class:`slurm_energy.slurm.env.JobContext`;
:class:`slurm_energy.model.JobRecord` (pydantic takes a base class's annotated fields); the hook
path's light context (:data:`slurm_energy.slurm.hooks.context.CONTEXT_DEFAULTS`, read through
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
