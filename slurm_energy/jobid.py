"""Every job id form ``jobenergy`` accepts, parsed into a :class:`JobSpec`, and record matching.

Forms (as ``sacct -j`` takes them; Slurm 22.05 ``slurm_job_step_id`` syntax):

============  =================================================================================
``715219``     the raw job id; if it is an array's job id (SLURM_ARRAY_JOB_ID) it means every task
               of the array, if a het job's id (SLURM_HET_JOB_ID) every component -- as in sacct
``715219_23``  array task 23 of array 715219 (the same task is also reachable by its raw job id)
``715219_[1-3,7]``  several tasks of one array
``1234+0``     het job component 0 of het job 1234 (each component also has its own raw job id)
``X.batch`` / ``X.extern`` / ``X.0``  a job step. Energy is measured per job allocation (Prolog to
               Epilog on each node), not per step, so a step id selects its job; the step is kept
               in :attr:`JobSpec.step` so the CLI can say so.
============  =================================================================================

Requeued attempts and reused ids: a stored record is one *attempt* (key cluster, job_id,
start_time). Attempts of one job share the job id and have increasing ``restart_count``
(SLURM_JOB_RESTART_COUNT); a record whose restart_count does not increase over the previous one
(ordered by start time) starts a *new job* that reuses the id (Slurm wraps at MaxJobId, or the
controller state was reset). :func:`split_reused` implements this rule.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Optional

#: Node records (and stored rows) of one run overlap in time: every node's Prolog runs before the
#: job ends and every Epilog after it. Clock skew between nodes allowed for, s.
RUN_OVERLAP_SLACK_S = 2.0

_JOBID = re.compile(
    r"""^(?P<job>\d+)
        (?:_(?P<task>\d+|\[[0-9,\-]+\]) | \+(?P<het>\d+))?
        (?:\.(?P<step>batch|extern|interactive|\d+))?$""",
    re.X,
)


@dataclass(frozen=True)
class JobSpec:
    """A parsed job id. ``job_id`` is the number before ``_``/``+``/``.``.

    ``array_tasks``: tuple of task ids (str) for ``X_T`` / ``X_[..]``, else None.
    ``het_offset``: component offset (str) for ``X+O``, else None.
    ``step``: ``"batch"``, ``"extern"``, ``"0"``, ... or None (energy is per job: informational).
    """

    raw: str
    job_id: str
    array_tasks: Optional[tuple[str, ...]] = None
    het_offset: Optional[str] = None
    step: Optional[str] = None


def _expand_tasks(body: str, raw: str) -> tuple[str, ...]:
    out: list[str] = []
    for part in body.split(","):
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m:
            raise ValueError(f"job id {raw!r}: bad array task range {part!r}; write e.g. 715219_[1-3,7]")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) else lo
        if hi < lo:
            raise ValueError(f"job id {raw!r}: array task range {part!r} runs backwards; write it low-high")
        if hi - lo > 1_000_000:
            raise ValueError(f"job id {raw!r}: array task range {part!r} is larger than 1000000 tasks")
        out.extend(str(i) for i in range(lo, hi + 1))
    return tuple(dict.fromkeys(out))


def parse_jobid(s: str) -> JobSpec:
    """Parse one job id in any accepted form (see module docstring).

    Raises:
        ValueError: the text is not a job id; the message quotes it and lists the accepted forms.
    """
    raw = str(s).strip()
    m = _JOBID.match(raw)
    if not m:
        raise ValueError(
            f"job id {s!r} is not valid: use a job id (715219), an array task (715219_23 or "
            "715219_[1-3]), a het job component (1234+0), optionally with a step (.batch, .extern, .0)"
        )
    task = m.group("task")
    tasks = None
    if task is not None:
        tasks = _expand_tasks(task[1:-1], raw) if task.startswith("[") else (str(int(task)),)
    het = m.group("het")
    return JobSpec(
        raw=raw,
        job_id=str(int(m.group("job"))),
        array_tasks=tasks,
        het_offset=None if het is None else str(int(het)),
        step=m.group("step"),
    )


def parse_jobids(values: Iterable[str]) -> list[JobSpec]:
    """Parse positional ids and ``-j`` comma lists: ``["1,2", "3_4"]`` -> three specs.

    Commas inside brackets (``7_[1,3]``) do not split. Raises ValueError as :func:`parse_jobid`.
    """
    out: list[JobSpec] = []
    for v in values:
        for item in re.findall(r"[^,\[]+(?:\[[^\]]*\][^,]*)?", str(v)):
            if item.strip():
                out.append(parse_jobid(item))
    return out


def matches(spec: JobSpec, record) -> bool:
    """Does ``record`` (a JobRecord, or anything with its id fields) belong to ``spec``?

    * ``X``: raw job id X, or any task of array X, or any component of het job X;
    * ``X_T``: ``array_job_id == X`` and ``array_task_id == T``;
    * ``X+O``: ``het_job_id == X`` and ``het_job_offset == O``.
    The step never narrows the match (energy is per job allocation).
    """
    if spec.array_tasks is not None:
        return record.array_job_id == spec.job_id and record.array_task_id in spec.array_tasks
    if spec.het_offset is not None:
        return record.het_job_id == spec.job_id and record.het_job_offset == spec.het_offset
    return spec.job_id in (record.job_id, record.array_job_id, record.het_job_id)


def display_id(record) -> str:
    """sacct's JobID column: ``715219_23`` for an array task, ``1234+1`` for a het component, else
    the raw id."""
    if record.array_job_id and record.array_task_id is not None:
        return f"{record.array_job_id}_{record.array_task_id}"
    if record.het_job_id and record.het_job_offset is not None:
        return f"{record.het_job_id}+{record.het_job_offset}"
    return record.job_id


def split_reused(records: list) -> list[list]:
    """Split attempts sharing one (cluster, job_id) into jobs (oldest job first).

    Args:
        records: JobRecords with the same cluster and raw job_id, any order.

    Returns:
        list of jobs, each a list of attempts sorted by start_time. A new job starts whenever an
        attempt's ``restart_count`` is not greater than the previous attempt's (requeues count up
        from 0 via SLURM_JOB_RESTART_COUNT; a reused id starts again at 0).
    """
    jobs: list[list] = []
    for r in sorted(records, key=lambda r: (r.start_time, r.restart_count)):
        if jobs and r.restart_count > jobs[-1][-1].restart_count:
            jobs[-1].append(r)
        else:
            jobs.append([r])
    return jobs
