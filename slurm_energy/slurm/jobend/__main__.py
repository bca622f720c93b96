"""The job end's detached processes: ``python -I -m slurm_energy.slurm.jobend KIND ...``, niced,
started by the Epilog (or by the sampler that saw no Epilog, or a finalizer for its standby):

* ``finalize-queue QUEUE_DIR NODE``: the node's finalizer, one per node and spool, working the
  node's queue of ended jobs (:mod:`slurm_energy.slurm.jobend.queue`) and sweeping the node;
* ``finalize DIR NODE T EXIT OUTCOME``: one job, when it could not be queued,
  :data:`FINALIZER_SLOTS` at a time per spool (trigger ``SINGLE``);
* ``finalize-env JOB@NODE``: a job whose node had no usable spool, its CONTEXT_JSON T EXIT OUTCOME
  ERRORS_JSON in ``$SLURM_ENERGY_FINALIZE_ENV`` as JSON (trigger ``NO_SPOOL``).

Each ends in :func:`slurm_energy.slurm.jobend.finish.finish`. Always exits 0: every failure is
logged and recorded on the job.
"""

from __future__ import annotations

import json
import logging
import os
import sys

from slurm_energy.slurm.attempt import Attempt, SamplerEnd

__all__ = ["FINALIZER_SLOTS", "main"]

#: Finalizers of one spool that run at once (2, or a quarter of the node's CPUs); the others wait
#: their turn before their imports (:func:`slurm_energy.slurm.detach.slot`: next to no CPU, ~15 MB
#: each). Niced, they queue up in a burst: 149 of them held 9.2 GB after a 300-job burst on the
#: 2-CPU test cluster before this limit.
FINALIZER_SLOTS = max(2, (os.cpu_count() or 2) // 4)


def _single(job_dir: str, node: str, end_time: float, exit_code: str, sampler: SamplerEnd) -> int:
    """``finalize``: one job attempt, when it could not be queued for the node's finalizer."""
    from slurm_energy.slurm.detach import slot
    from slurm_energy.slurm.jobend.finish import AfterSlot, Trigger, finalize_main
    from slurm_energy.slurm.jobend.publish import MARKER_RETRY_S
    from slurm_energy.slurm.jobend.queue import run_reports

    log = logging.getLogger("slurm_energy")
    after = AfterSlot()  # the user's report: written once the slot is free (bounded, killable)
    sp = Attempt.from_dir(job_dir, node)
    # <spool>/jobs/<run>: at most FINALIZER_SLOTS finalizers of the spool past this point
    with slot(os.path.dirname(os.path.dirname(job_dir.rstrip("/"))), "finalize", FINALIZER_SLOTS):
        if sp.is_finalized():
            return 0  # `collect` finished it while this one waited for a slot (files untouched 5 min)
        rc = finalize_main(job_dir, node, end_time, exit_code, sampler, deferred=after, trigger=Trigger.SINGLE)
    run_reports(sp, after.reports, log)
    for marker in after.markers:  # a full spool (why this job was not queued): its marker, once there is room
        if not marker.retry(MARKER_RETRY_S):
            log.warning("%s still not written after %.0f s: collect finishes the job again", marker.path, MARKER_RETRY_S)
    return rc


def main(argv: list[str] | None = None) -> int:
    """``{finalize-queue QUEUE_DIR NODE|finalize DIR NODE T EXIT OUTCOME|finalize-env JOB@NODE}``
    (default ``sys.argv[1:]``). Returns 0."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        what = argv[0] if argv else ""
        if what == "finalize":
            rest = argv[4:6]
            return _single(argv[1], argv[2], float(argv[3]), rest[0] if rest else "",
                           SamplerEnd.parse(rest[1] if len(rest) > 1 else "", SamplerEnd.TERMINATED))
        if what == "finalize-queue":  # the node's finalizer: every job the Epilogs queued
            from slurm_energy.slurm.jobend.queue import run_queue

            run_queue(argv[1], argv[2])
            return 0
        if what == "finalize-env":  # finalize-env JOB@NODE, its arguments in FINALIZE_ENV_VAR (older: in argv)
            from slurm_energy.slurm.detach import FINALIZE_ENV_VAR
            from slurm_energy.slurm.jobend.finish import finalize_env_main

            args = json.loads(os.environ.pop(FINALIZE_ENV_VAR)) if len(argv) == 2 else argv[1:6]
            return finalize_env_main(args[0], float(args[1]), args[2], SamplerEnd.parse(args[3], SamplerEnd.NO_PIDFILE),
                                     json.loads(args[4]))
        print("usage: python -m slurm_energy.slurm.jobend {finalize-queue|finalize|finalize-env} ...", file=sys.stderr)
    except BaseException:
        logging.getLogger("slurm_energy").exception("finalizer %s failed", argv[:1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
