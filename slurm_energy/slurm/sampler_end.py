"""How a node's sampler ended, read from its rows and what the Epilog saw: the finalizer's one
place for it (:func:`classify_end`, :func:`measured_to_the_end`).

A sampler that stopped before the Epilog: its ``final`` row is not the job's end.

The sampler writes a ``final`` row whenever a stop signal arrives (TERM, INT, HUP). Only the
Epilog's TERM comes after the job ended; a TERM from anyone else (``kill``/``pkill``, an admin's
clean-up, a node agent) stops it mid-job, and reading that row as the job's end would hold the
job's CPU time flat until the Epilog: under-counted energy with full coverage and no flag.

How the finalizer tells the two apart: the Epilog notes its time (``t_end``) *before* it signals
the sampler, so the sampler's ``final`` row in answer to it is written after ``t_end``; a ``final``
row written before ``t_end`` ended the sampler early -- unless the sampler had already seen the
job end by itself (a ``cgroup_gone`` row before it: cgroup v2 ``populated 0``, the job's cgroup or
PIDs gone). Such a row is relabelled :data:`STOPPED_EARLY`, which marks no end: the stretch after
it is the job's unobserved tail, charged from Slurm's TotalCPU where known, else estimated
(flagged), else left unknown (:func:`slurm_energy.accounting.node_series.fill_cpu_tail`).

The sampler leaves the signal that stopped it in ``sampler-stop-<node>.json`` (written after its
last row, off the hooks' path), so the record can say what stopped it.
"""

from __future__ import annotations

import json
import signal
import time
from typing import TYPE_CHECKING

from slurm_energy.slurm.attempt import CLEAN_SAMPLER_ENDS, NOT_STOPPED, Attempt, SamplerEnd

if TYPE_CHECKING:
    from slurm_energy.sampling.sampletable import SampleTable

#: the kind a ``final`` row written before the Epilog gets: the sampler stopped, the job did not
#: (also the sampler's end the record takes then)
STOPPED_EARLY = SamplerEnd.STOPPED_EARLY.value
#: the spool file (``<kind>-<node>.json``) with the signal that stopped the sampler
STOP_FILE = "sampler-stop"


def record_stop(spool: Attempt, signum: int | None) -> None:
    """Leave the signal that stopped the sampler (None: it stopped without one) in the spool.
    Never raises: a spool that cannot take it costs only the signal's name in the record."""
    from slurm_energy.slurm.attempt import write_private

    try:
        write_private(spool.path(STOP_FILE), json.dumps({"t": time.time(), "signal": signum}))
    except OSError:
        pass


def signal_name(spool: Attempt) -> str:
    """The name of the signal that stopped the sampler (``SIGTERM``), '' when unknown."""
    from slurm_energy.slurm.attempt import read_json

    n = read_json(spool.path(STOP_FILE)).get("signal")
    try:
        return signal.Signals(int(n)).name if n is not None else ""
    except (ValueError, TypeError):
        return ""


def check_early_stop(rows: SampleTable, epilog_t: float, spool: Attempt, errors: list[str]) -> bool:
    """Relabel the sampler's ``final`` row :data:`STOPPED_EARLY` (in place) when it was written
    before the Epilog began (``epilog_t``, epoch s) and no ``cgroup_gone`` row precedes it, and add
    the record's error (with the signal from the spool) to ``errors``. Returns whether it did."""
    for i in sorted(range(len(rows)), key=rows.t.__getitem__):
        if rows.kind[i] == "cgroup_gone":
            return False  # the sampler saw the job end: what follows is after the job
        if rows.kind[i] == "final":
            if rows.t[i] >= epilog_t:
                return False
            rows.kind[i] = STOPPED_EARLY
            sig = signal_name(spool)
            errors.append(f"sampler stopped early{f' by {sig}' if sig else ''}, {epilog_t - rows.t[i]:.1f} s before "
                          "the Epilog, not by it (a signal from elsewhere: kill/pkill, an admin or node agent); the "
                          "job's CPU time after its last row is charged from Slurm's TotalCPU where known, else "
                          "estimated (flag tail_*), its memory there is unknown")
            return True
    return False


def check_vanished(rows: SampleTable, epilog_t: float, sampler_outcome: SamplerEnd, errors: list[str]) -> bool:
    """A sampler the Epilog found already gone (``not_running``/``no_pidfile``) without a ``final``
    or ``cgroup_gone`` row was killed (SIGKILL, the OOM killer) or crashed: adds an error saying so
    and how long before the Epilog (``epilog_t``, epoch s) its last row was. Returns whether it did.
    The rows keep their kinds: the stretch after the last row is already the job's unobserved tail."""
    if sampler_outcome not in NOT_STOPPED:
        return False
    own = [t for t, k in zip(rows.t, rows.kind) if k not in ("prolog", "epilog")]
    if not own or any(k in ("final", "cgroup_gone", STOPPED_EARLY) for k in rows.kind):
        return False
    gap = epilog_t - max(own)
    errors.append(f"sampler gone without a final sample (killed: SIGKILL, the OOM killer; or crashed: see the "
                  f"sampler log), its last row {gap:.1f} s before the Epilog; the job's CPU time after it is "
                  "charged from Slurm's TotalCPU where known, else estimated (flag tail_*), its memory there is unknown")
    return True


def until_job_gone(rows: SampleTable) -> SampleTable:
    """A sampler that ended by itself (no Epilog) went on sampling the node for
    ``sampling.epilog_wait_s`` after the job had gone: those rows are not the job's. Returns the
    rows up to its ``cgroup_gone`` sample (the job's last usage), or all of them when it never saw
    the job (then nothing says when the job ended better than the rows themselves)."""
    if "cgroup_gone" in rows.kind:
        return rows.head(rows.kind.index("cgroup_gone") + 1)
    return rows


def measured_to_the_end(rows: SampleTable, sampler_outcome: SamplerEnd, errors: list[str]) -> bool:
    """True when the rows cover the job to its end. A sampler the Epilog killed (TERM unanswered for
    1 s) after its ``cgroup_gone`` row lost nothing: that row has the job's last usage and the
    counters at its end, the job's CPU time is carried forward after it (no tail to estimate),
    and the finalizer's reading closes the counters: complete (noted). Killed before it saw the
    end, the job's last stretch is estimated (TotalCPU or ``tail_estimated``): partial."""
    if sampler_outcome in CLEAN_SAMPLER_ENDS:
        return True
    if sampler_outcome == SamplerEnd.KILLED and "cgroup_gone" in rows.kind:
        errors.append("the killed sampler had seen the job end (its cgroup_gone row: the job's last usage and the "
                      "node's counters at its end): nothing of the job was lost, the node's record is complete")
        return True
    return False


def classify_end(rows: SampleTable, epilog_t: float, sampler_outcome: SamplerEnd, spool: Attempt,
                 errors: list[str]) -> tuple[SampleTable, SamplerEnd]:
    """The rows to summarise and the sampler's outcome as the record takes it: after a sampler
    that ended by itself (``epilog_missing``) the rows up to the job's end (:func:`until_job_gone`);
    a ``final`` row written before the Epilog is an early stop (:func:`check_early_stop`, outcome
    ``stopped_early``); a sampler gone without a final row is said so (:func:`check_vanished`).
    ``epilog_t``: the Epilog's start, epoch s. Appends the record's errors to ``errors``."""
    if sampler_outcome == SamplerEnd.EPILOG_MISSING:
        return until_job_gone(rows), sampler_outcome
    if check_early_stop(rows, epilog_t, spool, errors):  # its `final` row is not the job's end
        return rows, SamplerEnd.STOPPED_EARLY
    check_vanished(rows, epilog_t, sampler_outcome, errors)  # killed or crashed: say when
    return rows, sampler_outcome
