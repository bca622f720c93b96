"""The Prolog (:mod:`slurm_energy.slurm.hooks`): the job's spool, GPUs, first reading and sampler."""

from __future__ import annotations

import os
import time

from slurm_energy.slurm import detach
from slurm_energy.slurm.attempt import Attempt, usable_spool, write_private
from slurm_energy.slurm.detach import DETACHED_MODULE
from slurm_energy.slurm.hooks import begin, enable_site, log_hook_time
from slurm_energy.slurm.log import get

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from collections.abc import Mapping

    from slurm_energy.slurm.config_cache import HookSite
    from slurm_energy.slurm.context import JobFacts

__all__ = ["prolog"]

log = get(__name__)


def prolog(env: Mapping[str, str] | None = None) -> int:
    """The Prolog. Always returns 0."""
    t0 = time.time()
    errors: list[str] = []
    spool: Attempt | None = None
    ctx: JobFacts | None = None
    outcome = "failed"
    try:
        cfg, ctx = begin(env, errors)
        ctx.prolog_time = t0
        if ctx.job_gpus:
            enable_site()  # NVML's binding
            from slurm_energy.slurm.hooks.gpus import resolve_gpus

            resolve_gpus(ctx, cfg, os.environ if env is None else env)
        spool = usable_spool(cfg, ctx, errors)
        for e in errors:
            log("ERROR", f"job {ctx.job_id}: {e}")
            if spool is not None:
                spool.record_error(e)
        if spool is None:  # the Epilog hands the job to the finalizer from its environment
            outcome = "no_spool"
            return 0
        os.close(os.open(spool.prolog_running, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
        _prepare_marks(ctx, spool, (cfg.paths.spool_dir, getattr(cfg.paths, "spool_fallback_dir", "")))
        _reading(cfg, ctx, spool)
        if getattr(cfg.sampling, "sampler", "job") == "node":  # one sampler for all the node's jobs
            from slurm_energy.slurm import sampler_join

            log_dir = cfg.paths.log_dir
            pid = sampler_join.join_or_start(spool.dir, spool.spool_dir, spool.node, lambda argv, logf: detach.spawn(
                argv, logf, log_dir, nice=detach.SAMPLER_NICE))
        else:
            pid = detach.spawn(["-m", DETACHED_MODULE, "sampler", spool.dir, spool.node],
                              os.path.join(spool.dir, f"sampler-{spool.node}.log"), cfg.paths.log_dir,
                              nice=detach.SAMPLER_NICE)
            write_private(spool.pidfile, str(pid))
        outcome = "ok" if spool.spool_dir == cfg.paths.spool_dir else "fallback_spool"
        gpus = [g["device_id"] for g in ctx.gpus] or ctx.job_gpus or "-"
        log("INFO", f"prolog job={ctx.job_id} node={ctx.node} sampler={pid} gpus={gpus} spool={spool.dir} "
                    f"({time.time() - t0:.3f} s)")
    except BaseException as e:
        log.exception("prolog failed")
        if spool is not None:
            spool.record_error(f"prolog: {type(e).__name__}: {e}")
    finally:
        if spool is not None:  # it finished (killed, this is not run: the file tells the finalizer)
            try:
                os.unlink(spool.prolog_running)
            except OSError:
                pass
        log_hook_time("prolog", ctx, outcome)
    return 0


def _reading(cfg: HookSite, ctx: JobFacts, spool: Attempt) -> None:
    """The job's first counter reading, now: the raw files (:mod:`slurm_energy.slurm.prolograw`;
    the sampler writes the row) when the node has a file list for them and the job no GPU, else
    the row itself through the readers. A failure is recorded; the sampler still starts (its own
    first sample is the start then)."""
    try:
        if not ctx.job_gpus:
            from slurm_energy.slurm.prolograw import snapshot

            if snapshot(cfg, spool):
                return
        from slurm_energy.slurm.node_reading import reading_row

        reading_row(cfg, ctx, spool, "prolog")
    except Exception as e:
        spool.record_error(f"prolog reading: {type(e).__name__}: {e}")


def _prepare_marks(ctx: JobFacts, spool: Attempt, spool_roots: tuple[str, ...] = ()) -> None:
    """The job's marks directory, owned by the job's user (``slurm_energy.track`` finds it and
    leaves its phase marks there instead of starting a second sampler), in a root apart from the
    spools (``spool_roots``: the configured spool and fallback spool). A few syscalls: what jobs
    left here is the node finalizer's sweep's to remove, never the Prolog's (its size is the users').
    Failure: recorded only."""
    try:
        from slurm_energy.sampling.marks import marks_root, prepare_job_dir

        if ctx.uid is None or ctx.gid is None:
            raise ValueError("the job's uid/gid are unknown (SLURM_JOB_UID/SLURM_JOB_GID)")
        root = os.path.realpath(marks_root())
        for sp in (spool.spool_dir, *spool_roots):
            sp = os.path.realpath(sp) if sp else ""
            if sp and (root == sp or root.startswith(sp + "/") or sp.startswith(root + "/")):
                raise ValueError(f"the marks root {root} and the spool {sp} overlap (the spool is root-only, 0700; "
                                 "users must reach their marks directory): give them separate roots "
                                 "($SLURM_ENERGY_MARKS_DIR, paths.spool_fallback_dir)")
        prepare_job_dir(ctx.job_id, ctx.uid, ctx.gid, node=ctx.node)
    except Exception as e:
        spool.record_error(f"prolog: marks directory not made ({type(e).__name__}: {e}); "
                           "phases marked by the job are not recorded")
