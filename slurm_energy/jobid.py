"""Every job id form ``jobenergy`` accepts, parsed into a :class:`JobSpec`, and record matching.

Forms (as ``sacct -j`` takes them; Slurm 22.05 ``slurm_job_step_id`` syntax):

============  =================================================================================
``715219``     the raw job id; if it is an array's job id (SLURM_ARRAY_JOB_ID) it means every task
               of the array, if a het job's id (SLURM_HET_JOB_ID) every component -- as in sacct
``715219_23``  array task 23 of array 715219 (the same task is also reachable by its raw job id)
``715219_[1-3,7]``  several tasks of one array (also ``[0-15:4]``, every 4th, and squeue's
               throttle ``[1-10%2]``, ignored)
``1234+0``     het job component 0 of het job 1234 (each component also has its own raw job id)
``X.batch`` / ``X.extern`` / ``X.interactive`` / ``X.TBD`` / ``X.0``  a job step of any of the
               forms above (``715219_23.0``, ``1234+1.batch``). Energy is measured per job allocation
               (Prolog to Epilog on each node), not per step, so a step id selects its job; the step
               is kept in :attr:`JobSpec.step` so the CLI can say so.
``1234.0+1``  a het step (one step spanning het components; sacct prints ``<step>+<component>``):
               selects its job, as any step
``sBR1JB8J1YM400``  a SLUID (Slurm >= 25.11; ``sacct -o SLUID``, ``sacct --json`` ``.jobs[].sluid``,
               SLURM_JOB_SLUID), optionally with a step (``sBR1JB8J1YM400.batch``): one *run* of a
               job (a requeue gets a new one), matched against :attr:`JobRecord.sluid`
============  =================================================================================

Sources (SchedMD/slurm commit 284c3b95f0): the forms sacct prints are ``slurmdb_get_job_id_str``
(src/common/slurmdb_defs.c: ``J_T``, ``J_[..]``, ``J+O``, ``J``) followed for a step by ``.`` and
``log_build_step_id_str`` (src/common/log.c: ``batch``, ``extern``, ``interactive``, ``TBD`` or the
number, then ``+<step_het_comp>``); what ``sacct -j``/``squeue -j`` accept is ``unfmt_job_id_string``
(src/common/slurm_protocol_defs.c). The SLUID text form is src/common/sluid.c (``print_sluid``,
``str2sluid``): ``s`` and 13 Crockford base-32 digits of the 64-bit id, read case-insensitively with
``O`` as 0 and ``I``/``L`` as 1.

Requeued attempts and reused ids: a stored record is one *attempt* (key cluster, job_id,
start_time). Attempts of one job share the job id and have increasing ``restart_count``
(SLURM_JOB_RESTART_COUNT); a record whose restart_count does not increase over the previous one
(ordered by start time) starts a *new job* that reuses the id (Slurm wraps at MaxJobId, or the
controller state was reset). :func:`split_reused` implements this rule.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

_JOBID = re.compile(
    r"""^(?P<job>[0-9]+)
        (?:_(?P<task>[0-9]+|\[[0-9,:%\-]+\]) | \+(?P<het>[0-9]+))?
        (?:\.(?P<step>batch|extern|interactive|tbd|[0-9]+)(?:\+(?P<stephet>[0-9]+))?)?$""",
    re.X | re.I,
)

#: Crockford base 32 as Slurm writes it (src/common/sluid.c ``cb32map``)
CB32 = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_SLUID = re.compile(r"^[sS](?P<body>[0-9A-Za-z]{13})(?:\.(?P<step>batch|extern|interactive|tbd|[0-9]+))?$", re.I)


def sluid_value(text: str) -> int | None:
    """A SLUID's 64-bit value (``str2sluid``): ``s`` + 13 base-32 digits, any case, O = 0, I/L = 1;
    None for anything else (also for 0, which Slurm treats as no SLUID)."""
    if len(text) != 14 or text[0] not in "sS":
        return None
    v = 0
    for c in text[1:].upper():
        d = CB32.find({"O": "0", "I": "1", "L": "1"}.get(c, c))
        if d < 0:
            return None
        v = (v << 5) | d
    v &= (1 << 64) - 1  # 13 x 5 = 65 bits: the first digit's top bit falls off, as in C
    return v or None


def format_sluid(value: int) -> str:
    """``print_sluid``: ``s`` + 13 base-32 digits, most significant first (0xbc064b4483ea1000 ->
    ``sBR1JB8J1YM400``, Slurm's testsuite/slurm_unit/common/sluid-test.c)."""
    return "s" + "".join(CB32[(value >> (5 * i)) & 0x1F] for i in range(12, -1, -1))


def canonical_sluid(text: str) -> str:
    """The SLUID as Slurm prints it (``s1xhm8xwwdzcoo`` -> ``s1XHM8XWWDZC00``), '' if ``text`` is none."""
    v = sluid_value(str(text or "").strip())
    return "" if v is None else format_sluid(v)


@dataclass(frozen=True)
class JobSpec:
    """A parsed job id. ``job_id`` is the number before ``_``/``+``/``.``.

    ``array_tasks``: tuple of task ids (str) for ``X_T`` / ``X_[..]``, else None.
    ``het_offset``: component offset (str) for ``X+O``, else None.
    ``step``: ``"batch"``, ``"extern"``, ``"interactive"``, ``"TBD"``, ``"0"``, ... or None (energy is
    per job: informational); ``step_het_comp``: the ``+K`` of a het step (``1234.0+1``), else None.
    ``sluid``: the run's SLUID as Slurm prints it (``sBR1JB8J1YM400``) for that form, else ``""``
    (then ``job_id`` is ``""``).
    """

    raw: str
    job_id: str
    array_tasks: tuple[str, ...] | None = None
    het_offset: str | None = None
    step: str | None = None
    step_het_comp: str | None = None
    sluid: str = ""


def _expand_tasks(body: str, raw: str) -> tuple[str, ...]:
    """``1-3,7``, ``0-15:4`` (every 4th), ``1-10%2`` (squeue's throttle, ignored) -> task ids, as
    Slurm's ``slurm_parse_array_tok`` (src/common/slurm_protocol_defs.c) reads them."""
    out: list[str] = []
    for part in body.split(","):
        m = re.fullmatch(r"([0-9]+)(?:-([0-9]+)(?::([0-9]+))?)?(?:%[0-9]+)?", part)
        if not m:
            raise ValueError(f"job id {raw!r}: bad array task range {part!r}; write e.g. 715219_[1-3,7] or "
                             "715219_[0-15:4]")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) else lo
        step = int(m.group(3)) if m.group(3) else 1
        if hi < lo:
            raise ValueError(f"job id {raw!r}: array task range {part!r} runs backwards; write it low-high")
        if step < 1:
            raise ValueError(f"job id {raw!r}: array task step in {part!r} must be 1 or more")
        if hi - lo > 1_000_000:
            raise ValueError(f"job id {raw!r}: array task range {part!r} is larger than 1000000 tasks")
        out.extend(str(i) for i in range(lo, hi + 1, step))
    return tuple(dict.fromkeys(out))


def parse_jobid(s: str) -> JobSpec:
    """Parse one job id in any accepted form (see module docstring).

    Raises:
        ValueError: the text is not a job id; the message quotes it and lists the accepted forms.
    """
    raw = str(s).strip()
    if raw[:1] in ("s", "S"):
        sm = _SLUID.match(raw)
        sluid = canonical_sluid("s" + sm.group("body")) if sm else ""
        if sm is None or not sluid:
            raise ValueError(
                f"job id {s!r} is not a valid SLUID: a SLUID is 's' and 13 characters of "
                f"0-9 and {CB32[10:]} (e.g. sBR1JB8J1YM400, as sacct -o SLUID prints it), optionally "
                "with a step (.batch, .0)"
            )
        return JobSpec(raw=raw, job_id="", step=_step(sm.group("step")), sluid=sluid)
    m = _JOBID.match(raw)
    if not m or int(m.group("job")) == 0:
        raise ValueError(
            f"job id {s!r} is not valid: use a job id (715219), an array task (715219_23 or "
            "715219_[1-3]), a het job component (1234+0), optionally with a step (.batch, .extern, .0, "
            "a het step .0+1), or a SLUID (sBR1JB8J1YM400)"
        )
    if m.group("het") is not None and m.group("stephet") is not None:
        raise ValueError(f"job id {s!r}: a het job component ({m.group('job')}+{m.group('het')}) has no het "
                         f"steps; write {m.group('job')}+{m.group('het')}.{m.group('step')} or "
                         f"{m.group('job')}.{m.group('step')}+{m.group('stephet')}")
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
        step=_step(m.group("step")),
        step_het_comp=None if m.group("stephet") is None else str(int(m.group("stephet"))),
    )


def _step(text: str | None) -> str | None:
    """A step as Slurm prints it: ``batch``/``extern``/``interactive``/``TBD`` (names read in any case,
    as ``_unfmt_step_id_str``) or the number."""
    if text is None:
        return None
    low = text.lower()
    if low.isdigit():
        return str(int(low))
    return "TBD" if low == "tbd" else low


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
    * ``X+O``: ``het_job_id == X`` and ``het_job_offset == O``;
    * a SLUID: the record's ``sluid`` (one run; compared as Slurm prints it).
    The step never narrows the match (energy is per job allocation).
    """
    if spec.sluid:
        return canonical_sluid(getattr(record, "sluid", "")) == spec.sluid
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
