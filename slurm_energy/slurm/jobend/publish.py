"""Publishing a job's record, through its two doors: final (:func:`finish_node`: the node's record
into the results directory, then, once every node has reported, the merged job's record through
:func:`slurm_energy.outputs.sinks.publish_final`) and running (:func:`publish_running`: the
sampler's periodic flush, this node's energy so far, stored with status ``running`` so
``jobenergy`` shows a running job).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from slurm_energy.core import Status
from slurm_energy.model import JobRecord
from slurm_energy.outputs.sinks import forget_running, publish_final, publish_outputs, site_sinks
from slurm_energy.pipeline import finalise_job, publish
from slurm_energy.slurm.attempt import Attempt, spool_dirs
from slurm_energy.slurm.context import JobContext
from slurm_energy.slurm.jobend.node_record import node_record

if TYPE_CHECKING:
    from slurm_energy.accounting.running import RunningSummary
    from slurm_energy.config import SiteConfig

log = logging.getLogger("slurm_energy.finalize")


#: How long (s) a finalizer retries writing a ``finalized`` marker the spool had no room for
#: (:class:`MarkerPending`): a spool full for minutes, then freed, must not leave its jobs for
#: ``collect`` to do again.
MARKER_RETRY_S = 180.0


class MarkerPending:
    """An attempt's FINALIZED marker not written (a full or read-only spool) for a job whose
    record was published: :meth:`retry` tries again for a while, so ``collect`` does not finish the
    job a second time once the spool has room again. A deferred item of
    :func:`~slurm_energy.slurm.jobend.finish.finalize_main`, not a report to run: the caller retries
    it (:func:`slurm_energy.slurm.jobend.queue.run_reports` skips it)."""

    def __init__(self, path: str):
        self.path = path

    def retry(self, for_s: float, every_s: float = 5.0, sleep: Callable[[float], None] = time.sleep) -> bool:
        """Try writing the marker every ``every_s`` s for ``for_s`` s; True once written."""
        from slurm_energy.slurm.attempt import write_private

        for k in range(int(for_s // every_s) + 1):  # at 0, every_s, ... up to for_s
            if k:
                sleep(every_s)
            try:
                write_private(self.path, repr(time.time()))
                return True
            except OSError:
                continue
        return False


def report_umask(jobenv: Mapping[str, str]) -> tuple[int | None, str]:
    """(the umask the job's report is written with, the record's note when it is unknown): the
    sampler's ``umask`` from the job's processes (``jobenv``: the spool's job facts, ``"0022"``),
    else None (the report is then private, :data:`~slurm_energy.reporting.safe_write.UNKNOWN_UMASK`)
    and :data:`~slurm_energy.reporting.safe_write.PRIVATE_REPORT_NOTE`, so the record says why."""
    from slurm_energy.reporting.safe_write import PRIVATE_REPORT_NOTE

    um = jobenv.get("umask")
    if isinstance(um, str) and um.isdigit() and set(um) <= set("01234567") and int(um, 8) <= 0o777:
        return int(um, 8), ""
    return None, PRIVATE_REPORT_NOTE


def finish_node(cfg: SiteConfig, rec: JobRecord, ctx: JobContext, umask: int | None = None,
                deferred: list[Callable[[], object]] | None = None) -> JobRecord | None:
    """Write this node's record (``paths.results_dir``, else the fallback spool's results); if every
    node has reported, finalise the job (:func:`slurm_energy.pipeline.finalise_job`) and publish it
    (:func:`store_and_report`). Returns the published record, or None while other nodes are still to
    report. With nowhere to leave the node record, this node's view is published (a later merge
    replaces it)."""
    from slurm_energy.slurm.jobend.results import collect_node_records, retire_run, write_node_record

    where = None
    for results_dir in results_dirs(cfg):
        try:
            write_node_record(results_dir, rec)
            where = results_dir
            break
        except OSError as e:  # full or read-only: the fallback spool's results, then none
            log.warning("job=%s node=%s: results dir %s not written: %s", ctx.job_id, ctx.node, results_dir, e)
            rec.errors.append(f"results dir {results_dir} not written: {e}")
    if where is None:
        return store_and_report(cfg, finalise_job([rec], cfg, merge=False), umask=umask, deferred=deferred)
    records = collect_node_records(where, ctx.cluster, ctx.job_id, ctx.restart_count, rec.expected_nodes, record=rec)
    if records is None:
        log.info("job=%s node=%s: waiting for other nodes %s", ctx.job_id, ctx.node, rec.expected_nodes)
        forget_running(cfg, rec)  # the node that completes the job exports its totals
        return None
    final = finalise_job(records, cfg)
    final.slurm_energy_j, final.slurm_energy_source = _slurm_energy(final.job_id)
    out = store_and_report(cfg, final, outputs=False, umask=umask, deferred=deferred)
    try:  # stored: its node files must not meet a later run of this job id (Slurm reuses ids)
        retire_run(where, final)
    except OSError as e:
        log.warning("job=%s: node files not moved to stored/: %s", ctx.job_id, e)
    publish_outputs(cfg, out, queue_in=spool_dirs(cfg))  # after the run is retired: outputs may take seconds
    return out


def _slurm_energy(job_id: str) -> tuple[float | None, str]:
    """Slurm's own ConsumedEnergy for the job (off the hook path); (None, why) when it has none."""
    try:
        from slurm_energy.slurm.clients.facts import current

        return current().consumed_energy(job_id)
    except Exception as e:  # Slurm's number is a comparison only: never lose the job over it
        return None, f"unavailable: {type(e).__name__}: {e}"


def store_and_report(cfg: SiteConfig, final: JobRecord, outputs: bool = True, umask: int | None = None,
                     deferred: list[Callable[[], object]] | None = None) -> JobRecord:
    """:func:`slurm_energy.outputs.sinks.publish_final`, a store that is down queueing in the spools."""
    return publish_final(cfg, final, umask=umask, queue_in=spool_dirs(cfg), deferred=deferred, outputs=outputs)


def results_dirs(cfg: SiteConfig) -> list[str]:
    """``paths.results_dir``, then ``results`` under the fallback spool (collect merges both)."""
    fb = cfg.paths.spool_fallback_dir
    return list(dict.fromkeys(d for d in (cfg.paths.results_dir, fb and os.path.join(fb, "results")) if d))


#: The sampler's running summaries, by sample file (one per sampler process).
_RUNNING: dict[str, RunningSummary] = {}


def publish_running(cfg: SiteConfig, spool: Attempt, ctx: JobContext) -> None:
    """The sampler's periodic flush: this node's energy so far, stored with status running, and
    exported to node_exporter. Costs the rows added since the previous flush
    (:class:`~slurm_energy.accounting.running.RunningSummary`); the record has no power trace and
    no phase windows (the Epilog's has them)."""
    from slurm_energy.accounting.running import RunningSummary

    summary = _RUNNING.get(spool.samples)
    if summary is None:
        summary = _RUNNING[spool.samples] = RunningSummary(spool.samples)
    rec = node_record(cfg, spool, ctx, time.time(), status=Status.RUNNING, running=summary)
    running = finalise_job([rec], cfg, merge=False).model_copy(update={"status": Status.RUNNING})
    publish(running, site_sinks(cfg, running=True))
