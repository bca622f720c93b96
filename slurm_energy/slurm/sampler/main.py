"""The per-job detached sampler (``python -I -m slurm_energy.slurm.sampler sampler DIR NODE``,
started by the Prolog when ``sampling.sampler`` is ``job``; the default is the node sampler): samples the job until the
Epilog's TERM, or finishes the node itself when no Epilog came (:func:`finish_without_epilog`). The
node sampler (:mod:`slurm_energy.slurm.sampler.node`) shares :class:`Interim`,
:func:`finish_without_epilog` and :func:`start_node_meter` with it.

Every failure is logged and recorded on the job (``errors-<node>.jsonl`` in its spool).
"""

from __future__ import annotations

import json
import logging
import os
import signal
from typing import TYPE_CHECKING, Any

from slurm_energy.slurm.attempt import Attempt, SamplerEnd, write_private
from slurm_energy.slurm.config_cache import load_config, load_light_config
from slurm_energy.slurm.log import setup_logging
from slurm_energy.slurm.node_reading import prolog_reading_by_sampler, readers_for, spool_from_dir

if TYPE_CHECKING:
    from slurm_energy.config import SiteConfig
    from slurm_energy.slurm.context import JobContext

__all__ = ["Interim", "check_stranded", "finish_without_epilog", "sampler_main", "start_node_meter"]

log = logging.getLogger("slurm_energy.hooks")


def sampler_main(job_dir: str, node: str, early_stop: list[int] | None = None) -> int:
    """The detached per-job sampler (started by the Prolog). ``early_stop``: the list the entry
    module's first TERM handler appends to (a TERM while still starting up). Returns 0."""
    _EARLY_STOP = early_stop if early_stop is not None else []
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:  # called other than as __main__ (tests)
        signal.signal(signal.SIGTERM, lambda *_: _EARLY_STOP.append(1))
    errors: list[str] = []
    # the resolved copy, as in the Prolog: a short job's Epilog waits for this start-up (its TERM
    # takes effect once the sampler is running); the full config (carbon) only for the interims
    cfg = load_light_config(errors)
    setup_logging(cfg.paths.log_dir, "sampler.log")
    spool, ctx = spool_from_dir(job_dir, node)
    prolog_reading_by_sampler(cfg, ctx, spool)  # the Prolog's row from the files it read: before any sample
    try:
        from slurm_energy.sampling.samplefile import SampleWriter
        from slurm_energy.sampling.sampler import Sampler, freeze_gc
        from slurm_energy.slurm.sampler.probe import SlurmJobProbe

        readers, _ = readers_for(cfg, ctx, spool, errors)
        start_node_meter(cfg, spool)
        for e in errors:
            spool.record_error(e)
        probe = SlurmJobProbe(ctx.job_id, ctx.uid if ctx.uid is not None else -1, ctx.node, sluid=ctx.sluid,
                              on_job_env=lambda facts: write_private(spool.jobenv, json.dumps(facts)))
        writer = SampleWriter(spool.samples)
        s = Sampler(readers, probe, writer, interval_s=cfg.sampling.interval_s,
                    gone_after_s=cfg.sampling.epilog_wait_s,
                    interim_every_s=cfg.sampling.interim_s, on_interim=Interim(spool, ctx), interim_in_worker=True)
        s.install_signal_handlers()
        if _EARLY_STOP:
            s.stop()  # the job already ended: one start and one final sample, then exit
        freeze_gc()
        n = s.run()
        t = os.times()  # its own CPU and its interim workers', for benchmarks/job_end_burst.py
        log.info("sampler job=%s node=%s wrote %d samples cpu_s=%.3f", ctx.job_id, node, n,
                 t.user + t.system + t.children_user + t.children_system)
        if s.stop_signal is not None or _EARLY_STOP:  # the Epilog's TERM, or someone else's: the finalizer tells
            from slurm_energy.slurm.sampler_end import record_stop

            record_stop(spool, s.stop_signal if s.stop_signal is not None else signal.SIGTERM.value)
        if s.gone_at is not None:
            finish_without_epilog(cfg, spool, ctx, s.gone_at)
    except BaseException as e:
        log.exception("sampler failed")
        spool.record_error(f"sampler: {type(e).__name__}: {e}")
    return 0


def start_node_meter(cfg: Any, spool: Attempt) -> None:
    """The node's meter process, where the site has a meter and none runs (docs/NODE_METER.md)."""
    try:
        from slurm_energy.slurm.nodemeter import ensure_running

        if ensure_running(cfg, spool.spool_dir, spool.node):
            log.info("sampler node=%s: node meter process started", spool.node)
    except (OSError, TimeoutError) as e:
        log.warning("sampler node=%s: node meter process not started: %s", spool.node, e)


def finish_without_epilog(cfg: Any, spool: Attempt, ctx: JobContext, gone_at: float) -> None:
    """The job ended ``sampling.epilog_wait_s`` ago and no Epilog finished on this node (killed by
    its 1.9 s guard under load, slurmd restarted, no Epilog configured): do what it would have
    done, so the node's record (and a multi-node job's merge, which waits for every node) is not
    left to ``collect``. The Epilog's ``done`` marker is written first: a late Epilog then ignores
    the run, as it does a repeated one. The end time is when the sampler saw the job gone."""
    if spool.epilog_done():
        return
    try:
        spool.mark_epilog(gone_at, SamplerEnd.EPILOG_MISSING, "")
    except OSError as e:  # a read-only spool: the finalizer still runs; collect would too
        log.warning("job %s: %s not written: %s", ctx.job_id, spool.done, e)
    from slurm_energy.slurm.detach import hand_over

    hand_over(spool, gone_at, "", SamplerEnd.EPILOG_MISSING, cfg.paths.log_dir)
    log.warning("sampler job=%s node=%s: no Epilog within %.0f s of the job's end; finalizer started by the sampler",
                ctx.job_id, spool.node, cfg.sampling.epilog_wait_s)


class Interim:
    """The sampler's interim summary: the finalizer's module and the full site config (carbon) are
    loaded at the first call, not at the sampler's start (most jobs end before one is due)."""

    def __init__(self, spool: Attempt, ctx: JobContext):
        self.spool, self.ctx = spool, ctx
        self.cfg: SiteConfig | None = None

    def __call__(self) -> None:
        self.flush()
        check_stranded(self.cfg, self.spool.node, self.ctx.job_id)

    def flush(self) -> None:
        """The job's energy so far, stored (running) and exported."""
        from slurm_energy.sampling.marks import bound_job_dir
        from slurm_energy.slurm.jobend.publish import publish_running

        bound_job_dir(self.ctx.job_id)  # what the job's user keeps in its marks dir: its marks, bounded
        if self.cfg is None:
            self.cfg = load_config([])  # its problems are already on the job (the Prolog's and the sampler's)
        publish_running(self.cfg, self.spool, self.ctx)


def check_stranded(cfg: Any, node: str, who: str) -> None:
    """Start a finalizer for ended jobs whose node finalizer and standby were both killed."""
    import time

    from slurm_energy.slurm.attempt import finalize_queue_dir, spool_dirs
    from slurm_energy.slurm.jobend.queue import restart_if_stranded

    if cfg is None:
        return
    for sd in spool_dirs(cfg):
        try:
            if restart_if_stranded(finalize_queue_dir(sd, node), node, time.time()):
                log.warning("sampler job=%s: %s had jobs waiting and no finalizer: one started", who,
                            finalize_queue_dir(sd, node))
        except Exception:
            log.exception("sampler job=%s: stranded queue check failed", who)
