"""The finalizer for a job whose node had no usable spool (both spools full or read-only).

The Epilog passes the job's context (parsed from its environment) on the finalizer's command line,
so nothing on disk is needed; this asks slurmctld for the job's state and times (off the hook path)
and stores a ``no_data`` record saying why nothing was measured. If ``collect`` later finds the
node's spool files after all (a spool remounted), the measured record replaces this one.
"""

from __future__ import annotations

import logging

from slurm_energy.slurm.env import JobContext
from slurm_energy.slurm.spool import JobSpool

log = logging.getLogger("slurm_energy.finalize")

#: never created: node_record reads nothing from it (no samples, no inventory, no errors file)
_NOWHERE = "/nonexistent/slurm-energy-no-spool"


def finalize_env_main(ctx_json: str, end_time: float, exit_code: str, sampler_outcome: str,
                      errors: list, logging_ready: bool = False) -> int:
    """Entry point (``hooks finalize-env CONTEXT_JSON T EXIT OUTCOME ERRORS_JSON``). Returns 0.

    ``errors``: why each spool was unusable (the Epilog's messages), put on the record. Removes the
    job's :data:`~slurm_energy.slurm.spool.NO_SPOOL_JOBS` entry once done (a killed one leaves it for
    the node finalizer's sweep). ``logging_ready``: the caller has set up the log."""
    import os

    from slurm_energy.accounting.merge import combine_errors
    from slurm_energy.slurm.finalize import finish_node, node_record
    from slurm_energy.slurm.runtime import load_config, setup_logging
    from slurm_energy.slurm.spool import no_spool_entry

    problems: list[str] = []
    cfg = load_config(problems)
    if not logging_ready:
        setup_logging(cfg.paths.log_dir, "finalize.log")
    ctx = JobContext.from_json(ctx_json)
    try:
        from slurm_energy.slurm.scontrol import show_job

        facts = show_job(ctx.job_id, attempt=ctx.restart_count)
        spool = JobSpool(_NOWHERE, ctx.job_id, ctx.restart_count, ctx.node)
        rec = node_record(cfg, spool, ctx, end_time, exit_code, slurm_facts=facts, sampler_outcome=sampler_outcome)
        reason = ("no usable spool on this node: " + "; ".join(str(e) for e in errors) + "; free space in "
                  f"{cfg.paths.spool_dir} (or make it writable) and check {getattr(cfg.paths, 'spool_fallback_dir', '')}")
        rec.errors = combine_errors([reason], problems, rec.errors)
        rec.nodes[0].errors = list(rec.errors)
        if facts and facts.get("end_time"):
            rec.end_time = rec.nodes[0].end_time = max(rec.start_time, float(facts["end_time"]))
        finish_node(cfg, rec, ctx)
        log.info("job=%s node=%s: stored without a spool (status %s)", ctx.job_id, ctx.node, rec.status.value)
    except Exception:
        log.exception("finalize-env job=%s node=%s failed", ctx.job_id, ctx.node)
    try:  # done, or failed in a way a second run would repeat (logged): not run again
        os.unlink(no_spool_entry(cfg.paths.log_dir, ctx.job_id, ctx.restart_count, ctx.node))
    except OSError:
        pass
    return 0

