"""The job's context on a node, from slurmd's Prolog/Epilog environment (stdlib only): the one
module of the job context, for the hooks, the sampler and the job's end.

slurmd runs Prolog and Epilog as root with no PATH, HOME or USER; what it does give is listed in
../shared/notes/slurm-on-debian12.md (Slurm 22.05): SLURM_JOB_ID, SLURM_JOB_UID, SLURM_JOB_GID,
SLURM_JOB_USER, SLURM_JOB_ACCOUNT (only with accounting storage), SLURM_JOB_PARTITION,
SLURM_JOB_WORK_DIR, SLURM_JOB_NUM_NODES, SLURM_NODELIST, SLURMD_NODENAME, SLURM_CLUSTER_NAME,
SLURM_JOB_RESTART_COUNT, SLURM_JOB_GPUS (physical indices), CUDA_VISIBLE_DEVICES; the Epilog adds
SLURM_JOB_EXIT_CODE2 ("3:0"). Array and het-job variables are read when present; newer Slurm adds
SLURM_JOB_START_TIME (23.11) and SLURM_JOB_SLUID (25.11), which tell runs of a reused job id apart.

:class:`NodeContext` declares what a node's job context holds beyond the job's identity
(:class:`slurm_energy.jobmeta.JobIdentity`): the one declaration of the job context's fields.
:class:`JobContext` is their dataclass (what the sampler and finalizer use; built on first use,
so that importing this module costs the hooks no ``dataclasses`` or ``slurm_energy.core``); the
Prolog and Epilog hold the same fields as :class:`JobFacts`, a dict (the dataclass machinery and
``slurm_energy.core`` cost them milliseconds of CPU at import), built from
:data:`CONTEXT_DEFAULTS` (every field with its default, from the same declarations) by
:func:`context_dict`: the JSON object ``JobContext.to_json`` writes. Code that both take (the
readers for a job: :mod:`slurm_energy.slurm.node_reading`) reads them through a Protocol of the
fields it uses.
"""

from __future__ import annotations

import os
import re

from slurm_energy.errors import SlurmEnvError
from slurm_energy.jobmeta import JobIdentity, field_defaults

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from dataclasses import dataclass
    from typing import Any

    _Dict = dict[str, Any]
else:
    def dataclass(cls):  # the dataclass is JobContext
        return cls

    _Dict = dict


@dataclass
class NodeContext(JobIdentity):
    """The job on one node, as read in the Prolog (and again in the Epilog): its identity plus what
    only this node knows."""

    node: str = ""  # SLURMD_NODENAME, else the short host name
    nodelist: str = ""  # compressed Slurm hostlist, e.g. "n[1-2]"
    num_nodes: int = 1
    cpus_per_node: str = ""  # SLURM_JOB_CPUS_PER_NODE, e.g. "2(x2)" or "4,2"
    job_gpus: str = ""  # SLURM_JOB_GPUS: physical GPU indices on this node, e.g. "0,2"
    cuda_visible_devices: str = ""
    exit_code: str = ""  # Epilog only: SLURM_JOB_EXIT_CODE2, e.g. "0:0"
    prolog_time: float = 0.0  # epoch s, set by the Prolog
    mem_per_node: str = ""  # SLURM_MEM_PER_NODE (MB; 0 = whole node): the job's env, not 22.05's Prolog
    mem_per_cpu: str = ""  # SLURM_MEM_PER_CPU (MB), x the job's CPUs on the node
    gpus: list[dict[str, Any]] = []  # noqa: RUF012 - resolved once in the Prolog (devices.gpu.Gpu dicts); a fresh list per context
    gpu_resolution_error: str = ""


#: Every field of a job's context on a node (:class:`NodeContext`, its identity part included)
#: with its default.
CONTEXT_DEFAULTS: dict[str, Any] = field_defaults(NodeContext)

#: A SLUID is Slurm's run id (e.g. ``sl_01J...``): letters, digits, ``_`` and ``-`` only; anything
#: else is ignored (it names spool directories).
_SAFE_SLUID = re.compile(r"^[A-Za-z0-9_\-]{1,64}$")


def _int(env: Mapping[str, str], name: str, default: int | None = None) -> int:
    raw = env.get(name, "")
    if raw == "":
        if default is None:
            raise SlurmEnvError(f"{name} is not set: the hook must run from slurmd (Prolog/Epilog), "
                                f"or set {name} by hand for a manual run")
        return default
    try:
        return int(raw)
    except ValueError:
        raise SlurmEnvError(f"{name}={raw!r} is not an integer; slurmd sets it to a number") from None


def opt(env: Mapping[str, str], name: str) -> str | None:
    """``env[name]``, None when unset, empty or Slurm's "no value" (``N/A``, ``4294967294``)."""
    v = env.get(name, "")
    return v if v not in ("", "N/A", "4294967294") else None


def start_time(env: Mapping[str, str]) -> int | None:
    """SLURM_JOB_START_TIME (Slurm >= 23.11 gives it to Prolog and Epilog), epoch s; None if absent/bad."""
    raw = env.get("SLURM_JOB_START_TIME", "")
    return int(raw) if raw.isdigit() and int(raw) > 0 else None


def slurm_env_fields(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The job's fields in slurmd's Prolog/Epilog environment (default ``os.environ``), keyed as
    :class:`~slurm_energy.slurm.context.JobContext`'s: ``node`` = SLURMD_NODENAME (else the short host
    name), ``job_id`` = SLURM_JOB_ID (the raw job id; array/het ids kept apart).

    Raises:
        SlurmEnvError: SLURM_JOB_ID, SLURM_JOB_UID or SLURM_JOB_GID missing or not integers.
    """
    env = os.environ if env is None else env
    job_id = env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID") or ""
    if not job_id:
        raise SlurmEnvError("SLURM_JOB_ID is not set: the hook must run from slurmd (Prolog/Epilog)")
    if not job_id.isdigit():
        raise SlurmEnvError(f"SLURM_JOB_ID={job_id!r} is not a raw numeric job id")
    return {
        "job_id": job_id,
        "uid": _int(env, "SLURM_JOB_UID"),
        "gid": _int(env, "SLURM_JOB_GID"),
        "user": env.get("SLURM_JOB_USER", ""),
        "account": env.get("SLURM_JOB_ACCOUNT", ""),
        "partition": env.get("SLURM_JOB_PARTITION", ""),
        "work_dir": env.get("SLURM_JOB_WORK_DIR", ""),
        "node": env.get("SLURMD_NODENAME") or os.uname().nodename.split(".")[0],
        "cluster": env.get("SLURM_CLUSTER_NAME", ""),
        "nodelist": env.get("SLURM_NODELIST") or env.get("SLURM_JOB_NODELIST", ""),
        "num_nodes": _int(env, "SLURM_JOB_NUM_NODES", 1),
        "cpus_per_node": env.get("SLURM_JOB_CPUS_PER_NODE", ""),
        "restart_count": _int(env, "SLURM_JOB_RESTART_COUNT", 0),
        "job_gpus": env.get("SLURM_JOB_GPUS", ""),
        "cuda_visible_devices": env.get("CUDA_VISIBLE_DEVICES", ""),
        "array_job_id": opt(env, "SLURM_ARRAY_JOB_ID"),
        "array_task_id": opt(env, "SLURM_ARRAY_TASK_ID"),
        "het_job_id": opt(env, "SLURM_HET_JOB_ID"),
        "het_job_offset": opt(env, "SLURM_HET_JOB_OFFSET"),
        "job_name": env.get("SLURM_JOB_NAME", ""),
        "exit_code": env.get("SLURM_JOB_EXIT_CODE2", ""),
        "mem_per_node": env.get("SLURM_MEM_PER_NODE", ""),
        "mem_per_cpu": env.get("SLURM_MEM_PER_CPU", ""),
        "slurm_start_time": start_time(env),
        "sluid": env.get("SLURM_JOB_SLUID", "") if _SAFE_SLUID.match(env.get("SLURM_JOB_SLUID", "")) else "",
    }


def context_dict(fields: dict[str, Any]) -> dict[str, Any]:
    """Every JobContext field: :data:`CONTEXT_DEFAULTS` updated with ``fields`` (fresh lists)."""
    out = {k: (list(v) if isinstance(v, list) else v) for k, v in CONTEXT_DEFAULTS.items()}
    out.update(fields)
    return out


class JobFacts(_Dict):
    """The job's context in the Prolog/Epilog: every :class:`NodeContext` field (:func:`context_dict`)
    as a dict with attribute access, read and set (the Prolog adds its time and the job's GPUs):
    what the spool and marks read of a job's context."""

    def __getattr__(self, key: str) -> Any:
        try:
            return self[key]
        except KeyError:
            raise AttributeError(key) from None

    def __setattr__(self, key: str, value: Any) -> None:
        self[key] = value

    def to_json(self) -> str:
        """JSON text of every field, as ``JobContext.to_json`` writes it."""
        import json

        return json.dumps(self, sort_keys=True)


class ContextJson:
    """:class:`JobContext`'s JSON form (the job's start record in the spool)."""

    __dataclass_fields__: dict[str, Any]

    def to_json(self) -> str:
        """JSON text of every field (the job's start record in the spool)."""
        import json

        return json.dumps({k: getattr(self, k) for k in self.__dataclass_fields__}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Any:
        """Inverse of :meth:`to_json`; unknown keys ignored. Raises ``ValueError`` on bad JSON."""
        import json

        d = json.loads(text)
        if "gpus" not in d:
            d["gpus"] = legacy_gpus(d)
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


def legacy_gpus(d: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The job's GPUs from a context written before the GPU backend registry (``gpu_uuids``:
    NVML UUIDs; ``drm_gpus``: AMD/Intel cards as ``ResolvedDrmGpu`` dicts), as
    :class:`~slurm_energy.devices.gpu.Gpu` dicts: a job running across a package upgrade keeps its
    GPUs measured by the new finalizer instead of reporting them unavailable."""
    out: list[dict[str, Any]] = [{"backend": "nvml", "vendor": "nvidia", "device_id": str(u)}
                                 for u in d.get("gpu_uuids") or [] if u]
    for g in d.get("drm_gpus") or []:
        if isinstance(g, dict) and g.get("device_id"):
            new = {k: v for k, v in g.items() if k != "pci_bus_id"}
            out.append({**new, "backend": "drm", "bus_id": g.get("pci_bus_id", "")})
    return out


if TYPE_CHECKING:
    from slurm_energy.core import JobMeta

    class JobContext(JobMeta, NodeContext, ContextJson):
        """The job's facts on one node, as read in the Prolog (and again in the Epilog): the job's
        :class:`~slurm_energy.core.JobMeta` (identity, owner) plus what only this node knows (the
        fields: :class:`NodeContext`)."""

        @classmethod
        def from_json(cls, text: str) -> JobContext: ...
else:
    def __getattr__(name: str) -> Any:
        """``JobContext``, built on first use (PEP 562): the dataclass of :class:`NodeContext` on
        :class:`~slurm_energy.core.JobMeta`, with :class:`ContextJson`."""
        if name != "JobContext":
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        from slurm_energy.core import JobMeta
        from slurm_energy.jobmeta import dataclass_of

        class JobContext(dataclass_of(NodeContext, base=JobMeta), ContextJson):
            """The job's facts on one node, as read in the Prolog (and again in the Epilog): the job's
            :class:`~slurm_energy.core.JobMeta` (identity, owner) plus what only this node knows (the
            fields: :class:`NodeContext`)."""

        JobContext.__qualname__ = "JobContext"
        globals()["JobContext"] = JobContext
        return JobContext


def cpus_on_node(cpus_per_node: str, node_index: int) -> int | None:
    """CPUs allocated on the ``node_index``-th node (0-based, hostlist order) of a job.

    ``cpus_per_node`` is Slurm's compressed SLURM_JOB_CPUS_PER_NODE: "2", "2(x3)", "4,2(x2)".
    Returns None if the string is empty, malformed, or shorter than ``node_index + 1`` nodes.
    """
    counts: list[int] = []
    for part in filter(None, (p.strip() for p in cpus_per_node.split(","))):
        n, _, rep = part.partition("(x")
        try:
            counts.extend([int(n)] * (int(rep.rstrip(")")) if rep else 1))
        except ValueError:
            return None
    return counts[node_index] if 0 <= node_index < len(counts) else None


#: What is read from the job's own processes: only what is the user's to say anyway. Every variable
#: in a job's environment can be exported by its user (``export SLURM_ARRAY_JOB_ID=...`` before a
#: child, ``sbatch --export``), so identity (array and het-job ids) and requests (SLURM_MEM_PER_NODE,
#: SLURM_MEM_PER_CPU) are never taken from there: they come from slurmd's Prolog/Epilog environment
#: (slurmd builds it itself; user-set SPANK variables must start with ``SPANK_``: Slurm's
#: prep_script_slurmd.c ``_build_env``/``valid_spank_job_env``) or from slurmctld (``scontrol show
#: job`` in the finalizer, :mod:`slurm_energy.slurm.clients.scontrol`). The job name is the user's own text
#: (``--job-name``), used only where slurmctld gives none; SLURM_UMASK (sbatch's copy of the
#: submitting shell's umask) is the mode the user's reports are written with.
JOB_ENV_FACTS = {"SLURM_JOB_NAME": "job_name", "SLURM_UMASK": "umask"}


def job_env_facts(environ: Mapping[str, str], job_id: str) -> dict[str, str] | None:
    """The job name and umask from one of the job's processes' environment (see :data:`JOB_ENV_FACTS`).

    Args:
        environ: a process environment (``/proc/PID/environ`` of a PID in the job's cgroup, or in
            PID mode of a process of the job's uid).
        job_id: the raw job id; the environment must carry SLURM_JOB_ID equal to it (slurmstepd
            itself runs with slurmd's environment and is skipped this way).
    Returns:
        {"job_name": ..., "umask": "0022"} with the keys found (possibly none; a umask that is not
        an octal number up to 0777 is left out), or None if ``environ`` is not the job's.
    """
    if environ.get("SLURM_JOB_ID") != job_id:
        return None
    out = {}
    for var, key in JOB_ENV_FACTS.items():
        v = opt(environ, var)
        if v is not None:
            out[key] = v
    if "umask" in out and not (out["umask"].isdigit() and set(out["umask"]) <= set("01234567")
                               and int(out["umask"], 8) <= 0o777):
        del out["umask"]
    return out
