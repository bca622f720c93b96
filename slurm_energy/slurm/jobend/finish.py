"""The one finisher of a node's job attempt: :func:`finish`.

Whatever found the attempt ended -- the node's finalizer queue, a finalizer for one job, the
sampler that saw no Epilog, the node finalizer's sweep, ``slurm-energy collect``, or an Epilog with
no usable spool -- the same sequence runs, and only the :class:`Trigger` differs (written on the
record when it is a recovery, and how long a stray sampler is waited for):

1. stop a sampler that outlived its job (recovery only: the Epilog stopped it otherwise), checked;
2. record why the attempt is finished this way (no Epilog, a killed finalizer, a sampler that did
   not end on the Epilog's TERM);
3. take the last counter reading when the sampler did not write its own;
4. build this node's record (:func:`slurm_energy.slurm.jobend.node_record.node_record`);
5. write it to the results directory and, when every node has reported, merge and publish the
   job's record (:func:`slurm_energy.slurm.jobend.publish.finish_node`: ``publish_final``);
6. mark the attempt FINALIZED (:meth:`~slurm_energy.slurm.attempt.Attempt.mark_finalized`), or,
   without a spool, remove its entry.

What must wait for the caller's finalizer slot to be free (the user's report writer, a marker the
spool had no room for) goes into an :class:`AfterSlot`.
"""

from __future__ import annotations

import enum
import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from slurm_energy.slurm.attempt import Attempt, SamplerEnd, no_spool_entry, read_json

if TYPE_CHECKING:
    from slurm_energy.config import SiteConfig
    from slurm_energy.model import JobRecord
    from slurm_energy.slurm.context import JobContext
    from slurm_energy.slurm.jobend.publish import MarkerPending
    from slurm_energy.slurm.processes import SamplerStop

log = logging.getLogger("slurm_energy.finalize")


class Trigger(str, enum.Enum):
    """What found the attempt ended and hands it to :func:`finish`."""

    QUEUE = "queue"  #: the node's finalizer queue (the Epilog, or the sampler without one, queued it)
    SINGLE = "single"  #: a finalizer for this job alone (its queue entry could not be written)
    NO_EPILOG = "no_epilog"  #: the sampler saw the job end and no Epilog came (through the queue)
    SWEEP = "sweep"  #: the node finalizer's 30 s sweep found the attempt left over
    COLLECT = "collect"  #: ``slurm-energy collect`` found the attempt left over
    NO_SPOOL = "no_spool"  #: the node had no usable spool: the job's context came from the Epilog

    def __str__(self) -> str:
        return str(self.value)

    @property
    def recovery(self) -> bool:
        """True when the attempt's own finalizer never finished it (killed or never started)."""
        return self in (Trigger.SWEEP, Trigger.COLLECT)

    @property
    def by(self) -> str:
        """Who finished it, as the record's errors say."""
        return {Trigger.SWEEP: "the node finalizer's sweep", Trigger.COLLECT: "slurm-energy collect"}.get(
            self, "the node's finalizer")


class AfterSlot:
    """What the caller runs once its finalizer slot is free: the user's report writers (bounded,
    killable: :func:`slurm_energy.slurm.jobend.queue.run_reports`) and the FINALIZED markers the
    spool had no room for (:class:`~slurm_energy.slurm.jobend.publish.MarkerPending`, retried)."""

    def __init__(self) -> None:
        self.reports: list[Callable[[], object]] = []
        self.markers: list[MarkerPending] = []


#: How long (s) a recovery waits for a sampler that outlived its job to stop on TERM, then on KILL
#: (the Epilog's own waits are 1.0 and 0.2 s: its 2 s budget)
STRAY_SAMPLER_WAITS = (5.0, 1.0)


def stop_stray_sampler(attempt: Attempt, waits: tuple[float, float] = STRAY_SAMPLER_WAITS) -> SamplerStop:
    """Stop the sampler of an attempt whose job has ended (the Epilog never stopped it): the
    checked stop (:func:`slurm_energy.slurm.processes.stop_sampler`: its pidfile's PID only if
    that is our sampler of this attempt, else found in /proc), with ``waits`` (TERM, KILL) s."""
    from slurm_energy.slurm.processes import stop_sampler

    return stop_sampler(attempt, term_wait_s=waits[0], kill_wait_s=waits[1])


def _record_why(cfg: SiteConfig, attempt: Attempt, ctx: JobContext, trigger: Trigger, sampler: SamplerEnd,
                note: Callable[[str], None]) -> None:
    """Steps 1-3: a recovery stops a sampler that outlived its job and says why the attempt is
    finished so; the sampler's own end is noted, with the last reading where it wrote none."""
    from slurm_energy.slurm.jobend.node_record import last_reading

    # 1-2. a recovery: the sampler may have outlived its job; say why the attempt is finished so
    if trigger.recovery:
        if stop_stray_sampler(attempt).was_running:
            log.info("%s: stopped the sampler of ended job %s", trigger.by, ctx.job_id)
        if not attempt.epilog():
            note("no Epilog ran for this attempt on this node (or it could not write its spool); "
                 f"finished by {trigger.by}")
        note(f"finalizer did not finish (killed or never started); finished by {trigger.by}")
    elif sampler == SamplerEnd.EPILOG_MISSING:  # its own last sample closes the job: no late reading
        note(f"epilog: none finished on {attempt.node} within sampling.epilog_wait_s of the job's end "
             "(killed by its time guard, or slurmd restarted); the sampler saw the job end, "
             "took its last sample and started this finalizer")
    elif sampler != SamplerEnd.TERMINATED and attempt.has_spool:  # 3. as close to the Epilog as can be
        failed = last_reading(cfg, attempt, ctx)
        what = (f"sampler {sampler}" if sampler != SamplerEnd.KILLED else
                "the sampler did not stop within 1 s of the Epilog's TERM; killed")
        note(f"epilog: {what}; " + (
            f"no reading could be taken after the Epilog ({failed}): the rows written before it, if any, "
            "are used" if failed else "the rows written before the Epilog, if any, and a reading taken after "
            "it are used"))


def finish(cfg: SiteConfig, attempt: Attempt, ctx: JobContext, trigger: Trigger, *, end_time: float,
           exit_code: str, sampler: SamplerEnd, facts: dict[str, object] | None = None, ask_slurm: bool = True,
           after: AfterSlot | None = None, errors: Sequence[str] = ()) -> JobRecord | None:
    """Finish one node's job attempt (the module's sequence). Returns the job's published record,
    or None while other nodes are still to report. Raises what publishing raises (the attempt is
    then not FINALIZED: a later trigger finishes it again, idempotently).

    ``sampler``: how its sampler ended, as the Epilog saw it (:class:`SamplerEnd`); ``facts``:
    Slurm's facts of the job when the caller has them (recovery asked Slurm whether it ended),
    else asked here (``ask_slurm``); ``errors``: the caller's messages for the record (a config
    problem, why no spool was usable)."""
    from slurm_energy.accounting.merge import combine_errors
    from slurm_energy.sampling.marks import remove_marks
    from slurm_energy.slurm.jobend.jobfacts import slurm_facts
    from slurm_energy.slurm.jobend.node_record import node_record
    from slurm_energy.slurm.jobend.publish import MarkerPending, finish_node, report_umask

    note = attempt.record_error if attempt.has_spool else (lambda _m: None)
    problems = list(errors)
    if attempt.has_spool:
        for e in problems:
            note(e)
    _record_why(cfg, attempt, ctx, trigger, sampler, note)
    if facts is None and ask_slurm:
        facts = slurm_facts(ctx, note if attempt.has_spool else problems.append)  # off the hooks' path
    # 4. the node's record
    rec = node_record(cfg, attempt, ctx, end_time, exit_code, slurm_facts=facts, sampler_outcome=sampler)
    umask = None
    if attempt.has_spool:
        umask, why = report_umask(read_json(attempt.jobenv))
        if why:
            rec.errors.append(why)
    else:
        rec.errors = combine_errors(problems, rec.errors)
        rec.nodes[0].errors = list(rec.errors)
        end = facts.get("end_time") if facts else None
        if isinstance(end, (int, float)) and end:
            rec.end_time = rec.nodes[0].end_time = max(rec.start_time, float(end))
    # 5. results, merge, publish
    out = finish_node(cfg, rec, ctx, umask=umask, deferred=after.reports if after is not None else None)
    remove_marks(ctx.job_id, ctx.node)  # read into this node's record: no longer needed
    # 6. FINALIZED
    if not attempt.has_spool:
        try:
            os.unlink(no_spool_entry(cfg.paths.log_dir, ctx.job_id, ctx.restart_count, ctx.node))
        except OSError:
            pass
        return out
    try:
        attempt.mark_finalized(time.time())
    except OSError as e:  # read-only or full spool: collect would finish it again (idempotent)
        log.warning("job=%s: %s not written: %s", ctx.job_id, attempt.finalized, e)
        if after is not None:  # the caller retries once its slot is free (MARKER_RETRY_S)
            after.markers.append(MarkerPending(attempt.finalized))
    return out


def finalize_main(job_dir: str, node: str, end_time: float, exit_code: str = "",
                  sampler_outcome: SamplerEnd = SamplerEnd.TERMINATED, deferred: AfterSlot | None = None,
                  logging_ready: bool = False, trigger: Trigger | None = None) -> int:
    """Entry point of the detached finalizer, for one job attempt on one node (the node's queue
    runner, :mod:`slurm_energy.slurm.jobend.queue`, calls it for each job it takes; a finalizer
    for one job, ``SINGLE``): loads the site config, then :func:`~slurm_energy.slurm.jobend.finish.finish`.
    Returns 0; failures are logged and on the record. ``logging_ready``: the caller has set up the log.

    ``deferred``: where the user's report writing and a marker the spool had no room for are left
    for the caller, to run once it has released its finalizer slot (the job's user can stop or hang
    that writer, which then must not delay other users' jobs); None: written here."""
    from slurm_energy.slurm.config_cache import load_config
    from slurm_energy.slurm.log import setup_logging
    from slurm_energy.slurm.node_reading import spool_from_dir

    errors: list[str] = []
    cfg = load_config(errors)  # per job: site.yaml may have changed since the runner's previous one
    if not logging_ready:
        setup_logging(cfg.paths.log_dir, "finalize.log")
    spool, ctx = spool_from_dir(job_dir, node)
    if trigger is None:
        trigger = Trigger.NO_EPILOG if sampler_outcome == SamplerEnd.EPILOG_MISSING else Trigger.QUEUE
    try:
        finish(cfg, spool, ctx, trigger, end_time=end_time, exit_code=exit_code, sampler=sampler_outcome,
               after=deferred, errors=errors)
    except Exception as e:
        from slurm_energy.textsafe import one_line

        log.exception("finalize job=%s node=%s failed", one_line(ctx.job_id), one_line(node))
        spool.record_error(f"finalize: {type(e).__name__}: {e}")
    finally:
        from slurm_energy.sampling.marks import remove_marks

        remove_marks(ctx.job_id, ctx.node)  # whatever happened: a user's marks never outlive the job
    return 0


def finalize_env_main(ctx_json: str, end_time: float, exit_code: str, sampler_outcome: SamplerEnd,
                      errors: list[str], logging_ready: bool = False) -> int:
    """The finalizer of a job whose node had no usable spool (both spools full or read-only):
    ``finalize-env CONTEXT_JSON T EXIT OUTCOME ERRORS_JSON``, the job's context parsed from the
    Epilog's environment, nothing read from disk (:meth:`Attempt.without_spool
    <slurm_energy.slurm.attempt.Attempt.without_spool>`): :func:`~slurm_energy.slurm.jobend.finish.finish`
    with trigger ``NO_SPOOL``. Asks slurmctld for the job's state and times and stores a ``no_data``
    record saying why nothing was measured (if ``collect`` later finds the node's spool files after
    all, the measured record replaces it). Returns 0.

    ``errors``: why each spool was unusable (the Epilog's messages), put on the record. Removes the
    job's :data:`~slurm_energy.slurm.attempt.NO_SPOOL_JOBS` entry once done (a killed one leaves it for
    the node finalizer's sweep). ``logging_ready``: the caller has set up the log."""
    from slurm_energy.slurm.config_cache import load_config
    from slurm_energy.slurm.context import JobContext
    from slurm_energy.slurm.log import setup_logging

    problems: list[str] = []
    cfg = load_config(problems)
    if not logging_ready:
        setup_logging(cfg.paths.log_dir, "finalize.log")
    ctx = JobContext.from_json(ctx_json)
    reason = ("no usable spool on this node: " + "; ".join(str(e) for e in errors) + "; free space in "
              f"{cfg.paths.spool_dir} (or make it writable) and check {cfg.paths.spool_fallback_dir}")
    try:
        rec = finish(cfg, Attempt.without_spool(ctx), ctx, Trigger.NO_SPOOL, end_time=end_time, exit_code=exit_code,
                     sampler=sampler_outcome, errors=[reason, *problems])
        if rec is None:  # its node record is waiting for the other nodes' in results
            log.info("job=%s node=%s: node record left without a spool", ctx.job_id, ctx.node)
        else:
            log.info("job=%s node=%s: stored without a spool (status %s)", ctx.job_id, ctx.node, rec.status.value)
    except Exception:
        log.exception("finalize-env job=%s node=%s failed", ctx.job_id, ctx.node)
        try:  # failed in a way a second run would repeat (logged): not run again
            os.unlink(no_spool_entry(cfg.paths.log_dir, ctx.job_id, ctx.restart_count, ctx.node))
        except OSError:
            pass
    return 0
