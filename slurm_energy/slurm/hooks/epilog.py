"""The Epilog (:mod:`slurm_energy.slurm.hooks`): stop the job's sampler, hand the job to its finalizer."""

from __future__ import annotations

import json
import os
import time

from slurm_energy.slurm import detach
from slurm_energy.slurm.attempt import Attempt, leave_no_spool_entry, usable_spool
from slurm_energy.slurm.detach import JOBEND_MODULE
from slurm_energy.slurm.hooks import begin, log_hook_time
from slurm_energy.slurm.log import get
from slurm_energy.slurm.processes import stop_sampler

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from collections.abc import Mapping

    from slurm_energy.slurm.context import JobFacts

__all__ = ["epilog"]

log = get(__name__)


def epilog(env: Mapping[str, str] | None = None) -> int:
    """The Epilog. Always returns 0."""
    t_end = time.time()
    errors: list[str] = []
    spool: Attempt | None = None
    ctx: JobFacts | None = None
    outcome = "failed"
    try:
        cfg, ctx = begin(env, errors)
        spool = usable_spool(cfg, ctx, errors, epilog=True)
        if spool is None:  # no spool at all: the finalizer gets the job from argv, needs no disk
            outcome = "no_spool"
            sampler = stop_sampler(f"{ctx.job_id}-r{ctx.restart_count}", ctx.node).outcome
            args = [ctx.to_json(), repr(t_end), ctx.exit_code or "", str(sampler), json.dumps(errors)]
            try:  # its finalizer may be killed: the node finalizer's sweep runs it again from this
                leave_no_spool_entry(cfg.paths.log_dir, ctx.job_id, ctx.restart_count, ctx.node, args)
            except OSError as err:
                log("WARNING", f"job {ctx.job_id}: no entry in {cfg.paths.log_dir} for its finalizer ({err})")
            detach.spawn(["-m", JOBEND_MODULE, "finalize-env", f"{ctx.job_id}@{ctx.node}"],  # all ps shows
                  os.path.join(cfg.paths.log_dir, "finalize.log"), cfg.paths.log_dir, nice=detach.FINALIZER_NICE,
                  private={detach.FINALIZE_ENV_VAR: json.dumps(args)})  # the job's context: not in argv
            log("ERROR", f"epilog job={ctx.job_id} node={ctx.node}: no usable spool ({'; '.join(errors)}); "
                         "finalizer started from the environment")
            return 0
        for e in errors:
            spool.record_error(e)
        if spool.epilog_done():  # Slurm < 26.05 can run the Epilog twice for one run
            log("INFO", f"epilog job={ctx.job_id} node={ctx.node}: this run's Epilog already ran; repeated Epilog ignored")
            return 0
        if not spool.has_prolog():  # the Prolog failed or never ran: record from our env
            spool.record_error("epilog: no Prolog context (Prolog failed or was not configured); "
                               "nothing was sampled on this node")
        outcome = stop_sampler(spool).outcome
        if outcome == "not_running" and getattr(cfg.sampling, "sampler", "job") == "node":
            from slurm_energy.slurm import sampler_join  # the node sampler died: again, for the other jobs

            log_dir = cfg.paths.log_dir
            sampler_join.restart_for_others(spool.dir, spool.spool_dir, spool.node, lambda argv, logf: detach.spawn(
                argv, logf, log_dir, nice=detach.SAMPLER_NICE))
        detach.hand_over(spool, t_end, ctx.exit_code or "", outcome, cfg.paths.log_dir)
        try:
            spool.mark_epilog(t_end, outcome, ctx.exit_code or "")
        except OSError as e:  # a read-only spool: the finalizer is already on its way
            log("WARNING", f"job {ctx.job_id}: {spool.done} not written: {e}")
        log("INFO", f"epilog job={ctx.job_id} node={ctx.node} sampler={outcome} ({time.time() - t_end:.3f} s)")
    except BaseException as e:
        log.exception("epilog failed")
        if spool is not None:
            spool.record_error(f"epilog: {type(e).__name__}: {e}")
    finally:
        log_hook_time("epilog", ctx, outcome)
    return 0
