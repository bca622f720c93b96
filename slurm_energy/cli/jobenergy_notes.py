"""``jobenergy``'s one-line explanations on stderr: a job id with no record, a query that found no
job, and records left ``running`` that have not been updated for a long time.

Never on stdout (the table and ``-p``/``--json`` output keep their shape) and never by asking Slurm:
a ``running`` record is only judged by its own last update (``end_time``, the sampler's last interim
flush), so ``jobenergy`` stays one store query (no ``sacct`` per call).

Stale rule: a record still ``running`` whose last update is older than :data:`STALE_INTERIMS` x
``sampling.interim_s`` (default 10 x 60 s = 10 min) belongs to a job whose sampler stopped writing:
the job has almost certainly ended (or its node died) and the finalizer's record never replaced the
interim one. ``slurm-energy collect`` (run by the installed timer every 5 min) finalises it; the
note says so. The same bound (10 interim periods) is what the Prometheus exporter drops a running
entry after (:mod:`slurm_energy.outputs.prometheus`).
"""

from __future__ import annotations

from typing import Callable, Iterable

from slurm_energy.core import Status
from slurm_energy.jobid import display_id, matches

#: A running record not updated for this many interim periods is reported as probably ended.
STALE_INTERIMS = 10

#: At most this many job ids are named in one note; the rest are counted.
MAX_NAMED = 5


def _names(ids: list[str]) -> str:
    shown = ", ".join(ids[:MAX_NAMED])
    return shown + (f" and {len(ids) - MAX_NAMED} more" if len(ids) > MAX_NAMED else "")


def not_recorded_why(privileged: bool, interim_s: float) -> str:
    """Why a job may have no record: the sentence after a 'not in the store' message. For an
    ordinary user it starts with "another user's job": the store query only returns their own jobs,
    so the message cannot (and must not) say whether the job exists."""
    why = (f"pending, started under {interim_s:g} s ago, or ended and was not collected (admins: "
           "slurm-energy collect)")
    if privileged:
        return f"No record yet if it is {why}"
    return f"It may be another user's job, which you cannot see, or one not recorded yet: {why}"


def missing_ids(specs: list, records: list, filtered: bool, among: str, where: str, privileged: bool,
                interim_s: float) -> list[str]:
    """One message per requested job id (``specs``, :func:`slurm_energy.jobid.parse_jobids`) that no
    record matches. Root and admins: ``job ID: not in the store[ in the given -S/-E window or -s
    states]: WHERE. <why>``; an ordinary user (``among``: `` among U's jobs``): ``job ID: no record
    among U's jobs[...]: WHERE. It may be another user's job, which you cannot see, or ...`` -- never
    "not in the store", which would tell them that another user's job does not exist.
    ``filtered``: -S/-E/-s were given (then the advice is to drop them)."""
    out = []
    for spec in specs:
        if any(matches(spec, r) for r in records):
            continue
        cond = " in the given -S/-E window or -s states" if filtered else ""
        if filtered:
            why = "Try it without -S/-E/-s" + ("" if privileged else "; it may also be another user's job, "
                                                                     "which you cannot see")
        else:
            why = not_recorded_why(privileged, interim_s)
        head = "not in the store" if privileged or not among else f"no record{among}"
        out.append(f"job {spec.raw}: {head}{cond}: {where}. {why}")
    return out


def nothing_found(*, window: str, users: list[str], accounts: list[str], partitions: list[str],
                  states: list[str], where: str, privileged: bool, default_window: bool, example_day: str) -> str:
    """The line for a query without job ids that selected no job: what was asked (``window`` as
    ``running between A and B``), the store, and what to try. ``example_day``: a date for the ``-S``
    hint (the day before the window)."""
    parts = [window]
    if users:
        parts.append(f"of user {','.join(users)}" + ("" if privileged else " (you see only your own jobs)"))
    parts += [f"in account {','.join(accounts)}"] if accounts else []
    parts += [f"in partition {','.join(partitions)}"] if partitions else []
    parts += [f"in state {','.join(states)}"] if states else []
    hint = (f". Without -j the window is today from midnight (as sacct): give -S for older jobs, e.g. -S {example_day}"
            if default_window else "")
    return f"no jobs {' '.join(p for p in parts if p)} in the store: {where}{hint}"


def stale_running(records: Iterable, now: float, interim_s: float, fmt_time: Callable[[float], str],
                  fmt_elapsed: Callable[[float], str]) -> list[str]:
    """A note for records still ``running`` whose last update (``end_time``, epoch s) is more than
    :data:`STALE_INTERIMS` x ``interim_s`` before ``now`` (empty list when none); one line for all."""
    stale = [r for r in records if Status(r.status) == Status.RUNNING
             and now - r.end_time > STALE_INTERIMS * interim_s]
    if not stale:
        return []
    ids = list(dict.fromkeys(display_id(r) for r in stale))
    oldest = min(r.end_time for r in stale)
    limit = f"{STALE_INTERIMS} x {interim_s:g} s, sampling.interim_s"
    if len(ids) == 1:
        head = (f"note: job {ids[0]}: its record says running but was last updated {fmt_time(oldest)}, "
                f"{fmt_elapsed(now - oldest)} ago (a running job's is updated every {interim_s:g} s; stale after "
                f"{limit}): ended per Slurm? (sacct -j {ids[0]}) Its energy is shown up to then")
    else:
        head = (f"note: jobs {_names(ids)}: their records say running but were last updated over "
                f"{fmt_elapsed(STALE_INTERIMS * interim_s)} ago (oldest {fmt_time(oldest)}; stale after {limit}): "
                f"ended per Slurm? (sacct -j {','.join(ids[:MAX_NAMED])}) Their energy is shown up to then")
    return [head + f"; admins: run slurm-energy collect to finalise {'it' if len(ids) == 1 else 'them'}"]
