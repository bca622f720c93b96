"""Which records ``jobenergy`` shows, and in which order: ``-s/--state``, ``-S``/``-E`` checks, sorting.

Two kinds of state, both accepted by ``-s/--state`` (a record matches if it is in any listed state):

* Slurm job states, sacct's names and short forms, case-insensitive: ``CD``/``COMPLETED`` (exit 0),
  ``F``/``FAILED`` (non-zero exit), ``CA``/``CANCELLED`` (ended by a signal: scancel, time limit,
  OOM kill -- the Epilog sees only the exit code, so these cannot be told apart), ``R``/``RUNNING``
  (the job is still running = our measurement status ``running``). Source of the names: sacct(1),
  "JOB STATE CODES".
* our measurement statuses, lower case exactly: ``complete``, ``partial``, ``failed`` (the hooks
  failed, nothing to do with the job's exit), ``running``. Lower-case ``failed`` is this status;
  ``FAILED`` or ``F`` is the job state.
* the qualifiers a ``complete`` status shows (:func:`slurm_energy.core.status_text`): ``estimated``,
  ``partial-coverage`` (``-s estimated`` lists ``complete(estimated)`` and
  ``complete(partial-coverage,estimated)`` jobs; ``-s complete`` lists every complete job).

Order (sacct's: src/sacct/sacct.c ``get_data`` sorts slurmdbd's jobs with ``_sort_desc_submit_time``,
"so the last task of arrays don't appear to run before any of the other tasks": by submit time,
then array job id, array task id, job id): by cluster, then the array's job id (the id the array
got at submission; a plain job's own id, which Slurm hands out in submission order), then the
numeric array task id, then the raw job id -- 400_1, 400_2, 400_10, whatever raw ids the tasks got
(the last task to start keeps the array's id, 400) and whatever order ids were given in; a reused
job id's jobs newest first; a requeued job's attempts oldest first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, NamedTuple

from slurm_energy.core import ESTIMATED, PARTIAL_COVERAGE, Status, metered_rest, status_text
from slurm_energy.jobid import split_reused

if TYPE_CHECKING:  # records or the store's summary rows (store.select.JobRow): same attribute names
    from slurm_energy.model import JobRecord

#: Our measurement statuses (JobRecord.status), matched in lower case exactly.
STATUSES = tuple(s.value for s in Status)

#: sacct job state short forms -> the long name (sacct(1) "JOB STATE CODES"). The finalizer records
#: slurmctld's final state (scontrol), else one derived from the Epilog's exit code.
JOB_STATES = {"CD": "COMPLETED", "F": "FAILED", "CA": "CANCELLED", "R": "RUNNING", "TO": "TIMEOUT",
              "OOM": "OUT_OF_MEMORY", "NF": "NODE_FAIL", "PR": "PREEMPTED", "BF": "BOOT_FAIL",
              "DL": "DEADLINE", "RQ": "REQUEUED"}

#: sacct states a finished job's record never has (it is stored once the job has ended).
UNTELLABLE = {"PD": "PENDING", "RS": "RESIZING", "RV": "REVOKED", "S": "SUSPENDED", "CG": "COMPLETING"}

STATE_HELP = (
    "comma-separated states; a job in any of them is shown. Slurm job states (sacct's, any case): "
    "CD|COMPLETED, F|FAILED, CA|CANCELLED, TO|TIMEOUT, OOM|OUT_OF_MEMORY, NF|NODE_FAIL, "
    "PR|PREEMPTED, RQ|REQUEUED (an earlier attempt of a requeued job), R|RUNNING (still running); "
    "from slurmctld when the job ended, else from its exit code. Our measurement statuses (lower case): complete "
    "(every node measured), partial (a node never reported or a sampler died), failed (the energy "
    "hooks failed; not the job's exit: use F/FAILED for that), running (energy so far), no_data (the job ran "
    "but nothing was measured: no sampler or an unusable spool; the record's errors say why); and the "
    "qualifiers of complete: estimated (complete(estimated): every class from the TDP model), "
    "partial-coverage (complete(partial-coverage))"
)

#: Qualifiers of ``complete`` accepted by ``-s`` (lower case exactly): a job whose Status shows it
#: (:func:`slurm_energy.core.status_text`) matches.
QUALIFIERS = (ESTIMATED, PARTIAL_COVERAGE)


class StateFilter(NamedTuple):
    """Parsed ``-s``: measurement statuses (``Status`` values) and Slurm job states (long names)."""

    statuses: frozenset[str]
    job_states: frozenset[str]
    qualifiers: frozenset[str] = frozenset()  # "estimated", "partial-coverage" (of a complete status)

    def __bool__(self) -> bool:
        return bool(self.statuses or self.job_states or self.qualifiers)


def parse_states(tokens: Iterable[str]) -> StateFilter:
    """``["F", "complete"]`` -> StateFilter(statuses={"complete"}, job_states={"FAILED"}).

    Raises:
        ValueError: an unknown state (names it and lists the accepted ones), or a Slurm state that
            the Epilog's exit code cannot reveal (``TIMEOUT``: says what it shows as instead).
    """
    statuses, job_states, quals = set(), set(), set()
    for raw in tokens:
        t = raw.strip()
        if t in STATUSES:
            statuses.add(t)
            continue
        if t in QUALIFIERS:
            quals.add(t)
            continue
        up = t.upper()
        long = JOB_STATES.get(up, up)
        if long in JOB_STATES.values():
            if long == "RUNNING":
                statuses.add(Status.RUNNING.value)
            else:
                job_states.add(long)
            continue
        if up in UNTELLABLE or up in UNTELLABLE.values():
            raise ValueError(
                f"--state: {t!r} ({UNTELLABLE.get(up, up)}) is never a stored job's state: records are "
                "stored once a job has ended (a running job shows as R/RUNNING). Use CD, F, CA, TO, OOM, "
                "NF, PR, RQ, R or complete, partial, failed, running"
            )
        raise ValueError(
            f"--state: unknown state {t!r}; use Slurm job states CD|COMPLETED, F|FAILED, CA|CANCELLED, "
            f"TO|TIMEOUT, OOM|OUT_OF_MEMORY, NF|NODE_FAIL, PR|PREEMPTED, RQ|REQUEUED, R|RUNNING "
            f"or measurement statuses {', '.join(STATUSES)} and {', '.join(QUALIFIERS)} (see --help)"
        )
    return StateFilter(frozenset(statuses), frozenset(job_states), frozenset(quals))


def job_state(rec: JobRecord) -> str:
    """Slurm-like job state of a record: ``COMPLETED``/``FAILED``/``CANCELLED`` (stored, else derived
    from ``exit_code`` for records stored before ``job_state`` existed), ``RUNNING`` while the
    job runs, ``UNKNOWN`` when the Epilog gave no exit code."""
    if Status(rec.status) == Status.RUNNING:
        return "RUNNING"
    if rec.job_state:
        return rec.job_state
    from slurm_energy.model import job_state_from_exit_code

    return job_state_from_exit_code(rec.exit_code) or "UNKNOWN"


def state_matches(rec: JobRecord, flt: StateFilter) -> bool:
    """True if ``rec`` is in any state of ``flt`` (an empty filter matches everything)."""
    if not flt:
        return True
    if Status(rec.status).value in flt.statuses or job_state(rec) in flt.job_states:
        return True
    if not flt.qualifiers:
        return False
    shown = status_text(rec.status, rec.coverage_complete, rec.methods, rec.energy_it_j, metered_rest(rec))
    return any(q in shown.partition("(")[2].rstrip(")").split(",") for q in flt.qualifiers)


def check_window(start: float | None, end: float | None, start_text: str, end_text: str,
                 fmt: Callable[[float], str]) -> None:
    """Refuse a ``-S`` after ``-E`` (epoch s; either may be None).

    ``start_text``/``end_text``: what the user typed (or ``"midnight (default)"``); ``fmt`` turns
    epoch s into the printed time. Raises ValueError naming both options, values and the fix.
    """
    if start is None or end is None or start <= end:
        return
    raise ValueError(
        f"-S/--starttime {start_text} ({fmt(start)}) is after -E/--endtime {end_text} ({fmt(end)}): "
        "nothing can run in that window. Give an -S before the -E (e.g. -S "
        f"{fmt(end - 86400)[:10]}), or a later -E"
    )


def _num(text: object) -> tuple[int, int, str]:
    s = str(text or "")
    return (0, int(s), "") if s.isdigit() else (1, 0, s)


def ordered_jobs(records: list[JobRecord]) -> list[list[JobRecord]]:
    """Group attempts into jobs and put them in sacct's order (see module docstring).

    Returns a list of jobs, each its attempts oldest first (a reused id gives several jobs).
    """
    groups: dict[tuple[str, str], list[JobRecord]] = {}
    for r in records:
        groups.setdefault((r.cluster, r.job_id), []).append(r)
    out: list[list[JobRecord]] = []

    def sacct_key(k: tuple[str, str]) -> tuple[str, tuple[int, int, str], tuple[int, int, str], tuple[int, int, str]]:
        r = groups[k][0]
        return (k[0], _num(r.array_job_id or k[1]), _num(r.array_task_id or ""), _num(k[1]))

    for key in sorted(groups, key=sacct_key):
        out.extend(reversed(split_reused(groups[key])))  # newest job first, as sacct
    return out
