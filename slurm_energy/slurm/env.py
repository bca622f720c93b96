"""The job as the Prolog/Epilog sees it: parsed from slurmd's environment, never from scontrol.

slurmd runs Prolog and Epilog as root with no PATH, HOME or USER; what it does give is listed in
../shared/notes/slurm-on-debian12.md (Slurm 22.05): SLURM_JOB_ID, SLURM_JOB_UID, SLURM_JOB_GID,
SLURM_JOB_USER, SLURM_JOB_ACCOUNT (only with accounting storage), SLURM_JOB_PARTITION,
SLURM_JOB_WORK_DIR, SLURM_JOB_NUM_NODES, SLURM_NODELIST, SLURMD_NODENAME, SLURM_CLUSTER_NAME,
SLURM_JOB_RESTART_COUNT, SLURM_JOB_GPUS (physical indices), CUDA_VISIBLE_DEVICES; the Epilog adds
SLURM_JOB_EXIT_CODE2 ("3:0"). Array and het-job variables are read when present; newer Slurm adds
SLURM_JOB_START_TIME (23.11) and SLURM_JOB_SLUID (25.11), which tell runs of a reused job id apart.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict
from typing import TYPE_CHECKING

from slurm_energy.core import JobMeta
from slurm_energy.jobmeta import dataclass_of
from slurm_energy.slurm.hooks.context import NodeContext, opt

if TYPE_CHECKING:
    class _ContextFields(JobMeta, NodeContext):
        pass
else:
    _ContextFields = dataclass_of(NodeContext, base=JobMeta)


class JobContext(_ContextFields):
    """The job's facts on one node, as read in the Prolog (and again in the Epilog): the job's
    :class:`~slurm_energy.core.JobMeta` (identity, owner) plus what only this node knows (the
    fields: :class:`slurm_energy.slurm.hooks.context.NodeContext`)."""

    def to_json(self) -> str:
        """JSON text of every field (the job's start record in the spool)."""
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> JobContext:
        """Inverse of :meth:`to_json`; unknown keys ignored. Raises ``ValueError`` on bad JSON."""
        d = json.loads(text)
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


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


def job_env_facts(environ: Mapping[str, str], job_id: str) -> dict | None:
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
